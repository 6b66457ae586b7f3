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

from ..errors import shorten
from .diagnosis import explain_number, explanation
from .messages import message
from .numbers import as_number, distinct, quantity, unit_name

__all__ = [
    "as_number",
    "as_sequence",
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

# ---- arrays, lists and ranks ----------------------------------------------------------------


def size_of(value):
    """Elements in an answer, a list of arrays of different shapes included.

    >>> size_of([np.ones(2), np.ones(3)]), size_of(np.zeros((2, 3)))
    (5, 6)
    """
    if isinstance(value, list | tuple):
        return sum(size_of(v) for v in value)
    return int(np.size(value))


def short(value, limit=120):
    """``repr(value)`` cut to ``limit`` characters (:func:`collsim.errors.shorten`)."""
    return shorten(value, limit)


def _argument(value):
    """One case argument, short: an array by its shape, ``7e9`` for a float ``7e9``."""
    if isinstance(value, np.ndarray):
        return f"array{np.shape(value)} {value.dtype}"
    if isinstance(value, float) and value.is_integer() and abs(value) >= 1e6:
        mantissa, exponent = f"{value:.6g}".split("e")
        return f"{mantissa}e{int(exponent)}"
    return short(value, 40)


def short_args(args, names=()):
    """Case arguments labelled by ``names`` (the reference's parameters), arrays by shape.

    >>> short_args((7e9, 512, np.zeros((2, 3))), ["params", "seq", "x"])
    'params=7e9, seq=512, x=array(2, 3) float64'
    >>> short_args((1, 2))
    '1, 2'
    """
    names = list(names)
    if len(names) < len(args):  # no names (or *args): the bare values
        return ", ".join(_argument(a) for a in args)
    return ", ".join(f"{n}={_argument(a)}" for n, a in zip(names, args))


def _numeric(value):
    try:
        array = np.asarray(value)
    except Exception:  # a ragged list, an odd object: not an array
        return None
    return array if array.dtype.kind in "biuf" else None


def describe_difference(got, want, rtol=0.0, atol=0.0, unit="", lang="en", reveal=True, **context):
    """``None`` when ``got`` matches ``want``; otherwise what differs, in one line.

    ``reveal=False`` leaves the expected value of a wrong number out (the hint ladder's
    first tries); ``context`` (``quantities``, ``alternatives``) goes to
    :func:`~collsim.teach.diagnosis.explain_number`.
    """

    def say(key, **fields):
        return message(key, lang, **fields)

    if isinstance(want, list | tuple):
        got = as_sequence(got)
        if not isinstance(got, list | tuple):
            return say(
                "got_kind_expected_list",
                kind=type(got).__name__,
                got=short(got, 60),
                count=len(want),
            )
        if len(got) != len(want):
            return say("got_items", got=len(got), want=len(want))
        item = say("item")
        for i, (g, w) in enumerate(zip(got, want)):
            inner = describe_difference(g, w, rtol, atol, unit, lang, reveal, **context)
            if inner and inner.startswith(f"{item} ["):  # nested lists: item [0][1]
                return f"{item} [{i}]{inner[len(item) + 1 :]}"
            if inner:
                return f"{item} [{i}]: {inner}"
        return None

    def got_not_want():
        if not reveal:
            return say("got_only", got=short(got, 60))
        return say("got_expected", got=short(got, 60), want=short(want, 60))

    if want is None or got is None:
        return None if got is want else got_not_want()
    w, g = _numeric(want), _numeric(got)
    if w is None or g is None:
        return None if _equal(got, want) else got_not_want()
    if w.ndim == 0 and g.ndim == 0:
        if np.isclose(g, w, rtol=rtol, atol=atol, equal_nan=True):
            return None
        said, expect = distinct(float(g), float(w), unit)
        how = explain_number(float(g), float(w), max(rtol, 1e-9), lang=lang, unit=unit, **context)
        if not reveal:
            return say("got_how", got=said, how=how)
        return say("got_expected_how", got=said, want=expect, how=how)
    if g.shape != w.shape:
        hint = say("shape_hint") if g.size == w.size else ""
        return say("shape", got=g.shape, want=w.shape, hint=hint)
    wrong = ~np.isclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
    if not wrong.any():
        return None
    where = np.argwhere(wrong)
    first = "; ".join(
        say(
            "element" if reveal else "element_got",
            index=", ".join(map(str, i)),
            got=f"{g[tuple(i)]:.6g}",
            want=f"{w[tuple(i)]:.6g}",
        )
        for i in where[:3]
    )
    gap = float(np.max(np.abs(g.astype(float) - w.astype(float))[wrong]))
    text = say("elements_differ", count=len(where), size=w.size, first=first, gap=f"{gap:.3g}")
    if not reveal:
        text = say("elements_differ_hidden", count=len(where), size=w.size, first=first)
    gaps = (g.astype(float) - w.astype(float))[wrong]
    if wrong.all() and np.allclose(gaps, gaps[0], rtol=1e-9, atol=0.0):  # all off by one gap
        quantities = context.get("quantities", ())
        how = explanation(float(gaps[0]), 0.0, lang=lang, quantities=quantities, unit=unit)
        return text + (say("every_element", how=how) if how else "")
    nonzero = w != 0
    if nonzero.any() and not g[~nonzero].any():  # zeros where expected: maybe one factor
        ratios = g[nonzero] / w[nonzero]
        factor = float(ratios.flat[0])
        if np.allclose(ratios, factor, rtol=1e-9):
            quantities = context.get("quantities", ())  # a ratio: no alternative applies
            how = explanation(factor, 1.0, lang=lang, quantities=quantities, gaps=False)
            how = how or explain_number(factor, 1.0, counts=False, lang=lang)
            text += say("every_element", how=how)
    return text


def as_sequence(value):
    """A list for an answer that is a sequence in another form (a numpy array, a tuple, a
    generator, a range), so that a list asked for may be given as any of them; other values
    as they are.

    >>> as_sequence(np.arange(3)), as_sequence(i * i for i in range(3)), as_sequence("ab")
    ([0, 1, 2], [0, 1, 4], 'ab')
    """
    if isinstance(value, np.ndarray) and value.ndim >= 1:
        return value.tolist()
    if isinstance(value, str | bytes | dict | list) or not hasattr(value, "__iter__"):
        return value
    try:
        return list(value)
    except Exception:  # the student's iterator raised: leave it as it is, it is reported
        return value


def _equal(got, want):
    """``got == want`` as one truth value: an object compared with an array answers
    element by element, and such an answer (or one that raises) is not equal.

    >>> _equal(object(), np.zeros(2)), _equal("a", "a")
    (False, True)
    """
    try:
        same = got == want
        return bool(same.all()) if isinstance(same, np.ndarray) else bool(same)
    except Exception:  # the student's object's own __eq__ or __bool__: not an answer
        return False


def rank_problem(answer, ranks, lang="en"):
    if isinstance(answer, bool) or not isinstance(answer, int | np.integer | float):
        return message("not_a_rank", lang, answer=repr(answer), last=ranks - 1)
    if not math.isfinite(answer) or float(answer) != int(answer) or not 0 <= int(answer) < ranks:
        return message("no_such_rank", lang, answer=repr(answer), last=ranks - 1)
    return None
