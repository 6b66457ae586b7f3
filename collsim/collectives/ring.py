"""Ring algorithms: reduce-scatter, all-gather, all-reduce, and the pipelined chain.

On a ring of K ranks with the buffer cut into K chunks:

* reduce-scatter, step s = 0..K-2: rank r sends chunk (r-s-1) mod K to rank r+1, which
  adds it to its own copy; after K-1 steps rank r holds chunk r of the full reduction.
* all-gather, step s = 0..K-2: rank r forwards chunk (r-s) mod K to rank r+1.
* all-reduce = reduce-scatter then all-gather: 2(K-1) steps, each rank sending
  2(K-1)/K of the buffer whatever K is.

Broadcast and reduce run as a pipelined chain along the ring's links with K chunks:
broadcast root -> root+1 -> ... -> root-1 (chunk c leaves the root at step c, so the
last chunk arrives after 2(K-1) steps); reduce root+1 -> root+2 -> ... -> root, the
broadcast run backwards, in the same steps and time.

Examples
--------
>>> s = ring_all_reduce(4)
>>> s.n_steps, s.chunk_count()        # 2(K-1) steps, 2K(K-1) chunk transfers
(6, 24)
>>> [s.phase_of(i) for i in (0, 3)]
[('reduce-scatter', 1, 3), ('all-gather', 1, 3)]
"""

from .schedule import ChunkMove, RankRule, Schedule

__all__ = [
    "ring_reduce_scatter",
    "ring_all_gather",
    "ring_all_reduce",
    "chain_broadcast",
    "chain_reduce",
    "RingStep",
]


def _one(c):
    return range(c, c + 1)


class RingStep(RankRule):
    """Step ``s`` (0-based) of a ring phase: rank r sends chunk (r - s - shift) mod K to
    rank r+1, which adds it to its own (``reduce``) or copies it over (not ``reduce``)."""

    def __init__(self, k, s, shift, reduce):
        super().__init__(k, reduce)
        self.s, self.shift = s, shift

    def receiver(self, r):
        return (r + 1) % self.ranks

    def chunk(self, r):
        return (r - self.s - self.shift) % self.ranks


def _rs_steps(k):
    # reduce-scatter: rank r first sends chunk r-1, the one its right neighbour ends with
    return [RingStep(k, s, shift=1, reduce=True) for s in range(k - 1)]


def _ag_steps(k):
    # all-gather: rank r first forwards chunk r, the one it holds complete
    return [RingStep(k, s, shift=0, reduce=False) for s in range(k - 1)]


def ring_reduce_scatter(k):
    """Rank r ends with chunk r of the reduction after K-1 steps."""
    return Schedule(
        "reduce_scatter",
        "ring",
        k,
        k,
        tuple(_rs_steps(k)),
        (("reduce-scatter", 0, k - 1),),
        "full",
        "own_chunk",
    )


def ring_all_gather(k):
    """Rank r starts with chunk r; every rank ends with all K after K-1 steps."""
    return Schedule(
        "all_gather",
        "ring",
        k,
        k,
        tuple(_ag_steps(k)),
        (("all-gather", 0, k - 1),),
        "own_chunk",
        "full",
    )


def ring_all_reduce(k):
    """Reduce-scatter then all-gather: 2(K-1) steps."""
    steps = tuple(_rs_steps(k) + _ag_steps(k))
    phases = (("reduce-scatter", 0, k - 1), ("all-gather", k - 1, 2 * (k - 1)))
    return Schedule("all_reduce", "ring", k, k, steps, phases, "full", "full")


def _chain(k, root, toward_root):
    # Both chains follow the ring's links r -> r+1, so each hop crosses one link and no
    # two hops share one (on the one-way ``ring`` topology too).  Broadcast runs
    # root -> root+1 -> ... -> root-1; reduce is that pipeline run backwards in time,
    # root+1 -> root+2 -> ... -> root, ending at the root: the same steps, the same
    # time.  Hop h runs from chain position h to h+1; chunk c crosses hop h at step c + h.
    first = root if not toward_root else root + 1
    rank_at = [(first + h) % k for h in range(k)]
    steps = []
    for s in range(2 * (k - 1)):
        moves = []
        for h in range(k - 1):
            c = s - h
            if 0 <= c < k:
                moves.append(ChunkMove(rank_at[h], rank_at[h + 1], _one(c), toward_root))
        steps.append(tuple(moves))
    return steps


def chain_broadcast(k, root=0):
    """Pipelined chain broadcast with K chunks: 2(K-1) steps."""
    return Schedule(
        "broadcast",
        "ring",
        k,
        k,
        tuple(_chain(k, root, False)),
        (("broadcast", 0, 2 * (k - 1)),),
        "root",
        "full",
        root,
    )


def chain_reduce(k, root=0):
    """Pipelined chain reduce toward ``root`` with K chunks: 2(K-1) steps."""
    return Schedule(
        "reduce",
        "ring",
        k,
        k,
        tuple(_chain(k, root, True)),
        (("reduce", 0, 2 * (k - 1)),),
        "full",
        "root",
        root,
    )
