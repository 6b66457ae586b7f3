"""Recursive halving and doubling: all-reduce (Rabenseifner, 2004), reduce-scatter by
recursive halving and all-gather by recursive doubling (Thakur, Rabenseifner and Gropp,
2005, "Optimization of collective communication operations in MPICH").

For K a power of two, with the buffer in K chunks:

* recursive halving (reduce-scatter), step i = 1..log2 K: rank r pairs with
  r XOR K/2^i; each keeps the half of its current chunk range that holds chunk r and
  sends the other half, which the partner reduces in; after log2 K steps rank r holds
  chunk r of the reduction.  Step i sends K/2^i chunks.
* recursive doubling (all-gather), step i = 1..log2 K: rank r pairs with r XOR 2^(i-1)
  and sends every chunk it holds, so what it holds doubles: 2^(i-1) chunks in step i.
* all-reduce = halving then doubling: 2·log2 K steps, 2(K-1)/K of the buffer sent per
  rank: ring's bandwidth with a tree's latency, but partners far apart share links on a
  ring.

For other K the all-reduce folds the ``K - 2^⌊log2 K⌋`` extra ranks in: rank
2^⌊log2 K⌋ + i first sends its whole buffer to rank i (which reduces it), the
power-of-two core runs, and rank i sends the result back: two steps more.  The
reduce-scatter and all-gather need K a power of two and refuse other K, naming the two
nearest (a fold-in would leave the extra ranks' chunks split across core ranks, which
a chunk range cannot say).

Examples
--------
>>> s = halving_doubling_all_reduce(4)
>>> [(m.src, m.dst, m.chunks) for m in s.steps[0]][:2]
[(0, 2, range(2, 4)), (1, 3, range(2, 4))]
>>> halving_doubling_all_reduce(6).n_steps    # 2 log2 4 + 2
6
>>> [[(m.src, m.dst, m.chunks) for m in st][:1] for st in halving_doubling_all_gather(4).steps]
[[(0, 1, range(0, 1))], [(0, 2, range(0, 2))]]
"""

import math

from .checks import check_power_of_two
from .schedule import ChunkMove, Schedule

__all__ = [
    "halving_doubling_all_reduce",
    "halving_doubling_reduce_scatter",
    "halving_doubling_all_gather",
]


def _halving_steps(core):
    """Recursive halving on ``core`` (a power of two) ranks and chunks: the steps, and
    the chunk range each rank owns at the end (``range(r, r + 1)``)."""
    owned = [range(0, core)] * core
    steps = []
    mask = core // 2
    while mask:
        moves, kept = [], []
        for r in range(core):
            lo, hi = owned[r].start, owned[r].stop
            mid = (lo + hi) // 2
            low_half = r & mask == 0  # the half that holds chunk r
            keep = range(lo, mid) if low_half else range(mid, hi)
            give = range(mid, hi) if low_half else range(lo, mid)
            moves.append(ChunkMove(r, r ^ mask, give, True))
            kept.append(keep)
        steps.append(tuple(moves))
        owned = kept
        mask //= 2
    return steps, owned


def _doubling_steps(core, owned):
    """Recursive doubling from the ranges ``owned``: each rank sends what it holds to
    r XOR 2^i, so owned ranges grow back to the whole buffer."""
    steps = []
    mask = 1
    while mask < core:
        steps.append(tuple(ChunkMove(r, r ^ mask, owned[r], False) for r in range(core)))
        owned = [
            range(
                min(owned[r].start, owned[r ^ mask].start), max(owned[r].stop, owned[r ^ mask].stop)
            )
            for r in range(core)
        ]
        mask *= 2
    return steps


def halving_doubling_reduce_scatter(k):
    """Recursive halving: log2 K steps; K must be a power of two."""
    check_power_of_two(k, "halving-doubling reduce-scatter")
    steps, _ = _halving_steps(k)
    phases = (("reduce-scatter (halving)", 0, len(steps)),)
    return Schedule(
        "reduce_scatter", "halving_doubling", k, k, tuple(steps), phases, "full", "own_chunk"
    )


def halving_doubling_all_gather(k):
    """Recursive doubling: log2 K steps; K must be a power of two."""
    check_power_of_two(k, "halving-doubling all-gather")
    steps = _doubling_steps(k, [range(r, r + 1) for r in range(k)])
    phases = (("all-gather (doubling)", 0, len(steps)),)
    return Schedule(
        "all_gather", "halving_doubling", k, k, tuple(steps), phases, "own_chunk", "full"
    )


def halving_doubling_all_reduce(k):
    """The schedule for K ranks (any K >= 1)."""
    core = 2 ** int(math.log2(k)) if k > 1 else 1
    extra = k - core
    whole = range(0, core)
    halving, owned = _halving_steps(core)
    doubling = _doubling_steps(core, owned)
    fold_in = [tuple(ChunkMove(core + i, i, whole, True) for i in range(extra))] if extra else []
    fold_out = [tuple(ChunkMove(i, core + i, whole, False) for i in range(extra))] if extra else []
    steps = fold_in + halving + doubling + fold_out
    n_in, n_h = len(fold_in), len(halving)
    phases = (
        ((("fold-in", 0, 1),) if extra else ())
        + (
            ("reduce-scatter (halving)", n_in, n_in + n_h),
            ("all-gather (doubling)", n_in + n_h, n_in + 2 * n_h),
        )
        + ((("fold-out", n_in + 2 * n_h, n_in + 2 * n_h + 1),) if extra else ())
    )
    return Schedule("all_reduce", "halving_doubling", k, core, tuple(steps), phases)
