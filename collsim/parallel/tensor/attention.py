"""Tensor-parallel attention (heads split over the TP ranks) and the transformer block.

Attention splits the way the MLP does: ``wq``, ``wk``, ``wv`` column-parallel by heads
(each rank computes whole heads, no communication inside), ``wo`` row-parallel (its
output is a partial sum, all-reduced by ``g``).  So a transformer layer communicates
four times per training step under TP: ``g`` after attention and after the MLP in the
forward, ``f`` before each in the backward, each moving ``B·S·H`` elements.

With sequence parallelism (SP) the block's input and output are split along the sequence
(``(B, S/t, H)`` per rank): the LayerNorms and residual adds run on the local tokens,
``f`` all-gathers the tokens in front of attention and the MLP, ``g`` reduce-scatters
them after.  The replicated parameters that see only local tokens (both LayerNorms, the
attention output bias and the MLP's second bias) then hold partial gradients; the block
sums them over the TP group in one all-reduce at the end of its ``backward_weight``
(Megatron's layernorm-gradient all-reduce).

=============================  =========================================================
name                           what it is
=============================  =========================================================
:class:`ParallelAttention`     heads ``tp_rank·H/t .. (tp_rank+1)·H/t`` of a
                               :class:`~collsim.nn.MultiHeadAttention`
:class:`ParallelTransformerBlock`  a :class:`~collsim.nn.TransformerBlock`, TP or TP+SP
=============================  =========================================================

Both are rank modules (see :mod:`collsim.parallel.modules`) built per rank with
``from_full(full, group, tp_rank, sequence_parallel=False)``.

Examples
--------
>>> import numpy as np, collsim
>>> from collsim.nn import TransformerBlock
>>> from collsim.runtime.group import Group
>>> rng = np.random.default_rng(0)
>>> block = TransformerBlock.init(8, 4, rng)  # hidden 8, 4 heads, ffn 32
>>> x, dy = rng.uniform(-1, 1, (2, 6, 8)), rng.uniform(-1, 1, (2, 6, 8))  # (B, S, H)
>>> group = Group([0, 1])
>>> def program(rank):
...     tp_block = ParallelTransformerBlock.from_full(block, group, rank.id)
...     y, ctx = yield from tp_block.forward(rank, x)
...     dx, grads = yield from tp_block.backward(rank, ctx, dy)
...     return y, dx
>>> result = collsim.Cluster(collsim.topology.switch(2)).run(program)
>>> y_ref, ctx = block.forward(x)
>>> bool(np.allclose(result.returns[1][0], y_ref))
True
>>> result.stats.bytes_sent  # 4 all-reduces of 2·6·8 float64, 2(t-1)/t of each
[3072, 3072]
"""

import numpy as np

from ...errors import ConfigError
from ...nn import MultiHeadAttention
from ..block import RankBlock
from ..modules import Local, layer_compute
from .comm import (
    FG,
    _check_rank,
    _shard,
    check_tp,
    reduced_output_weight_grads,
    sync_partial_grads,
)
from .layers import ParallelMLP

__all__ = ["ParallelAttention", "ParallelTransformerBlock"]

_HEAD_SPLIT = {"wq": 1, "bq": 0, "wk": 1, "bk": 0, "wv": 1, "bv": 0, "wo": 0}


class ParallelAttention:
    """This rank's heads of a multi-head self-attention, over ``(B, S, H)`` inputs.

    Parameters
    ----------
    shard : collsim.nn.MultiHeadAttention
        The local heads: ``wq/wk/wv[:, cols]``, ``bq/bk/bv[cols]``, ``wo[cols, :]``, and
        ``bo=None``.
    bo : array or None
        The full output bias, held by every rank, added once after ``g``.
    sequence_parallel : bool
        Input and output split along the sequence (axis 1); see the module docstring.
    """

    def __init__(
        self,
        shard,
        bo,
        group,
        tp_rank,
        sequence_parallel=False,
        name="attn",
        sync_partial_grads=True,
    ):
        if shard.bo is not None:
            raise ConfigError("a head-split attention shard has no bo: pass it separately")
        self.shard, self.group, self.tp_rank = shard, group, tp_rank
        self.bo = None if bo is None else np.array(bo, dtype=shard.wq.dtype)
        self.fg = FG(group, sequence_parallel, seq_axis=1)
        self.name = name
        self.sync_partial_grads = sync_partial_grads
        self.shard_axes = {k: _HEAD_SPLIT[k] for k in shard.params}
        if self.bo is not None:
            self.shard_axes["bo"] = None
        self.partial_grad_names = ("bo",) if sequence_parallel and bo is not None else ()

    @classmethod
    def from_full(cls, attn, group, tp_rank, sequence_parallel=False, **options):
        """Heads ``tp_rank·n/t .. (tp_rank+1)·n/t`` of ``attn`` (copied)."""
        check_tp(group.size, hidden=attn.d_model, heads=attn.n_heads)
        heads = _shard(attn.n_heads, group, tp_rank, "heads")
        cols = slice(heads.start * attn.head_dim, heads.stop * attn.head_dim)

        def cut(b):
            return None if b is None else b[cols]

        shard = MultiHeadAttention(
            attn.wq[:, cols],
            attn.wk[:, cols],
            attn.wv[:, cols],
            attn.wo[cols, :],
            n_heads=heads.stop - heads.start,
            bq=cut(attn.bq),
            bk=cut(attn.bk),
            bv=cut(attn.bv),
            bo=None,
            causal=attn.causal,
        )
        return cls(shard, attn.bo, group, tp_rank, sequence_parallel, **options)

    def __repr__(self):
        return f"ParallelAttention({self.shard!r}, tp={self.group.size})"

    @property
    def params(self):
        return self.shard.params | ({"bo": self.bo} if self.bo is not None else {})

    def forward(self, rank, x):
        _check_rank(self, rank)
        x_full = yield from self.fg.f_forward(rank, x)  # SP: all-gather the tokens
        flops = self.shard.flops(x_full.shape)
        yield layer_compute(rank, "forward", self.name, flops["forward"])
        y, ctx = self.shard.forward(x_full)  # (B, S, H), a partial sum over ranks
        y = yield from self.fg.g_forward(rank, y)  # all-reduce (SP: reduce-scatter)
        if self.bo is not None:
            y = y + self.bo
        return y, {"inner": ctx, "flops": flops}

    def backward_input(self, rank, ctx, dy):
        dy_full = yield from self.fg.g_backward(rank, dy)  # SP: all-gather
        ctx["dy_local"] = (dy, dy_full)
        yield layer_compute(rank, "backward_input", self.name, ctx["flops"]["backward_input"])
        dx = self.shard.backward_input(ctx["inner"], dy_full)  # partial sum over ranks
        return (yield from self.fg.f_backward(rank, dx))  # all-reduce (SP: reduce-scatter)

    def backward_weight(self, rank, ctx, dy):
        return (yield from reduced_output_weight_grads(self, rank, ctx, dy, "bo", self.bo))

    def backward(self, rank, ctx, dy):
        dx = yield from self.backward_input(rank, ctx, dy)
        return dx, (yield from self.backward_weight(rank, ctx, dy))


class ParallelTransformerBlock(RankBlock):
    """Pre-LayerNorm block ``h = x + attn(ln1(x))``, ``y = h + mlp(ln2(h))`` under TP.

    The LayerNorms are replicated (:class:`~collsim.parallel.modules.Local`); attention
    and MLP are :class:`ParallelAttention` and :class:`~collsim.parallel.tensor.ParallelMLP`.
    Params carry the names of :class:`collsim.nn.TransformerBlock` (``"ln1.gamma"``,
    ``"attn.wq"``, ``"mlp.fc1.weight"``, ...).

    ``from_full(block, group, tp_rank, sequence_parallel=False)`` checks hidden, heads
    and ffn hidden against tp at once (:func:`~collsim.parallel.tensor.check_tp`).  With
    sequence parallelism the input is this rank's ``(B, S/t, H)`` slice of tokens.
    """

    def __init__(self, ln1, attn, ln2, mlp, sequence_parallel=False, name="block"):
        ln1 = Local(ln1, name=f"{name}.ln1") if not isinstance(ln1, Local) else ln1
        ln2 = Local(ln2, name=f"{name}.ln2") if not isinstance(ln2, Local) else ln2
        super().__init__(ln1, attn, ln2, mlp, name)
        self.group, self.tp_rank = attn.group, attn.tp_rank
        self.sequence_parallel = bool(sequence_parallel)
        attn.sync_partial_grads = mlp.fc2.sync_partial_grads = False  # summed here, at once
        self.partial_grad_names = self.partial_names(self.sequence_parallel)

    @classmethod
    def from_full(cls, block, group, tp_rank, sequence_parallel=False, name="block"):
        check_tp(
            group.size,
            hidden=block.attn.d_model,
            heads=block.attn.n_heads,
            ffn_hidden=block.mlp.fc1.out_features,
        )
        sp = {"sequence_parallel": sequence_parallel}
        attn = ParallelAttention.from_full(block.attn, group, tp_rank, name=f"{name}.attn", **sp)
        mlp = ParallelMLP.from_full(block.mlp, group, tp_rank, seq_axis=1, **sp)
        mlp.fc1.name, mlp.fc2.name, mlp.act.name = (
            f"{name}.mlp.{n}" for n in ("fc1", "fc2", "gelu")
        )
        ln1, ln2 = (type(ln)(ln.gamma, ln.beta, ln.eps) for ln in (block.ln1, block.ln2))
        return cls(ln1, attn, ln2, mlp, sequence_parallel, name)

    def __repr__(self):
        return f"ParallelTransformerBlock({self.attn!r}, {self.mlp!r})"

    def forward(self, rank, x):
        _check_rank(self, rank)
        return (yield from super().forward(rank, x))  # with SP this rank's (B, S/t, H)

    def sum_partial(self, rank, grads):
        return (yield from sync_partial_grads(rank, grads, self.partial_grad_names, self.group))
