"""Which language the lessons speak: moved to :mod:`collsim.course.language` (the lesson
files' layer, which loads without numpy); re-exported here for the checks and the tour."""

from ..course.language import (  # noqa: F401
    JAPANESE_FOLDER,
    LANGUAGES,
    current_language,
    locale_language,
    parse_language,
)

__all__ = ["LANGUAGES", "current_language", "locale_language", "parse_language"]
