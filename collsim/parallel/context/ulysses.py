"""All-to-all context parallelism (DeepSpeed-Ulysses, Jacobs et al. 2023).

Each of the ``cp`` ranks of a group holds ``S/cp`` tokens of every sequence (in a
:mod:`~collsim.parallel.context.layouts` layout) and a full copy of the attention
weights.  One layer runs::

    x (B, S/cp, D)  --local q, k, v projections, all H heads-->  (B, S/cp, H·hd) each
      --all-to-all: sequence-sharded -> head-sharded-->  (B, H/cp, S, hd) each
      --full-sequence attention on this rank's H/cp heads-->  (B, H/cp, S, hd)
      --all-to-all: head-sharded -> sequence-sharded-->  (B, S/cp, H·hd)
      --local output projection-->  (B, S/cp, D)

and the backward pass mirrors it: an all-to-all of the output-projection gradient to
heads, the attention backward on the local heads, an all-to-all of ``dq, dk, dv`` back to
tokens; the projections' gradients are local.  Rank ``r`` attends for heads
``r·H/cp .. (r+1)·H/cp`` (the columns of those heads, as
:class:`~collsim.nn.MultiHeadAttention` lays them out), so heads must be divisible by cp.

After the all-to-all the sequence arrives in the ranks' order, rank ``j``'s tokens in
``j``'s layout order; the causal mask is built from the tokens' global positions
(:func:`~collsim.parallel.context.layouts.token_positions`), so a query sees exactly the
keys it sees on one device, in either layout.

Examples
--------
>>> import numpy as np, collsim
>>> from collsim.nn import MultiHeadAttention
>>> from collsim.runtime.group import Group
>>> from collsim.parallel.context.layouts import gather_sequence, shard_sequence
>>> rng = np.random.default_rng(0)
>>> full = MultiHeadAttention.init(8, 4, rng)  # d_model 8, 4 heads of size 2, causal
>>> x = rng.uniform(-1, 1, (2, 8, 8))  # (B, S, D)
>>> group = Group([0, 1])
>>> def program(rank):
...     attn = UlyssesAttention.from_full(full, group, rank.id, layout="balanced")
...     y, ctx = yield from attn.forward(rank, shard_sequence(x, 2, rank.id, "balanced"))
...     return y
>>> result = collsim.Cluster(collsim.topology.switch(2)).run(program)
>>> y = gather_sequence(result.returns, "balanced")
>>> bool(np.allclose(y, full.forward(x)[0]))
True
>>> result.stats.bytes_sent == [ulysses_attention_bytes(2, 8, 8, 2, 8)] * 2
True
"""

import math
import numbers

import numpy as np

from ...errors import ConfigError, nearest_first
from ...nn import MultiHeadAttention
from ...nn.layers import SOFTMAX_FLOPS, softmax
from ..modules import layer_compute
from .formulas import ulysses_attention_bytes
from .layouts import check_sequence, token_positions

__all__ = ["UlyssesAttention", "ulysses_attention_bytes", "check_heads"]


def check_heads(heads, cp):
    """Refuse a cp degree that does not divide the attention heads (each cp rank attends
    for heads/cp whole heads over the full sequence).

    >>> check_heads(8, 4)
    >>> check_heads(6, 4)
    Traceback (most recent call last):
    ...
    collsim.errors.ConfigError: DeepSpeed-Ulysses needs heads divisible by cp: heads=6 is not \
divisible by cp=4 (each cp rank attends for heads/cp whole heads); cp values that divide \
heads=6, nearest first: 3, 2, 6, 1
    """
    if heads % cp:
        divisors = [c for c in range(1, heads + 1) if heads % c == 0]
        valid = ", ".join(map(str, nearest_first(cp, divisors)))
        raise ConfigError(
            f"DeepSpeed-Ulysses needs heads divisible by cp: heads={heads} is not divisible by "
            f"cp={cp} (each cp rank attends for heads/cp whole heads); cp values that divide "
            f"heads={heads}, nearest first: {valid}"
        )


class UlyssesAttention:
    """A :class:`~collsim.nn.MultiHeadAttention` run over a cp group by all-to-all.

    Parameters
    ----------
    attn : collsim.nn.MultiHeadAttention
        This rank's replica of the weights (every rank of the group holds all of them:
        ``shard_axes`` is None everywhere).
    group : collsim.runtime.group.Group
        The cp group.
    cp_rank : int
        This rank's position in ``group``: it holds that part of the sequence and
        attends for heads ``cp_rank·H/cp .. (cp_rank+1)·H/cp``.
    layout : {"contiguous", "balanced"}
        How the input tokens are split (:mod:`~collsim.parallel.context.layouts`).
    name : str
        The layer of its compute spans: ``"<name>.qkv"``, ``"<name>.core"`` (the
        attention itself, :meth:`attention_flops`), ``"<name>.out"`` and, for the
        weight gradients, ``"<name>"``.

    Notes
    -----
    ``q``, ``k`` and ``v`` travel in **one packed all-to-all** (a ``(cp, 3, B, S/cp,
    H/cp, hd)`` buffer) rather than three: the bytes are the same, the latency terms a
    third ((cp−1)·α instead of 3(cp−1)·α), and nothing here could overlap the three
    calls with compute anyway; ``dq``, ``dk``, ``dv`` go back the same way.  So a layer
    makes 2 all-to-all calls forward and 2 backward (``backward_weight`` none: its
    gradients are this rank's contribution, summed over the cp group by the gradient
    reduction of whatever trains it, as FSDP's shard group spans dp_shard × cp).
    """

    def __init__(self, attn, group, cp_rank, layout="contiguous", name="attn"):
        if not isinstance(attn, MultiHeadAttention):
            raise ConfigError(
                f"UlyssesAttention runs a collsim.nn.MultiHeadAttention, got {type(attn).__name__}"
            )
        check_heads(attn.n_heads, group.size)
        check_sequence(2 * group.size, group.size, layout)  # checks the layout's name
        if not (isinstance(cp_rank, numbers.Integral) and 0 <= cp_rank < group.size):
            raise ConfigError(
                f"cp_rank={cp_rank!r} is not a position in the cp group {list(group.ranks)}: "
                f"choose 0..{group.size - 1} (group.index(rank.id))"
            )
        self.attn, self.group, self.cp_rank = attn, group, int(cp_rank)
        self.layout, self.name = layout, name
        self.cp = group.size
        self.local_heads = attn.n_heads // self.cp
        self.shard_axes = dict.fromkeys(attn.params)  # replicated: every rank holds all

    @classmethod
    def from_full(cls, attn, group, cp_rank, layout="contiguous", name="attn"):
        """This rank's module for ``attn`` (its weights copied)."""
        if not isinstance(attn, MultiHeadAttention):
            raise ConfigError(
                f"UlyssesAttention runs a collsim.nn.MultiHeadAttention, got {type(attn).__name__}"
            )
        check_heads(attn.n_heads, group.size)
        copies = {k: v.copy() for k, v in attn.params.items()}
        replica = MultiHeadAttention(
            copies["wq"],
            copies["wk"],
            copies["wv"],
            copies["wo"],
            n_heads=attn.n_heads,
            bq=copies.get("bq"),
            bk=copies.get("bk"),
            bv=copies.get("bv"),
            bo=copies.get("bo"),
            causal=attn.causal,
        )
        return cls(replica, group, cp_rank, layout, name)

    def __repr__(self):
        return f"UlyssesAttention({self.attn!r}, cp={self.cp}, layout={self.layout!r})"

    @property
    def params(self):
        return self.attn.params

    # ---- sizes and FLOPs --------------------------------------------------------------

    def _local_shape(self, x_shape):
        shape = tuple(int(n) for n in x_shape)
        if len(shape) != 3 or shape[2] != self.attn.d_model or shape[1] < 1:
            raise ConfigError(
                f"UlyssesAttention expects this rank's tokens (B, S/cp, {self.attn.d_model}), "
                f"got {shape}"
            )
        try:
            check_sequence(shape[1] * self.cp, self.cp, self.layout)
        except ConfigError as exc:
            message = f"UlyssesAttention input {shape} holds {shape[1]} tokens: {exc}"
            raise ConfigError(message) from None
        return shape

    def attention_flops(self, x_shape):
        """FLOPs of the attention itself (``QKᵀ``, softmax, ``AV``) per pass, on this
        rank's heads over the full sequence, for this rank's input shape ``(B, S/cp, D)``.

        Every rank does the same work whatever the layout or mask: the dense kernel
        computes the masked scores too (as :class:`~collsim.nn.MultiHeadAttention`
        counts them), and each rank attends for H/cp heads over all S tokens.
        """
        B, s, _ = self._local_shape(x_shape)
        seq, hd = s * self.cp, self.attn.head_dim
        matmul = 2 * B * self.local_heads * seq * seq * hd  # QKᵀ or AV
        scores = B * self.local_heads * seq * seq
        softmax_fwd, softmax_bwd = SOFTMAX_FLOPS
        return {
            "forward": 2 * matmul + (softmax_fwd + 1) * scores,
            "backward_input": 4 * matmul + (softmax_bwd + 1) * scores,
            "backward_weight": 0,
        }

    def flops(self, x_shape):
        """FLOPs this rank computes per pass: four projections of its ``S/cp`` tokens
        for all heads, plus :meth:`attention_flops`.  Summed over the group they are the
        single-device layer's ``flops``."""
        B, s, D = self._local_shape(x_shape)
        proj = 2 * B * s * D * self.attn.n_heads * self.attn.head_dim
        attention = self.attention_flops(x_shape)
        return {pass_: 4 * proj + attention[pass_] for pass_ in attention}

    # ---- the two all-to-alls ----------------------------------------------------------

    def _to_heads(self, rank, t):
        """(n, B, S/cp, H·hd) tokens of this rank, all heads -> (n, B, H/cp, S, hd) every
        rank's tokens (in group order) for this rank's heads."""
        n, B, s, _ = t.shape
        hl, hd = self.local_heads, self.attn.head_dim
        send = t.reshape(n, B, s, self.cp, hl, hd).transpose(3, 0, 1, 2, 4, 5)  # chunk j: heads j
        got = yield from rank.all_to_all(np.ascontiguousarray(send), group=self.group)
        return got.transpose(1, 2, 4, 0, 3, 5).reshape(n, B, hl, self.cp * s, hd)  # got[j]: j's

    def _to_tokens(self, rank, t):
        """(n, B, H/cp, S, hd) -> (n, B, S/cp, H·hd): the inverse of :meth:`_to_heads`."""
        n, B, hl, seq, hd = t.shape
        s = seq // self.cp
        send = t.reshape(n, B, hl, self.cp, s, hd).transpose(3, 0, 1, 4, 2, 5)  # chunk j: j's
        got = yield from rank.all_to_all(np.ascontiguousarray(send), group=self.group)
        return got.transpose(1, 2, 3, 0, 4, 5).reshape(n, B, s, self.cp * hl * hd)  # heads j

    def _arrival_positions(self, seq):
        """Global positions of the full sequence as it arrives: rank 0's tokens, rank 1's..."""
        return np.concatenate(
            [token_positions(seq, self.cp, j, self.layout) for j in range(self.cp)]
        )

    # ---- passes -----------------------------------------------------------------------

    def _check_rank(self, rank):
        if self.group.ranks[self.cp_rank] != rank.id:
            raise ConfigError(
                f"UlyssesAttention holds cp rank {self.cp_rank} of group "
                f"{list(self.group.ranks)} (rank {self.group.ranks[self.cp_rank]}) but runs on "
                f"rank {rank.id}: build it with cp_rank=group.index(rank.id)"
            )

    def forward(self, rank, x):
        self._check_rank(rank)
        x = np.asarray(x)  # (B, S/cp, D)
        flops = self.flops(x.shape)
        attention = self.attention_flops(x.shape)
        proj = (flops["forward"] - attention["forward"]) // 4
        a = self.attn
        yield layer_compute(rank, "forward", f"{self.name}.qkv", 3 * proj)
        local = [
            x @ w if b is None else x @ w + b for w, b in ((a.wq, a.bq), (a.wk, a.bk), (a.wv, a.bv))
        ]
        q, k, v = yield from self._to_heads(rank, np.stack(local))  # (B, H/cp, S, hd) each
        seq = q.shape[2]
        yield layer_compute(rank, "forward", f"{self.name}.core", attention["forward"])
        scores = (q @ k.swapaxes(-1, -2)) / math.sqrt(a.head_dim)  # (B, H/cp, S, S)
        if a.causal:
            pos = self._arrival_positions(seq)
            future = pos[None, :] > pos[:, None]  # (S, S): key after query, globally
            scores = np.where(future, -np.inf, scores)
        att = softmax(scores, axis=-1)
        (y,) = yield from self._to_tokens(rank, (att @ v)[None])  # (B, S/cp, H·hd)
        yield layer_compute(rank, "forward", f"{self.name}.out", proj)
        out = y @ a.wo if a.bo is None else y @ a.wo + a.bo  # (B, S/cp, D)
        ctx = {
            "x": x,
            "q": q,
            "k": k,
            "v": v,
            "att": att,
            "y": y,
            "flops": flops,
            "attention_flops": attention,
            "proj_flops": proj,
        }
        return out, ctx

    def backward_input(self, rank, ctx, dy):
        dy = np.asarray(dy)
        if dy.shape != ctx["x"].shape:
            raise ConfigError(
                f"UlyssesAttention gradient has shape {dy.shape}; the output is {ctx['x'].shape}"
            )
        a, proj = self.attn, ctx["proj_flops"]
        q, k, v, att = ctx["q"], ctx["k"], ctx["v"], ctx["att"]
        yield layer_compute(rank, "backward_input", f"{self.name}.out", proj)
        (dyh,) = yield from self._to_heads(rank, (dy @ a.wo.T)[None])  # (B, H/cp, S, hd)
        core = ctx["attention_flops"]["backward_input"]
        yield layer_compute(rank, "backward_input", f"{self.name}.core", core)
        datt = dyh @ v.swapaxes(-1, -2)  # (B, H/cp, S, S)
        dv = att.swapaxes(-1, -2) @ dyh
        # softmax backward; masked entries have att == 0, so they get no gradient
        dscores = att * (datt - np.sum(datt * att, axis=-1, keepdims=True))
        dscores = dscores / math.sqrt(a.head_dim)
        dq, dk = dscores @ k, dscores.swapaxes(-1, -2) @ q
        dqkv = yield from self._to_tokens(rank, np.stack([dq, dk, dv]))  # (3, B, S/cp, H·hd)
        ctx["dys"] = (dy, dqkv)  # backward_weight needs them: never communicated twice
        yield layer_compute(rank, "backward_input", f"{self.name}.qkv", 3 * proj)
        return dqkv[0] @ a.wq.T + dqkv[1] @ a.wk.T + dqkv[2] @ a.wv.T  # (B, S/cp, D)

    def backward_weight(self, rank, ctx, dy):
        """This rank's contribution to every weight gradient (from its tokens); the sum
        over the cp group is the single-device gradient."""
        kept = ctx.get("dys")
        if kept is None or kept[0] is not dy:
            yield from self.backward_input(rank, ctx, dy)
            kept = ctx["dys"]
        dy, dqkv = kept
        a = self.attn
        yield layer_compute(rank, "backward_weight", self.name, ctx["flops"]["backward_weight"])
        inner = a.n_heads * a.head_dim
        x2 = ctx["x"].reshape(-1, a.d_model)  # (B·S/cp, D)
        grads = {}
        for name, g in zip("qkv", dqkv, strict=True):
            g2 = g.reshape(-1, inner)
            grads["w" + name] = x2.T @ g2
            if getattr(a, "b" + name) is not None:
                grads["b" + name] = g2.sum(axis=0)
        dy2 = dy.reshape(-1, a.d_model)
        grads["wo"] = ctx["y"].reshape(-1, inner).T @ dy2
        if a.bo is not None:
            grads["bo"] = dy2.sum(axis=0)
        return {name: grads[name] for name in self.params}

    def backward(self, rank, ctx, dy):
        dx = yield from self.backward_input(rank, ctx, dy)
        return dx, (yield from self.backward_weight(rank, ctx, dy))
