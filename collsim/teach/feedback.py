"""How a wrong answer is wrong: the words :mod:`collsim.teach` prints.

A number off by a recognisable factor (2x, 1/K, (K-1)/K, bits for bytes, a unit prefix)
says which; an array says its shape or which elements differ and by how much; a rank says
why it is not the one.  Every number is printed with its unit (:mod:`collsim.units`).

Examples
--------
>>> explain_number(224, 112)  # doctest: +ELLIPSIS
'2x the answer. Did you count something twice ...'
"""

import math

import numpy as np

from ..errors import CollsimError
from ..units import format_rate, format_size, format_time, parse_rate, parse_size, parse_time

__all__ = [
    "as_number",
    "describe_difference",
    "distinct",
    "explain_number",
    "quantity",
    "rank_problem",
    "short",
    "short_args",
    "size_of",
    "unit_name",
]

# ---- numbers and their units --------------------------------------------------------------

_BYTES, _SECONDS, _RATE = ("B", "bytes", "byte"), ("s", "seconds"), ("B/s",)
_PARSERS = {**dict.fromkeys(_BYTES, parse_size), **dict.fromkeys(_SECONDS, parse_time),
            **dict.fromkeys(_RATE, parse_rate)}  # fmt: skip


def unit_name(unit):
    names = {"B": "bytes", "s": "seconds", "B/s": "bytes per second", "x": "a ratio",
             "fraction": "a fraction between 0 and 1", "": "a number"}  # fmt: skip
    return names.get(unit, f"a number, in {unit}")


def as_number(answer, unit):
    """``(float, None)``, or ``(None, why it is not a number)``; "14MiB" reads in ``unit``."""
    if isinstance(answer, str) and unit in _PARSERS:
        try:
            return float(_PARSERS[unit](answer)), None
        except CollsimError as exc:
            return None, f"your answer {answer!r} cannot be read: {exc}"
    if isinstance(answer, bool) or not isinstance(answer, int | float | np.integer | np.floating):
        return None, f"your answer {answer!r} is not a number ({unit_name(unit)} expected)"
    if not math.isfinite(float(answer)):
        return None, f"your answer {answer!r} is not a finite number"
    return float(answer), None


def _number(value):
    value = float(value)
    if value.is_integer() and abs(value) < 1e18:
        return f"{int(value):,}"
    return f"{value:.6g}"


def quantity(value, unit, precise=False):
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


def distinct(answer, expected, unit):
    """Both numbers formatted, with more digits when the short forms look the same."""
    said, want = quantity(answer, unit), quantity(expected, unit)
    if said == want:
        said, want = quantity(answer, unit, precise=True), quantity(expected, unit, True)
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


def explain_number(answer, expected, rel=1e-6, ranks=None, counts=True):
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


def size_of(value):
    return int(np.size(value))


def short(value, limit=120):
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def short_args(args):
    """Case arguments with every array shown by its shape, not its contents."""
    parts = [f"array{np.shape(a)} {np.asarray(a).dtype}" if isinstance(a, np.ndarray)
             else short(a, 40) for a in args]  # fmt: skip
    return "(" + ", ".join(parts) + ")"


def _numeric(value):
    try:
        array = np.asarray(value)
    except Exception:  # a ragged list, an odd object: not an array
        return None
    return array if array.dtype.kind in "biuf" else None


def describe_difference(got, want, rtol=0.0, atol=0.0, unit=""):
    """``None`` when ``got`` matches ``want``; otherwise what differs, in one line."""
    if isinstance(want, list | tuple):
        if not isinstance(got, list | tuple):
            return f"got {type(got).__name__} {short(got, 60)}, expected a list of {len(want)}"
        if len(got) != len(want):
            return f"got {len(got)} items, expected {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            inner = describe_difference(g, w, rtol, atol, unit)
            if inner and inner.startswith("item ["):  # nested lists: item [0][1]
                return f"item [{i}]{inner[len('item ') :]}"
            if inner:
                return f"item [{i}]: {inner}"
        return None
    if want is None or got is None:
        return None if got is want else f"got {short(got, 60)}, expected {short(want, 60)}"
    w, g = _numeric(want), _numeric(got)
    if w is None or g is None:
        return None if got == want else f"got {short(got, 60)}, expected {short(want, 60)}"
    if w.ndim == 0 and g.ndim == 0:
        if np.isclose(g, w, rtol=rtol, atol=atol, equal_nan=True):
            return None
        said, expect = distinct(float(g), float(w), unit)
        return f"got {said}, expected {expect}: {explain_number(float(g), float(w), rtol)}"
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
            text += f"; every element is {explain_number(factor, 1.0, counts=False)}"
    return text


def rank_problem(answer, ranks):
    if isinstance(answer, bool) or not isinstance(answer, int | np.integer | float):
        return f"your answer {answer!r} is not a rank: give a number 0 to {ranks - 1}"
    if float(answer) != int(answer) or not 0 <= int(answer) < ranks:
        return f"rank {answer!r} does not exist: the ranks are 0 to {ranks - 1}"
    return None
