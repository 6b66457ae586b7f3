"""Where a lesson keeps an exercise's answer: the variable, its file and its line.

A check is called as ``teach.check("4.1", ring_bytes_answer, ...)``; :func:`find_slot`
reads the calling cell's source to find the name passed (``ring_bytes_answer``) and the line
that assigns it (``ring_bytes_answer = None  # your prediction``), so that every message can
say which line to edit.
"""

import ast
import inspect
import linecache
import os
from dataclasses import dataclass
from pathlib import Path

from .language import current_language
from .messages import message

__all__ = ["AnswerSlot", "CHECKS", "caller", "find_slot"]

CHECKS = ("check", "check_array", "check_function", "check_rank")
PACKAGE = Path(__file__).resolve().parent


def caller():
    """The first frame outside this package: the lesson cell that called the check."""
    frame = inspect.currentframe()
    while frame is not None and Path(frame.f_code.co_filename).resolve().parent == PACKAGE:
        frame = frame.f_back
    return frame


@dataclass(frozen=True)
class AnswerSlot:
    """Where a lesson keeps one exercise's answer: the variable, its file and line."""

    name: str | None  # the variable passed to the check, e.g. "dx_bytes_answer"
    path: str | None  # the lesson file, or None inside a notebook
    line: int | None  # the line of ``name = None``
    hint: str = ""  # the comment on that line ("your prediction, in bytes")

    def where(self, what=None, lang="en"):
        """``lessons/07_tensor_parallel.py:123: set x_answer = ...`` (or the cell above)."""
        name = self.name or message("the_answer", lang)
        hint = f"({self.hint})" if self.hint else f"({what or message('your_answer', lang)})"
        if self.path is None or self.line is None:
            return message("where_cell", lang, name=name, hint=hint)
        path = _display_path(self.path)
        return message("where_file", lang, path=path, line=self.line, name=name, hint=hint)


def _display_path(path):
    """Relative to the working folder when the file is inside it, else absolute."""
    full, here = Path(path).resolve(), Path.cwd().resolve()
    return str(full.relative_to(here)) if full.is_relative_to(here) else str(full)


def find_slot(frame):
    """Find the answer variable passed to the check being run in ``frame``."""
    if frame is None:
        return AnswerSlot(None, None, None)
    filename, lineno = frame.f_code.co_filename, frame.f_lineno
    source = "".join(linecache.getlines(filename, frame.f_globals))
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return AnswerSlot(None, None, None)
    calls = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and getattr(n.func, "attr", getattr(n.func, "id", None)) in CHECKS
        and n.lineno <= lineno <= n.end_lineno
        and len(n.args) >= 2
    ]
    if not calls:
        return AnswerSlot(None, None, None)
    call = min(calls, key=lambda n: n.end_lineno - n.lineno)
    names = [n.id for n in ast.walk(call.args[1]) if isinstance(n, ast.Name)]
    if not names:
        return AnswerSlot(None, None, None)
    name = names[-1]  # adapt(answer) or answer: the innermost name is the slot
    slots = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign)
        and n.lineno <= call.lineno
        and any(getattr(t, "id", None) == name for t in n.targets)
    ]
    line = max((n.lineno for n in slots), default=None)
    text = linecache.getline(filename, line) if line else ""
    hint = text.split("#", 1)[1].strip() if "#" in text else ""
    notebook = "ipykernel" in filename or not os.path.isfile(filename)
    return AnswerSlot(name, None if notebook else filename, line, hint)


def lesson_language():
    """The language of the lesson that called the check (its file's folder, the env).

    In a notebook the cell has no file; Jupyter runs the kernel in the notebook's folder, so
    a lesson opened from ``lessons/ja/`` is recognised by the working folder instead.
    """
    frame = caller()
    filename = frame.f_code.co_filename if frame is not None else ""
    lesson = filename if os.path.isfile(filename) else Path.cwd() / "notebook.py"
    return current_language(lesson)
