"""Binomial trees: broadcast, reduce, and all-reduce as reduce-then-broadcast.

With ranks relabelled relative to the root (rel = (r - root) mod K), broadcast step d
sends the whole buffer from every rel < 2^d to rel + 2^d; reduce runs the same tree
backwards.  Each step moves the whole buffer, so a tree wins on latency
(⌈log2 K⌉ steps) and loses on bandwidth.

Examples
--------
>>> tree_broadcast(5).steps[2]
(ChunkMove(src=0, dst=4, chunks=range(0, 1), reduce=False),)
>>> tree_all_reduce(8).n_steps      # 2⌈log2 K⌉
6
"""

import math

from .schedule import ChunkMove, Schedule

__all__ = ["tree_broadcast", "tree_reduce", "tree_all_reduce", "rank_order_reduce"]

WHOLE = range(0, 1)  # trees move the whole buffer as one chunk


def _depth(k):
    return 0 if k <= 1 else math.ceil(math.log2(k))


def _broadcast_steps(k, root):
    steps = []
    for d in range(_depth(k)):
        moves = [
            ChunkMove((rel + root) % k, (rel + 2**d + root) % k, WHOLE, False)
            for rel in range(2**d)
            if rel + 2**d < k
        ]
        steps.append(tuple(moves))
    return steps


def _reduce_steps(k, root):
    # the broadcast tree read backwards, each edge reversed and reducing
    return [
        tuple(ChunkMove(m.dst, m.src, WHOLE, True) for m in step)
        for step in reversed(_broadcast_steps(k, root))
    ]


def tree_broadcast(k, root=0):
    """Binomial broadcast from ``root``: ⌈log2 K⌉ steps of the whole buffer."""
    n = _depth(k)
    return Schedule(
        "broadcast",
        "tree",
        k,
        1,
        tuple(_broadcast_steps(k, root)),
        (("broadcast", 0, n),),
        "root",
        "full",
        root,
    )


def tree_reduce(k, root=0):
    """Binomial reduce to ``root``: ⌈log2 K⌉ steps of the whole buffer."""
    n = _depth(k)
    return Schedule(
        "reduce",
        "tree",
        k,
        1,
        tuple(_reduce_steps(k, root)),
        (("reduce", 0, n),),
        "full",
        "root",
        root,
    )


def tree_all_reduce(k):
    """Reduce to rank 0, then broadcast from it: 2⌈log2 K⌉ steps."""
    n = _depth(k)
    steps = _reduce_steps(k, 0) + _broadcast_steps(k, 0)
    return Schedule(
        "all_reduce",
        "tree",
        k,
        1,
        tuple(steps),
        (("reduce", 0, n), ("broadcast", n, 2 * n)),
        "full",
        "full",
    )


def rank_order_reduce(k):
    """A binomial reduce to rank 0 that combines ranks in their order, as MPI requires of an
    operation that does not commute: in step i every rank r that is an odd multiple of 2^i
    sends to r - 2^i what it holds, the ranks r .. r + 2^i - 1, which the receiver puts
    after its own.  ⌈log2 K⌉ steps, as :func:`tree_reduce`, whose pairs (rel, rel + 2^d)
    from the farthest first would combine x0 with x4 before x1.

    >>> [[(m.src, m.dst) for m in step] for step in rank_order_reduce(5).steps]
    [[(1, 0), (3, 2)], [(2, 0)], [(4, 0)]]
    """
    steps, mask = [], 1
    while mask < k:
        moves = [ChunkMove(r, r - mask, WHOLE, True) for r in range(mask, k, 2 * mask)]
        steps.append(tuple(moves))
        mask *= 2
    return Schedule(
        "reduce", "tree", k, 1, tuple(steps), (("reduce", 0, len(steps)),), "full", "root", 0
    )
