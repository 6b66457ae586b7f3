"""What a picture can show readably, and the checks that refuse the rest up front.

Every figure function and ``collsim viz`` call these before any simulation starts, so a
bad number is refused at once with its value, the rule and the nearest valid choice,
instead of a traceback (or a long run) from inside matplotlib.

Examples
--------
>>> check_count(200, "bins", 1, MAX_BINS)
200
>>> check_count(0, "bins", 1, MAX_BINS)
Traceback (most recent call last):
...
collsim.errors.ConfigError: bins 0: must be a whole number from 1 to 2000; nearest valid: 1
>>> check_rate(float("nan"), "fps", MAX_FPS)
Traceback (most recent call last):
...
collsim.errors.ConfigError: fps nan: must be a number above 0 and at most 30 (e.g. 1)
"""

import math
import numbers

from ..errors import ConfigError

__all__ = [
    "MAX_RING_RANKS",
    "MAX_PICTURE_RANKS",
    "MAX_BINS",
    "MAX_FPS",
    "MAX_TIMELINE_PASSES",
    "MAX_SWEEP_SIZES",
    "check_count",
    "check_rate",
    "check_ring_ranks",
    "check_picture_ranks",
]

MAX_RING_RANKS = 16  # the circle of ranks with a buffer strip each: past 16 cells blur
MAX_PICTURE_RANKS = 64  # traffic, utilisation, sweep: one row or node per link / rank
MAX_BINS = 2000  # time slices: more than a slide's pixels across
MAX_FPS = 30  # GIF frame times are whole hundredths of a second
MAX_TIMELINE_PASSES = 1024  # stages x micro-batches x chunks: blocks big enough to number
MAX_SWEEP_SIZES = 64  # message sizes in one sweep (8 B .. 256 MiB by 2 is 26)


def check_count(value, name, low, high, shown=None):
    """``value`` as an int in ``low..high``, or a ConfigError naming it (as ``shown``,
    the text the user typed, when given)."""
    shown = repr(value) if shown is None else shown
    ok = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if ok and low <= value <= high:
        return int(value)
    nearest = ""
    if ok:
        nearest = f"; nearest valid: {low if value < low else high}"
    raise ConfigError(f"{name} {shown}: must be a whole number from {low} to {high}{nearest}")


def check_rate(value, name, high, example=1, shown=None):
    """``value`` as a float in ``(0, high]``, or a ConfigError naming it (as ``shown``)."""
    shown = repr(value) if shown is None else shown
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if ok and math.isfinite(value) and 0 < value <= high:
        return float(value)
    nearest = f"; nearest valid: {high}" if ok and value > high else f" (e.g. {example})"
    raise ConfigError(f"{name} {shown}: must be a number above 0 and at most {high}{nearest}")


def check_ring_ranks(k, flag=None):
    """Refuse a ring picture of more than :data:`MAX_RING_RANKS` ranks, with guidance
    (the error starts with ``flag k`` when a flag is given, else ``k ranks``)."""
    if k > MAX_RING_RANKS:
        given = f"{flag} {k}" if flag else f"{k} ranks"
        raise ConfigError(
            f"{given}: the ring picture stays readable up to {MAX_RING_RANKS} ranks "
            f"(one buffer cell per chunk beside each rank); use --ranks {MAX_RING_RANKS} or "
            "fewer (every step looks alike at any K), or draw the larger cluster with "
            "`collsim viz traffic` or `collsim viz utilization`"
        )
    return k


def check_picture_ranks(k, what, flag=None):
    """Refuse a ``what`` picture of more than :data:`MAX_PICTURE_RANKS` ranks."""
    if k > MAX_PICTURE_RANKS:
        given = f"{flag} {k}" if flag else f"{k} ranks"
        raise ConfigError(
            f"{given}: the {what} picture stays readable up to {MAX_PICTURE_RANKS} ranks; "
            f"use --ranks {MAX_PICTURE_RANKS} or fewer, or `collsim run` for the numbers of "
            "a larger cluster"
        )
    return k
