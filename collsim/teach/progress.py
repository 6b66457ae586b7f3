"""The student's progress: how many times each exercise was tried, and whether it is done.

One small JSON file: ``.collsim-progress.json`` in the student's own copy of the lessons
when the lesson runs from one (``collsim lesson init``; the file ``collsim lesson list``
reads, :mod:`collsim.course.progress`), else ``$COLLSIM_PROGRESS`` when that is set, else
``~/.collsim/progress.json``.  Its whole format::

    {"version": 1,
     "lessons": {"4": {"4.2": {"tries": 3, "wrong": 2, "solved": true, "last": "-1"}}}}

Lessons are keyed by their number and exercises by their id, both as strings; ``tries``
counts every checked answer, ``wrong`` the wrong ones, ``solved`` is true once an answer was
right, and ``last`` is the last wrong answer (``repr``, cut short; null after a right one),
so that running the lesson again without changing the answer does not count as a try.
The hint ladder of :mod:`collsim.teach` reads ``wrong``; ``collsim lesson list`` may read
``solved``.  A file that cannot be read or written is ignored (the lesson still runs; the
ladder starts over).

Examples
--------
>>> import os, tempfile
>>> os.environ["COLLSIM_PROGRESS"] = os.path.join(tempfile.mkdtemp(), "progress.json")
>>> record_try("4", "4.2", correct=False, answer=-1)
Attempts(tries=1, wrong=1, solved=False)
>>> record_try("4", "4.2", correct=False, answer=-1)  # the same answer again: not a new try
Attempts(tries=1, wrong=1, solved=False)
>>> record_try("4", "4.2", correct=True, answer=3)
Attempts(tries=2, wrong=1, solved=True)
>>> record_try("4", "4.2", correct=True, answer=3)  # solved, and run again
Attempts(tries=2, wrong=1, solved=True)
>>> attempts("4", "4.2").solved, attempts("4", "4.3").tries
(True, 0)
>>> del os.environ["COLLSIM_PROGRESS"]
"""

import json
import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Attempts", "attempts", "lesson_progress", "progress_path", "record_try"]

VERSION = 1
LAST_LIMIT = 200  # characters of the last wrong answer kept; enough to tell answers apart


@dataclass(frozen=True)
class Attempts:
    """How one exercise has gone so far."""

    tries: int = 0  # answers checked (an unchanged wrong answer counts once)
    wrong: int = 0  # of those, the wrong ones: the hint ladder's step
    solved: bool = False  # an answer was right at least once


def progress_path(where=None):
    """The progress file for a lesson run from ``where`` (its file, or the working folder):
    the student's copy's, else ``$COLLSIM_PROGRESS``, else ``~/.collsim/progress.json``."""
    from ..course.progress import PROGRESS_FILE
    from ..course.student import student_root

    here = where if where and Path(where).exists() else Path.cwd()
    folder = student_root(here)
    if folder is not None:
        return Path(folder) / PROGRESS_FILE
    chosen = os.environ.get("COLLSIM_PROGRESS", "").strip()
    return Path(chosen) if chosen else Path.home() / ".collsim" / "progress.json"


def _load(where=None):
    try:
        data = json.loads(progress_path(where).read_text(encoding="utf-8"))
    except (OSError, ValueError):  # none yet, or unreadable: start afresh
        return {"version": VERSION, "lessons": {}}
    if not isinstance(data, dict) or not isinstance(data.get("lessons"), dict):
        return {"version": VERSION, "lessons": {}}
    return data


def _save(data, where=None):
    path = progress_path(where)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(path.name + ".tmp")
        temporary.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
        temporary.replace(path)  # whole or not at all: a lesson stopped mid-write loses nothing
    except OSError:  # a read-only home: the ladder restarts next run, the lesson still runs
        pass


def _entry(data, lesson, exercise):
    lessons = data["lessons"].get(str(lesson))
    entry = lessons.get(str(exercise)) if isinstance(lessons, dict) else None
    return entry if isinstance(entry, dict) else {}


def _attempts(entry):
    def count(key):
        value = entry.get(key, 0)
        return value if isinstance(value, int) and value >= 0 else 0

    return Attempts(count("tries"), count("wrong"), entry.get("solved") is True)


def attempts(lesson, exercise, where=None):
    """The :class:`Attempts` recorded for ``exercise`` (such as "4.2") of ``lesson`` ("4")."""
    return _attempts(_entry(_load(where), lesson, exercise))


def lesson_progress(lesson, where=None):
    """``{exercise: Attempts}`` for every exercise of ``lesson`` tried so far."""
    exercises = _load(where)["lessons"].get(str(lesson))
    if not isinstance(exercises, dict):
        return {}
    return {name: _attempts(e) for name, e in exercises.items() if isinstance(e, dict)}


def record_try(lesson, exercise, correct, answer=None, where=None):
    """Count one checked answer and return the exercise's :class:`Attempts` after it.

    A wrong ``answer`` equal to the last wrong one is not counted again: running a lesson
    twice without editing the answer is not a second try.  ``where`` is the lesson's file
    (default: the working folder), which says whose progress file it is.
    """
    data = _load(where)
    entry = dict(_entry(data, lesson, exercise))
    before = _attempts(entry)
    said = repr(answer)[:LAST_LIMIT]
    if entry.get("last") == (None if correct else said) and (before.solved or not correct):
        return before  # the same answer checked again (the lesson run twice): not a new try
    entry.update(
        tries=before.tries + 1,
        wrong=before.wrong + (0 if correct else 1),
        solved=before.solved or bool(correct),
        last=None if correct else said,
    )
    lessons = data["lessons"].get(str(lesson))
    data["lessons"][str(lesson)] = {
        **(lessons if isinstance(lessons, dict) else {}),
        str(exercise): entry,
    }
    data["version"] = VERSION
    _save(data, where)
    return _attempts(entry)
