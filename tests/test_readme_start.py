"""The README starts with the student (issue 27, item 7): its first 60 lines take a new
student from nothing to lesson 1 — a virtualenv, the install, the tour, their own copy of
the lessons, lesson 1 — and those commands work as written; the contributors' command
stays, labelled; the tour's last line and `collsim --help` point to lesson 1."""

import re
import shlex
from pathlib import Path

import pytest

from collsim.cli import main
from collsim.course.catalog import find_lessons

ROOT = Path(__file__).resolve().parents[1]
STEPS = [
    "python3 -m venv",
    "/bin/activate",
    "pip install .",
    "collsim tour",
    "collsim lesson init",
    "collsim lesson 1",
]


def read(name):
    return (ROOT / name).read_text(encoding="utf-8")


def quick_start(text):
    """The first code block of the README: the commands a new student types."""
    return re.search(r"```\n(.*?)```", text, re.S).group(1).splitlines()


@pytest.mark.parametrize("name", ["README.md", "README.ja.md"])
def test_the_first_60_lines_take_a_new_student_to_lesson_1_in_order(name):
    first = "\n".join(read(name).splitlines()[:60])
    at = 0
    for step in STEPS:  # each found after the one before it
        at = first.find(step, at)
        assert at != -1, f"{step!r} after {' → '.join(STEPS[: STEPS.index(step)])}"
    assert re.search(r"\*\*(Next: |次は )`collsim lesson 1", first)
    lessons = re.findall(r"^(\d+)\. \[", first, re.M)  # the lesson list, one line each
    assert lessons == [str(n) for n in sorted(find_lessons(ROOT / "lessons"))]


def test_the_quick_start_commands_run_as_written(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for name in ("COLLSIM_LESSONS", "COLLSIM_SOLUTIONS", "COLLSIM_LANG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLLSIM_LESSON_OUT", str(tmp_path / "pictures"))
    commands = [shlex.split(line) for line in quick_start(read("README.md"))]
    collsim = [argv[1:] for argv in commands if argv[0] == "collsim"]
    assert collsim == [["tour"], ["lesson", "init"], ["lesson", "1"]]
    for argv in collsim:
        assert main([*argv, "--no-pause"] if argv[0] == "lesson" and argv[1] == "1" else argv) == 0
    out = capsys.readouterr().out
    assert "(running collsim-lessons/01_why_not_one_device.py: your copy)" in out
    assert "collsim-lessons/01_why_not_one_device.py:" in out  # the line of an answer to write


def test_the_contributors_command_stays_labelled_and_the_internals_moved_to_docs():
    readme = read("README.md")
    contributors = readme.split("## For contributors", 1)[1].split("\n## ", 1)[0]
    assert "pip install -e '.[test]' && python -m pytest" in contributors
    assert len(readme.splitlines()) <= 220
    for heading in ("## How it is built", "## Measured performance", "## Memory, measured"):
        assert heading not in readme
    more = readme.split("## More", 1)[1]
    links = re.findall(r"\]\((docs/[^)]+\.md)\)", more)
    assert {"docs/commands.md", "docs/architecture.md", "docs/performance.md"} <= set(links)
    assert all((ROOT / link).is_file() for link in links)


@pytest.mark.parametrize(
    ("lang", "next_line"),
    [
        ("en", "next: collsim lesson init, then collsim lesson 1"),
        ("ja", "collsim lesson 1 --lang ja"),
    ],
)
def test_the_tour_ends_pointing_at_lesson_1(capsys, lang, next_line):
    assert main(["tour", "--lang", lang]) == 0
    last = capsys.readouterr().out.rstrip().splitlines()[-1]
    assert next_line in last


def test_collsim_help_points_to_lesson_1(capsys):
    assert main([]) == 0
    assert "`collsim lesson 1`" in capsys.readouterr().out
