"""A lesson file's cells and exercises, read from its percent-format text.

A lesson is a percent-format Python file: ``# %%`` starts a code cell, ``# %% [markdown]``
a prose cell (jupytext's format, which Jupyter and VS Code open as a notebook).  An
exercise is a call ``teach.check...("4.2", answer, ...)`` whose first argument names it;
:func:`exercises` finds each one and the line its statement ends on, which is where
``collsim lesson 4 --exercise 2`` stops.

Examples
--------
>>> text = ('# %% [markdown]\\n# # Hello\\n# %%\\nx = None\\n'
...         'teach.check("1.1", x,\\n    expected=2)\\n')
>>> [(c.kind, c.line) for c in numbered_cells(text)]
[('markdown', 2), ('code', 4)]
>>> exercises(text)
[Exercise(name='1.1', line=5, end=6)]
"""

import ast
import re
from dataclasses import dataclass
from typing import NamedTuple

__all__ = ["Cell", "Exercise", "cells", "exercises", "numbered_cells", "prose"]

CELL = re.compile(r"^# %%(.*)$")
CHECKS = ("check", "check_array", "check_function", "check_rank")
EXERCISE_NAME = re.compile(r"^\d+\.\d+$")  # "4.2": lesson 4, exercise 2


@dataclass(frozen=True)
class Cell:
    """One cell of a percent-format file: its kind, its text and the file line it starts on."""

    kind: str  # "markdown" or "code"
    source: str
    line: int  # 1-based line of the first line of ``source`` in the file


class Exercise(NamedTuple):
    """One exercise of a lesson: its name and the lines of the statement that checks it."""

    name: str  # "4.2"
    line: int  # 1-based first line of the check's statement
    end: int  # 1-based last line of that statement: a run of this exercise stops here


def numbered_cells(text):
    """Split percent-format text into :class:`Cell` records that remember their line."""
    out, kind, lines, start = [], None, [], 1
    for number, line in enumerate(text.splitlines(), 1):
        match = CELL.match(line)
        if match:
            if kind is not None:
                out.append(_cell(kind, lines, start))
            kind = "markdown" if "[markdown]" in match.group(1) else "code"
            lines, start = [], number + 1
        elif kind is not None:
            lines.append(line)
    if kind is not None:
        out.append(_cell(kind, lines, start))
    return [c for c in out if c.source.strip()]


def _cell(kind, lines, start):
    skipped = next((i for i, line in enumerate(lines) if line), 0)  # empty lines strip() drops
    return Cell(kind, "\n".join(lines).strip("\n"), start + skipped)


def cells(text):
    """Split percent-format text into ``[(kind, source)]``, kind "markdown" or "code"."""
    return [(c.kind, c.source) for c in numbered_cells(text)]


def prose(cell):
    """A markdown cell's text without the ``# `` that percent format puts before each line."""
    return "\n".join(
        line[2:] if line.startswith("# ") else line.lstrip("#") for line in cell.source.splitlines()
    )


def exercises(text):
    """The lesson's exercises in file order, as :class:`Exercise` records.

    A statement is the top-level one holding the check (``ok = teach.check(...)`` counts);
    text that does not parse (a student's half-typed answer) has none to offer.
    """
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    found = []
    for statement in tree.body:
        for node in ast.walk(statement):
            name = _exercise_name(node)
            if name and name not in (e.name for e in found):
                found.append(Exercise(name, statement.lineno, statement.end_lineno))
    return found


def _exercise_name(node):
    """``"4.2"`` for a call ``teach.check("4.2", ...)`` (or ``check_function`` ...), else None."""
    if not isinstance(node, ast.Call) or not node.args:
        return None
    called = getattr(node.func, "attr", getattr(node.func, "id", None))
    first = node.args[0]
    if called in CHECKS and isinstance(first, ast.Constant) and isinstance(first.value, str):
        return first.value if EXERCISE_NAME.match(first.value) else None
    return None
