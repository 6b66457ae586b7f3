"""The library's ring all-reduce and lesson 4's hand-written ring are the same rule.

Lesson 4 defines ``my_ring_all_reduce(rank, x, chunk_rule)``, a 16-line rank program. It is
taken from the lesson file as it stands (its ``def``, read with ``ast``; nothing is copied
here) and run on a recording stand-in for a rank with the rule the lesson states ("at step
s rank r sends chunk (r - s) mod K", its takeaways). Every element it holds is a
:class:`Tagged` value that knows its chunk and which ranks' inputs it sums, so each send
shows its chunk and each receive shows whether the receiver added (reduce) or copied.
Every move, (step, sender, receiver, chunk, reduce), must be the library schedule's.
"""

import ast
import itertools
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from collsim.collectives.registry import build
from collsim.collectives.ring import ring_all_reduce

LESSON = Path(__file__).resolve().parents[1] / "lessons" / "04_ring_allreduce.py"


def lesson_function(name):
    """The function ``name`` as lesson 4 defines it, compiled from the lesson's own text."""
    tree = ast.parse(LESSON.read_text(encoding="utf-8"))
    (node,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name]
    namespace = {"np": np}
    exec(compile(ast.Module([node], []), str(LESSON), "exec"), namespace)
    return namespace[name]


ADDS = itertools.count()  # every addition of two Tagged values takes a number


@dataclass(frozen=True)
class Tagged:
    """One element: the chunk it belongs to and the inputs summed in it (a multiset, so an
    addition of a finished sum to a partial one would show)."""

    chunk: int
    inputs: tuple

    def __add__(self, other):
        assert self.chunk == other.chunk, "added a value of another chunk"
        next(ADDS)
        return Tagged(self.chunk, tuple(sorted(self.inputs + other.inputs)))


@dataclass(frozen=True)
class Send:
    dst: int
    payload: np.ndarray


@dataclass(frozen=True)
class Recv:
    src: int


class RecordingRank:
    """What the lesson's program calls on ``rank``; the operations it yields are read by
    :func:`lesson_moves`."""

    def __init__(self, rank, size):
        self.id, self.size = rank, size

    def isend(self, dst, payload):
        return Send(dst, payload)

    def recv(self, src):
        return Recv(src)

    def wait(self, handle):
        return ("wait", handle)


def lesson_moves(k):
    """Every move of the lesson's ring on K ranks: ``{(step, src, dst, chunk, reduce)}``,
    steps numbered from 0, and every rank's result."""
    ring = lesson_function("my_ring_all_reduce")
    rule = lambda rank, step, k: (rank - step) % k  # noqa: E731 -- the lesson's stated rule
    inputs = [np.array([Tagged(c, (r,)) for c in range(k)], dtype=object) for r in range(k)]
    programs = [ring(RecordingRank(r, k), inputs[r], rule) for r in range(k)]
    pending = [p.send(None) for p in programs]
    moves, results = set(), [None] * k
    for step in range(2 * (k - 1)):
        sent = {}
        for r in range(k):  # every rank posts its send, then its receive
            assert isinstance(pending[r], Send)
            sent[r] = pending[r]
            pending[r] = programs[r].send("handle")
        for r in range(k):
            src = pending[r].src
            assert sent[src].dst == r
            (value,) = sent[src].payload  # one element a chunk
            pending[r] = programs[r].send(sent[src].payload)  # -> its wait
            adds = next(ADDS)
            try:
                pending[r] = programs[r].send(None)  # it adds or copies, then posts again
            except StopIteration as done:
                results[r] = done.value
            reduced = next(ADDS) - adds > 1  # counter read twice: 1 apart when nothing added
            moves.add((step, src, r, value.chunk, reduced))
    return moves, results


def library_moves(schedule):
    return {
        (s, m.src, m.dst, m.chunks.start, m.reduce)
        for s, step in enumerate(schedule.steps)
        for m in step
        if len(m.chunks) == 1
    }


@pytest.mark.parametrize("k", [2, 3, 4, 5, 8])
def test_the_library_ring_is_the_lessons_ring_move_for_move(k):
    moves, results = lesson_moves(k)
    schedule = ring_all_reduce(k)
    assert schedule.chunk_count() == len(moves) == 2 * k * (k - 1)
    assert library_moves(schedule) == moves
    assert library_moves(build("all_reduce", "ring", k)) == moves  # what the cluster runs
    everyone = tuple(range(k))
    for result in results:  # and the lesson's ring really is an all-reduce
        assert [(t.chunk, t.inputs) for t in result] == [(c, everyone) for c in range(k)]


def test_a_wrong_rule_would_show():
    # the comparison is not vacuous: the lesson's ring with the chunk one off differs
    ring = ring_all_reduce(4)
    moves, _ = lesson_moves(4)
    shifted = {(s, a, b, (c + 1) % 4, red) for s, a, b, c, red in moves}
    assert library_moves(ring) != shifted


ALGORITHM_FILES = sorted((LESSON.parents[1] / "collsim" / "collectives").glob("*.py"))


@pytest.mark.parametrize("path", ALGORITHM_FILES, ids=lambda p: p.name)
def test_no_algorithm_file_writes_its_schedule_as_numpy_columns(path):
    # the plain form is the definition: chunk moves a person reads; the column form is the
    # fast package's own (collsim/fast/columns.py), built from the moves
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    modules = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert "StepColumns" not in names and "ColumnSteps" not in names
    assert not any(m and m.endswith("columns") for m in modules)


def test_the_ring_file_is_numpy_free_and_its_rule_reads_as_moves():
    source = (LESSON.parents[1] / "collsim" / "collectives" / "ring.py").read_text()
    assert "import numpy" not in source
    step = ring_all_reduce(4).steps[0]  # step 1: rank r sends chunk (r - 1) mod 4 to r+1
    assert [(m.src, m.dst, m.chunks, m.reduce) for m in step] == [
        (r, (r + 1) % 4, range((r - 1) % 4, (r - 1) % 4 + 1), True) for r in range(4)
    ]
