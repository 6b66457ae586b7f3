"""A lesson's numbers with their units: reading a student's answer, printing a value.

Examples
--------
>>> quantity(14680064, "B"), quantity(1.5e-5, "s")
('14,680,064 B (14 MiB)', '15 us')
>>> as_number("14MiB", "B")
(14680064.0, None)
"""

import math

import numpy as np

from ..errors import CollsimError
from ..units import format_rate, format_size, format_time, parse_rate, parse_size, parse_time
from .messages import message

__all__ = ["as_number", "distinct", "quantity", "unit_name"]

_BYTES, _SECONDS, _RATE = ("B", "bytes", "byte"), ("s", "seconds"), ("B/s",)
_PARSERS = {
    **dict.fromkeys(_BYTES, parse_size),
    **dict.fromkeys(_SECONDS, parse_time),
    **dict.fromkeys(_RATE, parse_rate),
}


def unit_name(unit, lang="en"):
    names = {
        "B": "unit_bytes",
        "s": "unit_seconds",
        "B/s": "unit_rate",
        "x": "unit_ratio",
        "fraction": "unit_fraction",
        "": "unit_number",
    }
    return message(names.get(unit, "unit_other"), lang, unit=unit)


def as_number(answer, unit, lang="en"):
    """``(float, None)``, or ``(None, why it is not a number)``; "14MiB" reads in ``unit``."""
    if isinstance(answer, str) and unit in _PARSERS:
        try:
            return float(_PARSERS[unit](answer)), None
        except CollsimError as exc:
            return None, message("cannot_read", lang, answer=repr(answer), error=exc)
    if isinstance(answer, bool) or not isinstance(answer, int | float | np.integer | np.floating):
        return None, message("not_a_number", lang, answer=repr(answer), unit=unit_name(unit, lang))
    if not math.isfinite(float(answer)):
        return None, message("not_finite", lang, answer=repr(answer))
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
