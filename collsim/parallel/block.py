"""The pre-LayerNorm transformer block as a rank module, whatever splits its parts.

``h = x + attn(ln1(x))``, ``y = h + mlp(ln2(h))`` with each part a rank module: the
tensor-parallel block (:class:`~collsim.parallel.tensor.ParallelTransformerBlock`) and the
context-parallel ones (:mod:`collsim.parallel.context.block`, :mod:`.context.tensor`) differ
only in which parts they give it and in the gradients they sum over a group afterwards
(:meth:`RankBlock.sum_partial`). Parameter names are :class:`collsim.nn.TransformerBlock`'s
(``"ln1.gamma"``, ``"attn.wq"``, ``"mlp.fc1.weight"``, ...).

>>> import numpy as np, collsim
>>> from collsim.nn import TransformerBlock
>>> from collsim.parallel.modules import Local
>>> full = TransformerBlock.init(8, 2, np.random.default_rng(0))
>>> block = RankBlock(*(Local(getattr(full, p)) for p in ("ln1", "attn", "ln2", "mlp")))
>>> x = np.ones((1, 3, 8))
>>> def program(rank):
...     y, ctx = yield from block.forward(rank, x)
...     return y
>>> y = collsim.Cluster(collsim.topology.switch(1)).run(program).returns[0]
>>> bool(np.allclose(y, full.forward(x)[0]))
True
"""

import numpy as np

from ..nn.blocks import RESIDUAL_FLOPS
from .modules import layer_compute

__all__ = ["RankBlock"]

_BACKWARD_ORDER = ("mlp", "ln2", "attn", "ln1")  # the order backward produces gradients


class RankBlock:
    """A pre-LayerNorm block of rank modules ``ln1``, ``attn``, ``ln2``, ``mlp``."""

    def __init__(self, ln1, attn, ln2, mlp, name="block"):
        self.ln1, self.attn, self.ln2, self.mlp = ln1, attn, ln2, mlp
        self.name = name
        self._children = {"ln1": ln1, "attn": attn, "ln2": ln2, "mlp": mlp}

    @property
    def params(self):
        return {f"{p}.{k}": v for p, c in self._children.items() for k, v in c.params.items()}

    @property
    def shard_axes(self):
        return {f"{p}.{k}": v for p, c in self._children.items() for k, v in c.shard_axes.items()}

    def partial_names(self, sequence_parallel):
        """Gradients that hold only this rank's share under tensor parallelism: the parts'
        own partial ones and, with sequence parallelism, both LayerNorms' (Megatron)."""
        partial = [f"attn.{n}" for n in self.attn.partial_grad_names]
        partial += [f"mlp.{n}" for n in self.mlp.partial_grad_names]
        if sequence_parallel:
            partial += [f"{p}.{k}" for p in ("ln1", "ln2") for k in self._children[p].params]
        return tuple(partial)

    def sum_partial(self, rank, grads):
        """Sum what only this rank's share produced over its group (none here: a generator)."""
        yield from ()
        return grads

    def forward(self, rank, x):
        x = np.asarray(x)  # (B, S, H): this rank's tokens
        ctx = {}
        a, ctx["ln1"] = yield from self.ln1.forward(rank, x)
        o, ctx["attn"] = yield from self.attn.forward(rank, a)
        yield layer_compute(rank, "forward", "residual", RESIDUAL_FLOPS[0] * x.size)
        h = x + o
        b, ctx["ln2"] = yield from self.ln2.forward(rank, h)
        m, ctx["mlp"] = yield from self.mlp.forward(rank, b)
        yield layer_compute(rank, "forward", "residual", RESIDUAL_FLOPS[0] * x.size)
        return h + m, ctx

    def backward_input(self, rank, ctx, dy):
        d_b = yield from self.mlp.backward_input(rank, ctx["mlp"], dy)
        dh = dy + (yield from self.ln2.backward_input(rank, ctx["ln2"], d_b))
        d_a = yield from self.attn.backward_input(rank, ctx["attn"], dh)
        dx = dh + (yield from self.ln1.backward_input(rank, ctx["ln1"], d_a))
        yield layer_compute(rank, "backward_input", "residual", 2 * RESIDUAL_FLOPS[1] * np.size(dy))
        ctx["dys"] = (dy, {"mlp": dy, "ln2": d_b, "attn": dh, "ln1": d_a})
        return dx

    def backward_weight(self, rank, ctx, dy):
        kept = ctx.get("dys")
        if kept is None or kept[0] is not dy:
            yield from self.backward_input(rank, ctx, dy)
            kept = ctx["dys"]
        grads = {}
        for p in _BACKWARD_ORDER:
            part = yield from self._children[p].backward_weight(rank, ctx[p], kept[1][p])
            grads |= {f"{p}.{k}": v for k, v in part.items()}
        grads = yield from self.sum_partial(rank, grads)
        return {name: grads[name] for name in self.params}

    def backward(self, rank, ctx, dy):
        dx = yield from self.backward_input(rank, ctx, dy)
        return dx, (yield from self.backward_weight(rank, ctx, dy))
