"""Linear gather and scatter: the root and every other rank, one message each, in one step.

Chunk r is rank r's part of the root's buffer.  A gather starts with each rank holding its
own chunk and ends with the root holding all K; a scatter starts with the root holding all
K and ends with rank r holding chunk r.  Every message leaves (or reaches) the root in the
same step, so the root's link carries K-1 chunks and the call takes one latency: the
algorithm MPICH and Open MPI use for small communicators and for the v-variants (Gatherv,
Scatterv), whose blocks differ rank to rank.

Examples
--------
>>> [(m.src, m.dst, m.chunks) for m in linear_gather(3, root=1).steps[0]]
[(0, 1, range(0, 1)), (2, 1, range(2, 3))]
>>> [(m.src, m.dst, m.chunks) for m in linear_scatter(3, root=0).steps[0]]
[(0, 1, range(1, 2)), (0, 2, range(2, 3))]
"""

from .schedule import ChunkMove, Schedule
from .spec import CONCAT_FIRST_AXIS, SPLIT_FIRST_AXIS, CollectiveSpec

__all__ = ["linear_gather", "linear_scatter", "GATHER", "SCATTER"]

# gather and scatter are not collectives of Cluster (torch.distributed has them, NCCL does
# not): their facts travel with their schedules
GATHER = CollectiveSpec("gather", rooted=True, output_shape_rule=CONCAT_FIRST_AXIS)
SCATTER = CollectiveSpec("scatter", rooted=True, output_shape_rule=SPLIT_FIRST_AXIS)


def linear_gather(k, root=0):
    """Every rank r but the root sends its chunk r to the root, which copies it into place:
    one step of K-1 moves."""
    moves = [ChunkMove(r, root, range(r, r + 1), False) for r in range(k) if r != root]
    return _one_step(GATHER, k, root, moves, start="own_chunk", result="root")


def linear_scatter(k, root=0):
    """The root sends chunk r to every rank r but itself, which keeps it as its answer:
    one step of K-1 moves."""
    moves = [ChunkMove(root, r, range(r, r + 1), False) for r in range(k) if r != root]
    return _one_step(SCATTER, k, root, moves, start="root", result="own_chunk")


def _one_step(spec, k, root, moves, start, result):
    """The schedule of ``moves`` in one step (none for one rank), K chunks."""
    steps = (tuple(moves),) if moves else ()
    phases = ((spec.name, 0, len(steps)),)
    return Schedule(spec.name, "linear", k, k, steps, phases, start, result, root, spec)
