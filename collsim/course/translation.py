"""A lesson's translation: its prose in another language, applied to the one English code.

A lesson exists once, as the English percent-format file ``lessons/NN_topic.py``.  Its
Japanese version is only prose: ``lessons/ja/NN_topic.md`` holds one section per markdown
cell of the English file, in order, and a table of the code's strings and comments with
their translations (what a code cell prints, a picture's title, a comment).  This module
assembles the Japanese lesson from the two, so the code of both languages is the same by
construction: only markdown cells, string literals and comments are swapped.

The translation file reads as markdown::

    <!-- cell 1 -->
    # 4. リング all-reduce を 1 ステップずつ
    ...
    <!-- cell 2 -->
    ...
    <!-- strings -->
    ```diff
    - "each rank sends"
    + "各ランクが送るバイト数"
    - # the busiest link
    + # いちばん混むリンク
    ```

A markdown cell's lines are stored without the ``# `` that percent format puts in front of
them; a string or comment is written as it is in the source, quotes included.  A string
over several lines, or a comment written over several lines (one entry), continues on lines
indented by two spaces; a translated comment may take more or fewer lines than the English.

Examples
--------
>>> english = '# %% [markdown]\\n# # Hello\\n\\n# %%\\nprint("hi")  # greet\\n'
>>> text = ('<!-- cell 1 -->\\n# こんにちは\\n<!-- strings -->\\n```diff\\n'
...         '- "hi"\\n+ "やあ"\\n- # greet\\n+ # あいさつ\\n```\\n')
>>> print(translate_lesson(english, parse_translation(text)), end="")
# %% [markdown]
# # こんにちは
<BLANKLINE>
# %%
print("やあ")  # あいさつ
"""

import io
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from ..errors import ConfigError

__all__ = [
    "Translation",
    "parse_translation",
    "format_translation",
    "read_translation",
    "translate_lesson",
    "translate_code",
    "unused_strings",
]

CELL_MARKER = re.compile(r"^# %%(.*)$")  # a percent-format cell starts here
SECTION = re.compile(r"^<!-- cell (\d+) -->$")
STRINGS = "<!-- strings -->"


@dataclass(frozen=True)
class Translation:
    """A lesson's prose and code strings in one language.

    ``prose`` holds one entry per markdown cell of the English lesson, in order, each the
    cell's lines without percent format's ``# ``; ``strings`` maps a string literal or
    comment of the English code, exactly as written, to its translation.
    """

    prose: tuple[str, ...]
    strings: dict[str, str]
    source: str = "<translation>"  # the file it came from, for error messages


def parse_translation(text, source="<translation>"):
    """Read a translation file's text (see the module docstring for its form)."""
    prose, pairs, body, entry, in_strings = [], [], None, None, False
    for number, line in enumerate(text.splitlines(), 1):
        section = SECTION.match(line)
        if section or line == STRINGS:
            if body is not None:
                prose.append("\n".join(body).rstrip("\n"))
            if section and (in_strings or int(section.group(1)) != len(prose) + 1):
                raise ConfigError(
                    f"{source}:{number}: {line!r} is out of order: the cells are numbered "
                    f"1, 2, ... before {STRINGS}; expected <!-- cell {len(prose) + 1} -->"
                )
            body, in_strings = ([] if section else None), not section
        elif body is not None:
            body.append(line)
        elif in_strings and line[:2] in ("- ", "+ "):
            entry = [line[2:]]
            pairs.append(_Entry(line[0], entry, number))
        elif in_strings and entry is not None and (line.startswith("  ") or not line):
            entry.append(line[2:])  # a line of a multi-line string or comment block
        elif line.startswith("```"):  # the fence around the table, for the eye
            entry = None
        elif line.strip():
            raise ConfigError(
                f"{source}:{number}: {line[:60]!r} is outside any section: start the prose "
                f"with <!-- cell N -->, a string pair with '- ' and '+ ' after {STRINGS}"
            )
    if body is not None:
        prose.append("\n".join(body).rstrip("\n"))
    return Translation(tuple(prose), _string_table(pairs, source), source)


class _Entry(NamedTuple):
    """One ``-`` (English) or ``+`` (translated) entry of the string table."""

    sign: str
    lines: list  # the entry's lines; a multi-line string or comment block has several
    line: int  # where it starts in the file


def _string_table(entries, source):
    """``{english: translation}`` from the entries, an English one followed by its own."""
    strings = {}
    for index in range(0, len(entries), 2):
        english, following = entries[index], entries[index + 1 : index + 2]
        if english.sign != "-" or not following or following[0].sign != "+":
            raise ConfigError(
                f"{source}:{english.line}: the strings come in pairs, an English '- ' line "
                "and then its '+ ' translation"
            )
        key = "\n".join(english.lines).rstrip("\n")
        strings[key] = "\n".join(following[0].lines).rstrip("\n")
    return strings


def format_translation(translation):
    """The text of a translation file; :func:`parse_translation` reads it back."""
    out = []
    for number, prose in enumerate(translation.prose, 1):
        out += [f"<!-- cell {number} -->", prose, ""]
    if translation.strings:
        out += [STRINGS, "```diff"]
        for english, translated in translation.strings.items():
            for sign, text in (("-", english), ("+", translated)):
                first, *rest = text.split("\n")
                out += [f"{sign} {first}"] + [f"  {line}" if line else "" for line in rest]
        out += ["```"]
    return "\n".join(out) + "\n"


def read_translation(path):
    """:func:`parse_translation` of the file at ``path``."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the translation ({exc})") from None
    return parse_translation(text, str(path))


@dataclass(frozen=True)
class _Unit:
    """A string literal, or a run of comments on consecutive lines at one column, that a
    translation may replace: its key (the text, lines joined by newlines) and place."""

    key: str
    start: tuple[int, int]  # (1-based row, column) of its first character
    end: tuple[int, int]  # (row, column) just after its last one
    comment: bool


def _units(text):
    """The translatable units of Python source, in order."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError) as exc:
        raise ConfigError(f"the lesson's code does not tokenize ({exc})") from None
    units, alone = [], set()  # alone: rows whose only token is a comment
    for before, token in zip([None, *tokens], tokens):
        if token.type == tokenize.COMMENT and (
            before is None or before.end[0] < token.start[0] or before.type == tokenize.NL
        ):
            alone.add(token.start[0])
    for token in tokens:
        if token.type == tokenize.STRING:
            units.append(_Unit(token.string, token.start, token.end, False))
        elif token.type == tokenize.COMMENT:
            last = units[-1] if units else None
            joins = (
                last is not None
                and last.comment
                and token.start[0] in alone
                and last.end[0] == token.start[0] - 1
                and last.end[0] in alone
                and last.start[1] == token.start[1]
            )
            if joins:  # one comment written over several lines is translated as one
                units[-1] = _Unit(f"{last.key}\n{token.string}", last.start, token.end, True)
            else:
                units.append(_Unit(token.string, token.start, token.end, True))
    return units


def _offset(line_starts, position):
    row, column = position
    return line_starts[row - 1] + column


def _apply(text, edits):
    """``text`` with each ``(start, end, new)`` (positions as tokenize gives them) replaced."""
    line_starts = [0]
    for line in text.splitlines(keepends=True):
        line_starts.append(line_starts[-1] + len(line))
    spans = sorted(
        ((_offset(line_starts, a), _offset(line_starts, b), new) for a, b, new in edits),
        reverse=True,
    )
    for start, end, new in spans:
        text = text[:start] + new + text[end:]
    return text


def _code_edits(text, strings, skip_rows=frozenset()):
    edits = []
    for unit in _units(text):
        if unit.start[0] in skip_rows or unit.key not in strings:
            continue
        new = strings[unit.key]
        if unit.comment:  # a comment block's later lines start at its column
            new = new.replace("\n", "\n" + " " * unit.start[1])
        edits.append((unit.start, unit.end, new))
    return edits


def translate_code(text, strings):
    """``text`` with each string literal and comment found in ``strings`` replaced.

    >>> translate_code('x = "a"  # b\\n', {'"a"': '"あ"'})
    'x = "あ"  # b\\n'
    """
    return _apply(text, _code_edits(text, strings))


def _markdown_cells(lines):
    """``[(first body line, end)]`` (0-based, end exclusive, trailing blank lines left out)
    of every markdown cell in percent-format ``lines``."""
    starts = [i for i, line in enumerate(lines) if CELL_MARKER.match(line)] + [len(lines)]
    out = []
    for start, stop in zip(starts, starts[1:]):
        if "[markdown]" in CELL_MARKER.match(lines[start]).group(1):
            end = stop
            while end > start + 1 and not lines[end - 1].strip():
                end -= 1
            out.append((start + 1, end))
    return out


def translate_lesson(english, translation):
    """The lesson ``english`` (percent-format text) in the language of ``translation``.

    The translation must have one prose section per markdown cell; a string or comment it
    does not list stays as it is in English.
    """
    markdown = _markdown_cells(english.splitlines(keepends=True))
    if len(markdown) != len(translation.prose):
        raise ConfigError(
            f"{translation.source}: {len(translation.prose)} prose sections for "
            f"{len(markdown)} markdown cells: translate every markdown cell of the English "
            "lesson, one <!-- cell N --> section each, in order"
        )
    prose_rows = {row + 1 for start, end in markdown for row in range(start, end)}
    edits = _code_edits(english, translation.strings, prose_rows)
    for (start, end), prose in zip(markdown, translation.prose):
        lines = [f"# {line}" if line else "#" for line in prose.split("\n")]
        edits.append(((start + 1, 0), (end + 1, 0), "\n".join(lines) + "\n"))
    return _apply(english, edits)


def unused_strings(english_texts, translation):
    """The entries of ``translation.strings`` that no string or comment of the English
    texts (the lesson and its solutions) has: left behind when the English changed."""
    present = {unit.key for text in english_texts for unit in _units(text)}
    return sorted(set(translation.strings) - present)
