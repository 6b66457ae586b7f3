"""The checker never crashes (issue 27, item 5): whatever a student writes in an answer
slot, or returns from a function, gets a message about that value, never a traceback from
collsim.teach; and the hint ladder and the progress file behave as documented."""

import json

import numpy as np
import pytest

from collsim import teach
from collsim.cli import main
from collsim.teach.progress import attempts, progress_path, record_try


@pytest.fixture(autouse=True)
def student(monkeypatch, tmp_path):
    monkeypatch.delenv("COLLSIM_SOLUTIONS", raising=False)
    monkeypatch.delenv("COLLSIM_REVEAL", raising=False)
    monkeypatch.setenv("COLLSIM_PROGRESS", str(tmp_path / "progress.json"))


def reply(capsys):
    return " ".join(capsys.readouterr().out.split())


class Stubborn:
    """An object whose comparisons and conversions all raise."""

    def __eq__(self, other):
        raise RuntimeError("no comparing me")

    def __array__(self, *args, **kwargs):
        raise RuntimeError("no array of me")

    def __iter__(self):
        raise RuntimeError("no iterating me")

    def __repr__(self):
        return "Stubborn()"


def broken_generator():
    yield 1
    raise ValueError("the generator broke")


ODD = [
    None,
    "lots",
    [1, 2],
    (3,),
    {"a": 1},
    {1, 2},
    np.arange(4),
    np.float64("nan"),
    1j,
    float("inf"),
    Stubborn(),
    (i for i in range(3)),
    broken_generator(),
    b"bytes",
    [np.ones(2), np.ones(3)],
    object(),
]


@pytest.mark.parametrize("value", ODD, ids=lambda v: type(v).__name__)
def test_any_number_answer_gets_a_message_not_a_crash(value, capsys):
    assert teach.check("x.1", value, expected=4, unit="B") in (False, None)
    out = reply(capsys)
    assert "Not yet" in out or "set value = ..." in out, out  # None: the slot to fill


@pytest.mark.parametrize("value", ODD, ids=lambda v: type(v).__name__)
def test_any_array_or_rank_answer_gets_a_message_not_a_crash(value, capsys):
    assert teach.check_array("x.2", value, np.arange(3.0)) in (False, None)
    assert teach.check_rank("x.3", value, expected=1, ranks=4, why="w") in (False, None)
    # the one right answer among them: a list of arrays of two shapes
    assert teach.check_array("x.4", value, [np.ones(2), np.ones(3)]) in (True, False, None)
    assert reply(capsys).count("x.4") == 1


@pytest.mark.parametrize("value", ODD, ids=lambda v: type(v).__name__)
def test_any_value_a_function_returns_gets_a_message_not_a_crash(value, capsys):
    for reference in (lambda n: n, lambda n: list(range(n)), lambda n: [np.ones(n)] * 2):
        assert teach.check_function("x.5", lambda n: value, reference, [(3,)]) is False
        assert "case 1 (n=3)" in reply(capsys)


def test_a_list_asked_for_may_come_as_an_array_a_tuple_or_a_generator(capsys):
    positions = lambda seq, cp, i: [0, 1, 6, 7]  # noqa: E731 - the reference returns a list
    for answer in (
        lambda *a: np.array([0, 1, 6, 7]),
        lambda *a: (0, 1, 6, 7),
        lambda *a: (p for p in [0, 1, 6, 7]),
    ):
        assert teach.check_function("x.6", answer, positions, [(8, 2, 0)]) is True


def test_a_function_that_raises_or_is_not_a_function_is_named(capsys):
    assert teach.check_function("x.7", lambda n: 1 / 0, lambda n: n, [(3,)]) is False
    assert "case 1 (n=3) raised ZeroDivisionError" in reply(capsys)
    assert teach.check_function("x.7", 42, lambda n: n, [(3,)]) is False
    assert "your answer 42 is not a function: write def f(n)" in reply(capsys)
    assert (
        teach.check_function("x.7", lambda n: n, lambda n: n, [(3,)], adapt=lambda f: 1 / 0)
        is False
    )
    assert "could not be set up to run: ZeroDivisionError" in reply(capsys)


def test_a_rank_program_that_forgot_yield_is_told_so(capsys):
    from collsim import Cluster, topology

    def on_ring(program):
        return lambda k: Cluster(topology.ring(k)).run(lambda rank: program(rank)).returns

    def forgot(rank):  # a plain function: no yield at all
        rank.send((rank.id + 1) % rank.size, np.ones(2))
        return 0

    assert teach.check_function("x.8", forgot, lambda k: [0] * k, [(3,)], adapt=on_ring) is False
    out = reply(capsys)
    assert "case 1 (k=3) raised" in out and "yield" in out, out


# ---- the hint ladder -----------------------------------------------------------------------


def test_the_ladder_diagnoses_then_hints_then_reveals_counted_per_exercise(capsys):
    ask = dict(expected=112, unit="GPUs", hint="count the GPUs of every node")
    teach.check("3.1", 224, **ask)
    first = reply(capsys)
    assert "2x the answer" in first and "Hint" not in first and "112 GPUs" not in first
    assert "Wrong tries: 1" in first
    teach.check("3.1", 224, **ask)  # the same answer again: not a new try
    assert "Wrong tries: 1" in reply(capsys)
    teach.check("3.1", 225, **ask)
    second = reply(capsys)
    assert "Hint: count the GPUs of every node" in second and "112 GPUs" not in second
    teach.check("3.1", 226, **ask)
    assert "The answer is 112 GPUs." in reply(capsys)  # the third wrong try
    teach.check("3.2", 224, expected=112, unit="GPUs")  # another exercise starts afresh
    assert "The answer is" not in reply(capsys)
    assert attempts("3", "3.1").wrong == 3 and not attempts("3", "3.1").solved
    teach.check("3.1", 112, **ask)
    assert attempts("3", "3.1").solved


def test_reveal_shows_the_answer_at_once(capsys, monkeypatch):
    monkeypatch.setenv("COLLSIM_REVEAL", "1")
    teach.check("3.3", 224, expected=112, unit="GPUs", hint="h")
    out = reply(capsys)
    assert "The answer is 112 GPUs." in out and "Hint: h" in out


def test_the_lesson_command_takes_reveal(tmp_path, capsys):
    folder = tmp_path / "lessons"
    (folder / "solutions").mkdir(parents=True)
    lesson = (
        "# %%\nfrom collsim import teach\n\n# %%\nguess_answer = 2048  # bytes in a KiB\n\n"
        '# %%\nteach.check("1.1", guess_answer, expected=1024, unit="B")\n'
    )
    (folder / "01_tiny.py").write_text(lesson, encoding="utf-8")
    assert main(["lesson", "1", "--no-pause", "--dir", str(folder)]) == 0
    first = reply(capsys)
    assert "Not yet. 1.1" in first and "1,024 B" not in first and "01_tiny.py:5" in first
    assert main(["lesson", "1", "--no-pause", "--reveal", "--dir", str(folder)]) == 0
    assert "The answer is 1,024 B (1 KiB)." in reply(capsys)


def test_the_progress_file_is_plain_json_in_the_documented_shape():
    record_try("4", "4.2", correct=False, answer=-1)
    record_try("4", "4.2", correct=True, answer=3)
    data = json.loads(progress_path().read_text(encoding="utf-8"))
    assert data["version"] == 1
    assert data["lessons"]["4"]["4.2"] == {"tries": 2, "wrong": 1, "solved": True, "last": None}


def test_a_broken_progress_file_is_started_afresh(capsys):
    progress_path().write_text("{not json", encoding="utf-8")
    assert attempts("4", "4.2").tries == 0
    teach.check("4.2", 2, expected=1, unit="x")
    assert "Wrong tries: 1" in reply(capsys)
