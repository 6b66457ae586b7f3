"""The student's own copy of the lessons (issue 27, item 4): `collsim lesson init` makes it
and never overwrites it, `collsim lesson N` runs it and says so, `--exercise M` stops at
M's check, `collsim lesson list` shows what is done, and an installed collsim (not the
checkout) carries the lessons."""

import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from collsim.cli import main
from collsim.course.catalog import course_lessons, find_lessons
from collsim.course.progress import PROGRESS_FILE
from collsim.course.student import MARKER

ROOT = Path(__file__).resolve().parents[1]
WRONG_1_1 = "model_state_bytes_answer = 2 * 7e9  # only the fp16 weights"  # 14 GB, a classic
RIGHT_1_1 = "model_state_bytes_answer = 16 * 7e9"


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A student's working folder outside the checkout, with no COLLSIM_* settings."""
    for name in ("COLLSIM_LESSONS", "COLLSIM_SOLUTIONS", "COLLSIM_LANG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLLSIM_LESSON_OUT", str(tmp_path / "pictures"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def answer(copy, line):
    """Write ``line`` over the answer slot it names in lesson 1 of ``copy``, as a student does."""
    path = copy / "01_why_not_one_device.py"
    name = line.split(" =")[0]
    text = re.sub(rf"^{name} = None.*$", line, path.read_text(encoding="utf-8"), flags=re.M)
    assert line in text
    path.write_text(text, encoding="utf-8")


def test_init_copies_every_lesson_and_leaves_a_marker(home, capsys):
    assert main(["lesson", "init"]) == 0
    copy = home / "collsim-lessons"
    assert sorted(p.name for p in copy.glob("[0-9][0-9]_*.py")) == sorted(
        p.name for p in find_lessons(course_lessons()).values()
    )
    assert (copy / MARKER).is_file()
    assert not (copy / "solutions").exists()  # the answers stay out of the student's folder
    assert "next: `collsim lesson 1`" in capsys.readouterr().out


def test_init_never_overwrites_the_students_work(home, capsys):
    main(["lesson", "init", "mine"])
    answer(home / "mine", WRONG_1_1)
    assert main(["lesson", "init", "mine"]) == 0
    assert WRONG_1_1 in (home / "mine" / "01_why_not_one_device.py").read_text(encoding="utf-8")
    kept = len(find_lessons(course_lessons()))
    assert f"kept {kept} already there" in capsys.readouterr().out


def test_init_refuses_a_folder_of_someone_elses_files(home, capsys):
    (home / "thesis").mkdir()
    (home / "thesis" / "notes.txt").write_text("mine", encoding="utf-8")
    assert main(["lesson", "init", "thesis"]) == 2
    err = capsys.readouterr().err
    assert "thesis" in err and "not empty" in err and "thesis/collsim-lessons" in err
    assert [p.name for p in (home / "thesis").iterdir()] == ["notes.txt"]


def test_lesson_runs_the_students_copy_and_says_which_file(home, capsys):
    main(["lesson", "init"])
    answer(home / "collsim-lessons", WRONG_1_1)
    capsys.readouterr()
    assert main(["lesson", "1", "--exercise", "1", "--no-pause"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("(running collsim-lessons/01_why_not_one_device.py: your copy)")
    assert "Not yet. 1.1" in out  # the student's own answer was checked


def test_the_copy_is_found_from_inside_it_and_through_COLLSIM_LESSONS(home, capsys, monkeypatch):
    main(["lesson", "init", "course"])
    monkeypatch.chdir(home / "course")
    capsys.readouterr()
    main(["lesson", "1", "--exercise", "1", "--no-pause"])
    assert "(running 01_why_not_one_device.py: your copy)" in capsys.readouterr().out
    elsewhere = home / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setenv("COLLSIM_LESSONS", str(home / "course"))
    main(["lesson", "1", "--exercise", "1", "--no-pause"])
    assert f"(running {home / 'course' / '01_why_not_one_device.py'}: your copy)" in (
        capsys.readouterr().out
    )
    monkeypatch.setenv("COLLSIM_LESSONS", str(home / "typo"))
    assert main(["lesson", "list"]) == 2
    assert "COLLSIM_LESSONS=" in capsys.readouterr().err


def test_without_a_copy_the_course_runs_read_only_and_says_how_to_make_one(home, capsys):
    main(["lesson", "1", "--exercise", "1", "--no-pause"])
    out = capsys.readouterr().out
    assert "collsim's own copy; `collsim lesson init` makes yours" in out
    assert not list(home.rglob(PROGRESS_FILE))  # nothing recorded outside a student's copy


def test_exercise_runs_up_to_its_check_and_no_further(home, capsys):
    main(["lesson", "init"])
    capsys.readouterr()
    assert main(["lesson", "4", "--exercise", "2", "--no-pause"]) == 0
    out = capsys.readouterr().out
    assert "4.2" in out and "chunk_sent_answer" in out
    assert "4.3" not in out and "root_link_bytes_answer" not in out  # the next part
    assert "4.1" not in out  # the part before ran quietly
    assert main(["lesson", "4", "--exercise", "4.2", "--no-pause"]) == 0


@pytest.mark.parametrize(
    ("given", "named"), [("9", "the nearest is 3"), ("5.1", "no exercise 5.1"), ("x", "x")]
)
def test_an_exercise_the_lesson_does_not_have_is_refused_with_the_nearest(
    home, capsys, given, named
):
    assert main(["lesson", "4", "--exercise", given, "--no-pause"]) == 2
    err = capsys.readouterr().err
    assert named in err and "4.1, 4.2, 4.3" in err


def test_list_shows_the_exercises_passed(home, capsys):
    main(["lesson", "init"])
    copy = home / "collsim-lessons"
    answer(copy, WRONG_1_1)
    main(["lesson", "1", "--exercise", "1", "--no-pause"])
    capsys.readouterr()
    main(["lesson", "list"])
    assert re.search(r"^ 1  Why one device is not enough +0/4$", capsys.readouterr().out, re.M)
    text = (copy / "01_why_not_one_device.py").read_text(encoding="utf-8")
    (copy / "01_why_not_one_device.py").write_text(text.replace(WRONG_1_1, RIGHT_1_1))
    main(["lesson", "1", "--exercise", "1", "--no-pause"])
    assert "Correct! 1.1" in capsys.readouterr().out
    main(["lesson", "list"])
    out = capsys.readouterr().out
    assert re.search(r"^ 1  Why one device is not enough +1/4  1\.1$", out, re.M)
    assert re.search(r"^ 4  Ring all-reduce, step by step +0/3$", out, re.M)


def test_only_init_takes_a_folder(home, capsys):
    assert main(["lesson", "4", "somewhere"]) == 2
    assert "only `lesson init` takes a folder" in capsys.readouterr().err


def test_japanese_copy_sits_in_ja_and_speaks_japanese(home, capsys):
    assert main(["lesson", "init", "--lang", "ja"]) == 0
    assert (home / "collsim-lessons" / "ja" / "04_ring_allreduce.py").is_file()
    capsys.readouterr()
    main(["lesson", "1", "--exercise", "1", "--no-pause", "--lang", "ja"])
    out = capsys.readouterr().out
    assert "(実行するファイル: collsim-lessons/ja/01_why_not_one_device.py: あなたのコピー)" in out
    assert main(["lesson", "1", "--lang", "en", "--no-pause", "--exercise", "1"]) == 2
    assert "collsim lesson init" in capsys.readouterr().err  # English not copied yet


# ---- an installed collsim carries the lessons ------------------------------------------------


@pytest.mark.slow
def test_a_built_wheel_carries_the_lessons_and_runs_lesson_1_outside_the_checkout(tmp_path):
    """`pip wheel .`, installed with --target into a folder outside the checkout, copies and
    runs lesson 1: the lessons are package data, not the repository's folder."""
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "-w",
            str(tmp_path / "wheel"),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = (tmp_path / "wheel").glob("collsim-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for path in find_lessons(ROOT / "lessons").values():
        assert f"collsim/course/lessons/{path.name}" in names
        assert f"collsim/course/lessons/solutions/{path.name}" in names
        assert f"collsim/course/lessons/ja/{path.stem}.md" in names
    assert "collsim/course/examples/mpi_heat_stencil.py" in names  # lesson 13 runs it
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
        timeout=600,
    )
    student = tmp_path / "student"
    student.mkdir()
    env = {"PYTHONPATH": str(target), "MPLBACKEND": "Agg", "PATH": "/usr/bin:/bin"}
    run = [sys.executable, "-m", "collsim", "lesson"]
    init = subprocess.run(
        [*run, "init"], cwd=student, env=env, capture_output=True, text=True, timeout=120
    )
    assert init.returncode == 0, init.stderr
    lesson = subprocess.run(
        [*run, "1", "--no-pause"], cwd=student, env=env, text=True, capture_output=True, timeout=300
    )
    assert lesson.returncode == 0, lesson.stderr[-2000:]
    assert "(running collsim-lessons/01_why_not_one_device.py: your copy)" in lesson.stdout
    assert (
        str(target)
        in subprocess.run(
            [sys.executable, "-c", "import collsim.course.catalog as c; print(c.course_lessons())"],
            cwd=student,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
    )


def test_progress_is_kept_in_the_copy_found_from_the_working_folder(home):
    from collsim.course.progress import attempts, passed, record_try

    record_try(4, "4.2", correct=False)  # no copy yet: nothing recorded, nothing written
    assert attempts(4, "4.2") == 0 and not list(home.rglob(PROGRESS_FILE))
    main(["lesson", "init"])
    record_try(4, "4.2", correct=False)
    record_try(4, "4.2", correct=True)
    record_try(4, "4.2", correct=False)  # passed once is passed
    assert attempts(4, "4.2") == 3
    assert passed(home / "collsim-lessons") == {"4.2"}
    (home / "collsim-lessons" / PROGRESS_FILE).write_text("{not json", encoding="utf-8")
    assert attempts(4, "4.2") == 0  # a file broken by hand counts as no progress, no crash


def test_the_solutions_fill_a_students_copy_too(home, capsys, monkeypatch):
    # the copy holds no solutions/ folder; COLLSIM_SOLUTIONS=1 reads collsim's own
    main(["lesson", "init", "--lang", "ja"])
    main(["lesson", "init"])
    monkeypatch.setenv("COLLSIM_SOLUTIONS", "1")
    capsys.readouterr()
    assert main(["lesson", "1", "--exercise", "2", "--no-pause"]) == 0
    assert "Correct! 1.2" in capsys.readouterr().out
    assert main(["lesson", "1", "--exercise", "1", "--no-pause", "--lang", "ja"]) == 0
    assert "1.1" in capsys.readouterr().out
    assert not list(home.rglob(PROGRESS_FILE))  # the solutions' answers are not the student's


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["list", "--exercise", "2"], "lesson list --exercise"),
        (["init", "--notebook"], "lesson init --notebook"),
        (["4", "--exercise", "2", "--notebook"], "--exercise 2 with --notebook"),
    ],
)
def test_flags_that_need_one_lesson_are_refused_elsewhere(home, capsys, argv, named):
    assert main(["lesson", *argv]) == 2
    assert named in capsys.readouterr().err
    assert not (home / "collsim-lessons").exists()  # refused before any work
