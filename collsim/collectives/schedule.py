"""A collective algorithm as data: who sends which chunks to whom at which step.

The buffer of ``n`` elements is cut into ``n_chunks`` chunks; the first ``n mod
n_chunks`` chunks are one element longer (so chunks may be empty when ``n`` is short).
A :class:`ChunkMove` sends a contiguous range of chunks from one rank to another, where
they are reduced into or copied over the receiver's buffer.  A :class:`Schedule` is the
list of steps; transfers of one step may run at once, a transfer of step s+1 may depend
on step s.  The executor, the byte counts, the step-through view and the pictures all
read this one description.

Ranks in a schedule are *group* ranks, 0..K-1.

Examples
--------
>>> from collsim.collectives.ring import ring_all_reduce
>>> s = ring_all_reduce(3)
>>> s.n_steps, len(s.moves())
(4, 12)
>>> s.steps[0]
(ChunkMove(src=0, dst=1, chunks=range(2, 3), reduce=True), \
ChunkMove(src=1, dst=2, chunks=range(0, 1), reduce=True), \
ChunkMove(src=2, dst=0, chunks=range(1, 2), reduce=True))
>>> chunk_bounds(10, 4)
[(0, 3), (3, 6), (6, 8), (8, 10)]
"""

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

from ..errors import ConfigError
from .checks import is_int
from .spec import SPECS, CollectiveSpec

__all__ = [
    "ChunkMove",
    "Combine",
    "Lane",
    "Schedule",
    "RankRule",
    "chunk_bounds",
    "contributions",
    "LAYOUTS",
]

LAYOUTS = ("full", "own_chunk", "root")  # see Schedule: what a buffer holds, or answers


@dataclass(frozen=True, slots=True)
class Combine:
    """Moves of one step that a switch combines into one network flow (NVLink SHARP).

    The moves of a step whose ``combine`` records are equal travel as ONE flow over the
    union of their routes, so the switch's shared leg carries the bytes once: K-1 moves
    into one receiver that reduce (the switch sums them, as NVLS's ``multimem.ld_reduce``
    does) or K-1 copies from one sender (the switch multicasts, ``multimem.st``).  The flow
    starts once all ``members`` moves are matched and ends for all of them together; its
    wire bytes are its payload / ``efficiency`` (the switch's reduction throughput, as a
    fraction of the links' rate).

    >>> Combine("nvswitch0", ("reduce", 3), members=7).members
    7
    """

    switch: str  # the switch node that reduces or multicasts
    key: tuple  # tells apart the groups of one step, e.g. ("reduce", chunk)
    members: int  # moves in the group
    efficiency: float = 1.0  # payload / wire bytes on the combined flow


@dataclass(frozen=True, slots=True)
class ChunkMove:
    """``src`` sends its chunks ``chunks`` to ``dst``, which reduces them into (or, with
    ``reduce=False``, copies them over) its own chunks ``to`` (default: the same
    indices; read it as ``dst_chunks``).  ``from_input`` reads the sender's untouched
    input (all-to-all)."""

    src: int
    dst: int
    chunks: range
    reduce: bool
    to: range = None  # the receiver's chunks when they differ from ``chunks``
    from_input: bool = False
    combine: "Combine" = None  # in-switch reduction or multicast: see Combine

    @property
    def dst_chunks(self):
        """The receiver's chunk indices."""
        return self.chunks if self.to is None else self.to

    def to_args(self):
        """The move as JSON-ready ``args`` for the Chrome/Perfetto export (a transfer's
        ``meta``): group ranks, the first and last chunk (inclusive) and what the receiver
        does with them.

        >>> ChunkMove(0, 1, range(2, 4), True).to_args()
        {'group_src': 0, 'group_dst': 1, 'first_chunk': 2, 'last_chunk': 3, 'reduce': True}
        """
        args = {
            "group_src": self.src,
            "group_dst": self.dst,
            "first_chunk": self.chunks.start,
            "last_chunk": self.chunks.stop - 1,
            "reduce": self.reduce,
        }
        if self.to is not None:
            args["first_dst_chunk"], args["last_dst_chunk"] = self.to.start, self.to.stop - 1
        if self.from_input:
            args["from_input"] = True
        if self.combine is not None:
            args["combined_in"] = self.combine.switch
        return args

    def __repr__(self):
        extra = "" if self.to is None else f", dst_chunks={self.to}"
        return (
            f"ChunkMove(src={self.src}, dst={self.dst}, chunks={self.chunks}, "
            f"reduce={self.reduce}{extra})"
        )


class Lane(NamedTuple):
    """Chunks that travel one path of their own: a channel of NCCL's ring (its own ring
    order), one tree of the double binary tree.  A schedule's ``lanes`` name them, so a
    picture can show one lane at a time; the moves themselves say where the chunks go.

    >>> Lane("channel 1", range(4, 8)).chunks
    range(4, 8)
    """

    name: str  # "channel 1", "tree 0": what a reader calls it
    chunks: range  # the chunk indices that travel in this lane


class RankRule(Sequence):
    """One step in which every rank ``r`` of ``ranks`` sends one chunk to one receiver, by
    a rule: its :class:`ChunkMove` objects are made when read, so a step of 4,096 ranks
    costs one small object, not 4,096.  A subclass writes the rule as ``receiver(r)``
    (whom rank r sends to: one neighbour for every step of the class, as a ring's right
    neighbour) and ``chunk(r)`` (which chunk it sends in this step), both plain arithmetic
    on ``r``, and sets ``reduce``.

    >>> class Right(RankRule):  # every rank sends its own chunk to the next rank
    ...     def receiver(self, r): return (r + 1) % self.ranks
    ...     def chunk(self, r): return r
    >>> Right(3, reduce=False)[2]
    ChunkMove(src=2, dst=0, chunks=range(2, 3), reduce=False)
    """

    # steps of up to this many ranks keep their moves once read, so that every reader (the
    # executor, the trace's records, the step-through) sees the schedule's own objects
    KEEP_RANKS = 256

    def __init__(self, ranks, reduce):
        self.ranks, self.reduce = ranks, reduce
        self._kept = None

    def receiver(self, r):
        raise NotImplementedError

    def chunk(self, r):
        raise NotImplementedError

    def __len__(self):
        return self.ranks

    def move(self, r):
        """Rank ``r``'s move in this step."""
        c = self.chunk(r)
        return ChunkMove(r, self.receiver(r), range(c, c + 1), self.reduce)

    def __getitem__(self, index):
        if self._kept is None and self.ranks <= self.KEEP_RANKS:
            self._kept = tuple(self.move(r) for r in range(self.ranks))
        if self._kept is not None:
            return self._kept[index]
        if isinstance(index, slice):
            return tuple(self.move(r) for r in range(*index.indices(self.ranks)))
        if not -self.ranks <= index < self.ranks:
            raise IndexError(f"rank {index} of a step of {self.ranks} ranks")
        return self.move(index % self.ranks)

    def __eq__(self, other):
        return isinstance(other, Sequence) and tuple(self) == tuple(other)

    def __hash__(self):
        return hash(tuple(self))

    def __repr__(self):
        return repr(tuple(self))


@dataclass(frozen=True)
class Schedule:
    """Steps of chunk moves among ``ranks`` group ranks.

    The layouts are data the executor reads, so it never asks which collective runs.
    ``start`` says what each rank's working buffer holds before step 1: ``"full"``, a
    copy of its input; ``"own_chunk"``, only chunk r, and the input *is* that chunk
    (the buffer is K inputs long, as in all-gather); ``"root"``, only the root's buffer
    holds its input.  ``result`` says which part of the buffer is the rank's answer:
    ``"full"``, ``"own_chunk"`` (chunk r, as in reduce-scatter) or ``"root"`` (the
    whole buffer on the root, nothing elsewhere).  ``spec`` is the collective's
    :class:`~collsim.collectives.spec.CollectiveSpec` (reduction, root, output shape,
    input checks), by default the one of ``collective``.  ``phases`` names consecutive
    step ranges for the step-through; ``lanes`` names the chunks that travel a path of
    their own (:class:`Lane`: a channel, a tree), for pictures that show one at a time.
    """

    collective: str
    algorithm: str
    ranks: int
    n_chunks: int
    steps: tuple
    phases: tuple = ()  # (name, first step, stop step)
    start: str = "full"
    result: str = "full"
    root: int = 0
    spec: CollectiveSpec = None  # None: SPECS[collective]
    lanes: tuple = ()  # Lane records when chunks travel separate paths (channels, trees)

    def __post_init__(self):
        if self.spec is None:
            if self.collective not in SPECS:
                raise ConfigError(
                    f"schedule of collective {self.collective!r}: give its spec= "
                    f"(a CollectiveSpec), or use one of {', '.join(SPECS)}"
                )
            object.__setattr__(self, "spec", SPECS[self.collective])
        if self.start not in LAYOUTS or self.result not in LAYOUTS:
            raise ConfigError(
                f"{self.algorithm} schedule: start={self.start!r}, result={self.result!r}: "
                f"layouts are {', '.join(LAYOUTS)}"
            )
        for index, step in enumerate(self.steps):
            if isinstance(step, RankRule):
                continue  # every rank sends one move: no pair can repeat
            pairs = [(m.src, m.dst) for m in step]
            if len(set(pairs)) != len(pairs) and _overlapping(step):
                raise ConfigError(
                    f"{self.algorithm} step {index + 1} sends one chunk twice between one pair"
                )

    @property
    def n_steps(self):
        return len(self.steps)

    def buffer_elements(self, count):
        """Elements of each rank's working buffer for inputs of ``count`` elements: K
        inputs where the input is one chunk of it (``start="own_chunk"``).

        >>> from collsim.collectives.ring import ring_all_gather
        >>> ring_all_gather(4).buffer_elements(3)
        12
        """
        return count * self.ranks if self.start == "own_chunk" else count

    def without_steps(self):
        """This schedule with no steps: what a call of zero bytes runs.  NCCL returns at
        once from a collective of count 0 (nothing moves, no latency is paid), so collsim's
        call takes 0 steps, 0 s and 0 B; the layouts stay, so the outputs keep their shape.

        >>> from collsim.collectives.ring import ring_all_reduce
        >>> empty = ring_all_reduce(4).without_steps()
        >>> (empty.algorithm, empty.n_steps, empty.chunk_count())
        ('ring', 0, 0)
        """
        return replace(self, steps=(), phases=())

    def moves(self):
        """Every chunk move with its step: ``[(step, ChunkMove), ...]``."""
        return [(s, m) for s, step in enumerate(self.steps) for m in step]

    def phase_of(self, index):
        """``("reduce-scatter", 3, 7)`` for the step at 0-based ``index`` of ``steps``:
        the phase name, the 1-based step in it, the phase's length."""
        for name, first, stop in self.phases:
            if first <= index < stop:
                return name, index - first + 1, stop - first
        return self.collective.replace("_", "-"), index + 1, self.n_steps

    def chunk_count(self, step=None):
        """Chunk transfers (one chunk moving once) in step number ``step`` (1-based, as
        "step 1 of 6" counts) or, by default, in all of them.

        >>> from collsim.collectives.ring import ring_all_reduce
        >>> ring_all_reduce(4).chunk_count(1), ring_all_reduce(4).chunk_count()
        (4, 24)
        """
        if step is None:
            return sum(len(m.chunks) for s in self.steps for m in s)
        return sum(len(m.chunks) for m in self.steps[self._index_of(step)])

    def _index_of(self, number):
        """The 0-based index of 1-based step ``number``; names the value if it is not one."""
        if not is_int(number) or not 1 <= number <= self.n_steps:
            raise ConfigError(
                f"step {number!r} is not a step of this {self.algorithm} "
                f"{self.collective.replace('_', '-')}: steps are numbered 1..{self.n_steps}"
            )
        return number - 1


def _overlapping(step):
    """Whether two moves of ``step`` between one pair share a chunk.  Several moves may
    join one pair in a step when they carry different chunks (the channels of NCCL's
    ring, the two trees of the double binary tree): each is its own message, matched in
    posting order, as NCCL's channels are separate connections."""
    by_pair = {}
    for m in step:
        by_pair.setdefault((m.src, m.dst), []).append(m)
    for moves in by_pair.values():
        if len(moves) < 2:
            continue
        sent, landed = set(), set()
        for m in moves:
            if sent & set(m.chunks) or landed & set(m.dst_chunks):
                return True
            sent |= set(m.chunks)
            landed |= set(m.dst_chunks)
    return False


def chunk_bounds(n, n_chunks):
    """``[(start, stop), ...]`` of each chunk: the first ``n mod n_chunks`` chunks get
    one element more."""
    base, extra = divmod(n, n_chunks)
    bounds, start = [], 0
    for c in range(n_chunks):
        stop = start + base + (1 if c < extra else 0)
        bounds.append((start, stop))
        start = stop
    return bounds


def contributions(schedule):
    """Replay the schedule on sets: after each step, which ranks' inputs every chunk of
    every rank holds.  Yields one ``[rank][chunk] -> frozenset`` table per state,
    starting with the state before step 0 (so ``n_steps + 1`` tables).

    >>> from collsim.collectives.ring import ring_reduce_scatter
    >>> tables = list(contributions(ring_reduce_scatter(3)))
    >>> sorted(tables[-1][0][0])        # rank 0's own chunk holds everyone's part
    [0, 1, 2]
    """
    k, c = schedule.ranks, schedule.n_chunks
    if schedule.start == "full":
        state = [[frozenset([r]) for _ in range(c)] for r in range(k)]
    elif schedule.start == "own_chunk":
        state = [[frozenset([r]) if ch == r else frozenset() for ch in range(c)] for r in range(k)]
    else:  # only the root has data (broadcast)
        root = schedule.root
        state = [
            [frozenset([root]) if r == root else frozenset() for _ in range(c)] for r in range(k)
        ]
    inputs = [list(row) for row in state]
    yield [list(row) for row in state]
    for step in schedule.steps:
        arriving = []
        for m in step:  # read everything first: moves of one step happen at once
            source = inputs[m.src] if m.from_input else state[m.src]
            arriving.append((m, [source[ch] for ch in m.chunks]))
        for m, sets in arriving:
            for ch, got in zip(m.dst_chunks, sets):
                state[m.dst][ch] = state[m.dst][ch] | got if m.reduce else got
        yield [list(row) for row in state]
