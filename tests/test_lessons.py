"""Every lesson runs headless as a script, with every exercise filled from the solutions,
and every check passes."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from collsim.cli import main
from collsim.cli.lesson import cells, find_lessons

LESSONS = Path(__file__).resolve().parents[1] / "lessons"
FILES = sorted(find_lessons(LESSONS).values())


def test_there_are_lessons():
    assert len(FILES) >= 1


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_lesson_runs_and_every_check_passes(path, tmp_path):
    env = dict(os.environ, COLLSIM_SOLUTIONS="1", MPLBACKEND="Agg",
               COLLSIM_LESSON_OUT=str(tmp_path))  # fmt: skip
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, env=env,
                          cwd=tmp_path, stdin=subprocess.DEVNULL, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Not yet" not in done.stdout
    assert "Correct!" in done.stdout  # at least one exercise was checked
    assert list(tmp_path.glob("*.png")), "a lesson draws at least one picture"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_lesson_shape(path):
    parts = cells(path.read_text(encoding="utf-8"))
    kinds = [k for k, _ in parts]
    assert kinds[0] == "markdown" and "code" in kinds
    assert "takeaways" in parts[-1][1].lower(), "the last cell is the takeaways"
    assert (LESSONS / "solutions" / path.name).exists(), "solutions live apart"


def test_unanswered_exercise_prints_what_to_do_and_does_not_fail(capsys, monkeypatch):
    from collsim import teach

    monkeypatch.delenv("COLLSIM_SOLUTIONS", raising=False)
    assert teach.check("x.1", None, expected=3) is None
    assert "replace None" in capsys.readouterr().out


def test_wrong_answer_says_exactly_what_differs(capsys, monkeypatch):
    from collsim import teach

    monkeypatch.delenv("COLLSIM_SOLUTIONS", raising=False)
    assert teach.check_function("x.2", lambda a: a + 1, lambda a: a * 2, [(1,), (3,)]) is False
    out = capsys.readouterr().out
    assert "case 2" in out and "yours:    4" in out and "expected: 6" in out


def test_lesson_list_command(capsys):
    assert main(["lesson", "list"]) == 0
    out = capsys.readouterr().out
    for path in FILES:
        assert f"{int(path.name[:2]):>2}  " in out


def test_missing_lessons_folder_says_where_to_get_them(capsys, tmp_path):
    assert main(["lesson", "list", "--dir", str(tmp_path / "nowhere")]) == 1
    assert "clone the repository" in capsys.readouterr().err
