"""``collsim lesson``: list the lessons, or run one in the terminal cell by cell."""

import os
import re
import sys
from pathlib import Path

from ..errors import ConfigError
from .common import Formatter

__all__ = ["register", "run", "lessons_dir", "find_lessons", "cells"]

DESCRIPTION = """\
The lessons are percent-format Python files in the repository's lessons/ folder: each
runs as a plain script (python lessons/03_ring_allreduce.py) and opens as a notebook in
Jupyter (via jupytext) or VS Code.  This command runs one in the terminal, printing the
prose and the code of each cell, then its output; it pauses between cells only when
standard input is a terminal (--no-pause turns that off).

examples:
  collsim lesson list
  collsim lesson 3
  COLLSIM_SOLUTIONS=1 collsim lesson 3 --no-pause   # fill every exercise from the solutions
"""

CELL = re.compile(r"^# %%(.*)$")


def register(subparsers):
    p = subparsers.add_parser("lesson", help="list the lessons or run one (collsim lesson list)",
                              description=DESCRIPTION, formatter_class=Formatter)  # fmt: skip
    p.add_argument("which", help="'list', or a lesson number such as 3")
    p.add_argument("--no-pause", action="store_true", help="do not wait for Enter between cells")
    p.add_argument(
        "--dir", default=None, help="folder holding the lessons (default: the checkout's)"
    )
    p.set_defaults(func=run)


def lessons_dir(override=None):
    """The lessons folder of the checkout that the editable install points at."""
    folder = Path(override) if override else Path(__file__).resolve().parents[2] / "lessons"
    if not folder.is_dir():
        raise ConfigError(
            f"no lessons folder at {folder}: the lessons live in the collsim repository's "
            "lessons/ folder; clone the repository and install it with `pip install -e .` "
            "from the checkout (or pass --dir)"
        )
    return folder


def find_lessons(folder):
    """``{number: path}`` of ``NN_topic.py`` files."""
    found = {}
    for path in sorted(folder.glob("[0-9][0-9]_*.py")):
        found[int(path.name[:2])] = path
    return found


def cells(text):
    """Split percent-format text into ``[(kind, source)]``, kind "markdown" or "code"."""
    out, kind, lines = [], None, []
    for line in text.splitlines():
        match = CELL.match(line)
        if match:
            if kind is not None:
                out.append((kind, "\n".join(lines).strip("\n")))
            kind = "markdown" if "[markdown]" in match.group(1) else "code"
            lines = []
        elif kind is not None:
            lines.append(line)
    if kind is not None:
        out.append((kind, "\n".join(lines).strip("\n")))
    return [(k, s) for k, s in out if s.strip()]


def summary(path):
    """(title, one line) from the lesson's first markdown cell."""
    for kind, source in cells(path.read_text(encoding="utf-8")):
        if kind == "markdown":
            prose = [line[2:] if line.startswith("# ") else line.lstrip("#") for line in
                     source.splitlines()]  # fmt: skip
            title = re.sub(r"^\d+\.\s*", "", prose[0].lstrip("# ").strip())  # number shown apart
            rest = next((p.strip() for p in prose[1:] if p.strip()), "")
            return title, rest
    return path.stem, ""


def run(args):
    folder = lessons_dir(args.dir)
    lessons = find_lessons(folder)
    if args.which == "list":
        for number, path in lessons.items():
            title, line = summary(path)
            print(f"{number:>2}  {title}\n    {line}")
        print(f"\n(lessons in {folder}; run one with `collsim lesson N`)")
        return 0
    try:
        number = int(args.which)
    except ValueError:
        raise ConfigError(f"lesson {args.which!r}: give 'list' or a number") from None
    if number not in lessons:
        raise ConfigError(f"no lesson {number}: choose one of {sorted(lessons)} "
                          "(see `collsim lesson list`)")  # fmt: skip
    return _run_lesson(lessons[number], args)


def _run_lesson(path, args):
    namespace = {"__name__": "__main__", "__file__": str(path)}
    pause = not args.no_pause and sys.stdin.isatty()
    sys.path.insert(0, str(path.parent))
    os.environ.setdefault("MPLBACKEND", "Agg")
    for kind, source in cells(path.read_text(encoding="utf-8")):
        if kind == "markdown":
            print("\n".join(line[2:] if line.startswith("# ") else line.lstrip("#")
                            for line in source.splitlines()))  # fmt: skip
        else:
            print("\n".join(">>> " + line for line in source.splitlines()))
            # compiled under the lesson's own path: teach finds the solutions next to it
            exec(compile(source, str(path), "exec"), namespace)
        print()
        if pause:
            try:
                input("  [Enter: next cell] ")
            except EOFError:
                pause = False
    return 0
