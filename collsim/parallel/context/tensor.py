"""Context and tensor parallelism together: each TP rank's heads, attended across the cp group.

Tensor parallelism splits attention by heads (:class:`~collsim.parallel.tensor.ParallelAttention`:
``wq``, ``wk``, ``wv`` by columns, ``wo`` by rows, Megatron's ``g`` all-reduce after it);
context parallelism splits the sequence. Together, a rank at (cp rank c, tp rank t) holds tokens
``c`` of the sequence and heads ``t`` of every layer: it runs ring attention (or the all-to-all)
on its heads across the cp group, then the TP group all-reduces the partial output, and in the
backward the TP group all-reduces the input gradient (``f``). With sequence parallelism the
TP ranks of a cp rank split its tokens once more for the norms, the MLP and the residuals;
``f`` all-gathers them in front of attention and ``g`` reduce-scatters after it, and the
parameters that saw only a rank's tokens (both LayerNorms, the output biases) have their
gradients summed over the TP group, as Megatron does.
"""

import numpy as np

from ..tensor import ParallelAttention, ParallelMLP, sync_partial_grads
from .block import ContextParallelBlock, _attention

__all__ = ["TensorContextAttention", "TensorContextBlock", "tensor_context_block"]


class TensorContextAttention:
    """One (cp rank, tp rank)'s heads of a :class:`~collsim.nn.MultiHeadAttention`."""

    def __init__(self, tp_attn, cp_attn):
        self.tp, self.cp = tp_attn, cp_attn
        self.fg, self.bo, self.name = tp_attn.fg, tp_attn.bo, tp_attn.name
        self.shard_axes = dict(tp_attn.shard_axes)  # heads split over tp, replicated over cp
        self.partial_grad_names = tp_attn.partial_grad_names  # "bo" under SP

    @classmethod
    def from_full(
        cls,
        attn,
        tp_group,
        tp_rank,
        cp_group,
        cp_rank,
        variant="ring",
        layout="balanced",
        name="attn",
        sequence_parallel=False,
    ):
        tp_attn = ParallelAttention.from_full(attn, tp_group, tp_rank, sequence_parallel, name=name)
        cp_attn = _attention(variant).from_full(
            tp_attn.shard, cp_group, cp_rank, layout=layout, name=name
        )
        return cls(tp_attn, cp_attn)

    def __repr__(self):
        return f"TensorContextAttention({self.cp!r}, tp={self.tp.group.size})"

    @property
    def params(self):
        return self.cp.params | ({"bo": self.bo} if self.bo is not None else {})

    def forward(self, rank, x):
        x = yield from self.fg.f_forward(rank, x)  # SP: all-gather the cp rank's tokens
        y, ctx = yield from self.cp.forward(rank, x)  # (B, S/cp, D): a partial sum over tp
        y = yield from self.fg.g_forward(rank, y)  # all-reduce over the TP group
        if self.bo is not None:
            y = y + self.bo
        return y, {"inner": ctx}

    def backward_input(self, rank, ctx, dy):
        dy_full = yield from self.fg.g_backward(rank, dy)  # identity without SP
        ctx["dy"] = dy_full
        dx = yield from self.cp.backward_input(rank, ctx["inner"], dy_full)
        return (yield from self.fg.f_backward(rank, dx))  # all-reduce over the TP group

    def backward_weight(self, rank, ctx, dy):
        if "dy" not in ctx:
            yield from self.backward_input(rank, ctx, dy)
        grads = yield from self.cp.backward_weight(rank, ctx["inner"], ctx["dy"])
        if self.bo is not None:  # added once after g: its gradient is the output's, summed
            grads["bo"] = np.reshape(dy, (-1, self.bo.shape[0])).sum(axis=0)
        return grads  # "bo" is partial under SP: the block sums it over tp

    def backward(self, rank, ctx, dy):
        dx = yield from self.backward_input(rank, ctx, dy)
        return dx, (yield from self.backward_weight(rank, ctx, dy))


class TensorContextBlock(ContextParallelBlock):
    """A :class:`collsim.nn.TransformerBlock` on one rank of a (cp, tp) grid: attention by
    :class:`TensorContextAttention`, the MLP by Megatron's column/row split; under sequence
    parallelism the gradients of what saw only this rank's tokens are summed over tp."""

    def __init__(self, ln1, attn, ln2, mlp, tp_group, sequence_parallel, name="block"):
        super().__init__(ln1, attn, ln2, mlp, name)
        self.tp_group = tp_group
        self.partial_grad_names = self.partial_names(sequence_parallel)
        mlp.fc2.sync_partial_grads = False  # summed here, with the rest, at once

    def sum_partial(self, rank, grads):
        return (yield from sync_partial_grads(rank, grads, self.partial_grad_names, self.tp_group))


def tensor_context_block(
    block, tp_group, tp_rank, cp_group, cp_rank, variant, layout, name, sequence_parallel=False
):
    """The block of one (cp rank, tp rank): a :class:`TensorContextBlock`."""
    local = ContextParallelBlock.from_full(block, cp_group, cp_rank, variant, layout, name)
    attn = TensorContextAttention.from_full(
        block.attn,
        tp_group,
        tp_rank,
        cp_group,
        cp_rank,
        variant,
        layout,
        f"{name}.attn",
        sequence_parallel,
    )
    mlp = ParallelMLP.from_full(block.mlp, tp_group, tp_rank, sequence_parallel, seq_axis=1)
    return TensorContextBlock(local.ln1, attn, local.ln2, mlp, tp_group, sequence_parallel, name)
