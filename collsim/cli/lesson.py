"""``collsim lesson``: copy the lessons into your folder, list them, run one (or one exercise).

Nothing here loads numpy, networkx or matplotlib until a lesson runs: ``lesson list`` and
``lesson init`` read files only.
"""

import contextlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from ..course.catalog import course_lessons, find_lessons, lesson_exercises, lesson_text, summary
from ..course.catalog import read_lesson as _read
from ..course.cells import CELL, Cell, cells, numbered_cells
from ..course.language import JAPANESE_FOLDER, current_language, parse_language
from ..course.notebook import write_notebook
from ..course.progress import passed
from ..course.student import DEFAULT_FOLDER, find_student_folder, init_folder, lessons_in
from ..course.width import display_width, ljust, rjust
from ..course.working_copy import working_copy
from ..errors import ConfigError
from .exit_status import Meaning
from .lesson_run import run_lesson, stop_at
from .parsing import Formatter

__all__ = ["register", "run", "lessons_dir", "find_lessons", "cells", "numbered_cells", "Cell"]
__all__ += ["CELL", "lesson_text"]  # read by the lesson tests

EXIT_STATUS = Meaning(ok="done", failed="a cell raised (its traceback is printed)")

DESCRIPTION = """\
Start with your own copy of the lessons: `collsim lesson init` copies them into
./collsim-lessons (or the folder you name), where you write your answers; collsim never
changes a file there.  From then on `collsim lesson N`, run in that folder or the one
above it (or anywhere with COLLSIM_LESSONS=path/to/it), runs YOUR copy and says which
file it runs.  Without a copy it runs collsim's own lessons, read-only.

A lesson is a percent-format Python file: it runs as a plain script (python
04_ring_allreduce.py) and opens as a notebook (--notebook writes one, with the extra
`pip install 'collsim[notebook]'`).  This command prints each cell's prose and code, then
its output, pausing between cells when standard input is a terminal (--no-pause turns that
off).  --exercise M runs lesson N up to exercise N.M's check: the cells before its part run
quietly, so one answer is checked in seconds.  An unanswered exercise prints the file and
line of its answer slot (collsim-lessons/07_tensor_parallel.py:123: set ...).  A wrong
answer is told what it is off by, in the exercise's own quantities, and the line to edit;
a second wrong try adds a hint; the right value shows after 3 wrong tries of that exercise
or with --reveal.  `collsim lesson list` shows, per lesson, which exercises you have
answered correctly.

--lang ja: the lessons in Japanese (the English code with the prose of lessons/ja/),
`collsim lesson init --lang ja` puts them in collsim-lessons/ja/.  Without --lang the
language comes from COLLSIM_LANG (en or ja), else from the locale (LC_ALL, LC_MESSAGES or
LANG starting with "ja"); English is the default.

examples:
  collsim lesson init                    # ./collsim-lessons, your copy
  collsim lesson 1                       # runs ./collsim-lessons/01_why_not_one_device.py
  collsim lesson 4 --exercise 2          # lesson 4 up to exercise 4.2's check
  collsim lesson list                    # the lessons, and the exercises you have done
  collsim lesson 4 --notebook            # collsim-lessons/04_ring_allreduce.ipynb
  collsim lesson init --lang ja && collsim lesson 4 --lang ja
  collsim lesson 4 --reveal              # a wrong answer shows the right value at once
  COLLSIM_SOLUTIONS=1 collsim lesson 4 --no-pause   # fill every exercise from the solutions
"""


def register(subparsers):
    p = subparsers.add_parser(
        "lesson",
        help="the lessons: `collsim lesson init`, then `collsim lesson 1` (list: all 15)",
        description=DESCRIPTION,
        formatter_class=Formatter,
    )
    p.add_argument(
        "which",
        help="'init' (copy the lessons into your folder), 'list', a lesson number such as "
        "3, or 'build' (--lang ja: build collsim's own Japanese lessons in place)",
    )
    p.add_argument(
        "folder",
        nargs="?",
        default=None,
        help=f"with init: the folder for your copy (default ./{DEFAULT_FOLDER}; "
        "a file already there is kept)",
    )
    p.add_argument("--exercise", default=None, help="run up to this exercise's check: 2 or 4.2")
    p.add_argument(
        "--notebook",
        action="store_true",
        help="write the lesson as a Jupyter notebook into your folder instead of running it",
    )
    p.add_argument("--no-pause", action="store_true", help="do not wait for Enter between cells")
    p.add_argument(
        "--reveal",
        action="store_true",
        help="show the right value of a wrong answer at once (otherwise it shows after 3 "
        "wrong tries of that exercise, counted in your progress file; COLLSIM_REVEAL=1 does "
        "the same for a lesson run as a script)",
    )
    p.add_argument(
        "--lang",
        default=None,
        help="en (English) or ja (Japanese, the prose in lessons/ja/); default: "
        "COLLSIM_LANG, else ja when LC_ALL/LC_MESSAGES/LANG starts with 'ja', else en",
    )
    p.add_argument(
        "--dir",
        default=None,
        help="folder of lesson files NN_topic.py (default: your copy, else collsim's own). "
        "Running a lesson EXECUTES the Python code of that folder's file: "
        "pass only a folder you trust",
    )
    p.set_defaults(func=run)


def lessons_dir(override=None):
    """The lessons folder: ``override`` (``--dir``), else the ones collsim ships."""
    if override is not None and str(override).strip() == "":
        raise ConfigError("--dir '': give the folder that holds the lesson files")
    folder = Path(override) if override else course_lessons()
    shown = override or folder  # the path as the user typed it
    try:
        exists, is_dir = folder.exists(), folder.is_dir()
    except (OSError, ValueError) as exc:  # a name too long, an embedded NUL byte
        raise ConfigError(f"--dir {shown!r}: not a usable path ({exc})") from None
    if override and exists and not is_dir:
        raise ConfigError(f"--dir {shown}: is not a folder; give the folder of lesson files")
    if override and not exists:
        raise ConfigError(
            f"--dir {shown}: no such folder; give a folder of lesson files NN_topic.py, such "
            "as your copy made by `collsim lesson init`"
        )
    if not is_dir:  # an installed collsim without its package data
        raise ConfigError(
            f"no lessons folder at {shown}: reinstall collsim (`pip install .` from the "
            "repository ships the lessons), or pass --dir"
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


@dataclass(frozen=True)
class Lessons:
    """The lessons a command works on: the files to run and where they came from."""

    files: dict  # {number: the file to run}
    folder: Path  # where they are, for the messages
    english: dict  # {number: the English file}, to name the lessons not translated yet
    student: Path | None = None  # the student's copy, when they run from it


def lessons_for(args, lang):
    """The student's copy when there is one (and no --dir), else collsim's own lessons."""
    student = None if args.dir else find_student_folder()
    if student is not None:
        folder = lessons_in(student, lang)
        files = find_lessons(folder) if folder.is_dir() else {}
        if not files:
            raise ConfigError(
                f"your lessons copy {student} has no {lang} lessons yet: add them with "
                f"`collsim lesson init {student} --lang {lang}`"
            )
        return Lessons(files, folder, find_lessons(student) or files, student)
    english = english_dir(lessons_dir(args.dir), lang)  # before any work: it must exist
    folder = english if lang == "en" else english / JAPANESE_FOLDER
    return Lessons(find_lessons(english, lang), folder, find_lessons(english))


LIST_FOOTER = {
    "en": "\n(lessons in {folder}; run one with `collsim lesson N`)",
    "ja": "\n(レッスンの場所: {folder}。`collsim lesson N --lang ja` で 1 つずつ実行できます)",
}
NO_COPY = {
    "en": "(no copy of your own yet: `collsim lesson init` makes one to write your answers in)",
    "ja": "(自分用のコピーがまだありません: `collsim lesson init --lang ja` で作れます)",
}
UNTRANSLATED = {
    "en": "",
    "ja": "(まだ日本語版のないレッスン: {numbers}。英語版は `collsim lesson N --lang en` で"
    "実行できます)",
}
HEADINGS = {"en": ("lesson", "exercises done"), "ja": ("レッスン", "できた演習")}
KEPT = {  # only translated lessons are built
    "ja": "(レッスンの元ファイルが更新されたので {lesson} を作り直しました。"
    "以前のファイルは {backup} に残してあります)",
}
BUILT = {"ja": "(日本語のレッスンを {lesson} に作りました)"}
RUNS = {"en": "(running {path}{whose})", "ja": "(実行するファイル: {path}{whose})"}
WHOSE = {
    "en": (": your copy", ": collsim's own copy; `collsim lesson init` makes yours"),
    "ja": (
        ": あなたのコピー",
        ": collsim 付属のコピー。`collsim lesson init --lang ja` で自分用を作れます",
    ),
}
INIT_DONE = {
    "en": "copied {written} lessons into {folder}{kept}\nnext: `collsim lesson 1`{where}",
    "ja": "{folder} に {written} 個のレッスンをコピーしました{kept}\n次は `collsim lesson 1 "
    "--lang ja`{where}",
}
INIT_KEPT = {"en": " (kept {count} already there)", "ja": " (既にある {count} 個はそのまま)"}
INIT_WHERE = {"en": ", run from {place}", "ja": " ({place} で実行してください)"}
NOTEBOOK_DONE = {
    "en": "wrote {path}\nopen it in Jupyter (`pip install jupyterlab; jupyter lab {path}`) "
    "or VS Code; its pictures show inline",
    "ja": "{path} を書き出しました\nJupyter (`pip install jupyterlab; jupyter lab {path}`) か "
    "VS Code で開いてください。図はセルの下に表示されます",
}


def run(args):
    which = str(args.which).strip()
    if which not in ("list", "build", "init") and not re.fullmatch(r"[0-9]{1,2}", which):
        raise ConfigError(
            f"lesson {args.which!r}: give 'init', 'list', 'build' or a lesson number such as 3"
        )
    if args.folder is not None and which != "init":
        raise ConfigError(
            f"lesson {which} {args.folder}: only `lesson init` takes a folder; the lessons "
            "are found in your copy (COLLSIM_LESSONS, or the folder you run in)"
        )
    number_flags = [
        flag
        for flag, given in (
            ("--exercise", args.exercise is not None),
            ("--notebook", args.notebook),
        )
        if given
    ]
    if number_flags and not which.isdigit():
        raise ConfigError(f"lesson {which} {number_flags[0]}: give a lesson number, such as 4")
    if len(number_flags) == 2:
        raise ConfigError(
            f"--exercise {args.exercise} with --notebook: a notebook holds the whole lesson; "
            "run the cells up to that exercise in Jupyter, or drop --notebook"
        )
    lang = language_of(args)
    if which == "init":
        return _init(args, lang)
    if which == "build":
        return _build_all(args, lang)
    lessons = lessons_for(args, lang)
    if which == "list":
        return _list(lessons, lang)
    number = int(which)
    if number not in lessons.files:
        raise ConfigError(_no_such_lesson(args.which, number, lessons))
    path = lessons.files[number]
    if lessons.student is None and lang != "en":
        path = _build(path, lang)
    if args.notebook:
        return _notebook(path, lessons, lang)
    stop = stop_at(_read(path), number, args.exercise) if args.exercise is not None else None
    whose = WHOSE[lang][0 if lessons.student else 1]
    print(RUNS[lang].format(path=_shown(path), whose=whose) + "\n")
    with _reveal_set(args.reveal):
        return run_lesson(path, lang, pause=not args.no_pause, stop=stop, shown=_shown(path))


@contextlib.contextmanager
def _reveal_set(reveal):
    """COLLSIM_REVEAL=1 while a lesson runs with --reveal: a wrong answer shows the right one
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


def _shown(path):
    """``path`` relative to the working folder when it is inside it."""
    here, full = Path.cwd().resolve(), Path(path).resolve()
    return str(full.relative_to(here)) if full.is_relative_to(here) else str(full)


def _init(args, lang):
    if args.folder is not None and not str(args.folder).strip():
        raise ConfigError(
            f"lesson init {args.folder!r}: give a folder's name (without one: ./{DEFAULT_FOLDER})"
        )
    folder = Path(args.folder if args.folder is not None else DEFAULT_FOLDER).expanduser()
    copied = init_folder(folder, lang, source=lessons_dir(args.dir) if args.dir else None)
    kept = INIT_KEPT[lang].format(count=len(copied.kept)) if copied.kept else ""
    here = Path.cwd().resolve()
    inside = here == folder.resolve() or here == folder.resolve().parent
    where = "" if inside else INIT_WHERE[lang].format(place=folder.resolve().parent)
    print(
        INIT_DONE[lang].format(
            written=len(copied.written), folder=lessons_in(folder, lang), kept=kept, where=where
        )
    )
    return 0


def _list(lessons, lang):
    done = passed(lessons.student) if lessons.student else set()
    rows = []
    for number, path in lessons.files.items():
        title, line = summary(path) if lessons.student else summary(path, lang)
        names = lesson_exercises(path)
        passed_here = [n for n in names if n in done]
        rows.append((number, title, line, f"{len(passed_here)}/{len(names)}", passed_here))
    lesson, exercises = HEADINGS[lang]
    width = max([display_width(lesson), *(display_width(row[1]) for row in rows)])
    print(f"{'':>2}  {ljust(lesson, width)}  {exercises}")
    for number, title, line, count, names in rows:  # padded by display width: kanji take two
        shown = f"{ljust(title, width)}  {rjust(count, display_width(exercises))}"
        print(f"{number:>2}  {shown}  {' '.join(names)}".rstrip())
        print(f"    {line}")
    missing = sorted(set(lessons.english) - set(lessons.files))
    if missing:
        print("\n" + UNTRANSLATED[lang].format(numbers=", ".join(map(str, missing))))
    print(LIST_FOOTER[lang].format(folder=lessons.folder))
    if lessons.student is None:
        print(NO_COPY[lang])
    return 0


def _notebook(path, lessons, lang):
    if lessons.student is None:
        raise ConfigError(
            "--notebook writes into your own copy of the lessons, and there is none here: "
            f"make it with `collsim lesson init{' --lang ja' if lang == 'ja' else ''}` "
            "(or set COLLSIM_LESSONS to it)"
        )
    print(NOTEBOOK_DONE[lang].format(path=_shown(write_notebook(path))))
    return 0


def _build_all(args, lang):
    if lang == "en":
        raise ConfigError(
            "lesson build --lang en: the English lessons are the sources and need no build; "
            "give --lang ja to build the Japanese ones"
        )
    english = english_dir(lessons_dir(args.dir), lang)
    for path in find_lessons(english, lang).values():
        _build(path, lang)
    return 0


def _build(english_path, lang):
    """The ``lang`` lesson of ``english_path``, built if its sources are newer."""
    built = working_copy(english_path, lang)
    if built.backup:
        print(KEPT[lang].format(lesson=built.lesson, backup=built.backup))
    elif built.rebuilt:
        print(BUILT[lang].format(lesson=built.lesson))
    return built.lesson


def _no_such_lesson(which, number, lessons):
    """What to say about a lesson number the folder does not have, with the nearest one."""
    files, folder = lessons.files, lessons.folder
    if number in lessons.english and number not in files:
        nearest = min(files, key=lambda n: (abs(n - number), n)) if files else None
        there = f"the nearest Japanese lesson is {nearest}" if nearest else "none exists yet"
        return (
            f"no Japanese lesson {which} yet in {folder}: {there} "
            f"(`collsim lesson list --lang ja`); the English one runs with "
            f"`collsim lesson {number} --lang en`"
        )
    if not files:
        return f"no lesson {which}: the folder {folder} has no NN_topic.py files"
    nearest = min(files, key=lambda n: (abs(n - number), n))
    listing = "collsim lesson list" + (" --lang ja" if folder.name == JAPANESE_FOLDER else "")
    return (
        f"no lesson {which}: the nearest is {nearest}; choose one of {sorted(files)} "
        f"(see `{listing}`)"
    )
