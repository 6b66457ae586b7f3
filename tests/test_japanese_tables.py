"""Japanese tables line up (issue 27, item 9): collsim pads by display width, where a kana
or kanji takes two terminal columns, in `collsim lesson list --lang ja` and in the tables
the Japanese lessons print."""

import os
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from collsim.cli import main
from collsim.course.width import display_width, ljust, rjust

ROOT = Path(__file__).resolve().parents[1]


def columns(line, text):
    """The terminal column where ``text`` starts in ``line``."""
    return display_width(line[: line.index(text)])


def test_display_width_counts_wide_characters_twice():
    assert display_width("レッスン") == 8 and display_width("ZeRO-1") == 6
    assert display_width("ＡＢ") == 4  # full-width forms
    assert all(unicodedata.east_asian_width(c) == "W" for c in "演習")
    assert ljust("演習", 6) == "演習  " and rjust("演習", 6) == "  演習"
    assert ljust("too long", 3) == "too long"  # never cut


def test_lesson_list_in_japanese_aligns_its_columns(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("COLLSIM_LESSONS", raising=False)
    assert main(["lesson", "init", "--lang", "ja"]) == 0
    capsys.readouterr()
    main(["lesson", "list", "--lang", "ja"])
    rows = [line for line in capsys.readouterr().out.splitlines() if line.endswith("/3")]
    heading = "できた演習"
    assert len(rows) >= 4
    ends = {display_width(row) for row in rows}  # every count ends under the heading's end
    assert len(ends) == 1, rows
    main(["lesson", "list", "--lang", "ja"])
    head = next(line for line in capsys.readouterr().out.splitlines() if heading in line)
    assert display_width(head) == ends.pop()


def run_japanese(number, *flags, cwd):
    env = dict(os.environ, COLLSIM_SOLUTIONS="1", MPLBACKEND="Agg", COLLSIM_LESSON_OUT=str(cwd))
    env.pop("COLLSIM_LESSONS", None)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "collsim",
            "lesson",
            str(number),
            "--lang",
            "ja",
            "--no-pause",
            "--dir",
            str(ROOT / "lessons"),
            *flags,
        ],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.splitlines()


@pytest.mark.parametrize(
    ("number", "flags", "starts", "column"),
    [
        (1, ["--exercise", "3"], "2 倍にするもの:", "->"),  # "マイクロバッチ" and "層数"
    ],
)
def test_japanese_lesson_tables_line_up(tmp_path, number, flags, starts, column):
    lines = run_japanese(number, *flags, cwd=tmp_path)
    first = next(i for i, line in enumerate(lines) if line.startswith(starts))
    rows = lines[first : first + 2]
    assert all(column in row for row in rows), rows
    assert columns(rows[0], column) == columns(rows[1], column), rows
