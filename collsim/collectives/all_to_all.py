"""Direct all-to-all: rank r's chunk j ends as rank j's chunk r.

Step s = 1..K-1: rank r sends its input chunk (r+s) mod K straight to rank (r+s) mod K,
which stores it as its chunk r.  Every step is a permutation, so on a switch no two
transfers share a link.

Examples
--------
>>> s = direct_all_to_all(3)
>>> s.steps[0]
(ChunkMove(src=0, dst=1, chunks=range(1, 2), reduce=False, dst_chunks=range(0, 1)), \
ChunkMove(src=1, dst=2, chunks=range(2, 3), reduce=False, dst_chunks=range(1, 2)), \
ChunkMove(src=2, dst=0, chunks=range(0, 1), reduce=False, dst_chunks=range(2, 3)))
"""

from .schedule import ChunkMove, Schedule

__all__ = ["direct_all_to_all"]


def direct_all_to_all(k):
    """K-1 steps; each rank sends (K-1)/K of its buffer."""
    steps = []
    for s in range(1, k):
        steps.append(
            tuple(
                ChunkMove(
                    r,
                    (r + s) % k,
                    range((r + s) % k, (r + s) % k + 1),
                    False,
                    to=range(r, r + 1),
                    from_input=True,
                )
                for r in range(k)
            )
        )
    return Schedule(
        "all_to_all", "direct", k, k, tuple(steps), (("all-to-all", 0, k - 1),), "full", "full"
    )
