"""``--max-ops``, ``--max-time``, ``--max-events``: the runaway guards of a command that runs
the user's own program (``collsim exec``), each checked before the run and named by the
message of the guard it sets.

The commands that run collsim's own programs (run, step, pipeline, verify, ...) need none:
their programs end, and what they run is bounded up front.  A lesson builds its clusters
in its own code, so a runaway there names ``Cluster(max_ops=...)``, the keyword the
learner edits.

Examples
--------
>>> import argparse
>>> parser = argparse.ArgumentParser()
>>> _ = add_guard_arguments(parser, max_ops_default="100,000 + 4K(K-1)")
>>> guards_from_args(parser.parse_args(["--max-ops", "2e6", "--max-time", "inf"]), ranks=2)
{'max_ops': 2000000, 'max_time': inf, 'max_events': 200000000}
>>> guards_from_args(parser.parse_args(["--max-ops", "0"]), ranks=2)
Traceback (most recent call last):
...
collsim.errors.ConfigError: --max-ops '0': a guard must be a whole number > 0, ...
"""

import math

from .. import units
from ..errors import ConfigError
from ..runtime.guards import DEFAULT_MAX_EVENTS, DEFAULT_MAX_TIME, EXEC_OPS_BASE, default_max_ops

__all__ = ["GUARD_FLAGS", "add_guard_arguments", "guards_from_args"]

# the flag that sets each guard: Cluster(guard_flags=...) passes them to the guards' messages
GUARD_FLAGS = {"max_ops": "--max-ops", "max_time": "--max-time", "max_events": "--max-events"}


def add_guard_arguments(parser, max_ops_default):
    """Add the three guard flags to ``parser`` (``max_ops_default`` says its default)."""
    g = parser.add_argument_group(
        "runaway guards (each stops the run with a report of what "
        "each rank was doing; 'inf' switches one off)"
    )
    g.add_argument(
        "--max-ops",
        default=None,
        metavar="N",
        help="operations (calls and messages) the ranks may issue, default "
        f"{max_ops_default}: a busy loop of calls stops in seconds",
    )
    g.add_argument(
        "--max-time",
        default=None,
        metavar="T",
        help="simulated time the run may reach, e.g. 10s or 7200s (default 86400s, a day)",
    )
    g.add_argument(
        "--max-events",
        default=None,
        metavar="N",
        help=f"engine events, a backstop (default {DEFAULT_MAX_EVENTS:,})",
    )
    return g


def guards_from_args(args, ranks):
    """The Cluster keywords the guard flags give on ``ranks`` ranks, each checked; the
    defaults where a flag is not given (``max_ops`` from :data:`EXEC_OPS_BASE`)."""
    return {
        "max_ops": _count(args.max_ops, "--max-ops", default_max_ops(ranks, EXEC_OPS_BASE)),
        "max_time": _seconds(args.max_time, "--max-time", DEFAULT_MAX_TIME),
        "max_events": _count(args.max_events, "--max-events", DEFAULT_MAX_EVENTS),
    }


def _count(text, flag, default):
    """A whole number > 0 (``1e6`` is one), or ``inf``."""
    if text is None:
        return default
    rule = "a guard must be a whole number > 0, or inf to switch it off"
    try:
        value = float(str(text).replace("_", ""))
    except ValueError:
        raise ConfigError(f"{flag} {text!r}: {rule}; e.g. {flag} {default}") from None
    if value == math.inf:
        return math.inf
    if not math.isfinite(value) or value <= 0 or value != int(value):
        nearest = max(1, int(value)) if math.isfinite(value) else default
        raise ConfigError(f"{flag} {text!r}: {rule}; nearest valid {flag} {nearest}")
    return int(value)


def _seconds(text, flag, default):
    """Simulated seconds > 0 from a time string (``10s``, ``5ms``), or ``inf``."""
    if text is None:
        return default
    if str(text).strip().lower() == "inf":
        return math.inf
    try:
        seconds = units.parse_time(text)
    except ConfigError as exc:
        raise ConfigError(f"{flag} {text!r}: {exc}; or inf to switch the guard off") from None
    if seconds <= 0:
        raise ConfigError(f"{flag} {text!r}: the guard must be a time > 0, e.g. {flag} 10s")
    return seconds
