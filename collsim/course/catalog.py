"""The lessons that ship with collsim, and what a folder of lessons holds.

The lessons are percent-format files ``NN_topic.py`` with their answers in
``solutions/NN_topic.py`` and their Japanese prose in ``ja/NN_topic.md``.  In a checkout
they are the repository's ``lessons/`` folder; an installed collsim carries the same files
as package data in ``collsim/course/lessons/`` (``setup.py`` copies them into the build),
so ``pip install collsim`` can run and copy them without the repository.

Examples
--------
>>> course_lessons().name
'lessons'
>>> sorted(find_lessons(course_lessons()))[:3]
[1, 2, 3]
>>> summary(find_lessons(course_lessons())[4])[0]
'Ring all-reduce, step by step'
"""

import importlib.resources
import re
from pathlib import Path

from ..errors import ConfigError
from .cells import exercises, numbered_cells, prose
from .translation import read_translation, translate_lesson
from .working_copy import translation_path

__all__ = [
    "course_lessons",
    "course_example",
    "find_lessons",
    "lesson_exercises",
    "lesson_text",
    "summary",
]

LESSON_FILES = "[0-9][0-9]_*.py"  # 04_ring_allreduce.py; solutions/ and ja/ sit apart


def course_lessons():
    """The folder of the lessons collsim ships: its package data, else the checkout's."""
    packaged = importlib.resources.files(__package__).joinpath("lessons")
    if packaged.is_dir():  # an installed (non-editable) collsim
        return Path(str(packaged))
    return Path(__file__).resolve().parents[2] / "lessons"  # a checkout: the one source


def course_example(name):
    """The path of ``name``, an example program a lesson runs unchanged (lesson 13 runs
    ``mpi_heat_stencil.py``): package data of an installed collsim, else the checkout's
    ``examples/``.

    >>> course_example("mpi_heat_stencil.py").name
    'mpi_heat_stencil.py'
    """
    packaged = importlib.resources.files(__package__).joinpath("examples", name)
    if packaged.is_file():  # an installed (non-editable) collsim: setup.py copied it
        return Path(str(packaged))
    path = Path(__file__).resolve().parents[2] / "examples" / name
    if not path.is_file():
        raise ConfigError(
            f"example {name!r}: this collsim does not ship it (no {path}); the lessons run "
            "mpi_heat_stencil.py"
        )
    return path


def find_lessons(folder, lang="en"):
    """``{number: path}`` of the English ``NN_topic.py`` files in ``folder``; for another
    ``lang`` only those with a translation (``ja/NN_topic.md``)."""
    found = {}
    try:
        paths = sorted(Path(folder).glob(LESSON_FILES))
    except OSError as exc:  # an unreadable folder
        raise ConfigError(f"{folder}: cannot list the lessons ({exc.strerror})") from None
    for path in paths:
        if path.is_file() and (lang == "en" or translation_path(path, lang).is_file()):
            found[int(path.name[:2])] = path
    return found


def read_lesson(path):
    """The text of the lesson file at ``path``, refused with its reason if unreadable."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not a UTF-8 text file ({exc.reason}), not a lesson") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read it ({exc.strerror})") from None


def lesson_text(path, lang="en"):
    """The text of the English lesson at ``path`` in ``lang`` (its translation applied)."""
    if lang == "en":
        return read_lesson(path)
    return translate_lesson(read_lesson(path), read_translation(translation_path(path, lang)))


def summary_of(text, fallback=""):
    """(title, one line) from the first markdown cell of a lesson's ``text``."""
    for cell in numbered_cells(text):
        if cell.kind == "markdown":
            lines = prose(cell).splitlines()
            title = re.sub(r"^\d+\.\s*", "", lines[0].lstrip("# ").strip())  # number apart
            rest = next((line.strip() for line in lines[1:] if line.strip()), "")
            return title, rest
    return fallback, ""


def summary(path, lang="en"):
    """(title, one line) of the English lesson at ``path``, in ``lang``."""
    return summary_of(lesson_text(path, lang), Path(path).stem)


def lesson_exercises(path):
    """The names of the exercises in the lesson file at ``path`` (``["4.1", "4.2", ...]``)."""
    return [exercise.name for exercise in exercises(read_lesson(path))]
