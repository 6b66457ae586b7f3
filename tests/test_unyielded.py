"""A rank program that forgot `yield` (issue 25, item 7): every shape of the mistake stops
the run with an error naming the rank, the operation made and never yielded, and the line
that runs it; the programs that yield everything they make run as before; and lesson
11's checker hands the student that message instead of crashing."""

import contextlib
import io
from pathlib import Path

import numpy as np
import pytest

import collsim
from collsim import topology
from collsim.errors import CollsimError, DeadlockError
from collsim.teach.feedback import describe_difference

LESSON_11 = Path(__file__).resolve().parents[1] / "lessons" / "11_debugging_a_hang.py"


def ring(k=3):
    return collsim.Cluster(topology.ring(k))


def _neighbours(rank):
    return (rank.id + 1) % rank.size, (rank.id - 1) % rank.size


def _refusal(program, k=3):
    with pytest.raises(CollsimError) as info:
        ring(k).run(program)
    return info.value, str(info.value)


def test_a_plain_function_that_returns_the_receive_it_made_is_refused_naming_both_calls():
    def shift(rank):  # the program: no yield anywhere
        right, left = _neighbours(rank)
        h = rank.isend(right, np.ones(2))  # noqa: F841 (the mistake under test)
        y = rank.recv(left)
        return y

    error, text = _refusal(shift)
    assert error.rank == 0
    assert text.startswith("rank 0's program is a plain function (it has no `yield`)")
    assert "rank.isend(1, ...): write `h = yield rank.isend(1, ...)`" in text
    assert "rank.recv(2), which the program returned: write `y = yield rank.recv(2)`" in text


def test_a_generator_that_returns_an_operation_it_never_yielded_is_refused_at_its_end():
    def program(rank):
        right, left = _neighbours(rank)
        yield rank.isend(right, np.ones(2))
        y = rank.recv(left, tag=4)
        return y

    error, text = _refusal(program)
    assert error.rank == 0
    assert text.startswith("rank 0 ended at t=0 s without yielding the operation it made")
    assert "rank.recv(2, tag=4), which the program returned: write " in text
    assert "`y = yield rank.recv(2, tag=4)`" in text


def test_an_operation_made_and_dropped_is_reported_though_the_program_returns_something_else():
    def program(rank):
        right, _ = _neighbours(rank)
        rank.send(right, np.ones(2))  # dropped: never yielded
        yield rank.compute(seconds="1ms")
        return 5

    error, text = _refusal(program)
    assert error.rank == 0
    assert "rank 0 ended at t=0.001 s" in text
    assert "rank.send(1, ...): write `yield rank.send(1, ...)`" in text
    assert "which the program returned" not in text


def test_a_collective_yielded_without_from_names_the_fix():
    def program(rank):
        y = yield rank.all_reduce(np.ones(4))
        return y

    error, text = _refusal(program)
    assert error.rank == 0
    assert "rank 0 yielded rank.all_reduce(...) with `yield`" in text
    assert "write `y = yield from rank.all_reduce(...)`" in text


def test_a_collective_called_without_yield_from_never_runs_and_is_named():
    def program(rank):
        y = rank.all_reduce(np.ones(4))
        yield rank.compute(seconds=0)
        return y

    error, text = _refusal(program)
    assert error.rank == 0
    assert "rank.all_reduce(...), which the program returned: write " in text
    assert "`y = yield from rank.all_reduce(...)`" in text


def test_a_hang_caused_by_a_forgotten_receive_says_so_in_the_deadlock_report():
    def program(rank):
        right, left = _neighbours(rank)
        rank.recv(left)  # forgotten: the blocking sends never find their receives
        yield rank.send(right, np.ones(2))

    with pytest.raises(DeadlockError) as info:
        ring().run(program)
    text = str(info.value)
    for r in range(3):
        assert (
            f"rank {r} made rank.recv({(r - 1) % 3}) and never yielded it, so it never "
            f"ran: write `y = yield rank.recv({(r - 1) % 3})`"
        ) in text


def test_programs_that_yield_all_they_make_run_as_before():
    def made_first_yielded_later(rank):
        right, left = _neighbours(rank)
        ops = [rank.isend(right, np.full(2, float(rank.id))), rank.irecv(left)]
        handles = []
        for op in ops:
            handles.append((yield op))
        got = yield rank.wait(*handles)
        return float(got[1][0])

    def queued_background_collectives(rank):
        # the second waits behind the first on the comm stream: it starts later
        first = yield rank.start(rank.all_reduce(np.ones(2)))
        second = yield rank.start(rank.all_reduce(np.full(2, 2.0)))
        got = yield rank.wait(first, second)
        return [float(g[0]) for g in got]

    def plain_function_returning_a_collective(rank):
        return rank.all_reduce(np.ones(2))

    assert ring().run(made_first_yielded_later).returns == [2.0, 0.0, 1.0]
    assert ring().run(queued_background_collectives).returns == [[3.0, 6.0]] * 3
    returns = ring().run(plain_function_returning_a_collective).returns
    assert [r.tolist() for r in returns] == [[3.0, 3.0]] * 3


def test_the_same_program_gives_the_same_report_every_run():
    def program(rank):
        yield rank.compute(seconds=rank.id * 1e-3)
        if rank.id == 1:
            rank.isend(0, np.ones(2))

    assert _refusal(program)[1] == _refusal(program)[1]


def test_the_checker_compares_an_object_with_an_array_without_crashing():
    class Op:
        def __repr__(self):
            return "Op()"

    text = describe_difference([Op()], [np.zeros(2)])
    assert text == "item [0]: got Op(), expected array([0., 0.])"


def _run_lesson_11_with(answer):
    """Lesson 11 run as a student runs it, with ``answer`` in exercise 11.4's slot."""
    source = LESSON_11.read_text(encoding="utf-8")
    assert source.count("shift_answer = None") == 1
    source = source.replace("shift_answer = None", answer + "\n#", 1)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(source, str(LESSON_11), "exec"), {"__name__": "__main__"})
    return out.getvalue()


def test_lesson_11_check_gives_the_student_the_forgotten_yield(tmp_path, monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("COLLSIM_LESSON_OUT", str(tmp_path))
    printed = _run_lesson_11_with(
        "def shift_answer(rank, x):\n"
        "    right, left = (rank.id + 1) % rank.size, (rank.id - 1) % rank.size\n"
        "    h = rank.isend(right, x)\n"
        "    y = rank.recv(left)\n"
        "    return y\n"
    )
    check = printed[printed.index("11.4") - len("Not yet. ") :]
    assert check.startswith(
        "Not yet. 11.4: case 1 (k=4, seed=0) raised UnyieldedOperationError: rank 0's "
        "program is a plain function"
    )
    assert "rank.recv(3), which the program returned: write `y = yield rank.recv(3)`" in check
