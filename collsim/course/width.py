"""How wide text is in a terminal, so tables in Japanese line up.

A kana or kanji takes two columns in a terminal (Unicode's East Asian Width "W" or "F",
``unicodedata.east_asian_width``), so ``f"{name:<12}"`` pads Japanese too little.  These
pad by display width instead; for ASCII they agree with the format spec.

Examples
--------
>>> display_width("リング"), display_width("ring")
(6, 4)
>>> ljust("リング", 8) + "|"
'リング  |'
>>> rjust("K", 3)
'  K'
"""

import unicodedata

__all__ = ["display_width", "ljust", "rjust"]


def display_width(text):
    """Columns ``text`` takes in a terminal: kana, kanji and full-width forms take two."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in str(text))


def ljust(text, width):
    """``text`` left-aligned in ``width`` terminal columns (``f"{text:<{width}}"`` for ASCII)."""
    text = str(text)
    return text + " " * max(0, width - display_width(text))


def rjust(text, width):
    """``text`` right-aligned in ``width`` terminal columns (``f"{text:>{width}}"`` for ASCII)."""
    text = str(text)
    return " " * max(0, width - display_width(text)) + text
