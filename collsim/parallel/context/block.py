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

from ...errors import ConfigError
from ..block import RankBlock
from ..modules import Local

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


class ContextParallelBlock(RankBlock):
    """A :class:`collsim.nn.TransformerBlock` on one rank of a context-parallel group."""

    @classmethod
    def from_full(cls, block, group, cp_rank, variant="ring", layout="balanced", name="block"):
        attn = _attention(variant).from_full(
            block.attn, group, cp_rank, layout=layout, name=f"{name}.attn"
        )
        local = {
            part: Local(copy.deepcopy(getattr(block, part)), name=f"{name}.{part}")
            for part in ("ln1", "ln2", "mlp")
        }
        return cls(local["ln1"], attn, local["ln2"], local["mlp"], name)

    def __repr__(self):
        return f"ContextParallelBlock({self.attn!r})"
