"""A schedule's steps as numpy columns: one row per chunk move.

The batched path (:mod:`collsim.fast.batched`) times, moves and records a whole step at
once, so it reads a step as a few arrays rather than as K
:class:`~collsim.collectives.schedule.ChunkMove` objects.  ``chunks`` of a move are
``range(lo, hi)`` of the sender's buffer; ``to_lo``/``to_hi`` the receiver's.  The columns
are built here from the readable schedule: a step of moves row by row, a
:class:`~collsim.collectives.schedule.RankRule` step (the ring's) by evaluating its rule on
every rank at once, so a ring all-reduce on 4,096 ranks (33 million moves) never builds
its moves.

Examples
--------
>>> from collsim.collectives.ring import ring_all_reduce
>>> first = schedule_columns(ring_all_reduce(3))[0]
>>> first.src.tolist(), first.dst.tolist(), first.lo.tolist(), first.reduce.tolist()
([0, 1, 2], [1, 2, 0], [2, 0, 1], [True, True, True])
"""

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..collectives.schedule import RankRule

__all__ = ["StepColumns", "columns_of", "schedule_columns"]


@dataclass(frozen=True, eq=False)
class StepColumns:
    """One step's moves as columns (group ranks, chunk indices), in the step's order."""

    src: np.ndarray  # int64 group ranks
    dst: np.ndarray
    lo: np.ndarray  # sender's chunks: range(lo, hi)
    hi: np.ndarray
    to_lo: np.ndarray  # receiver's chunks: range(to_lo, to_hi)
    to_hi: np.ndarray
    reduce: np.ndarray  # bool: the receiver reduces (else it copies over)
    from_input: np.ndarray  # bool: read the sender's untouched input
    combined: bool = False  # some move is switch-combined (NVLS): not batchable

    def __len__(self):
        return len(self.src)

    @cached_property
    def race_free(self):
        """Whether no rank writes a chunk twice in this step, or writes a chunk it also
        sends in it: then the step's result does not depend on the order its deliveries
        arrive in."""
        width = int(max(self.hi.max(initial=0), self.to_hi.max(initial=0))) + 1
        writes = _cells(self.dst, self.to_lo, self.to_hi, width)
        own = ~self.from_input  # a read of the untouched input cannot race with a write
        reads = _cells(self.src[own], self.lo[own], self.hi[own], width)
        return len(np.unique(writes)) == len(writes) and not np.isin(writes, reads).any()

    @cached_property
    def single_chunks(self):
        """Whether every move carries one chunk into one chunk."""
        return bool(np.all(self.hi - self.lo == 1) and np.all(self.to_hi - self.to_lo == 1))

    @cached_property
    def by_kind(self):
        """``[(reduce, src, lo, dst, to_lo, from_input), ...]``: the reducing moves and
        the copying moves (the one kind there is, when all are alike)."""
        kinds = []
        for reduce in (True, False):
            pick = self.reduce == reduce
            if pick.all():
                kinds.append((reduce, self.src, self.lo, self.dst, self.to_lo, self.from_input))
            elif pick.any():
                kinds.append(
                    (
                        reduce,
                        self.src[pick],
                        self.lo[pick],
                        self.dst[pick],
                        self.to_lo[pick],
                        self.from_input[pick],
                    )
                )
        return kinds


def _cells(ranks, lo, hi, width):
    """``(rank, chunk)`` of every chunk in ``range(lo, hi)`` of each row, as one int."""
    lengths = hi - lo
    rows = np.repeat(np.arange(len(ranks)), lengths)
    offsets = np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    return ranks[rows].astype(np.int64) * width + lo[rows] + offsets


def columns_of(moves):
    """The :class:`StepColumns` of one step's moves.

    >>> from collsim.collectives.schedule import ChunkMove
    >>> columns_of([ChunkMove(0, 1, range(2, 4), False, to=range(0, 2))]).to_hi.tolist()
    [2]
    """
    n = len(moves)
    rows = np.empty((6, n), dtype=np.int64)
    flags = np.empty((2, n), dtype=bool)
    combined = False
    for i, m in enumerate(moves):
        to = m.chunks if m.to is None else m.to
        rows[:, i] = (m.src, m.dst, m.chunks.start, m.chunks.stop, to.start, to.stop)
        flags[:, i] = (m.reduce, m.from_input)
        combined = combined or m.combine is not None
    return StepColumns(*rows, *flags, combined=combined)


def schedule_columns(schedule):
    """Every step of ``schedule`` as :class:`StepColumns`.  Steps of one rule share their
    sender, receiver and flag arrays where they are equal, as the batched path keys its
    routes by those arrays' identity."""
    shared = {}
    return tuple(
        _rule_columns(step, shared) if isinstance(step, RankRule) else columns_of(step)
        for step in schedule.steps
    )


def _rule_columns(step, shared):
    """A :class:`RankRule` step's columns: its rule read on every rank at once."""
    k = step.ranks
    ranks = shared.get(("ranks", k))
    if ranks is None:
        ranks = shared[("ranks", k)] = np.arange(k, dtype=np.int64)
    dst = shared.get((type(step), k))  # a rule's receivers are the same in every step
    if dst is None:
        dst = shared[(type(step), k)] = np.asarray(step.receiver(ranks), dtype=np.int64)
    small = shared.get(("int32", k))  # ranks as int32: the chunks come out int32 too,
    if small is None:  # half the memory of int64, with no copy to convert them
        small = shared[("int32", k)] = ranks.astype(np.int32)
    chunk = np.asarray(step.chunk(small), dtype=np.int32)
    after = chunk + 1
    flags = shared.get((k, step.reduce))
    if flags is None:
        flags = shared[(k, step.reduce)] = np.full(k, step.reduce)
    no = shared.get((k, False))
    if no is None:
        no = shared[(k, False)] = np.zeros(k, dtype=bool)
    return StepColumns(ranks, dst, chunk, after, chunk, after, flags, no)
