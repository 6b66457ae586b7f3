"""The naive all-reduce students compare ring with: everyone sends its whole buffer to
one root, which reduces and sends the result back to everyone.

Two steps only, but the root receives (K-1) whole buffers and sends (K-1): on a switch
all of them share the root's one link, so time grows like (K-1)·S/β.

Examples
--------
>>> s = naive_all_reduce(4)
>>> [(m.src, m.dst) for m in s.steps[0]], [(m.src, m.dst) for m in s.steps[1]]
([(1, 0), (2, 0), (3, 0)], [(0, 1), (0, 2), (0, 3)])
"""

from .schedule import ChunkMove, Schedule

__all__ = ["naive_all_reduce"]


def naive_all_reduce(k, root=0):
    """Gather-and-reduce to ``root``, then send the result to every other rank."""
    whole = range(0, 1)
    others = [r for r in range(k) if r != root]
    gather = tuple(ChunkMove(r, root, whole, True) for r in others)
    scatter = tuple(ChunkMove(root, r, whole, False) for r in others)
    steps = (gather, scatter) if others else ()
    phases = (("gather to root", 0, 1), ("send back", 1, 2)) if others else ()
    return Schedule("all_reduce", "naive", k, 1, steps, phases, root=root)
