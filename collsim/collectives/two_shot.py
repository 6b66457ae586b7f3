"""The two-shot all-reduce: a reduce-scatter and an all-gather, each rank exchanging with
all its peers at once, in two steps.

vLLM's custom all-reduce switches to it above its one-shot sizes, and NCCL's
symmetric-memory kernels have it too: with the buffer in K parts, in step 1 every rank
sends part c to rank c, which reduces the K-1 contributions into its own (a
reduce-scatter in one step), and in step 2 rank c sends the reduced part c to every
other rank (an all-gather in one step).  Each rank sends and receives 2(K-1)/K·S, the
bytes of a ring, in 2 steps instead of 2(K-1): α is paid twice, not 2(K-1) times.  On a
switch the K-1 messages of a step share the rank's link: 2α + 2(K-1)/K·S/β
(formulas.py).

Examples
--------
>>> s = two_shot_all_reduce(3)
>>> [(m.src, m.dst, m.chunks) for m in s.steps[0]][:2]   # part c goes to rank c
[(0, 1, range(1, 2)), (0, 2, range(2, 3))]
>>> [(m.src, m.dst, m.chunks) for m in s.steps[1]][:2]   # rank c sends its sum of part c
[(0, 1, range(0, 1)), (0, 2, range(0, 1))]
"""

from .schedule import ChunkMove, Schedule

__all__ = ["two_shot_all_reduce"]


def two_shot_all_reduce(k):
    """Reduce-scatter then all-gather, every rank with every peer in each step."""
    if k == 1:
        return Schedule("all_reduce", "two_shot", 1, 1, ())
    pairs = [(src, dst) for src in range(k) for dst in range(k) if src != dst]
    scatter = tuple(ChunkMove(src, dst, range(dst, dst + 1), True) for src, dst in pairs)
    gather = tuple(ChunkMove(src, dst, range(src, src + 1), False) for src, dst in pairs)
    phases = (("reduce-scatter (all peers at once)", 0, 1), ("all-gather (all peers)", 1, 2))
    return Schedule("all_reduce", "two_shot", k, k, (scatter, gather), phases)
