"""The transformer block under context parallelism: attention across the cp group, the rest local.

A pre-LayerNorm block ``h = x + attn(ln1(x))``, ``y = h + mlp(ln2(h))`` works token by token
everywhere except in attention. Under context parallelism each rank of the ``cp`` group holds
its tokens of the sequence (``(B, S/cp, D)`` in the group's layout,
:mod:`~collsim.parallel.context.layouts`): the LayerNorms, the MLP and the residual adds run on
those tokens alone, and attention is ring attention
(:class:`~collsim.parallel.context.ring.RingAttention`) or the all-to-all of DeepSpeed-Ulysses
(:class:`~collsim.parallel.context.ulysses.UlyssesAttention`).

Every parameter is replicated over the group and each rank's gradient covers its own tokens,
so the mesh trainer averages the gradients over the data-parallel and context-parallel ranks
together (each rank's loss is the mean over its tokens, and every rank holds as many).
Parameter names are :class:`collsim.nn.TransformerBlock`'s (``"ln1.gamma"``, ``"attn.wq"``,
``"mlp.fc1.weight"``, ...).
"""

import copy

import numpy as np

from ...errors import ConfigError
from ...nn.blocks import RESIDUAL_FLOPS
from ..modules import Local, layer_compute

__all__ = ["CP_VARIANTS", "ContextParallelBlock"]

CP_VARIANTS = ("ring", "all-to-all")


def _attention(variant):
    if variant == "ring":
        from .ring import RingAttention

        return RingAttention
    if variant == "all-to-all":
        from .ulysses import UlyssesAttention

        return UlyssesAttention
    raise ConfigError(f"cp variant {variant!r} is not one of {', '.join(CP_VARIANTS)}")


class ContextParallelBlock:
    """A :class:`collsim.nn.TransformerBlock` on one rank of a context-parallel group."""

    def __init__(self, ln1, attn, ln2, mlp, name="block"):
        self.ln1, self.attn, self.ln2, self.mlp = ln1, attn, ln2, mlp
        self.name = name
        self._children = {"ln1": ln1, "attn": attn, "ln2": ln2, "mlp": mlp}

    @classmethod
    def from_full(cls, block, group, cp_rank, variant="ring", layout="balanced", name="block"):
        attn = _attention(variant).from_full(
            block.attn, group, cp_rank, layout=layout, name=f"{name}.attn"
        )
        local = {part: Local(copy.deepcopy(getattr(block, part)), name=f"{name}.{part}")
                 for part in ("ln1", "ln2", "mlp")}  # fmt: skip
        return cls(local["ln1"], attn, local["ln2"], local["mlp"], name)

    def __repr__(self):
        return f"ContextParallelBlock({self.attn!r})"

    @property
    def params(self):
        return {f"{p}.{k}": v for p, c in self._children.items() for k, v in c.params.items()}

    @property
    def shard_axes(self):
        """Every cp rank holds every parameter; with tp the attention heads and the MLP
        columns/rows are split over the TP group as Megatron splits them."""
        return {f"{p}.{k}": v for p, c in self._children.items()
                for k, v in c.shard_axes.items()}  # fmt: skip

    def forward(self, rank, x):
        x = np.asarray(x)  # (B, S/cp, D): this rank's tokens
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
        for p in ("mlp", "ln2", "attn", "ln1"):  # the order backward produces them
            part = yield from self._children[p].backward_weight(rank, ctx[p], kept[1][p])
            grads |= {f"{p}.{k}": v for k, v in part.items()}
        return {name: grads[name] for name in self.params}

    def backward(self, rank, ctx, dy):
        dx = yield from self.backward_input(rank, ctx, dy)
        return dx, (yield from self.backward_weight(rank, ctx, dy))
