"""The guards that stop a program that would run forever, and what they report.

All the numbers live here.  Every guard counts something deterministic (simulated
seconds, operations, engine events), never wall-clock time, so a run that succeeds gives
the same result on any machine and a runaway stops at the same point every time.

* ``max_ops``: operations the rank programs issue.  Each operation a program yields
  (send, recv, compute, wait, ...) counts one, plus one per message that an exchange
  or a collective's schedule sends.  Only programs can make a run endless: the
  network's own events (a transfer's start and end, max-min re-sharing) are a finite
  consequence of the messages posted, so this is the guard a runaway meets first.
  There is no separate guard on events at one simulated instant: a run over free links
  (bandwidth ``"inf"``, latency 0) rightly does all its work at t=0; the report says
  instead when a runaway let no simulated time pass.
* ``max_time``: simulated seconds; a loop whose operations take long stops here.
* ``max_events``: engine events, a backstop for the network model itself.

When ``max_ops`` trips, the run goes on for :data:`SAMPLE_OPS` more operations while
recording what each rank yields, then stops with a :class:`~collsim.errors.
SimulationLimitError` that names the looping ranks, their operations with peers and
counts, whether simulated time still moved, and the parameter to raise.

Examples
--------
>>> default_max_ops(8)
1000224
>>> check_guard("max_time", float("nan"))  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
collsim.errors.ConfigError: Cluster(max_time=nan): a guard must be a number > 0 (or math.inf ...
"""

import math
import numbers
from collections import Counter

from ..errors import ConfigError, SimulationLimitError
from ..network import engine
from ..units import parse_time
from .diagnosis import describe

__all__ = [
    "DEFAULT_MAX_TIME",
    "DEFAULT_MAX_EVENTS",
    "OPS_BASE",
    "OPS_PER_RANK_PAIR",
    "EXEC_OPS_BASE",
    "SAMPLE_OPS",
    "default_max_ops",
    "check_guard",
    "OpSample",
    "runaway_error",
]

# Why these values.  The engine runs 60-170 thousand transfers a second on one core
# (benchmarks/bench_engine.py), 200-600 thousand operations a second for a ping-pong or a
# compute loop.  OPS_BASE stops such a runaway on a small cluster in a few seconds
# (measured on 2 ranks: a zero-time loop 2 s, a 1 ns compute loop 3-4 s, an endless
# ping-pong 4-6 s) and holds its trace to about a million records (~150 MB), where the
# engine's old guard of 200 million events took 7-15 minutes and 22 GiB.  Programs that
# collsim ships stay below it: a pipeline step issues about 8 operations per stage,
# micro-batch and chunk, so the largest the CLI allows (p·v <= 256 layers, 256
# micro-batches) issues about 530 thousand.
OPS_BASE = 1_000_000
# The largest collective, a ring all-reduce on K ranks, sends 2K(K-1) messages (2 million
# at K = 1,024); 4K(K-1) leaves room for two of them over every rank on top of OPS_BASE,
# so one collective (and the CLI's single runs) never meets the guard.  A runaway on K
# ranks therefore stops after OPS_BASE + 4K(K-1) operations: ~25 s at K = 1,024.
OPS_PER_RANK_PAIR = 4
# Blocking programs (collsim exec, collsim.mpi) pay two thread switches per call: 20-30
# thousand operations a second on 2 ranks (a busy send loop, on a shared 2-core machine),
# so OPS_BASE let a runaway run 40-60 s there.  `collsim exec` starts from this base
# instead, which stops such a loop in 2-3 s (about 6 s on a loaded machine); a teaching
# program stays below it (a ping-pong over 10 sizes x 1,000 repeats is 40,000 calls).
EXEC_OPS_BASE = 50_000
# The engine's own guards (a day of simulated time; an event backstop) are defined with
# the engine, which sits below the runtime, and named here with the others.
DEFAULT_MAX_TIME = engine.DEFAULT_MAX_TIME
DEFAULT_MAX_EVENTS = engine.DEFAULT_MAX_EVENTS
# Operations recorded after max_ops trips, to say what the looping ranks do: a few ms.
SAMPLE_OPS = 10_000
# How many different operations the report lists per rank, and how many ranks.
_REPORT_KINDS, _REPORT_RANKS = 4, 8


def default_max_ops(k, base=OPS_BASE):
    """The ``max_ops`` guard of a cluster of ``k`` ranks: ``base + 4·k·(k-1)``
    (``base`` is :data:`OPS_BASE`, or :data:`EXEC_OPS_BASE` for `collsim exec`).

    >>> default_max_ops(2, base=EXEC_OPS_BASE)
    50008
    """
    return base + OPS_PER_RANK_PAIR * k * (k - 1)


def check_guard(name, value, *, integer=False):
    """``value`` as a guard: a number > 0, or ``math.inf`` to switch the guard off.

    ``max_time`` also takes a time string (``"1h"`` is not one; ``"3600s"`` is).
    """
    given = value
    if name == "max_time" and isinstance(value, str):
        try:
            value = parse_time(value)
        except ConfigError as exc:
            raise ConfigError(f"Cluster({name}={given!r}): {exc}") from None
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    ok = ok and (value == math.inf or (math.isfinite(value) and value > 0))
    if ok and integer and value != math.inf and value != int(value):
        ok = False
    if not ok:
        kind = "a whole number" if integer else "a number"
        raise ConfigError(
            f"Cluster({name}={given!r}): a guard must be {kind} > 0 (or math.inf to switch it off)"
        )
    return float(value) if not integer or value == math.inf else int(value)


class OpSample:
    """What each process yielded after ``max_ops`` tripped: counts per description."""

    def __init__(self, now):
        self.start_time = now
        self.counts = {}  # (rank id, process name) -> Counter of descriptions

    def record(self, proc, op):
        key = (proc.rank.id, proc.name)
        counts = self.counts.get(key)
        if counts is None:
            counts = self.counts[key] = Counter()
        counts[_what(op)] += 1


def _over(guard, limit):
    """A value past ``limit`` for the hint, as the flag takes it (``--max-time 172800s``)."""
    return f"{2 * limit:g}s" if guard == "max_time" else str(2 * int(limit))


def _what(op):
    """Kind and peer of an operation, for the runaway report (no tags: they often count)."""
    kind = type(op).__name__
    if kind == "Send":
        return f"send to rank {op.dst}"
    if kind == "Recv":
        return f"recv from rank {op.src}"
    if kind == "Compute":
        return f"compute ({op.label})" if op.label != "compute" else "compute"
    if kind == "Exchange":
        peers = sorted({s.dst for s in op.sends} | {r.src for r in op.recvs})
        return f"exchange with ranks {peers}"
    if kind == "Steps":
        return "run a collective's steps"
    if kind == "Enter":
        return f"enter {op.call.name}" if op.call is not None else "leave a collective"
    if kind == "Start":
        return "start a background task"
    return describe(op)


def runaway_error(
    guard, limit, now, sample=None, processes=(), ended=False, default=None, flags=None
):
    """The :class:`SimulationLimitError` for a tripped guard.

    ``sample`` (an :class:`OpSample`) says what the ranks yielded after ``max_ops``
    tripped; without one (``max_time``, ``max_events``) the report names the ranks still
    running and what they wait for.  ``ended``: the run finished within the sample.
    ``flags`` maps each guard to the command-line flag that set it (``Cluster.guard_flags``):
    the message then tells how to raise the guard with that flag, not with ``Cluster(...)``.
    """
    lines, looping = [], {}
    if sample is not None:
        moved = now - sample.start_time
        when = (
            f"simulated time stood still at t={now:.6g} s: a zero-time loop (operations "
            "that complete at once, e.g. compute(seconds=0) or a wait on a done handle)"
            if moved == 0
            else f"simulated time went from t={sample.start_time:.6g} s to t={now:.6g} s"
        )
        seen = sum(sum(counts.values()) for counts in sample.counts.values())
        lines.append(f"in the {seen:,} operations after the guard, {when}; they were:")
        ranked = sorted(sample.counts.items(), key=lambda kv: (-sum(kv[1].values()), kv[0]))
        for (rank_id, name), counts in ranked[:_REPORT_RANKS]:
            merged = looping.setdefault(rank_id, {})
            for what, n in counts.items():
                merged[what] = merged.get(what, 0) + n
            top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
            shown = ", ".join(f"{n:,} x {what}" for what, n in top[:_REPORT_KINDS])
            more = (
                f", and {len(top) - _REPORT_KINDS} more kinds" if len(top) > _REPORT_KINDS else ""
            )
            who = f"rank {rank_id}" + ("" if name == "main" else f" ({name})")
            lines.append(f"  {who}: {shown}{more}")
        if len(ranked) > _REPORT_RANKS:
            lines.append(f"  ... and {len(ranked) - _REPORT_RANKS} more ranks")
        if ended:
            lines.append("the program then ended: it was not endless, only bigger than the guard")
    else:
        running = [p for p in processes if not p.handle.done]
        for proc in running[:_REPORT_RANKS]:
            op = proc.blocked_on
            if op is None:
                what = "(running)"
            elif type(op).__name__ == "Wait":
                what = "wait for " + "; ".join(h.describe() for h in op.handles if not h.done)
            else:
                what = _what(op)
            looping.setdefault(proc.rank.id, {})[what] = 1
            lines.append(f"  rank {proc.rank.id} ({proc.name}) was in: {what}")
        if len(running) > _REPORT_RANKS:
            lines.append(f"  ... and {len(running) - _REPORT_RANKS} more")
    flag = (flags or {}).get(guard)
    shown = {"max_ops": limit, "max_events": limit, "max_time": f"{limit:g}s"}[guard]
    named = f"{guard}={shown}" if flag is None else f"{flag} {shown}"  # as the user set it
    head = {
        "max_ops": f"the rank programs issued more than {named} operations",
        "max_events": f"the engine processed more than {named} events",
        "max_time": f"simulated time passed the guard {named}",
    }[guard]
    default_note = f" (the default is {default:,})" if default is not None else ""
    if flag is None:
        setting = f"Cluster(topology, {guard}=...){default_note}, or math.inf"
    else:
        setting = f"{flag} {_over(guard, limit)}, or {flag} inf"
    raise_hint = (
        f"if the program is meant to do this much, raise the guard: {setting} to switch it off"
    )
    message = f"{head} at t={now:.6g} s: does a rank loop forever?\n" + "\n".join(lines)
    return SimulationLimitError(message + "\n" + raise_hint, guard, limit, now, looping)
