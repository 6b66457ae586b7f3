"""Tensor parallelism (Megatron-LM): one concept, three modules.

==================  ==================================================================
module              what it holds
==================  ==================================================================
:mod:`.comm`        the divisibility rules, Megatron's ``f`` and ``g`` (TP or sequence
                    parallel) and the collectives along one axis of an activation
:mod:`.layers`      column- and row-parallel linears and the parallel MLP
:mod:`.attention`   attention with heads split and the parallel transformer block
:mod:`.layouts`     how an activation is split over a TP group ("full", "seq", "last")
==================  ==================================================================

Every class here is a rank module (:class:`collsim.parallel.modules.RankModule`): build
one per rank with ``from_full(full_layer, group, tp_rank)``.

>>> from collsim.parallel.tensor import ColumnParallelLinear, ParallelTransformerBlock
>>> ColumnParallelLinear.__module__, ParallelTransformerBlock.__module__
('collsim.parallel.tensor.layers', 'collsim.parallel.tensor.attention')
"""

from .attention import ParallelAttention, ParallelTransformerBlock
from .comm import (
    FG,
    all_gather_along,
    check_tp,
    reduce_scatter_along,
    sequence_shard,
    split_along,
    sync_partial_grads,
)
from .layers import ColumnParallelLinear, ParallelMLP, RowParallelLinear
from .layouts import LAYOUTS, assemble, local_part

__all__ = [
    "check_tp",
    "FG",
    "all_gather_along",
    "reduce_scatter_along",
    "split_along",
    "sequence_shard",
    "sync_partial_grads",
    "ColumnParallelLinear",
    "RowParallelLinear",
    "ParallelMLP",
    "ParallelAttention",
    "ParallelTransformerBlock",
    "LAYOUTS",
    "local_part",
    "assemble",
]
