"""Fuzz `collsim lesson` and `collsim tour` (issue 11, items 9 and 12).

Running a lesson takes seconds, so the fuzzing covers the refusal paths: bad lesson numbers
and names, bad ``--dir`` paths, unknown flags.  Every refusal is a collsim error (or an
argparse usage error) that names the value, reached before any lesson code runs.
"""

import string

import pytest
from fuzzkit import run_cli
from hypothesis import given
from hypothesis import strategies as st

from collsim.cli.lesson import find_lessons, lessons_dir

# the first number past the last lesson file (lessons/NN_topic.py, 01..13 today)
NO_SUCH_LESSON = max(find_lessons(lessons_dir())) + 1
# (argparse takes "-inf" or "--" for options before collsim sees them: not fuzzed here)
BAD_NUMBERS = [
    "-1",
    "0",
    "nan",
    "inf",
    str(2**62),
    "1e300",
    "3.5",
    "three",
    "",
    " ",
    "１",
    "0x3",
    "100",
    "3;rm",
    "99",
    "-2.5",
]
bad_which = st.one_of(
    st.sampled_from(BAD_NUMBERS),
    st.integers(min_value=NO_SUCH_LESSON, max_value=2**70).map(str),
    st.integers(max_value=-1).map(str),
    st.text(string.ascii_letters + string.punctuation + " ", min_size=1, max_size=12).filter(
        lambda s: s.strip() not in ("list", "init", "build") and not s.startswith("-")
    ),
)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """Paths a user could pass to --dir, none of which holds a runnable lesson 1."""
    root = tmp_path_factory.mktemp("dirs")
    regular = root / "file.txt"
    regular.write_text("not a folder\n", encoding="utf-8")
    empty = root / "empty"
    empty.mkdir()
    binary = root / "binary"
    binary.mkdir()
    (binary / "01_bad.py").write_bytes(b"# %%\n\xff\xfe not utf-8\n")
    return {
        "missing": str(root / "no" / "such" / "folder"),
        "under a file": str(regular / "lessons"),
        "a file": str(regular),
        "a device": "/dev/full",
        "empty string": "",
        "no lessons": str(empty),
        "trailing slash": str(root / "missing") + "/",
        "too long": "x" * 5000,
        "not utf-8": str(binary),
    }


@given(which=bad_which)
def test_lesson_refuses_bad_numbers_and_names(which):
    # a number that is not a lesson, or a name that is not 'list', is named in the refusal
    outcome = run_cli(["lesson", which, "--no-pause"], bad=which.strip() or which, timeout=5)
    assert outcome.status != 0


def test_the_first_number_past_the_last_lesson_is_refused():
    # lesson 15 (serving a model) is the last; 16 is the first that does not exist
    assert NO_SUCH_LESSON == 16
    outcome = run_cli(["lesson", str(NO_SUCH_LESSON), "--no-pause"], bad="16", timeout=5)
    assert outcome.status == 2 and "no lesson 16" in outcome.stderr


PATH_CASES = [
    "missing",
    "under a file",
    "a file",
    "a device",
    "empty string",
    "trailing slash",
    "too long",
]


@pytest.mark.parametrize("case", PATH_CASES)
@pytest.mark.parametrize("which", ["list", "1"])
def test_lesson_refuses_every_bad_dir(case, which, folders):
    path = folders[case]
    outcome = run_cli(["lesson", which, "--dir", path], bad=path.rstrip("/") or "''", timeout=5)
    assert outcome.status == 2, outcome


def test_a_folder_without_lessons_lists_none_and_refuses_a_number(folders):
    assert run_cli(["lesson", "list", "--dir", folders["no lessons"]]).status == 0
    outcome = run_cli(["lesson", "1", "--dir", folders["no lessons"]], bad="1")
    assert outcome.status == 2 and "no lesson 1" in outcome.stderr


def test_a_lesson_file_that_is_not_text_is_refused_before_running(folders):
    outcome = run_cli(["lesson", "1", "--dir", folders["not utf-8"]], bad="01_bad.py")
    assert outcome.status == 2 and "not a UTF-8 text file" in outcome.stderr


flags = st.sampled_from(["--pause", "--fast", "--dir", "-n", "--no-pause=1", "--ranks"])


@given(flag=flags, value=st.sampled_from(["", "3", "-1", "nan", "/dev/full"]))
def test_tour_refuses_flags_it_does_not_have(flag, value):
    argv = ["tour", flag] + ([value] if value else [])
    outcome = run_cli(argv, bad=flag.split("=")[0], timeout=5)
    assert outcome.status == 2  # argparse: unrecognised arguments, named


@given(flag=flags)
def test_lesson_refuses_unknown_flags_by_name(flag):
    if flag in ("--dir",):  # --dir without its value
        outcome = run_cli(["lesson", "list", flag], bad="--dir", timeout=5)
    else:
        outcome = run_cli(["lesson", "list", flag], bad=flag.split("=")[0], timeout=5)
    assert outcome.status == 2


# ---- `collsim lesson init DIR` and `--exercise M` (issue 27) ---------------------------------

INIT_CASES = ["under a file", "a file", "a device", "empty string", "too long", "not utf-8"]


@pytest.mark.parametrize("case", INIT_CASES)
def test_lesson_init_refuses_every_folder_it_cannot_or_must_not_write(case, folders):
    # "not utf-8" holds someone's file and no lessons copy: never written into
    path = folders[case]
    outcome = run_cli(["lesson", "init", path], bad=path or "''", timeout=10)
    assert outcome.status == 2, outcome


bad_exercise = st.one_of(
    st.sampled_from(["0", "4", "-1", "4.0", "4.4", "5.1", "4.", ".2", "nan", "2e9", "", " "]),
    st.integers(min_value=4).map(str),
    st.text(string.ascii_letters + string.punctuation + " ", min_size=1, max_size=8).filter(
        lambda s: not s.startswith("-")
    ),
)


@given(exercise=bad_exercise)
def test_lesson_refuses_an_exercise_it_does_not_have_before_running_anything(exercise):
    # lesson 4 has exercises 4.1, 4.2 and 4.3; anything else is refused, naming the value
    outcome = run_cli(
        ["lesson", "4", "--exercise", exercise, "--no-pause", "--lang", "en"],
        bad=exercise.strip() or exercise,
        timeout=5,
    )
    assert outcome.status == 2 and ">>>" not in outcome.stdout, outcome
