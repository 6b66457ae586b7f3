"""Checks shared by `Schedule`, the builders and the layer splitter.

Every message names the value, the rule and the nearest valid choice (DESIGN.md, principle 5).
"""

import math

from ....errors import ConfigError


def check_count(what, value, minimum=1):
    """Return ``value`` if it is an int >= ``minimum``; raise ConfigError otherwise."""
    # bool is an int subclass; p=True is almost certainly a bug, not p=1
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(
            f"{what} must be an integer, got {value!r} ({type(value).__name__}); "
            f"nearest valid choice: {what}={max(minimum, _round_or(value, minimum))}"
        )
    if value < minimum:
        raise ConfigError(
            f"{what}={value} is too small: it must be >= {minimum}; "
            f"nearest valid choice: {what}={minimum}"
        )
    return value


def nearest_multiples(value, step):
    """The multiples of ``step`` around ``value`` (never 0), for 'nearest valid choice' hints."""
    below = (value // step) * step
    above = below + step
    return [m for m in (below, above) if m > 0]


def _round_or(value, default):
    try:
        return round(value)
    except (TypeError, ValueError, OverflowError):
        return default


def check_times(t_f, t_b, t_w):
    """Pass times for the closed forms: finite seconds >= 0, not all zero."""
    for name, value in (("t_f", t_f), ("t_b", t_b), ("t_w", t_w)):
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        if not ok or not math.isfinite(value) or value < 0:
            raise ConfigError(f"{name}={value!r} must be a finite number of seconds >= 0")
    if t_f + t_b + t_w == 0:
        raise ConfigError("t_f, t_b and t_w are all 0; at least one pass must take time")


def check_stage_ops(schedule, stage, stage_ops):
    """Check that one stage of ``schedule`` runs every pass exactly once, in a valid local order.

    Local order: a micro-batch's F before its backward on the same (stage, chunk), and B before W.
    Cross-stage order is the executor's to respect (`Schedule.dependencies`).
    """
    m, v = schedule.microbatches, schedule.virtual
    slot = {}  # (kind, microbatch, chunk) -> position in this stage's order
    for i, op in enumerate(stage_ops):
        if op.microbatch >= m or op.chunk >= v:
            raise ConfigError(
                f"stage {stage} slot {i}: {op} is out of range; micro-batches are "
                f"0..{m - 1} and chunks 0..{v - 1}"
            )
        key = (op.kind, op.microbatch, op.chunk)
        if key in slot:
            raise ConfigError(
                f"stage {stage} runs {op} twice (slots {slot[key]} and {i}); "
                f"each pass runs exactly once per stage"
            )
        slot[key] = i
    kinds = ("F", "B", "W") if schedule.split_backward else ("F", "BW")
    for mb in range(m):
        for chunk in range(v):
            order = [slot.get((kind, mb, chunk)) for kind in kinds]
            names = [f"{kind}{mb}" + (f".{chunk}" if v > 1 else "") for kind in kinds]
            missing = [name for name, pos in zip(names, order) if pos is None]
            if missing:
                raise ConfigError(
                    f"stage {stage} never runs {', '.join(missing)}; every micro-batch "
                    f"needs {' then '.join(kinds)} on every (stage, chunk)"
                )
            if order != sorted(order):
                raise ConfigError(
                    f"stage {stage} runs {', '.join(names)} at slots {order}; they must run "
                    f"in the order {', '.join(kinds)}"
                )
