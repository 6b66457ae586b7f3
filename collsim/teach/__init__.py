"""Exercise checks for the lessons: "predict, then check", with feedback that teaches.

A lesson gives every exercise its own answer slot (``dx_bytes_answer = None``) and calls a
check here with it.  An answer left as ``None`` prints the file and line to edit.  A wrong
answer says how it is wrong: a recognisable factor off (2x, 1/K, (K-1)/K, a unit prefix),
which array elements differ, which rank it named and why that is not the one.  Every
number is printed with its unit (``collsim.units``).  The feedback is in Japanese when the
lesson runs in Japanese (:func:`collsim.teach.language.current_language`: ``COLLSIM_LANG``,
a lesson under ``lessons/ja/``, a ``ja`` locale) and in English otherwise.  With
``COLLSIM_SOLUTIONS=1`` an unanswered exercise takes the value of the same name from
``lessons/solutions/`` (the module with the lesson's file name) and a wrong result raises,
which is how the tests run every lesson.

Examples
--------
>>> check("demo", 112, expected=112, unit="GPUs")
Correct! demo: 112 GPUs
True
>>> check("demo", 224, expected=112, unit="GPUs")  # doctest: +NORMALIZE_WHITESPACE
Not yet. demo: you said 224 GPUs, the answer is 112 GPUs: 2x the answer.
Did you count something twice (both phases, both directions, send and receive)?
False
"""

import ast
import importlib.util
import inspect
import linecache
import math
import os
from dataclasses import dataclass
from pathlib import Path

from ..course.catalog import course_lessons
from ..course.progress import record_check
from .feedback import (
    as_number,
    describe_difference,
    distinct,
    explain_number,
    quantity,
    rank_problem,
    short,
    short_args,
    size_of,
    unit_name,
)
from .language import current_language
from .messages import message

__all__ = [
    "check",
    "check_array",
    "check_function",
    "check_rank",
    "show",
    "solutions_mode",
    "LessonCheckError",
    "AnswerSlot",
    "current_language",
]

CHECKS = ("check", "check_array", "check_function", "check_rank")


class LessonCheckError(AssertionError):
    """A check failed while running with the solutions (the lesson itself is wrong)."""


def solutions_mode():
    """True when ``COLLSIM_SOLUTIONS=1``: unanswered exercises use the solutions."""
    return os.environ.get("COLLSIM_SOLUTIONS", "") == "1"


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


def _caller():
    """The first frame outside this module: the lesson cell that called the check."""
    frame = inspect.currentframe()
    while frame is not None and frame.f_code.co_filename == __file__:
        frame = frame.f_back
    return frame


def _slot(frame):
    """Find the answer variable passed to the check being run in ``frame``."""
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


def _language():
    """The language of the lesson that called the check (its file's folder, the env).

    In a notebook the cell has no file; Jupyter runs the kernel in the notebook's folder, so
    a lesson opened from ``lessons/ja/`` is recognised by the working folder instead.
    """
    frame = _caller()
    filename = frame.f_code.co_filename if frame is not None else ""
    lesson = filename if os.path.isfile(filename) else Path.cwd() / "notebook.py"
    return current_language(lesson)


def _solution(slot, exercise, lang):
    """The value named ``slot.name`` in ``solutions/<lesson>.py`` next to the lesson (or in
    collsim's own lessons, for a student's copy)."""
    if slot.path is None or slot.name is None:
        raise LessonCheckError(message("no_slot", lang, exercise=exercise))
    path = Path(slot.path).resolve().parent / "solutions" / Path(slot.path).name
    if not path.exists():  # a student's copy holds no answers: the course's own solutions
        path = course_lessons() / "solutions" / Path(slot.path).name
    if not path.exists():
        raise LessonCheckError(message("no_solutions_file", lang, path=path, exercise=exercise))
    spec = importlib.util.spec_from_file_location(f"_solutions_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not hasattr(module, slot.name):
        raise LessonCheckError(
            message("no_solution_value", lang, file=path.name, name=slot.name, exercise=exercise)
        )
    return getattr(module, slot.name)


def _resolve(exercise, answer, what, lang, adapt=None):
    """``(answer, filled)``; ``None`` when unanswered outside solutions mode."""
    if answer is not None:
        return (adapt(answer) if adapt else answer), False
    slot = _slot(_caller())
    if solutions_mode():
        value = _solution(slot, exercise, lang)
        return (adapt(value) if adapt else value), True
    if slot.name is None:
        print(message("replace_none", lang, exercise=exercise, what=what))
    else:
        print(message("edit_slot", lang, exercise=exercise, where=slot.where(what, lang)))
    return None, False


def _record(exercise, correct):
    """Count the try in the student's progress (in their own copy only, never the solutions'),
    so that `collsim lesson list` shows what is done."""
    if not solutions_mode():
        frame = _caller()
        record_check(exercise, correct, frame.f_code.co_filename if frame else None)


def _fail(exercise, text, lang):
    text = message("not_yet", lang, exercise=exercise, message=text)
    print(text)
    _record(exercise, False)
    if solutions_mode():
        raise LessonCheckError(text)
    return False


def _correct(exercise, detail, lang):
    print(message("correct", lang, exercise=exercise, detail=detail))
    _record(exercise, True)
    return True


def check(exercise, answer, expected, rel=1e-6, unit="", ranks=None):
    """Compare a predicted number with what collsim computed (relative tolerance ``rel``).

    ``unit`` ("B", "s", "B/s", "x", "GPUs", ...) formats both numbers (bytes in binary
    units, rates in GB/s, times in s/ms/us/ns); a string answer such as ``"14MiB"`` or
    ``"2ms"`` is read in that unit.  ``ranks`` is the K of the exercise, so a K-fold,
    1/K, (K-1)/K or 2(K-1)/K mistake is named.  Returns True when correct, False when
    wrong, None when unanswered.
    """
    lang = _language()
    what = message("what_number", lang, unit=unit_name(unit, lang))
    answer, _ = _resolve(exercise, answer, what, lang)
    if answer is None:
        return None
    value, problem = as_number(answer, unit, lang)
    if problem:
        return _fail(exercise, problem, lang)
    if math.isclose(value, float(expected), rel_tol=rel, abs_tol=1e-300):
        return _correct(exercise, quantity(expected, unit), lang)
    said, want = distinct(value, expected, unit)
    how = explain_number(value, expected, rel=rel, ranks=ranks, lang=lang)
    return _fail(exercise, message("said_answer", lang, said=said, want=want, how=how), lang)


def check_array(exercise, answer, expected, rtol=0.0, atol=0.0, unit=""):
    """Compare an array answer element by element; a wrong one says which shape or which
    elements differ (how many, the first few with both values, the largest difference)."""
    lang = _language()
    answer, _ = _resolve(exercise, answer, message("what_array", lang), lang)
    if answer is None:
        return None
    difference = describe_difference(answer, expected, rtol, atol, unit, lang)
    if difference:
        return _fail(exercise, difference, lang)
    return _correct(exercise, message("all_elements_agree", lang, count=size_of(expected)), lang)


def check_function(exercise, function, reference, cases, compare=None, unit="", adapt=None):
    """Run a student's ``function`` and the ``reference`` on every case (a tuple of
    arguments) and report the first case where they differ, and how.

    ``compare(got, want)`` decides equality (default: exact, element by element, so lists
    of arrays work).  ``adapt`` turns the answer into what the cases call, e.g. a rank
    program into a function that runs it on a cluster; it also wraps the solution.
    """
    lang = _language()
    function, _ = _resolve(exercise, function, message("what_function", lang), lang, adapt)
    if function is None:
        return None
    for i, args in enumerate(cases):
        want = reference(*args)
        try:
            got = function(*args)
        except Exception as exc:  # the student's code: report, don't crash the lesson
            raised = message(
                "case_raised",
                lang,
                case=i + 1,
                args=short_args(args),
                error=type(exc).__name__,
                text=exc,
            )
            return _fail(exercise, raised, lang)
        differs = describe_difference(got, want, unit=unit, lang=lang)
        same = compare(got, want) if compare else not differs
        if not same:
            how = differs or message("got_expected", lang, got=short(got), want=short(want))
            return _fail(
                exercise,
                message("case_differs", lang, case=i + 1, args=short_args(args), how=how),
                lang,
            )
    return _correct(exercise, message("all_cases_agree", lang, count=len(cases)), lang)


def check_rank(exercise, answer, expected, ranks, why, about=None):
    """Check a rank number.  ``why`` says what makes ``expected`` the answer; ``about``
    maps ranks to what each one was doing, so a wrong rank is told why it is not it.

    >>> check_rank("demo", 1, expected=3, ranks=4, why="it never joined",
    ...            about={1: "it waits in all_reduce #2"})  # doctest: +NORMALIZE_WHITESPACE
    Not yet. demo: you named rank 1, but it waits in all_reduce #2.
    The answer is rank 3: it never joined.
    False
    """
    lang = _language()
    answer, _ = _resolve(exercise, answer, message("what_rank", lang, last=ranks - 1), lang)
    if answer is None:
        return None
    problem = rank_problem(answer, ranks, lang)
    if problem:
        return _fail(exercise, problem, lang)
    if int(answer) == int(expected):
        return _correct(exercise, message("rank_is", lang, rank=int(expected), why=why), lang)
    state = (about or {}).get(int(answer))
    said = (
        message("named_rank_state", lang, rank=int(answer), state=state)
        if state
        else message("named_rank", lang, rank=int(answer))
    )
    return _fail(
        exercise, message("rank_wrong", lang, said=said, rank=int(expected), why=why), lang
    )


def show(fig, name):
    """Display a figure in a notebook; in a script, save it as PNG and print the path.

    Pictures go to ``$COLLSIM_LESSON_OUT`` (default ``./collsim-lesson-pictures``).
    """
    if _in_kernel():
        # as PNG bytes, not display(fig): a Figure shows as an image only under the inline
        # backend, and MPLBACKEND=Agg (set by `collsim lesson`, CI, a terminal) turns it
        # into the text "<Figure size 1020x850 with 2 Axes>"; this needs no setup cell
        import io

        from IPython.display import Image, display

        png = io.BytesIO()
        fig.savefig(png, format="png", dpi=100)
        _close(fig)
        display(Image(data=png.getvalue(), format="png"))
        return None
    folder = Path(os.environ.get("COLLSIM_LESSON_OUT", "collsim-lesson-pictures"))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    fig.savefig(path, dpi=100)
    _close(fig)
    print(message("picture_saved", _language(), path=path))
    return path


def _in_kernel():
    """True inside a Jupyter kernel (IPython's kernel app), where a picture is displayed."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and "IPKernelApp" in shell.config


def _close(fig):
    import matplotlib.pyplot as plt

    plt.close(fig)
