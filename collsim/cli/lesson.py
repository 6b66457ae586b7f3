"""``collsim lesson``: list the lessons, or run one in the terminal cell by cell."""

import contextlib
import os
import re
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

from ..errors import CollsimError, ConfigError
from ..teach.language import JAPANESE_FOLDER, current_language, parse_language
from ..teach.translation import read_translation, translate_lesson
from ..teach.working_copy import translation_path, working_copy
from .common import Formatter
from .console import stdin_is_terminal
from .exit_status import Meaning

__all__ = ["register", "run", "lessons_dir", "find_lessons", "cells", "numbered_cells", "Cell"]

EXIT_STATUS = Meaning(ok="done", failed="a cell raised (its traceback is printed)")

DESCRIPTION = """\
The lessons are percent-format Python files in the repository's lessons/ folder: each
runs as a plain script (python lessons/04_ring_allreduce.py) and opens as a notebook in
Jupyter (via jupytext) or VS Code.  This command runs one in the terminal, printing the
prose and the code of each cell, then its output; it pauses between cells only when
standard input is a terminal (--no-pause turns that off).  An exercise left unanswered
prints the file and line of its answer slot (lessons/07_tensor_parallel.py:123: set ...).
A wrong answer is told what it is off by, in the exercise's own quantities, and the line to
edit; a second wrong try adds a hint; the right value shows only after 3 wrong tries of
that exercise (counted in ~/.collsim/progress.json, or $COLLSIM_PROGRESS) or with --reveal.

--lang ja runs a lesson in Japanese: the English lesson's code with the Japanese prose of
lessons/ja/NN_topic.md, assembled into lessons/ja/NN_topic.py (a percent-format file that
also runs as a script and opens as a notebook; write your answers there, it is rebuilt only
when its sources are newer, and a copy you changed is kept as NN_topic.py.bak).  The
exercise feedback is Japanese too; the titles are in `collsim lesson list --lang ja`.  Without
--lang the language comes from COLLSIM_LANG (en or ja), else from the locale (LC_ALL,
LC_MESSAGES or LANG starting with "ja"); English is the default.

examples:
  collsim lesson list
  collsim lesson 4
  collsim lesson list --lang ja
  collsim lesson 4 --lang ja
  collsim lesson 4 --reveal           # wrong answers show the right value at once
  collsim lesson build --lang ja      # lessons/ja/NN_topic.py for Jupyter, without running them
  COLLSIM_SOLUTIONS=1 collsim lesson 4 --no-pause   # fill every exercise from the solutions
"""

CELL = re.compile(r"^# %%(.*)$")


def register(subparsers):
    p = subparsers.add_parser(
        "lesson",
        help="list the lessons or run one (collsim lesson list)",
        description=DESCRIPTION,
        formatter_class=Formatter,
    )
    p.add_argument(
        "which",
        help="'list', 'build' (--lang ja: write the Japanese lessons to "
        "open as notebooks), or a lesson number such as 3",
    )
    p.add_argument("--no-pause", action="store_true", help="do not wait for Enter between cells")
    p.add_argument(
        "--lang",
        default=None,
        help="en (English) or ja (Japanese, the prose in lessons/ja/); default: "
        "COLLSIM_LANG, else ja when LC_ALL/LC_MESSAGES/LANG starts with 'ja', else en",
    )
    p.add_argument(
        "--reveal",
        action="store_true",
        help="show the correct value of a wrong answer at once (otherwise it shows after "
        "3 wrong tries of that exercise, counted in ~/.collsim/progress.json; "
        "COLLSIM_REVEAL=1 does the same for a lesson run as a script)",
    )
    p.add_argument(
        "--dir",
        default=None,
        help="folder of lesson files NN_topic.py (default: the checkout's lessons/). "
        "Running a lesson EXECUTES the Python code of that folder's file: "
        "pass only a folder you trust",
    )
    p.set_defaults(func=run)


def lessons_dir(override=None):
    """The lessons folder: ``override`` (``--dir``), else the checkout's ``lessons/``."""
    if override is not None and str(override).strip() == "":
        raise ConfigError("--dir '': give the folder that holds the lesson files")
    folder = Path(override) if override else Path(__file__).resolve().parents[2] / "lessons"
    shown = override or folder  # the path as the user typed it
    try:
        exists, is_dir = folder.exists(), folder.is_dir()
    except (OSError, ValueError) as exc:  # a name too long, an embedded NUL byte
        raise ConfigError(f"--dir {shown!r}: not a usable path ({exc})") from None
    if override and exists and not is_dir:
        raise ConfigError(f"--dir {shown}: is not a folder; give the folder of lesson files")
    if not is_dir:
        raise ConfigError(
            f"no lessons folder at {shown}: the lessons live in the collsim repository's "
            "lessons/ folder; clone the repository and install it with `pip install -e .` "
            "from the checkout (or pass --dir)"
        )
    return folder


def language_of(args):
    """``--lang`` as "en" or "ja", else the environment's language (English by default)."""
    lang = getattr(args, "lang", None)
    return current_language() if lang is None else parse_language(lang)


def english_dir(folder, lang):
    """The folder of the English lessons, the one code source: ``folder``, or its parent
    when ``--dir`` names the ``ja`` folder of translations."""
    if lang != "en" and folder.name == JAPANESE_FOLDER:
        folder = folder.parent
    if lang != "en" and not (folder / JAPANESE_FOLDER).is_dir():
        raise ConfigError(
            f"--lang {lang}: no Japanese lessons at {folder / JAPANESE_FOLDER}: their prose "
            "lives in lessons/ja/ of the collsim repository (or run the English ones with "
            "--lang en)"
        )
    return folder


def find_lessons(folder, lang="en"):
    """``{number: path}`` of the English ``NN_topic.py`` files in ``folder``; for another
    ``lang`` only those with a translation (``ja/NN_topic.md``)."""
    found = {}
    try:
        paths = sorted(folder.glob("[0-9][0-9]_*.py"))
    except OSError as exc:  # an unreadable folder
        raise ConfigError(f"{folder}: cannot list the lessons ({exc.strerror})") from None
    for path in paths:
        if path.is_file() and (lang == "en" or translation_path(path, lang).is_file()):
            found[int(path.name[:2])] = path
    return found


@dataclass(frozen=True)
class Cell:
    """One cell of a percent-format file: its kind, its text and the file line it starts on."""

    kind: str  # "markdown" or "code"
    source: str
    line: int  # 1-based line of the first line of ``source`` in the file


def numbered_cells(text):
    """Split percent-format text into :class:`Cell` records that remember their line."""
    out, kind, lines, start = [], None, [], 1
    for number, line in enumerate(text.splitlines(), 1):
        match = CELL.match(line)
        if match:
            if kind is not None:
                out.append(_cell(kind, lines, start))
            kind = "markdown" if "[markdown]" in match.group(1) else "code"
            lines, start = [], number + 1
        elif kind is not None:
            lines.append(line)
    if kind is not None:
        out.append(_cell(kind, lines, start))
    return [c for c in out if c.source.strip()]


def _cell(kind, lines, start):
    skipped = next((i for i, line in enumerate(lines) if line), 0)  # empty lines strip() drops
    return Cell(kind, "\n".join(lines).strip("\n"), start + skipped)


def cells(text):
    """Split percent-format text into ``[(kind, source)]``, kind "markdown" or "code"."""
    return [(c.kind, c.source) for c in numbered_cells(text)]


def _read(path):
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not a UTF-8 text file ({exc.reason}), not a lesson") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read it ({exc.strerror})") from None


def lesson_text(path, lang="en"):
    """The text of the English lesson at ``path`` in ``lang`` (its translation applied)."""
    if lang == "en":
        return _read(path)
    return translate_lesson(_read(path), read_translation(translation_path(path, lang)))


def summary(path, lang="en"):
    """(title, one line) from the lesson's first markdown cell."""
    for kind, source in cells(lesson_text(path, lang)):
        if kind == "markdown":
            prose = [
                line[2:] if line.startswith("# ") else line.lstrip("#")
                for line in source.splitlines()
            ]
            title = re.sub(r"^\d+\.\s*", "", prose[0].lstrip("# ").strip())  # number shown apart
            rest = next((p.strip() for p in prose[1:] if p.strip()), "")
            return title, rest
    return path.stem, ""


LIST_FOOTER = {
    "en": "\n(lessons in {folder}; run one with `collsim lesson N`)",
    "ja": "\n(レッスンの場所: {folder}。`collsim lesson N --lang ja` で 1 つずつ実行できます)",
}
UNTRANSLATED = {
    "en": "",
    "ja": "(まだ日本語版のないレッスン: {numbers}。英語版は `collsim lesson N --lang en` で"
    "実行できます)",
}
KEPT = {  # only translated lessons are built
    "ja": "(レッスンの元ファイルが更新されたので {lesson} を作り直しました。"
    "以前のファイルは {backup} に残してあります)",
}
BUILT = {"ja": "(日本語のレッスンを {lesson} に作りました)"}
NEXT_CELL = {"en": "  [Enter: next cell] ", "ja": "  [Enter: 次のセルへ] "}


def run(args):
    which = str(args.which).strip()
    if which not in ("list", "build") and not re.fullmatch(r"[0-9]{1,2}", which):
        raise ConfigError(
            f"lesson {args.which!r}: give 'list', 'build' or a lesson number such as 3"
        )
    lang = language_of(args)
    if which == "build" and lang == "en":
        raise ConfigError(
            "lesson build --lang en: the English lessons are the sources and need no build; "
            "give --lang ja to build the Japanese ones"
        )
    english = english_dir(lessons_dir(args.dir), lang)  # before any work: it must exist
    folder = english if lang == "en" else english / JAPANESE_FOLDER
    lessons = find_lessons(english, lang)
    if which == "list":
        for number, path in lessons.items():
            title, line = summary(path, lang)
            print(f"{number:>2}  {title}\n    {line}")
        missing = sorted(set(find_lessons(english)) - set(lessons))
        if missing:
            print("\n" + UNTRANSLATED[lang].format(numbers=", ".join(map(str, missing))))
        print(LIST_FOOTER[lang].format(folder=folder))
        return 0
    if which == "build":
        for path in lessons.values():
            _build(path, lang)
        return 0
    number = int(which)
    if number not in lessons:
        raise ConfigError(_no_such_lesson(args.which, number, lessons, folder, english))
    path = lessons[number] if lang == "en" else _build(lessons[number], lang)
    return _run_lesson(path, args, lang)


def _build(english_path, lang):
    """The ``lang`` lesson of ``english_path``, built if its sources are newer."""
    built = working_copy(english_path, lang)
    if built.backup:
        print(KEPT[lang].format(lesson=built.lesson, backup=built.backup))
    elif built.rebuilt:
        print(BUILT[lang].format(lesson=built.lesson))
    return built.lesson


def _no_such_lesson(which, number, lessons, folder, english):
    """What to say about a lesson number the folder does not have, with the nearest one."""
    if folder != english and number in find_lessons(english):
        nearest = min(lessons, key=lambda n: (abs(n - number), n)) if lessons else None
        there = f"the nearest Japanese lesson is {nearest}" if nearest else "none exists yet"
        return (
            f"no Japanese lesson {which} yet in {folder}: {there} "
            f"(`collsim lesson list --lang ja`); the English one runs with "
            f"`collsim lesson {number} --lang en`"
        )
    if not lessons:
        return f"no lesson {which}: the folder {folder} has no NN_topic.py files"
    nearest = min(lessons, key=lambda n: (abs(n - number), n))
    listing = "collsim lesson list" + (" --lang ja" if folder != english else "")
    return (
        f"no lesson {which}: the nearest is {nearest}; choose one of {sorted(lessons)} "
        f"(see `{listing}`)"
    )


@contextlib.contextmanager
def _language_set(lang):
    """COLLSIM_LANG while a lesson runs, so its feedback speaks ``lang`` whatever the locale."""
    before = os.environ.get("COLLSIM_LANG")
    os.environ["COLLSIM_LANG"] = lang
    try:
        yield
    finally:
        if before is None:
            del os.environ["COLLSIM_LANG"]
        else:
            os.environ["COLLSIM_LANG"] = before


def _run_lesson(path, args, lang="en"):
    with _language_set(lang), _reveal_set(getattr(args, "reveal", False)):
        return _run_cells(path, args, lang)


@contextlib.contextmanager
def _reveal_set(reveal):
    """COLLSIM_REVEAL=1 while a lesson runs with --reveal: wrong answers show the right one
    (the hint ladder, collsim/teach/ladder.py)."""
    before = os.environ.get("COLLSIM_REVEAL")
    if reveal:
        os.environ["COLLSIM_REVEAL"] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("COLLSIM_REVEAL", None)
        else:
            os.environ["COLLSIM_REVEAL"] = before


def _run_cells(path, args, lang):
    namespace = {"__name__": "__main__", "__file__": str(path)}
    pause = not args.no_pause and stdin_is_terminal()
    sys.path.insert(0, str(path.parent))
    os.environ.setdefault("MPLBACKEND", "Agg")
    for cell in numbered_cells(_read(path)):
        if cell.kind == "markdown":
            print(
                "\n".join(
                    line[2:] if line.startswith("# ") else line.lstrip("#")
                    for line in cell.source.splitlines()
                )
            )
        else:
            print("\n".join(">>> " + line for line in cell.source.splitlines()))
            _run_cell(cell, path, namespace)
        print()
        if pause:
            try:
                input(NEXT_CELL[lang])
            except (EOFError, RuntimeError):  # stdin closed meanwhile
                pause = False
    return 0


def _run_cell(cell, path, namespace):
    # compiled under the lesson's own path and line numbers: teach finds the solutions next
    # to it and prints the line of an answer slot as it is in the file
    code = compile("\n" * (cell.line - 1) + cell.source, str(path), "exec")
    try:
        exec(code, namespace)
    except Exception as exc:  # the lesson's (or the student's) code: show it, then stop
        sys.stdout.flush()
        traceback.print_exc()
        raise CollsimError(
            f"{path}:{cell.line}: the cell starting here raised {type(exc).__name__}: {exc} "
            "(traceback above); fix that cell and run the lesson again"
        ) from None
