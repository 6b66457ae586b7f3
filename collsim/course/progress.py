"""The student's progress: how often each exercise was tried and whether it was solved.

The file is ``.collsim-progress.json`` in the student's own folder of lessons (made by
``collsim lesson init``; :mod:`collsim.course.student`), keyed by lesson, then exercise, in
the same layout as the hint ladder's progress file (``collsim.teach``)::

    {"version": 1, "lessons": {"4": {"4.2": {"tries": 3, "wrong": 2, "solved": true}}}}

A lesson run anywhere else (the course's own copy, the tests) records nothing here: this
is the progress of a student's copy.  ``collsim lesson list`` reads it to show what is done.

Examples
--------
>>> import tempfile
>>> folder = Path(tempfile.mkdtemp())
>>> record_try(4, "4.2", correct=False, folder=folder)
>>> record_try(4, "4.2", correct=True, folder=folder)
>>> attempts(4, "4.2", folder=folder), passed(folder)
(2, {'4.2'})
"""

import json
from pathlib import Path

__all__ = ["PROGRESS_FILE", "attempts", "passed", "read_progress", "record_check", "record_try"]

PROGRESS_FILE = ".collsim-progress.json"
VERSION = 1


def read_progress(folder):
    """``{lesson: {exercise: {"tries": n, "wrong": n, "solved": bool}}}`` from ``folder``.

    A missing file, or one the student broke by hand, reads as no progress ({}) rather than
    stopping the lesson.
    """
    path = Path(folder) / PROGRESS_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    lessons = data.get("lessons") if isinstance(data, dict) else None
    return lessons if isinstance(lessons, dict) else {}


def _student_folder(folder):
    """``folder``, else the student's copy found from the working folder (None if none)."""
    if folder is not None:
        return folder
    from ..errors import ConfigError
    from .student import find_student_folder

    try:
        return find_student_folder()
    except ConfigError:  # a COLLSIM_LESSONS typo is reported by the command, not here
        return None


def _entry(lessons, lesson, exercise):
    """The record of ``exercise`` in ``lessons`` (made empty if missing or malformed)."""
    exercises = lessons.get(str(lesson))
    if not isinstance(exercises, dict):
        exercises = lessons[str(lesson)] = {}
    entry = exercises.get(str(exercise))
    if not isinstance(entry, dict):
        entry = exercises[str(exercise)] = {}
    return entry


def record_try(lesson, exercise, correct, folder=None):
    """Count one try at ``exercise`` of ``lesson``; a correct one marks it solved for good.

    ``folder`` is the student's copy (default: the one found from the working folder);
    without one nothing is recorded.
    """
    folder = _student_folder(folder)
    if folder is None:
        return
    lessons = read_progress(folder)
    entry = _entry(lessons, lesson, exercise)
    entry["tries"] = int(entry.get("tries", 0)) + 1
    entry["wrong"] = int(entry.get("wrong", 0)) + (not correct)
    entry["solved"] = bool(entry.get("solved")) or bool(correct)
    text = json.dumps({"version": VERSION, "lessons": lessons}, indent=1, sort_keys=True)
    try:
        (Path(folder) / PROGRESS_FILE).write_text(text + "\n", encoding="utf-8")
    except OSError:  # a read-only folder: the lesson still runs, only the count is lost
        pass


def attempts(lesson, exercise, folder=None):
    """How many times ``exercise`` of ``lesson`` was tried in ``folder`` (default: the
    student's copy found from the working folder; 0 without one)."""
    folder = _student_folder(folder)
    if folder is None:
        return 0
    entry = read_progress(folder).get(str(lesson), {})
    entry = entry.get(str(exercise), {}) if isinstance(entry, dict) else {}
    return int(entry.get("tries", 0)) if isinstance(entry, dict) else 0


def passed(folder):
    """The names of the exercises answered correctly at least once (``{"4.2", ...}``)."""
    return {
        name
        for lesson in read_progress(folder).values()
        if isinstance(lesson, dict)
        for name, entry in lesson.items()
        if isinstance(entry, dict) and entry.get("solved")
    }


def record_check(exercise, correct, lesson_file=None):
    """Count a check of ``exercise`` ("4.2") run from ``lesson_file`` (None in a notebook,
    whose kernel runs in the notebook's folder) when that is inside a student's copy."""
    from .student import student_root  # the student's folder is found only when recording

    where = lesson_file if lesson_file and Path(lesson_file).is_file() else Path.cwd()
    folder = student_root(where)
    if folder is not None:
        record_try(str(exercise).split(".")[0], exercise, correct, folder)
