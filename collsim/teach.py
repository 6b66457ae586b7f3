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

import numpy as np

from .errors import CollsimError
from .units import format_rate, format_size, format_time, parse_rate, parse_size, parse_time

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
        """``lessons/06_tensor_parallel.py:123: set x_answer = ...`` (or the cell above)."""
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
    answer, _ = _resolve(exercise, answer, f"your number ({_unit_name(unit)})")
    if answer is None:
        return None
    value, problem = _as_number(answer, unit)
    if problem:
        return _fail(exercise, problem)
    if math.isclose(value, float(expected), rel_tol=rel, abs_tol=1e-300):
        print(f"Correct! {exercise}: {_quantity(expected, unit)}")
        return True
    said, want = _distinct(value, expected, unit)
    how = _explain_number(value, expected, rel=rel, ranks=ranks)
    return _fail(exercise, f"you said {said}, the answer is {want}: {how}")


def check_array(exercise, answer, expected, rtol=0.0, atol=0.0, unit=""):
    """Compare an array answer element by element; a wrong one says which shape or which
    elements differ (how many, the first few with both values, the largest difference)."""
    answer, _ = _resolve(exercise, answer, "your array")
    if answer is None:
        return None
    difference = _describe_difference(answer, expected, rtol, atol, unit)
    if difference:
        return _fail(exercise, difference)
    print(f"Correct! {exercise}: all {_size_of(expected)} elements agree")
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
            return _fail(exercise, f"case {i + 1} {_short_args(args)} raised "
                                   f"{type(exc).__name__}: {exc}")  # fmt: skip
        same = compare(got, want) if compare else not _describe_difference(got, want, unit=unit)
        if not same:
            how = _describe_difference(got, want, unit=unit) or (
                f"got {_short(got)}, expected {_short(want)}"
            )
            return _fail(exercise, f"case {i + 1} {_short_args(args)}: {how}")
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
    problem = _rank_problem(answer, ranks)
    if problem:
        return _fail(exercise, problem)
    if int(answer) == int(expected):
        print(f"Correct! {exercise}: rank {int(expected)}: {why}")
        return True
    state = (about or {}).get(int(answer))
    said = f"you named rank {int(answer)}" + (f", but {state}" if state else "")
    return _fail(exercise, f"{said}. The answer is rank {int(expected)}: {why}.")


# ---- numbers and their units --------------------------------------------------------------

_BYTES, _SECONDS, _RATE = ("B", "bytes", "byte"), ("s", "seconds"), ("B/s",)
_PARSERS = {**dict.fromkeys(_BYTES, parse_size), **dict.fromkeys(_SECONDS, parse_time),
            **dict.fromkeys(_RATE, parse_rate)}  # fmt: skip


def _unit_name(unit):
    names = {"B": "bytes", "s": "seconds", "B/s": "bytes per second", "x": "a ratio",
             "fraction": "a fraction between 0 and 1", "": "a number"}  # fmt: skip
    return names.get(unit, f"a number, in {unit}")


def _as_number(answer, unit):
    """``(float, None)``, or ``(None, why it is not a number)``; "14MiB" reads in ``unit``."""
    if isinstance(answer, str) and unit in _PARSERS:
        try:
            return float(_PARSERS[unit](answer)), None
        except CollsimError as exc:
            return None, f"your answer {answer!r} cannot be read: {exc}"
    if isinstance(answer, bool) or not isinstance(answer, int | float | np.integer | np.floating):
        return None, f"your answer {answer!r} is not a number ({_unit_name(unit)} expected)"
    if not math.isfinite(float(answer)):
        return None, f"your answer {answer!r} is not a finite number"
    return float(answer), None


def _number(value):
    value = float(value)
    if value.is_integer() and abs(value) < 1e18:
        return f"{int(value):,}"
    return f"{value:.6g}"


def _quantity(value, unit, precise=False):
    """``14680064, "B"`` -> ``'14,680,064 B (14 MiB)'``; ``1.5e-5, "s"`` -> ``'15 us'``."""
    if unit in _BYTES:  # whole bytes, then the binary unit; the exact float if asked
        text = f"{float(value):,.0f} B" if abs(value) >= 1 else f"{float(value):.3g} B"
        text += f" ({format_size(value)})" if abs(value) >= 1024 else ""
        return text + (f" [{float(value)!r} B]" if precise else "")
    if unit in _SECONDS or unit in _RATE:
        text = format_time(value) if unit in _SECONDS else format_rate(value)
        return text + (f" ({float(value):.10g} {unit})" if precise else "")
    if unit == "fraction":
        return f"{float(value):.6g} ({float(value) * 100:.4g} %)"
    return f"{_number(value)} {unit}".rstrip()


def _distinct(answer, expected, unit):
    """Both numbers formatted, with more digits when the short forms look the same."""
    said, want = _quantity(answer, unit), _quantity(expected, unit)
    if said == want:
        said, want = _quantity(answer, unit, precise=True), _quantity(expected, unit, True)
    if said == want:
        said, want = f"{float(answer)!r} {unit}".rstrip(), f"{float(expected)!r} {unit}".rstrip()
    return said, want


def _factors(ranks):
    """``(factor, what it is, a question that points at the usual mistake)``, in order."""
    out = [(-1.0, "the answer with the wrong sign", "Check the sign."),
           (2.0, "2x the answer",
            "Did you count something twice (both phases, both directions, send and receive)?"),
           (0.5, "half the answer",
            "Did you count only one of two equal parts (one phase, one direction)?")]  # fmt: skip
    if ranks and ranks > 2:
        k = ranks
        out += [
            (k, f"K = {k} times the answer",
             "Did you add up all K ranks where one rank's share was asked?"),
            (1 / k, f"1/K of the answer (K = {k})",
             "Did you count one chunk (1/K) where the whole buffer was asked?"),
            (k - 1, f"K-1 = {k - 1} times the answer",
             "Did you count every other rank's buffer where one was asked?"),
            (1 / (k - 1), f"1/(K-1) of the answer (K = {k})",
             "Did you count one of the K-1 other ranks where all of them were asked?"),
            ((k - 1) / k, f"(K-1)/K = {k - 1}/{k} of the answer",
             "Did you apply a factor (K-1)/K that does not belong here?"),
            (k / (k - 1), f"K/(K-1) = {k}/{k - 1} times the answer",
             "Did you leave out a factor (K-1)/K (K-1 of the K chunks)?"),
            (2 * (k - 1) / k, f"2(K-1)/K = {2 * (k - 1)}/{k} times the answer",
             "Did you apply the ring all-reduce factor 2(K-1)/K where it does not belong?"),
            (k / (2 * (k - 1)), f"K/(2(K-1)) = {k}/{2 * (k - 1)} of the answer",
             "Did you leave out the factor 2(K-1)/K: 2(K-1) steps of one chunk N/K each?"),
        ]  # fmt: skip
    out += [(8.0, "8x the answer", "Bits or bytes? A byte is 8 bits."),
            (1 / 8, "1/8 of the answer", "Bits or bytes? A byte is 8 bits.")]  # fmt: skip
    for n, prefix in ((1, "k/m"), (2, "M/u"), (3, "G/n")):
        hint = f"Check the unit prefix ({prefix})."
        out += [(1000.0**n, f"{1000**n:,}x the answer", hint),
                (1000.0**-n, f"1/{1000**n:,} of the answer", hint)]  # fmt: skip
    for n, (binary, decimal) in enumerate((("KiB", "KB"), ("MiB", "MB"), ("GiB", "GB")), 1):
        hint = f"Decimal or binary units? 1 {binary} = {1024**n:,} B, 1 {decimal} = {1000**n:,} B."
        out += [(1.024**n, f"(1024/1000)^{n} times the answer", hint),
                (1.024**-n, f"(1000/1024)^{n} of the answer", hint)]  # fmt: skip
    return out


def _explain_number(answer, expected, rel=1e-6, ranks=None, counts=True):
    """Why ``answer`` is not ``expected``: a known factor, or how far off it is."""
    expected = float(expected)
    if expected == 0:
        return "the answer is zero."
    ratio = answer / expected
    tolerance = max(rel, 1e-3)
    for factor, what, question in _factors(ranks):
        if math.isclose(ratio, factor, rel_tol=tolerance):
            return f"{what}. {question}"
    if (
        ratio > 0
        and not math.isclose(abs(expected), 1.0, rel_tol=tolerance)
        and math.isclose(answer * expected, 1.0, rel_tol=tolerance)
    ):
        return "the reciprocal of the answer. Did you divide the wrong way round?"
    if counts and float(answer).is_integer() and expected.is_integer():
        gap = int(answer) - int(expected)
        return f"{abs(gap):,} too {'many' if gap > 0 else 'few'}."
    direction = "high" if ratio > 1 else "low"
    return f"{abs(ratio - 1) * 100:.3g} % too {direction}."


# ---- arrays, lists and ranks ----------------------------------------------------------------


def _size_of(value):
    return int(np.size(value))


def _short(value, limit=120):
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _short_args(args):
    """Case arguments with every array shown by its shape, not its contents."""
    parts = [f"array{np.shape(a)} {np.asarray(a).dtype}" if isinstance(a, np.ndarray)
             else _short(a, 40) for a in args]  # fmt: skip
    return "(" + ", ".join(parts) + ")"


def _numeric(value):
    try:
        array = np.asarray(value)
    except Exception:  # a ragged list, an odd object: not an array
        return None
    return array if array.dtype.kind in "biuf" else None


def _describe_difference(got, want, rtol=0.0, atol=0.0, unit=""):
    """``None`` when ``got`` matches ``want``; otherwise what differs, in one line."""
    if isinstance(want, list | tuple):
        if not isinstance(got, list | tuple):
            return f"got {type(got).__name__} {_short(got, 60)}, expected a list of {len(want)}"
        if len(got) != len(want):
            return f"got {len(got)} items, expected {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            inner = _describe_difference(g, w, rtol, atol, unit)
            if inner and inner.startswith("item ["):  # nested lists: item [0][1]
                return f"item [{i}]{inner[len('item ') :]}"
            if inner:
                return f"item [{i}]: {inner}"
        return None
    if want is None or got is None:
        return None if got is want else f"got {_short(got, 60)}, expected {_short(want, 60)}"
    w, g = _numeric(want), _numeric(got)
    if w is None or g is None:
        return None if got == want else f"got {_short(got, 60)}, expected {_short(want, 60)}"
    if w.ndim == 0 and g.ndim == 0:
        if np.isclose(g, w, rtol=rtol, atol=atol, equal_nan=True):
            return None
        said, expect = _distinct(float(g), float(w), unit)
        return f"got {said}, expected {expect}: {_explain_number(float(g), float(w), rtol)}"
    if g.shape != w.shape:
        hint = ""
        if g.size == w.size:
            hint = " (same number of elements: transposed or reshaped?)"
        return f"shape {g.shape}, expected {w.shape}{hint}"
    wrong = ~np.isclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
    if not wrong.any():
        return None
    where = np.argwhere(wrong)
    first = "; ".join(f"[{', '.join(map(str, i))}] got {g[tuple(i)]:.6g}, expected "
                      f"{w[tuple(i)]:.6g}" for i in where[:3])  # fmt: skip
    gap = float(np.max(np.abs(g.astype(float) - w.astype(float))[wrong]))
    text = f"{len(where)} of {w.size} elements differ; {first}; max |difference| {gap:.3g}"
    nonzero = w != 0
    if nonzero.any() and not g[~nonzero].any():  # zeros where expected: maybe one factor
        ratios = g[nonzero] / w[nonzero]
        factor = float(ratios.flat[0])
        if np.allclose(ratios, factor, rtol=1e-9):
            text += f"; every element is {_explain_number(factor, 1.0, counts=False)}"
    return text


def _rank_problem(answer, ranks):
    if isinstance(answer, bool) or not isinstance(answer, int | np.integer | float):
        return f"your answer {answer!r} is not a rank: give a number 0 to {ranks - 1}"
    if float(answer) != int(answer) or not 0 <= int(answer) < ranks:
        return f"rank {answer!r} does not exist: the ranks are 0 to {ranks - 1}"
    return None


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
