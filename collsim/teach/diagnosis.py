"""Why a wrong number is wrong, told from the exercise's own quantities.

An exercise declares the quantities it involves (:class:`Quantity`: ``L = 32 layers``,
``dp = 4 data-parallel replicas``, ``α = 5 us``) and the other definitions a student may
have used (:class:`Alternative`: Narayanan's ``(p-1)/m`` bubble).  A wrong answer is then
explained as the right one times or divided by one or two of those quantities or of the
usual slips (2x, 8 bits in a byte, 1000 and 1024 and their powers, a percentage for a
fraction, the K-rank factors), or as a quantity added or left out, or off by one, or the
sign, or the reciprocal.  The simplest explanation wins (fewest factors, an exact match
before a near one); a match must be tight (``NEAR``), so 41.94 against 43.94 is not called
decimal-versus-binary.  When nothing fits, it says how far off and which way, and guesses
nothing.

Examples
--------
>>> layers = Quantity("L", 32, "layers")
>>> explain_number(7, 224, quantities=[layers])  # doctest: +ELLIPSIS
'exactly 1/L of the answer (L = 32 layers). Did you count only one of the layers...'
>>> explain_number(41.94e-6, 43.94e-6, quantities=[Quantity("α", 2e-6, "latency", "s")])
'exactly α = 2 us latency too few. Did you leave α out (a term of the sum, or a % α)?'
>>> explain_number(41.94, 43.94)
'4.55 % too low.'
"""

import math
from dataclasses import dataclass
from itertools import combinations

from .messages import message
from .numbers import quantity

__all__ = [
    "Alternative",
    "Quantity",
    "explain_number",
    "explanation",
    "slips",
    "written_precision",
]

EXACT = 1e-9  # relative: the same number, up to float rounding
# relative: the loosest a match may be, for an answer rounded to 4 digits (27.27 for
# 27.2727...); 41.94/43.94 = 0.95448 is 8.4e-4 from (1000/1024)^2 and is no match
NEAR = 5e-4


@dataclass(frozen=True)
class Quantity:
    """A named number of an exercise: ``Quantity("L", 32, "layers")``."""

    symbol: str  # as the lesson writes it: "L", "dp", "α"
    value: float
    meaning: str  # what it counts, so a message can say it: "layers", "micro-batches"
    unit: str = ""  # "s", "B", ...: how its value is printed (collsim.units)


@dataclass(frozen=True)
class Alternative:
    """Another definition of the answer, named: a value a student may give on purpose.

    ``value`` is a number, or (for a function exercise) a function of the case's arguments.
    """

    name: str  # "Narayanan et al.'s bubble (p-1)/m"
    value: object
    why: str  # one sentence: why this exercise asks for the other definition


@dataclass(frozen=True)
class Slip:
    """One factor a wrong answer may carry: its value and what to say about it."""

    value: float
    what: str  # "8x the answer"
    question: str  # "Bits or bytes? A byte is 8 bits."
    name: str  # how it reads inside a product: "8", "L = 32 layers"
    declared: bool = False  # one of the exercise's own quantities
    unit: bool = False  # a unit slip: bits, percent, a decimal or binary prefix


def _format(value, unit):
    return quantity(value, unit)  # the one number formatter of the lessons


def _declared(quantities, lang):
    """Quantities grouped by value (equal values are named together), as factor slips."""
    groups = {}
    for q in quantities:
        value = float(q.value)
        if not math.isfinite(value) or value in (0.0, 1.0, -1.0):
            continue  # a factor of 1 explains nothing
        key = next((v for v in groups if math.isclose(v, value, rel_tol=EXACT)), value)
        groups.setdefault(key, []).append(q)
    out = []
    for value, group in groups.items():
        names = message("and", lang).join(
            message(
                "quantity_named",
                lang,
                symbol=q.symbol,
                value=_format(q.value, q.unit),
                meaning=q.meaning,
            )
            for q in group
        )
        symbols = message("or", lang).join(q.symbol for q in group)
        inverse = symbols if symbols.isidentifier() else f"({symbols})"  # 1/(B/dp), not 1/B/dp
        meanings = message("or", lang).join(q.meaning for q in group)
        fields = dict(names=names, symbols=symbols, meanings=meanings, inverse=inverse)
        out.append((value, fields))
    return out


SIZES = ("B", "bytes", "byte", "B/s")  # bits for bytes and 1000 for 1024 happen only here
PREFIXED = (*SIZES, "s")  # a k/M/G (m/u/n) prefix slip
PARTS = ("fraction", "x", "%")  # a percentage for a fraction


def _kinds(unit):
    """Which unit slips an answer in ``unit`` can make ("" is unknown: all of them)."""
    unknown = unit == ""
    return (unknown or unit in SIZES, unknown or unit in PREFIXED, unknown or unit in PARTS)


def slips(ranks=None, quantities=(), lang="en", unit=""):
    """Every single factor a wrong answer is tested against, the declared ones first; the
    unit slips only where ``unit`` allows them (no bits and bytes in a GPU count)."""

    def say(key, **fields):
        return message(key, lang, **fields)

    out = []
    for value, f in _declared(quantities, lang):
        out.append(
            Slip(
                value,
                say("q_times_what", **f),
                say("q_times_question", **f),
                f["names"],
                declared=True,
            )
        )
        out.append(
            Slip(
                1 / value,
                say("q_over_what", **f),
                say("q_over_question", **f),
                f"1/({f['names']})",
                declared=True,
            )
        )
    out += [
        Slip(-1.0, say("sign_what"), say("sign_question"), "-1"),
        Slip(2.0, say("twice_what"), say("twice_question"), "2"),
        Slip(0.5, say("half_what"), say("half_question"), "1/2"),
    ]
    if ranks and ranks > 2:
        k = ranks
        n = dict(k=k, k_minus_1=k - 1, two_k_minus_2=2 * (k - 1))
        for value, key in (
            (k, "k"),
            (1 / k, "one_over_k"),
            (k - 1, "k_minus_1"),
            (1 / (k - 1), "one_over_k_minus_1"),
            ((k - 1) / k, "k_minus_1_over_k"),
            (k / (k - 1), "k_over_k_minus_1"),
            (2 * (k - 1) / k, "ring"),
            (k / (2 * (k - 1)), "one_over_ring"),
        ):
            out.append(Slip(value, say(f"{key}_what", **n), say(f"{key}_question"), f"K-{key}"))
    sizes, prefixed, parts = _kinds(unit)

    def both(value, times, over, question, name):  # a unit slip and its inverse
        return [
            Slip(value, times, question, name, unit=True),
            Slip(1 / value, over, question, f"1/{name}", unit=True),
        ]

    if sizes:
        out += both(8.0, say("eight_what"), say("eighth_what"), say("bits_question"), "8")
    if parts:
        times, over = say("times_what", factor="100"), say("fraction_what", factor="100")
        out += both(100.0, times, over, say("percent_question"), "100")
    for n, prefix in ((1, "k/m"), (2, "M/u"), (3, "G/n")):
        if prefixed:
            times, over = (say(k, factor=f"{1000**n:,}") for k in ("times_what", "fraction_what"))
            out += both(
                1000.0**n, times, over, say("prefix_question", prefix=prefix), f"{1000**n:,}"
            )
    for n, (binary, decimal) in enumerate((("KiB", "KB"), ("MiB", "MB"), ("GiB", "GB")), 1):
        if not sizes:
            break
        hint = say(
            "binary_question",
            binary=binary,
            decimal=decimal,
            binary_bytes=f"{1024**n:,}",
            decimal_bytes=f"{1000**n:,}",
        )
        times, over = say("binary_times_what", n=n), say("binary_fraction_what", n=n)
        out += both(1.024**n, times, over, hint, f"(1024/1000)^{n}")
        times, over = (say(k, factor=f"{1024**n:,}") for k in ("times_what", "fraction_what"))
        out += both(1024.0**n, times, over, hint, f"{1024**n:,}")
    return out


def _close(a, b, tolerance):
    return math.isclose(a, b, rel_tol=tolerance, abs_tol=0.0)


def written_precision(answer):
    """One unit in the last digit the student wrote, relative: 41.94e-6 -> 1e-3.

    >>> written_precision(41.94e-6), written_precision(0.1), written_precision(262.144)
    (0.001, 1.0, 1e-05)
    """
    mantissa = repr(abs(float(answer))).split("e")[0]  # the shortest digits that round-trip
    significant = len(mantissa.replace(".", "").strip("0")) or 1
    return 10.0 ** (1 - significant)


def _terms(answer, expected, quantities, lang):
    """A declared quantity added, or left out of a sum (or of a ``% K``)."""
    for value, f in _declared(quantities, lang):
        for sign, key in ((1, "q_plus"), (-1, "q_minus")):
            text = message(
                "factor_sentence",
                lang,
                what=message(f"{key}_what", lang, **f),
                question=message(f"{key}_question", lang, **f),
            )
            yield (lambda a, v=sign * value: _close(answer, expected + v, a)), text


def _off_by_one(answer, expected, lang, unit):
    """One more or one fewer: a count, not a time, a rate or a fraction of a byte."""
    if unit not in ("s", "B/s") and (float(expected).is_integer() or unit not in SIZES):
        for sign, key in ((1, "off_by_one_more"), (-1, "off_by_one_less")):
            yield (lambda a, v=sign: _close(answer, expected + v, a)), message(key, lang)


def _single(answer, expected, ranks, quantities, alternatives, lang, unit, gaps=True):
    """``(matches(tolerance), explanation)`` for every one-step explanation, in the order
    they are preferred: the exercise's own (alternatives, quantities) before the usual slips."""
    for alt in alternatives:  # named by the exercise: always the first thing to say
        text = message("alternative", lang, name=alt.name, why=alt.why)
        yield (lambda a, alt=alt: _close(answer, float(alt.value), a)), text
    if expected == 0:  # no ratio to a zero: only what was added
        yield from _terms(answer, expected, quantities, lang)
        yield from _off_by_one(answer, expected, lang, unit)
        return
    if abs(expected) == 1 and gaps:  # any q is "q times 1": a count of one is off by one
        yield from _off_by_one(answer, expected, lang, unit)
    ratio = answer / expected
    if ratio > 0 and not _close(abs(expected), 1.0, NEAR):  # a division the wrong way round
        yield (lambda a: _close(answer * expected, 1.0, a)), message("reciprocal", lang)
    single = slips(ranks, quantities, lang, unit)
    sentence = [
        (s, message("factor_sentence", lang, what=s.what, question=s.question)) for s in single
    ]
    for slip, text in sentence:
        if slip.declared:
            yield (lambda a, s=slip: _close(ratio, s.value, a)), text
    if gaps:
        yield from _terms(answer, expected, quantities, lang)
    for slip, text in sentence:
        if not slip.declared:
            yield (lambda a, s=slip: _close(ratio, s.value, a)), text
    if gaps:
        yield from _off_by_one(answer, expected, lang, unit)


def _products(answer, expected, ranks, quantities, lang, unit):
    """Two factors at once: two declared quantities, or one with a unit slip (8 bits,
    100 %, 1000, 1024); the small counting factors (2, K, K-1) would fit too many small
    numbers by chance."""
    ratio = answer / expected
    products = [s for s in slips(ranks, quantities, lang, unit) if s.unit or s.declared]
    for first, second in combinations(products, 2):
        if _close(first.value * second.value, 1.0, EXACT):
            continue  # a factor and its inverse: no explanation at all
        text = message(
            "product_sentence",
            lang,
            first=first.name,
            second=second.name,
            what_first=first.what,
            what_second=second.what,
        )
        yield (lambda a, v=first.value * second.value: _close(ratio, v, a)), text


def explanation(
    answer,
    expected,
    rel=1e-6,
    ranks=None,
    lang="en",
    quantities=(),
    alternatives=(),
    unit="",
    gaps=True,
):
    """The simplest explanation of ``answer`` for ``expected``, or None when nothing fits;
    ``gaps=False`` for a ratio, where nothing was added or left out.

    A match must hold to within the check's ``rel`` or the digits the student wrote,
    whichever is looser, and never looser than ``NEAR``.
    """
    near = min(max(rel, written_precision(answer) / 2, EXACT), NEAR)  # half the last digit
    context = (float(answer), float(expected), ranks, quantities)
    for tolerance in (EXACT, near):  # the simplest exact match, else the simplest near one
        products = _products(*context, lang, unit) if expected != 0 else ()
        for found in (_single(*context, alternatives, lang, unit, gaps), products):
            for matches, text in found:
                if matches(tolerance):
                    return text
    return None


def explain_number(
    answer,
    expected,
    rel=1e-6,
    ranks=None,
    counts=True,
    lang="en",
    quantities=(),
    alternatives=(),
    unit="",
):
    """Why ``answer`` is not ``expected``: an alternative by name, the simplest product of
    declared quantities and usual slips that turns one into the other (:func:`explanation`),
    or how far off and which way."""
    answer, expected = float(answer), float(expected)
    found = explanation(answer, expected, rel, ranks, lang, quantities, alternatives, unit)
    if found:
        return found
    if expected == 0:
        return message("answer_is_zero", lang)
    ratio = answer / expected
    if counts and answer.is_integer() and expected.is_integer():
        gap = int(answer) - int(expected)
        return message("too_many" if gap > 0 else "too_few", lang, gap=f"{abs(gap):,}")
    return message(
        "too_high" if ratio > 1 else "too_low", lang, percent=f"{abs(ratio - 1) * 100:.3g}"
    )
