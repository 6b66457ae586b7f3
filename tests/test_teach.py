"""Feedback that teaches (issue 11, item 15): every kind of reply collsim.teach gives.

A wrong number off by a recognisable factor says which; a wrong array says which shape or
which elements differ; a wrong rank says which rank and why; every number has its unit; an
unanswered exercise names the file and line of its answer slot.
"""

import runpy

import numpy as np
import pytest

from collsim import teach


@pytest.fixture(autouse=True)
def student_mode(monkeypatch):
    monkeypatch.delenv("COLLSIM_SOLUTIONS", raising=False)


def reply(capsys):
    return " ".join(capsys.readouterr().out.split())


# ---- numbers: recognisable factors -----------------------------------------------------------

K = 5  # no two of the factors below coincide for K = 5
FACTORS = [
    (2.0, None, "2x the answer"),
    (0.5, None, "half the answer"),
    (-1.0, None, "wrong sign"),
    (K, K, "K = 5 times the answer"),
    (1 / K, K, "1/K of the answer (K = 5)"),
    (K - 1, K, "K-1 = 4 times the answer"),
    (1 / (K - 1), K, "1/(K-1) of the answer"),
    ((K - 1) / K, K, "(K-1)/K = 4/5 of the answer"),
    (K / (K - 1), K, "K/(K-1) = 5/4 times the answer"),
    (2 * (K - 1) / K, K, "2(K-1)/K = 8/5 times the answer"),
    (K / (2 * (K - 1)), K, "K/(2(K-1)) = 5/8 of the answer"),
    (8.0, None, "Bits or bytes?"),
    (1 / 8, None, "Bits or bytes?"),
    (1000.0, None, "1,000x the answer"),
    (1e-6, None, "1/1,000,000 of the answer"),
    (1.024**2, None, "Decimal or binary units?"),
    (1 / 1.024**3, None, "Decimal or binary units?"),
]


@pytest.mark.parametrize("factor, ranks, said", FACTORS, ids=[f[2] for f in FACTORS])
def test_a_known_factor_off_is_named(factor, ranks, said, capsys):
    expected = 3 * 2**20
    assert teach.check("f", expected * factor, expected=expected, unit="B", ranks=ranks) is False
    out = reply(capsys)
    assert out.startswith("Not yet. f: you said ") and said in out


def test_a_reciprocal_answer_is_named(capsys):
    assert teach.check("r", 4, expected=0.25, unit="x") is False
    assert "reciprocal" in reply(capsys)


def test_an_unrecognised_difference_says_how_far_off_and_which_way(capsys):
    teach.check("p", 1.3, expected=1.0, unit="x")
    assert "30 % too high" in reply(capsys)
    teach.check("c", 5, expected=8, unit="GPUs")
    assert "3 too few" in reply(capsys)  # a count: how many, not a percentage


def test_factor_hints_need_ranks_to_name_k(capsys):
    teach.check("k", 5 * 7.0, expected=7.0, unit="x")  # K unknown: no K-fold claim
    assert "K =" not in reply(capsys)


# ---- numbers: units ----------------------------------------------------------------------------

UNITS = [
    ("B", 14680064, "14,680,064 B (14 MiB)"),
    ("bytes", 512, "512 B"),
    ("s", 1.5e-5, "15 us"),
    ("B/s", 1e11, "100 GB/s"),
    ("fraction", 0.25, "0.25 (25 %)"),
    ("GPUs", 768, "768 GPUs"),
]


@pytest.mark.parametrize("unit, value, text", UNITS, ids=[u[0] for u in UNITS])
def test_every_reply_carries_its_unit(unit, value, text, capsys, monkeypatch):
    assert teach.check("u", value, expected=value, unit=unit) is True
    assert reply(capsys) == f"Correct! u: {text}"
    monkeypatch.setenv("COLLSIM_REVEAL", "1")  # the answer, asked for
    assert teach.check("u", value * 3, expected=value, unit=unit) is False
    assert f"The answer is {text}" in reply(capsys)


@pytest.mark.parametrize(
    "unit, answer, expected",
    [("B", "14MiB", 14680064), ("s", "15us", 1.5e-5), ("B/s", "100GB/s", 1e11)],
)
def test_a_string_answer_is_read_in_its_unit(unit, answer, expected, capsys):
    assert teach.check("s", answer, expected=expected, unit=unit) is True


@pytest.mark.parametrize("answer", ["lots", "12 parsecs", [1, 2], True, float("nan")])
def test_an_answer_that_is_not_a_number_is_named(answer, capsys):
    assert teach.check("n", answer, expected=1024, unit="B") is False
    assert repr(answer) in reply(capsys)


def test_numbers_that_look_the_same_short_are_shown_in_full(capsys, monkeypatch):
    monkeypatch.setenv("COLLSIM_REVEAL", "1")
    teach.check("d", 1.0486e-5, expected=1.04858e-5, unit="s")
    out = reply(capsys)
    assert "1.0486e-05 s" in out and "1.04858e-05 s" in out


# ---- arrays and lists -------------------------------------------------------------------------


def test_a_wrong_shape_is_named(capsys):
    assert teach.check_array("a", np.zeros((2, 3)), np.zeros((3, 2))) is False
    out = reply(capsys)
    assert "shape (2, 3), expected (3, 2)" in out and "transposed or reshaped" in out


def test_differing_elements_are_counted_and_located_not_dumped(capsys, monkeypatch):
    monkeypatch.setenv("COLLSIM_REVEAL", "1")
    want = np.arange(1000.0)
    got = want.copy()
    got[[7, 500, 999]] += [1.0, -2.5, 4.0]
    assert teach.check_array("a", got, want) is False
    out = reply(capsys)
    assert "3 of 1000 elements differ" in out
    assert "[7] got 8, expected 7" in out and "[500] got 497.5, expected 500" in out
    assert "max |difference| 4" in out
    diagnosis = out.split(" To change it:")[0]  # the slot line says "set got = ..."
    assert "..." not in diagnosis and len(diagnosis) < 400


def test_an_array_off_by_one_factor_says_so(capsys):
    teach.check_array("a", 2 * np.arange(6.0), np.arange(6.0))
    assert "every element is 2x the answer" in reply(capsys)


def test_a_list_of_arrays_says_which_item(capsys):
    teach.check_array("l", [np.ones(3), np.ones(3)], [np.ones(3), np.zeros(3)])
    assert "item [1]: 3 of 3 elements differ" in reply(capsys)
    teach.check_array("l", [(np.ones(2), np.ones(3))], [(np.ones(2), np.ones(4))])
    assert "item [0][1]: shape (3,), expected (4,)" in reply(capsys)
    teach.check_array("l", [np.ones(3)], [np.ones(3), np.zeros(3)])
    assert "got 1 items, expected 2" in reply(capsys)


def test_check_function_shows_arrays_by_shape_and_reports_exceptions(capsys):
    cases = [(np.ones((64, 16)),)]
    assert teach.check_function("f", lambda x: x.T, lambda x: x, cases) is False
    out = reply(capsys)
    assert "case 1 (x=array(64, 16) float64): shape (16, 64), expected (64, 16)" in out
    assert teach.check_function("f", lambda x: 1 / 0, lambda x: x, [(1,)]) is False
    assert "raised ZeroDivisionError" in reply(capsys)


def test_check_function_adapts_the_answer_before_calling_it(capsys):
    twice = teach.check_function(
        "g", lambda x: x, lambda x: 2 * x, [(3,)], adapt=lambda f: lambda x: 2 * f(x)
    )
    assert twice is True


# ---- ranks ---------------------------------------------------------------------------------------


def test_a_wrong_rank_says_which_rank_and_why(capsys, monkeypatch):
    monkeypatch.setenv("COLLSIM_REVEAL", "1")
    assert (
        teach.check_rank(
            "r",
            1,
            expected=3,
            ranks=4,
            why="it never joined",
            about={1: "it waits in all_reduce #2"},
        )
        is False
    )
    out = reply(capsys)
    assert "you named rank 1, but it waits in all_reduce #2" in out
    assert "The answer is rank 3: it never joined" in out
    assert "off by" not in out


@pytest.mark.parametrize("answer", [7, -1, 1.5, "two"])
def test_a_rank_that_does_not_exist_is_named(answer, capsys):
    assert teach.check_rank("r", answer, expected=3, ranks=4, why="x") is False
    out = reply(capsys)
    assert repr(answer) in out and "0 to 3" in out


def test_the_right_rank_says_why(capsys):
    assert teach.check_rank("r", 3, expected=3, ranks=4, why="it never joined") is True
    assert reply(capsys) == "Correct! r: rank 3: it never joined"


# ---- unanswered exercises and the solutions -------------------------------------------------

LESSON = """\
from collsim import teach

bytes_per_rank_answer = None  # your prediction: bytes each rank sends

result = teach.check("6.1", bytes_per_rank_answer, expected=1536, unit="B", ranks=4)
"""


@pytest.fixture
def lesson_file(tmp_path):
    path = tmp_path / "06_demo.py"
    path.write_text(LESSON, encoding="utf-8")
    (tmp_path / "solutions").mkdir()
    return path


def test_unanswered_names_the_file_line_and_slot(lesson_file, capsys):
    assert runpy.run_path(str(lesson_file))["result"] is None
    out = reply(capsys)
    assert f"{lesson_file.name}:3: set bytes_per_rank_answer = ..." in out
    assert "(your prediction: bytes each rank sends)" in out


def test_solutions_mode_takes_the_value_of_the_same_name(lesson_file, monkeypatch, capsys):
    monkeypatch.setenv("COLLSIM_SOLUTIONS", "1")
    solution = lesson_file.parent / "solutions" / lesson_file.name
    solution.write_text("bytes_per_rank_answer = 2 * 3 / 4 * 1024\n", encoding="utf-8")
    assert runpy.run_path(str(lesson_file))["result"] is True
    solution.write_text("bytes_per_rank_answer = 3 / 4 * 1024\n", encoding="utf-8")
    with pytest.raises(teach.LessonCheckError, match="half the answer"):
        runpy.run_path(str(lesson_file))
    solution.write_text("my_answer = 1536\n", encoding="utf-8")
    with pytest.raises(teach.LessonCheckError, match="defines no bytes_per_rank_answer"):
        runpy.run_path(str(lesson_file))
