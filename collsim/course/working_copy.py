"""The runnable lesson in a translated language, built from the English code and the prose.

``lessons/ja/NN_topic.md`` is the translation; :func:`working_copy` assembles it with the
English ``lessons/NN_topic.py`` into ``lessons/ja/NN_topic.py`` (and the solutions into
``lessons/ja/solutions/``): a percent-format file that runs as a script, opens as a
notebook, and is where a student writes the answers.  The copy is rebuilt when it is
missing or older than its sources; the previous copy, which may hold the student's answers,
is kept beside it as ``NN_topic.py.bak`` when it differs from the new one.

Examples
--------
>>> from pathlib import Path
>>> translation_path(Path("lessons/04_ring_allreduce.py"), "ja").as_posix()
'lessons/ja/04_ring_allreduce.md'
"""

from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError
from .language import JAPANESE_FOLDER
from .translation import read_translation, translate_code, translate_lesson

__all__ = ["Built", "translation_path", "working_copy"]

FOLDERS = {"ja": JAPANESE_FOLDER}  # the folder of each translated language under lessons/


@dataclass(frozen=True)
class Built:
    """What :func:`working_copy` did: the lesson to run, and a copy it set aside."""

    lesson: Path
    rebuilt: bool  # False when the copy was up to date (and kept as it was)
    backup: Path | None = None  # the student's previous copy, when it was replaced


def translation_path(english_path, lang):
    """Where the ``lang`` prose of the English lesson at ``english_path`` lives."""
    english_path = Path(english_path)
    return english_path.parent / FOLDERS[lang] / f"{english_path.stem}.md"


def _read(path):
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read it ({exc})") from None


def _write(path, text):
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            f"{path}: cannot write the translated lesson there ({exc.strerror}); "
            "run it from a checkout you can write to"
        ) from None


def _newer(path, sources):
    """True when ``path`` exists and is at least as new as every one of ``sources``."""
    if not path.exists():
        return False
    return path.stat().st_mtime >= max(s.stat().st_mtime for s in sources if s.exists())


def working_copy(english_path, lang, folder=None):
    """Build (or keep) the ``lang`` lesson of ``english_path``; returns :class:`Built`.

    ``folder`` is where the lesson is written (default: beside its translation); it should
    be named after the language (``ja``), which is how a lesson run as a script or opened as
    a notebook knows to give its feedback in that language.
    """
    english_path = Path(english_path)
    source = translation_path(english_path, lang)
    solutions = english_path.parent / "solutions" / english_path.name
    sources = [english_path, source, solutions]
    lesson = (Path(folder) if folder else source.parent) / english_path.name
    solved = lesson.parent / "solutions" / english_path.name
    if _newer(lesson, sources) and _newer(solved, sources):
        return Built(lesson, rebuilt=False)
    translation = read_translation(source)
    text = translate_lesson(_read(english_path), translation)
    backup = None
    if lesson.exists() and _read(lesson) != text:
        backup = lesson.with_suffix(".py.bak")
        _write(backup, _read(lesson))
    _write(lesson, text)
    if solutions.exists():
        _write(solved, translate_code(_read(solutions), translation.strings))
    return Built(lesson, rebuilt=True, backup=backup)
