"""Context parallelism: the sequence split over a cp group (ring attention, all-to-all).

==========================================  ===============================================
name                                        what it is
==========================================  ===============================================
:data:`CP_LAYOUTS`, :func:`shard_sequence`,  how a sequence is split over the group
:func:`gather_sequence`,                    (contiguous, or Megatron's load-balanced
:func:`token_positions`                     chunks i and 2·cp−1−i), :mod:`.layouts`
:class:`RingAttention`                      K/V blocks round a ring, online softmax
                                            (:mod:`.ring`)
:class:`UlyssesAttention`                   all-to-all to heads and back, DeepSpeed-Ulysses
                                            (:mod:`.ulysses`)
:func:`ring_attention_bytes`,               closed forms: bytes (ring, all-to-all, a rank
:func:`ulysses_attention_bytes`,            of a (cp, tp) grid over a run), the (query,
:func:`context_parallel_bytes`,             key) pairs a causal mask keeps and the
:func:`causal_pairs`,                       per-rank attention FLOPs by layout
:func:`causal_balance`,                     (:mod:`.formulas`)
:func:`causal_attention_flops`
:class:`ContextParallelBlock`               a transformer block under cp (:mod:`.block`)
==========================================  ===============================================
"""

from .block import CP_VARIANTS, ContextParallelBlock
from .formulas import (
    CausalBalance,
    causal_attention_flops,
    causal_balance,
    causal_pairs,
    context_parallel_bytes,
    ring_attention_bytes,
    score_flops,
    ulysses_attention_bytes,
)
from .layouts import (
    CP_LAYOUTS,
    check_sequence,
    gather_sequence,
    shard_sequence,
    token_positions,
)
from .ring import RingAttention, RingMessage, RingStep
from .ulysses import UlyssesAttention, check_heads

__all__ = [
    "CP_LAYOUTS",
    "CP_VARIANTS",
    "CausalBalance",
    "ContextParallelBlock",
    "RingAttention",
    "RingMessage",
    "RingStep",
    "UlyssesAttention",
    "causal_attention_flops",
    "causal_balance",
    "causal_pairs",
    "context_parallel_bytes",
    "check_heads",
    "check_sequence",
    "gather_sequence",
    "ring_attention_bytes",
    "score_flops",
    "shard_sequence",
    "token_positions",
    "ulysses_attention_bytes",
]
