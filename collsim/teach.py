"""Exercise checks for the lessons: "predict, then check".

A lesson asks for a number or a small function, then calls a check here.  An answer left
as ``None`` prints what to do and does not fail.  With ``COLLSIM_SOLUTIONS=1`` in the
environment an unanswered exercise takes its answer from ``lessons/solutions/`` (the
module with the lesson's file name) and a wrong result raises, which is how the tests run
every lesson.

Examples
--------
>>> check("demo", 112, expected=112, unit="MiB")
Correct! demo: 112 MiB
True
>>> check("demo", 100, expected=112, unit="MiB")
Not yet. demo: you said 100 MiB, the simulation says 112 MiB (off by 12)
False
"""

import importlib.util
import inspect
import math
import os
from pathlib import Path

import numpy as np

__all__ = ["check", "check_function", "show", "solutions_mode", "LessonCheckError"]


class LessonCheckError(AssertionError):
    """A check failed while running with the solutions (the lesson itself is wrong)."""


def solutions_mode():
    """True when ``COLLSIM_SOLUTIONS=1``: unanswered exercises use the solutions."""
    return os.environ.get("COLLSIM_SOLUTIONS", "") == "1"


def _caller_file(depth=2):
    frame = inspect.stack()[depth]
    return frame.filename


def _solution(exercise, lesson_file):
    """The solution for ``exercise`` from ``lessons/solutions/<lesson>.py``."""
    path = Path(lesson_file).resolve().parent / "solutions" / Path(lesson_file).name
    if not path.exists():
        raise LessonCheckError(f"no solutions file {path} for exercise {exercise}")
    spec = importlib.util.spec_from_file_location(f"_solutions_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if exercise not in module.SOLUTIONS:
        raise LessonCheckError(f"{path.name} has no solution for exercise {exercise}")
    return module.SOLUTIONS[exercise]


def _resolve(exercise, answer, what):
    if answer is not None:
        return answer, False
    if solutions_mode():
        return _solution(exercise, _caller_file(3)), True
    print(f"Exercise {exercise}: replace None with {what}, then run this cell again.")
    return None, False


def _fail(message):
    print(message)
    if solutions_mode():
        raise LessonCheckError(message)
    return False


def _fmt(value, unit):
    if isinstance(value, float) and not value.is_integer():
        text = f"{value:.6g}"
    elif isinstance(value, float):
        text = f"{int(value):,}"
    elif isinstance(value, int | np.integer):
        text = f"{int(value):,}"
    else:
        text = repr(value)
    return f"{text} {unit}".rstrip()


def check(exercise, answer, expected, rel=1e-6, unit=""):
    """Compare a predicted number with what collsim computed (relative tolerance ``rel``).

    Returns True when correct, False when wrong, None when unanswered.
    """
    answer, _ = _resolve(exercise, answer, "your number")
    if answer is None:
        return None
    ok = math.isclose(float(answer), float(expected), rel_tol=rel, abs_tol=1e-300)
    if ok:
        print(f"Correct! {exercise}: {_fmt(expected, unit)}")
        return True
    if isinstance(expected, int | np.integer) and not isinstance(expected, bool):
        how = f"off by {abs(int(round(float(answer))) - int(expected)):,}"  # ranks, counts
    elif expected:
        how = f"off by {abs(float(answer) - float(expected)) / abs(float(expected)):.2%}"
    else:
        how = "expected zero"
    return _fail(f"Not yet. {exercise}: you said {_fmt(answer, unit)}, the simulation says "
                 f"{_fmt(expected, unit)} ({how})")  # fmt: skip


def check_function(exercise, function, reference, cases, compare=None):
    """Run a student's ``function`` and the ``reference`` on every case (a tuple of
    arguments) and report the first case where they differ.

    ``compare(got, want)`` decides equality (default: ``numpy.array_equal`` on every
    element of the result, so lists of arrays work).
    """
    function, _ = _resolve(exercise, function, "your function")
    if function is None:
        return None
    compare = compare or _equal
    for i, args in enumerate(cases):
        want = reference(*args)
        try:
            got = function(*args)
        except Exception as exc:  # the student's code: report, don't crash the lesson
            return _fail(f"Not yet. {exercise}: case {i + 1} {_short(args)} raised "
                         f"{type(exc).__name__}: {exc}")  # fmt: skip
        if not compare(got, want):
            return _fail(f"Not yet. {exercise}: case {i + 1} {_short(args)}\n"
                         f"  yours:    {_short(got)}\n  expected: {_short(want)}")  # fmt: skip
    print(f"Correct! {exercise}: all {len(cases)} cases agree with the reference")
    return True


def _equal(got, want):
    if isinstance(want, list | tuple):
        return (isinstance(got, list | tuple) and len(got) == len(want)
                and all(_equal(g, w) for g, w in zip(got, want)))  # fmt: skip
    if want is None or got is None:
        return got is want
    return np.array_equal(np.asarray(got), np.asarray(want))


def _short(value, limit=160):
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


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
