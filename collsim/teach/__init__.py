"""Exercise checks for the lessons: "predict, then check", with feedback that teaches.

A lesson gives every exercise its own answer slot (``dx_bytes_answer = None``) and calls a
check here with it.  An answer left as ``None`` prints the file and line to edit.  A wrong
answer says how it is wrong: a recognisable factor off (2x, 1/K, (K-1)/K, a unit prefix),
which array elements differ, which rank it named and why that is not the one.  Every
number is printed with its unit (``collsim.units``).  With ``COLLSIM_SOLUTIONS=1`` an
unanswered exercise takes the value of the same name from ``lessons/solutions/`` (the
module with the lesson's file name) and a wrong result raises, which is how the tests run
every lesson.

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

__all__ = [
    "check",
    "check_array",
    "check_function",
    "check_rank",
    "show",
    "solutions_mode",
    "LessonCheckError",
    "AnswerSlot",
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

    def where(self, what="your answer"):
        """``lessons/07_tensor_parallel.py:123: set x_answer = ...`` (or the cell above)."""
        name = self.name or "the answer"
        hint = f"({self.hint})" if self.hint else f"({what})"
        if self.path is None or self.line is None:
            return f"in the cell above, set {name} = ... {hint}"
        return f"{_display_path(self.path)}:{self.line}: set {name} = ... {hint}"


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
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
             and getattr(n.func, "attr", getattr(n.func, "id", None)) in CHECKS
             and n.lineno <= lineno <= n.end_lineno and len(n.args) >= 2]  # fmt: skip
    if not calls:
        return AnswerSlot(None, None, None)
    call = min(calls, key=lambda n: n.end_lineno - n.lineno)
    names = [n.id for n in ast.walk(call.args[1]) if isinstance(n, ast.Name)]
    if not names:
        return AnswerSlot(None, None, None)
    name = names[-1]  # adapt(answer) or answer: the innermost name is the slot
    slots = [n for n in ast.walk(tree) if isinstance(n, ast.Assign) and n.lineno <= call.lineno
             and any(getattr(t, "id", None) == name for t in n.targets)]  # fmt: skip
    line = max((n.lineno for n in slots), default=None)
    text = linecache.getline(filename, line) if line else ""
    hint = text.split("#", 1)[1].strip() if "#" in text else ""
    notebook = "ipykernel" in filename or not os.path.isfile(filename)
    return AnswerSlot(name, None if notebook else filename, line, hint)


def _solution(slot, exercise):
    """The value named ``slot.name`` in ``solutions/<lesson>.py`` next to the lesson."""
    if slot.path is None or slot.name is None:
        raise LessonCheckError(f"exercise {exercise}: cannot tell which answer slot it checks")
    path = Path(slot.path).resolve().parent / "solutions" / Path(slot.path).name
    if not path.exists():
        raise LessonCheckError(f"no solutions file {path} for exercise {exercise}")
    spec = importlib.util.spec_from_file_location(f"_solutions_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not hasattr(module, slot.name):
        raise LessonCheckError(f"{path.name} defines no {slot.name} (exercise {exercise})")
    return getattr(module, slot.name)


def _resolve(exercise, answer, what, adapt=None):
    """``(answer, filled)``; ``None`` when unanswered outside solutions mode."""
    if answer is not None:
        return (adapt(answer) if adapt else answer), False
    slot = _slot(_caller())
    if solutions_mode():
        value = _solution(slot, exercise)
        return (adapt(value) if adapt else value), True
    if slot.name is None:
        print(f"Exercise {exercise}: replace None with {what}, then run this cell again.")
    else:
        print(f"Exercise {exercise}: {slot.where(what)}, then run this cell again.")
    return None, False


def _fail(exercise, message):
    message = f"Not yet. {exercise}: {message}"
    print(message)
    if solutions_mode():
        raise LessonCheckError(message)
    return False


def check(exercise, answer, expected, rel=1e-6, unit="", ranks=None):
    """Compare a predicted number with what collsim computed (relative tolerance ``rel``).

    ``unit`` ("B", "s", "B/s", "x", "GPUs", ...) formats both numbers (bytes in binary
    units, rates in GB/s, times in s/ms/us/ns); a string answer such as ``"14MiB"`` or
    ``"2ms"`` is read in that unit.  ``ranks`` is the K of the exercise, so a K-fold,
    1/K, (K-1)/K or 2(K-1)/K mistake is named.  Returns True when correct, False when
    wrong, None when unanswered.
    """
    answer, _ = _resolve(exercise, answer, f"your number ({unit_name(unit)})")
    if answer is None:
        return None
    value, problem = as_number(answer, unit)
    if problem:
        return _fail(exercise, problem)
    if math.isclose(value, float(expected), rel_tol=rel, abs_tol=1e-300):
        print(f"Correct! {exercise}: {quantity(expected, unit)}")
        return True
    said, want = distinct(value, expected, unit)
    how = explain_number(value, expected, rel=rel, ranks=ranks)
    return _fail(exercise, f"you said {said}, the answer is {want}: {how}")


def check_array(exercise, answer, expected, rtol=0.0, atol=0.0, unit=""):
    """Compare an array answer element by element; a wrong one says which shape or which
    elements differ (how many, the first few with both values, the largest difference)."""
    answer, _ = _resolve(exercise, answer, "your array")
    if answer is None:
        return None
    difference = describe_difference(answer, expected, rtol, atol, unit)
    if difference:
        return _fail(exercise, difference)
    print(f"Correct! {exercise}: all {size_of(expected)} elements agree")
    return True


def check_function(exercise, function, reference, cases, compare=None, unit="", adapt=None):
    """Run a student's ``function`` and the ``reference`` on every case (a tuple of
    arguments) and report the first case where they differ, and how.

    ``compare(got, want)`` decides equality (default: exact, element by element, so lists
    of arrays work).  ``adapt`` turns the answer into what the cases call, e.g. a rank
    program into a function that runs it on a cluster; it also wraps the solution.
    """
    function, _ = _resolve(exercise, function, "your function", adapt)
    if function is None:
        return None
    for i, args in enumerate(cases):
        want = reference(*args)
        try:
            got = function(*args)
        except Exception as exc:  # the student's code: report, don't crash the lesson
            return _fail(exercise, f"case {i + 1} {short_args(args)} raised "
                                   f"{type(exc).__name__}: {exc}")  # fmt: skip
        same = compare(got, want) if compare else not describe_difference(got, want, unit=unit)
        if not same:
            how = describe_difference(got, want, unit=unit) or (
                f"got {short(got)}, expected {short(want)}"
            )
            return _fail(exercise, f"case {i + 1} {short_args(args)}: {how}")
    print(f"Correct! {exercise}: all {len(cases)} cases agree with the reference")
    return True


def check_rank(exercise, answer, expected, ranks, why, about=None):
    """Check a rank number.  ``why`` says what makes ``expected`` the answer; ``about``
    maps ranks to what each one was doing, so a wrong rank is told why it is not it.

    >>> check_rank("demo", 1, expected=3, ranks=4, why="it never joined",
    ...            about={1: "it waits in all_reduce #2"})  # doctest: +NORMALIZE_WHITESPACE
    Not yet. demo: you named rank 1, but it waits in all_reduce #2.
    The answer is rank 3: it never joined.
    False
    """
    answer, _ = _resolve(exercise, answer, f"a rank number, 0 to {ranks - 1}")
    if answer is None:
        return None
    problem = rank_problem(answer, ranks)
    if problem:
        return _fail(exercise, problem)
    if int(answer) == int(expected):
        print(f"Correct! {exercise}: rank {int(expected)}: {why}")
        return True
    state = (about or {}).get(int(answer))
    said = f"you named rank {int(answer)}" + (f", but {state}" if state else "")
    return _fail(exercise, f"{said}. The answer is rank {int(expected)}: {why}.")


def show(fig, name):
    """Display a figure in a notebook; in a script, save it as PNG and print the path.

    Pictures go to ``$COLLSIM_LESSON_OUT`` (default ``./collsim-lesson-pictures``).
    """
    try:  # inside Jupyter the figure displays itself
        from IPython import get_ipython

        if get_ipython() is not None and "IPKernelApp" in get_ipython().config:
            from IPython.display import display

            display(fig)
            return None
    except ImportError:
        pass
    folder = Path(os.environ.get("COLLSIM_LESSON_OUT", "collsim-lesson-pictures"))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    fig.savefig(path, dpi=100)
    import matplotlib.pyplot as plt

    plt.close(fig)
    print(f"[picture saved: {path}]")
    return path
