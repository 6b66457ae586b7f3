"""PAT, NCCL's all-gather and reduce-scatter for one GPU per node (NCCL 2.23): ⌈log2 K⌉
steps instead of the ring's K - 1, for the same bytes.

PAT ("parallel aggregated trees") sends to partners at distances 1, 2, 4, ... and lets
what a rank has gathered travel on together, as Bruck's all-gather does (Bruck et al.
1997, "Efficient algorithms for all-to-all communications in multiport message-passing
systems").  For the all-gather, rank r starts with chunk r; after step i it holds the
2^i chunks r, r+1, ..., r+2^i-1 (mod K), and in step i+1 it sends all of them to rank
r - 2^i, which then holds twice as many.  The last step sends only what is still
missing, so every rank sends K - 1 chunks in all: (K-1)/K of the buffer, as the ring.
The reduce-scatter is the same moves reversed: step by step from the farthest partner,
rank r sends to r + 2^i the partial sums of the chunks that partner will own, which it
adds in.

NCCL bounds how much one message carries by its buffers, so large calls take more
steps; ``max_chunks`` does that here (a message of more chunks is split over steps).

Examples
--------
>>> s = pat_all_gather(5)
>>> s.n_steps, [len(m.chunks) for m in s.steps[-1] if m.src == 0]    # ⌈log2 5⌉; 1 chunk left
(3, [1])
>>> [(m.src, m.dst, m.chunks) for m in pat_all_gather(4).steps[1] if m.src == 3]
[(3, 1, range(3, 4)), (3, 1, range(0, 1))]
"""

from .schedule import ChunkMove, Schedule

__all__ = ["pat_all_gather", "pat_reduce_scatter", "pat_distances"]


def pat_distances(k, max_chunks=None):
    """``[(distance, first chunk offset, chunks)]`` per step: in each step every rank r
    sends chunks r + offset .. r + offset + chunks - 1 (mod K) over ``distance`` ranks.

    >>> pat_distances(6)
    [(1, 0, 1), (2, 0, 2), (4, 0, 2)]
    >>> pat_distances(6, max_chunks=1)
    [(1, 0, 1), (2, 0, 1), (2, 1, 1), (4, 0, 1), (4, 1, 1)]
    """
    steps, distance = [], 1
    while distance < k:
        count = min(distance, k - distance)
        size = count if max_chunks is None else max(1, int(max_chunks))
        for offset in range(0, count, size):
            steps.append((distance, offset, min(size, count - offset)))
        distance *= 2
    return steps


def _moves(k, src, dst, first, count, reduce):
    """The moves of ``count`` chunks from ``first`` (mod K): a range wraps round at K, so
    it is one move or two (the two carry different chunks between one pair)."""
    first %= k
    end = first + count
    if end <= k:
        return [ChunkMove(src, dst, range(first, end), reduce)]
    return [
        ChunkMove(src, dst, range(first, k), reduce),
        ChunkMove(src, dst, range(0, end - k), reduce),
    ]


def pat_all_gather(k, max_chunks=None):
    """Rank r sends to r - d the chunks it gathered, for d = 1, 2, 4, ...: ⌈log2 K⌉ steps
    (more with ``max_chunks``)."""
    steps = tuple(
        tuple(
            m for r in range(k) for m in _moves(k, r, (r - distance) % k, r + offset, count, False)
        )
        for distance, offset, count in pat_distances(k, max_chunks)
    )
    phases = (("all-gather (PAT)", 0, len(steps)),)
    return Schedule("all_gather", "pat", k, k, steps, phases, "own_chunk", "full")


def pat_reduce_scatter(k, max_chunks=None):
    """The all-gather's moves reversed: rank r sends to r + d the partial sums of the
    chunks that partner gathers from it, farthest partner first."""
    steps = tuple(
        tuple(
            m
            for r in range(k)
            for m in _moves(k, r, (r + distance) % k, r + distance + offset, count, True)
        )
        for distance, offset, count in reversed(pat_distances(k, max_chunks))
    )
    phases = (("reduce-scatter (PAT)", 0, len(steps)),)
    return Schedule("reduce_scatter", "pat", k, k, steps, phases, "full", "own_chunk")
