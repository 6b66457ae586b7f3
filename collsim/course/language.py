"""Which language the lessons, their feedback and the tour speak: English or Japanese.

The rule, first match wins:

1. ``COLLSIM_LANG=ja`` or ``COLLSIM_LANG=en`` (``en`` forces English everywhere);
2. the running lesson file sits in a folder named ``ja`` (``lessons/ja/04_ring_allreduce.py``);
3. the locale: the first of ``LC_ALL``, ``LC_MESSAGES``, ``LANG`` that is set, as POSIX
   reads them, starting with ``ja`` (``ja_JP.UTF-8``);
4. otherwise English.

Examples
--------
>>> current_language(environ={"COLLSIM_LANG": "ja"})
'ja'
>>> current_language("lessons/ja/04_ring_allreduce.py", environ={})
'ja'
>>> current_language("lessons/ja/04_ring_allreduce.py", environ={"COLLSIM_LANG": "en"})
'en'
>>> current_language(environ={"LC_ALL": "C.UTF-8", "LANG": "ja_JP.UTF-8"})  # LC_ALL wins
'en'
>>> parse_language("JA")
'ja'
"""

import difflib
import os
from pathlib import Path

from ..errors import ConfigError

__all__ = ["LANGUAGES", "current_language", "locale_language", "parse_language"]

LANGUAGES = {"en": "English", "ja": "Japanese"}
JAPANESE_FOLDER = "ja"  # lessons/ja/: the Japanese prose, and the lessons built from it


def locale_language(environ=None):
    """``"ja"`` when the locale (``LC_ALL``, else ``LC_MESSAGES``, else ``LANG``) is
    Japanese, else ``"en"``."""
    environ = os.environ if environ is None else environ
    for name in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = environ.get(name, "")
        if value:  # the first one set decides, as in POSIX
            return "ja" if value.lower().startswith("ja") else "en"
    return "en"


def current_language(lesson_path=None, environ=None):
    """``"ja"`` or ``"en"`` for the lesson at ``lesson_path`` (or no lesson: the CLI).

    ``COLLSIM_LANG`` (``ja`` or ``en``) decides first, then a lesson file whose folder is
    named ``ja``, then the locale.  Any other ``COLLSIM_LANG`` value is ignored here: the
    feedback of a running lesson must not crash on it (``collsim --lang`` refuses it).
    """
    environ = os.environ if environ is None else environ
    forced = environ.get("COLLSIM_LANG", "").strip().lower()
    if forced in LANGUAGES:
        return forced
    if lesson_path and Path(str(lesson_path)).parent.name == JAPANESE_FOLDER:
        return "ja"
    return locale_language(environ)


def parse_language(value, flag="--lang"):
    """A ``--lang`` value as ``"en"`` or ``"ja"`` (any case); anything else is refused with
    the nearest choice."""
    text = str(value).strip().lower()
    if text in LANGUAGES:
        return text
    for code, name in LANGUAGES.items():  # "japanese", "ja_JP.UTF-8", "English"
        if text == name.lower() or text.startswith(code + "_"):
            return code
    nearest = difflib.get_close_matches(text, list(LANGUAGES), n=1, cutoff=0.4)
    hint = f"; the nearest is {nearest[0]!r}" if nearest and text else ""
    raise ConfigError(
        f"{flag} {value!r}: the lessons and the tour exist in 'en' (English) and 'ja' "
        f"(Japanese){hint}"
    )
