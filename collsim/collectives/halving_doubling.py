"""Recursive halving-doubling all-reduce (Rabenseifner, 2004).

For K a power of two, with the buffer in K chunks: reduce-scatter by recursive halving
(step i: partner r XOR K/2^(i+1); each keeps one half of its current range and sends the
other), then all-gather by recursive doubling (the same pairs in reverse).  2·log2 K
steps, 2(K-1)/K of the buffer sent per rank: ring's bandwidth with a tree's latency, but
partners far apart share links on a ring.

For other K the ``K - 2^⌊log2 K⌋`` extra ranks fold in: rank 2^⌊log2 K⌋ + i first sends
its whole buffer to rank i (which reduces it), the power-of-two core runs, and rank i
sends the result back: two steps more.

Examples
--------
>>> s = halving_doubling_all_reduce(4)
>>> [(m.src, m.dst, m.chunks) for m in s.steps[0]][:2]
[(0, 2, range(2, 4)), (1, 3, range(2, 4))]
>>> halving_doubling_all_reduce(6).n_steps    # 2 log2 4 + 2
6
"""

import math

from .schedule import ChunkMove, Schedule

__all__ = ["halving_doubling_all_reduce"]


def halving_doubling_all_reduce(k):
    """The schedule for K ranks (any K >= 1)."""
    core = 2 ** int(math.log2(k)) if k > 1 else 1
    extra = k - core
    whole = range(0, core)
    lo, hi = [0] * core, [core] * core  # the chunk range each core rank is responsible for
    halving, doubling, history = [], [], []
    mask = core // 2
    while mask:
        moves = []
        new = []
        for r in range(core):
            mid = (lo[r] + hi[r]) // 2
            keep = range(lo[r], mid) if r & mask == 0 else range(mid, hi[r])
            give = range(mid, hi[r]) if r & mask == 0 else range(lo[r], mid)
            moves.append(ChunkMove(r, r ^ mask, give, True))
            new.append(keep)
        history.append([range(lo[r], hi[r]) for r in range(core)])
        lo, hi = [x.start for x in new], [x.stop for x in new]
        halving.append(tuple(moves))
        mask //= 2
    # doubling: each rank sends the range it owns now to the partner of the matching
    # halving step, in reverse order, so owned ranges grow back to the whole buffer
    owned = [range(lo[r], hi[r]) for r in range(core)]
    mask = 1
    while mask < core:
        doubling.append(tuple(ChunkMove(r, r ^ mask, owned[r], False) for r in range(core)))
        owned = [range(min(owned[r].start, owned[r ^ mask].start),
                       max(owned[r].stop, owned[r ^ mask].stop)) for r in range(core)]  # fmt: skip
        mask *= 2
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
