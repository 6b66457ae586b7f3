"""Closed forms of the pipeline schedules: bubble time, bubble fraction, peak in-flight.

The one place these formulas live.  `Schedule`'s ``formula_*`` methods call them with the
schedule's own ``p``, ``m`` and ``v`` (the second oracle its trace is checked against), and
the planner (:mod:`collsim.plan`) calls them for configurations too large to build as a
schedule.  ``m`` may be fractional here: the planner estimates configurations whose
micro-batch count a broken rule makes fractional.

=============== ============================== ============================================
schedule        idle time per stage            peak in-flight on stage ``s`` (chunks)
=============== ============================== ============================================
``gpipe``       (p-1)(t_f+t_b+t_w)             m
``1f1b``        (p-1)(t_f+t_b+t_w)             min(p-s, m)
``interleaved`` (p-1)(t_f+t_b+t_w)/v           min(2(p-s-1) + (v-1)p + 1, m·v)
``zb-h1``       (p-1)(t_f+t_b-t_w)             min(p, m)
=============== ============================== ============================================

Sources: Huang et al. 2019 (GPipe); Narayanan et al. 2021, "Efficient Large-Scale Language
Model Training on GPU Clusters Using Megatron-LM" (1F1B and interleaved 1F1B, bubble
(p-1)/(v·m + p-1)); Korthikanti et al. 2022 §4.2.3 (interleaved stage 0 holds
p·(1 + (p-1)/(p·v)) stages' worth of activations); Qi et al. 2024 (ZB-H1).

Examples
--------
>>> bubble_fraction("interleaved", p=4, m=8, v=2)  # (p-1)/(v·m + p-1) = 3/19
0.15789...
>>> peak_inflight("interleaved", p=4, m=8, v=2)
(11, 9, 7, 5)
>>> peak_inflight("1f1b", p=4, m=8, stage=0)
4
"""

import math

from ....errors import ConfigError
from ._checks import check_times

__all__ = ["CLOSED_FORMS", "bubble_time", "bubble_fraction", "peak_inflight"]

CLOSED_FORMS = ("gpipe", "1f1b", "interleaved", "zb-h1")


def _sizes(name, p, m, v):
    if name not in CLOSED_FORMS:
        raise ConfigError(
            f"schedule {name!r} has no closed form; closed forms exist for "
            f"'gpipe', '1f1b', 'interleaved' and 'zb-h1' (measure a hand-built schedule's trace)"
        )
    for what, value in (("p", p), ("m", m), ("v", v)):
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        if not ok or not math.isfinite(value) or value <= 0 or (what != "m" and value < 1):
            raise ConfigError(f"{what}={value!r} must be a finite number >= 1")
    if name != "interleaved" and v != 1:
        raise ConfigError(f"v={v} model chunks per stage only applies to 'interleaved'; use v=1")


def bubble_time(name, p, m, v=1, t_f=1.0, t_b=1.0, t_w=1.0):
    """Idle time of each stage, with zero communication time.

    ``t_f``, ``t_b``, ``t_w`` are one micro-batch's forward, input-gradient and
    weight-gradient times on one whole stage (all its chunks).  zb-h1's form holds only when
    ``t_w <= min(t_f, t_b)``.

    >>> bubble_time("interleaved", p=4, m=8, v=3)  # (p-1)·3/v
    3.0
    """
    _sizes(name, p, m, v)
    check_times(t_f, t_b, t_w)
    full = t_f + t_b + t_w
    if name in ("gpipe", "1f1b"):
        return (p - 1) * full
    if name == "interleaved":
        return (p - 1) * full / v
    if t_w > min(t_f, t_b):
        raise ConfigError(
            f"the zb-h1 bubble (p-1)(t_f+t_b-t_w) assumes t_w <= min(t_f, t_b); got "
            f"t_f={t_f}, t_b={t_b}, t_w={t_w}; nearest valid choice: t_w={min(t_f, t_b)}"
        )
    return (p - 1) * (t_f + t_b - t_w)


def bubble_fraction(name, p, m, v=1, t_f=1.0, t_b=1.0, t_w=1.0):
    """Share of a stage's time spent idle: ``bubble / (bubble + m (t_f+t_b+t_w))``.

    For gpipe and 1f1b ``(p-1)/(m+p-1)``; interleaved ``(p-1)/(v·m + p-1)``.

    >>> bubble_fraction("1f1b", p=4, m=8)  # 3/11
    0.2727...
    """
    bubble = bubble_time(name, p, m, v, t_f, t_b, t_w)
    return bubble / (bubble + m * (t_f + t_b + t_w))


def peak_inflight(name, p, m, v=1, stage=None):
    """Most (micro-batch, chunk) activations a stage holds at once, per stage or for one.

    One unit is one chunk's activations, 1/v of a whole stage's for interleaved schedules.

    >>> peak_inflight("gpipe", p=2, m=5)
    (5, 5)
    """
    _sizes(name, p, m, v)
    per_stage = {
        "gpipe": lambda s: m,
        "1f1b": lambda s: min(p - s, m),
        "interleaved": lambda s: min(2 * (p - s - 1) + (v - 1) * p + 1, m * v),
        "zb-h1": lambda s: min(p, m),
    }[name]
    if stage is not None:
        return per_stage(stage)
    return tuple(per_stage(s) for s in range(int(p)))
