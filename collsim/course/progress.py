"""The student's progress: how often each exercise was tried and whether it passed.

The file is ``.collsim-progress.json`` in the student's own folder of lessons (made by
``collsim lesson init``; :mod:`collsim.course.student`), keyed by lesson, then exercise::

    {"4": {"4.2": {"tries": 3, "passed": true}}}

A lesson run anywhere else (the course's own copy, the tests) records nothing: progress
belongs to a student's copy.  ``collsim lesson list`` reads it to show what is done.

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


def read_progress(folder):
    """``{lesson: {exercise: {"tries": n, "passed": bool}}}`` from ``folder`` ({} if none).

    A file the student broke by hand reads as no progress rather than stopping the lesson.
    """
    path = Path(folder) / PROGRESS_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


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


def record_try(lesson, exercise, correct, folder=None):
    """Count one try at ``exercise`` of ``lesson``; a correct one marks it passed for good.

    ``folder`` is the student's copy (default: the one found from the working folder);
    without one nothing is recorded.
    """
    folder = _student_folder(folder)
    if folder is None:
        return
    progress = read_progress(folder)
    entry = progress.setdefault(str(lesson), {}).setdefault(str(exercise), {})
    if not isinstance(entry, dict):  # hand-edited into something else: start it again
        entry = progress[str(lesson)][str(exercise)] = {}
    entry["tries"] = int(entry.get("tries", 0)) + 1
    entry["passed"] = bool(entry.get("passed")) or bool(correct)
    text = json.dumps(progress, indent=1, sort_keys=True) + "\n"
    try:
        (Path(folder) / PROGRESS_FILE).write_text(text, encoding="utf-8")
    except OSError:  # a read-only folder: the lesson still runs, only the count is lost
        pass


def attempts(lesson, exercise, folder=None):
    """How many times ``exercise`` of ``lesson`` was tried in ``folder`` (default: the
    student's copy found from the working folder; 0 without one)."""
    folder = _student_folder(folder)
    if folder is None:
        return 0
    entry = read_progress(folder).get(str(lesson), {}).get(str(exercise), {})
    return int(entry.get("tries", 0)) if isinstance(entry, dict) else 0


def passed(folder):
    """The names of the exercises answered correctly at least once (``{"4.2", ...}``)."""
    return {
        name
        for lesson in read_progress(folder).values()
        if isinstance(lesson, dict)
        for name, entry in lesson.items()
        if isinstance(entry, dict) and entry.get("passed")
    }


def record_check(exercise, correct, lesson_file=None):
    """Count a check of ``exercise`` ("4.2") run from ``lesson_file`` (None in a notebook,
    whose kernel runs in the notebook's folder) when that is inside a student's copy."""
    from .student import student_root  # the student's folder is found only when recording

    where = lesson_file if lesson_file and Path(lesson_file).is_file() else Path.cwd()
    folder = student_root(where)
    if folder is not None:
        record_try(str(exercise).split(".")[0], exercise, correct, folder)
