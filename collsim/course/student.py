"""The student's own copy of the lessons: made once, found again from where they work.

``collsim lesson init [DIR]`` copies the lessons into ``DIR`` (``./collsim-lessons`` by
default) and leaves a marker file there, ``.collsim-lessons``; the student writes answers
in that copy, never in collsim's own files, so updating collsim cannot touch them.  Later
commands find the copy through ``COLLSIM_LESSONS`` (a path), else a marker in the working
folder or one above it, else ``./collsim-lessons``.

Examples
--------
>>> import tempfile
>>> home = Path(tempfile.mkdtemp())
>>> made = init_folder(home / "collsim-lessons")
>>> len(made.written), made.kept
(15, [])
>>> find_student_folder(cwd=home, environ={}) == home / "collsim-lessons"
True
>>> init_folder(home / "collsim-lessons").kept[0].name  # the student's work stays
'01_why_not_one_device.py'
"""

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ConfigError
from .catalog import course_lessons, find_lessons, lesson_text
from .language import JAPANESE_FOLDER

__all__ = ["DEFAULT_FOLDER", "MARKER", "Copied", "find_student_folder", "init_folder"]

MARKER = ".collsim-lessons"  # JSON: the copy's format and its languages
DEFAULT_FOLDER = "collsim-lessons"
ENVIRONMENT = "COLLSIM_LESSONS"


@dataclass(frozen=True)
class Copied:
    """What :func:`init_folder` did: the folder, the files it wrote and those it kept."""

    folder: Path
    written: list[Path] = field(default_factory=list)
    kept: list[Path] = field(default_factory=list)  # already there: the student's work


def lessons_in(folder, lang):
    """Where the ``lang`` lessons of a student's ``folder`` are (``ja`` has its own folder)."""
    return Path(folder) if lang == "en" else Path(folder) / JAPANESE_FOLDER


def _refuse_foreign(folder):
    """A folder that exists but is not a lesson copy is someone's files: never write there."""
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"lesson init {folder}: is a file; give a new folder's name")
    if folder.is_dir() and not (folder / MARKER).exists() and any(folder.iterdir()):
        raise ConfigError(
            f"lesson init {folder}: the folder is not empty and holds no lessons copy "
            f"({MARKER} is missing); give a new folder, such as {folder / DEFAULT_FOLDER}"
        )


def init_folder(folder, lang="en", source=None):
    """Copy the ``lang`` lessons into ``folder``; a file already there is kept as it is.

    Returns :class:`Copied`.  ``source`` is the folder of English lessons to copy from
    (default: the ones collsim ships); Japanese lessons are built from it and its ``ja/``.
    """
    folder = Path(folder)
    try:
        _refuse_foreign(folder)
    except (OSError, ValueError) as exc:  # a name too long, a NUL byte, a folder we cannot read
        raise ConfigError(f"lesson init {folder}: not a usable folder ({exc})") from None
    source = Path(source) if source else course_lessons()
    lessons = find_lessons(source, lang)
    if not lessons:
        raise ConfigError(f"lesson init: no {lang} lessons found in {source}")
    target = lessons_in(folder, lang)
    copied = Copied(folder)
    try:
        target.mkdir(parents=True, exist_ok=True)
        for path in lessons.values():
            destination = target / path.name
            if destination.exists():
                copied.kept.append(destination)
                continue
            destination.write_text(lesson_text(path, lang), encoding="utf-8")
            copied.written.append(destination)
        _write_marker(folder, lang)
    except OSError as exc:
        raise ConfigError(f"lesson init {folder}: cannot write there ({exc.strerror})") from None
    return copied


def _write_marker(folder, lang):
    marker = folder / MARKER
    languages = set(read_marker(folder).get("languages", [])) | {lang}
    text = json.dumps({"format": 1, "languages": sorted(languages)}, indent=1)
    marker.write_text(text + "\n", encoding="utf-8")


def read_marker(folder):
    """The marker's record (``{"format": 1, "languages": ["en"]}``), {} if unreadable."""
    try:
        data = json.loads((Path(folder) / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def find_student_folder(cwd=None, environ=None):
    """The student's copy: ``COLLSIM_LESSONS``, a marker here or above, ``./collsim-lessons``.

    Returns None when there is none.  ``COLLSIM_LESSONS`` naming a folder without a marker
    is refused, so a typo is not silently replaced by collsim's own copy.
    """
    environ = os.environ if environ is None else environ
    cwd = Path.cwd() if cwd is None else Path(cwd)
    named = environ.get(ENVIRONMENT, "").strip()
    if named:
        folder = cwd / Path(named).expanduser()
        if not (folder / MARKER).is_file():
            raise ConfigError(
                f"{ENVIRONMENT}={named}: no lessons copy there ({MARKER} is missing); make one "
                f"with `collsim lesson init {named}` or unset {ENVIRONMENT}"
            )
        return folder
    return student_root(cwd) or (
        cwd / DEFAULT_FOLDER if (cwd / DEFAULT_FOLDER / MARKER).is_file() else None
    )


def student_root(path):
    """The student's folder holding ``path`` (a lesson file or a folder), or None."""
    path = Path(path).resolve()
    for folder in [path, *path.parents]:
        if (folder / MARKER).is_file():
            return folder
    return None
