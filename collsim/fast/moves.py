"""A rule step's moves for the trace's records, made in bulk.

A :class:`~collsim.collectives.schedule.RankRule` step makes each of its
:class:`~collsim.collectives.schedule.ChunkMove` objects when read, through the frozen
dataclass's ``__init__`` (every field set through ``object.__setattr__``).  Reading the
records of a ring all-reduce on 1,024 ranks makes two million of them; writing the slots
directly makes the same objects (equal field for field) in about half the time.  Steps
the schedule keeps its moves for (``RankRule.KEEP_RANKS`` ranks or fewer) and steps of
written-out moves are read as they are, so their records carry the schedule's own objects.

>>> from collsim.collectives.registry import build
>>> step = build("all_reduce", "ring", 300).steps[0]
>>> step_moves(step)[5] == step[5]
True
"""

from ..collectives.schedule import ChunkMove, RankRule

__all__ = ["step_moves"]

# the slots' descriptors (a slotted class's attribute is its slot's descriptor)
_SET_SRC, _SET_DST, _SET_CHUNKS, _SET_REDUCE, _SET_TO, _SET_FROM_INPUT, _SET_COMBINE = (
    getattr(ChunkMove, name).__set__
    for name in ("src", "dst", "chunks", "reduce", "to", "from_input", "combine")
)


def step_moves(step):
    """The moves of ``step`` in rank order, equal to ``tuple(step)``."""
    if not isinstance(step, RankRule) or step.ranks <= step.KEEP_RANKS:
        return step
    moves = []
    for r in range(step.ranks):
        c = step.chunk(r)
        moves.append(_move(r, step.receiver(r), range(c, c + 1), step.reduce))
    return moves


def _move(src, dst, chunks, reduce):
    """``ChunkMove(src, dst, chunks, reduce)``, built without the frozen ``__init__``."""
    move = object.__new__(ChunkMove)
    _SET_SRC(move, src)
    _SET_DST(move, dst)
    _SET_CHUNKS(move, chunks)
    _SET_REDUCE(move, reduce)
    _SET_TO(move, None)
    _SET_FROM_INPUT(move, False)
    _SET_COMBINE(move, None)
    return move
