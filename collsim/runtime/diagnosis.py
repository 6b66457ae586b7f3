"""How a hang is reported: every waiting rank and what it waits for, and, like NCCL's
flight recorder, every collective that never completed with the ranks missing from it.

Examples
--------
>>> import numpy as np, collsim
>>> def program(rank):
...     if rank.id != 2:                       # rank 2 never joins
...         yield from rank.all_reduce(np.ones(4))
>>> try:
...     collsim.Cluster(collsim.topology.ring(3)).run(program)
... except collsim.DeadlockError as hang:
...     print(hang.stuck)
{((0, 1, 2), 0, 'all_reduce'): ([0, 1], [2])}
"""

from dataclasses import dataclass
from typing import NamedTuple

from ..errors import DeadlockError, WatchdogTimeout
from ..units import format_size, format_time
from .ops import Recv, Send, Wait
from .waiting import Pending, describe, finished_ranks, waited_items

__all__ = [
    "deadlock_report",
    "describe",
    "watchdog_report",
    "RankReport",
    "ProcessWaits",
    "Culprit",
]


def _waits(proc, pending=None, finished=None):
    """What a blocked process waits for, in the report's words."""
    items = waited_items(proc, pending, finished)
    if not items:
        return "(not started)"
    return "wait for " + "; ".join(items) if isinstance(proc.blocked_on, Wait) else items[0]


def _counted(lines):
    """Each distinct line once, in first-seen order, with "(x7)" where it repeats.

    >>> _counted(["rank 2 -> rank 3: 1 KiB left", "rank 4 -> rank 5: 1 KiB left",
    ...           "rank 2 -> rank 3: 1 KiB left"])
    ['rank 2 -> rank 3: 1 KiB left (x2)', 'rank 4 -> rank 5: 1 KiB left']
    """
    counts = {}
    for line in lines:
        counts[line] = counts.get(line, 0) + 1
    return [line if n == 1 else f"{line} (x{n})" for line, n in counts.items()]


def _peers_waited_on(blocked):
    """``{peer rank: {ranks waiting for a message to or from it}}``."""
    peers = {}
    for proc in blocked:
        op = proc.blocked_on
        if isinstance(op, Send | Recv):
            whats = [("", op.dst if isinstance(op, Send) else op.src, None)]
        elif isinstance(op, Wait):
            whats = [h.what for h in op.handles if not h.done and isinstance(h.what, tuple)]
        else:
            whats = []
        for _, peer, _ in whats:
            if isinstance(peer, int):
                peers.setdefault(peer, set()).add(proc.rank.id)
    return peers


def deadlock_report(blocked, now, collective_calls=None, notes=(), processes=(), mail=None):
    """A :class:`DeadlockError` naming every waiting rank and what it waits for, and,
    like NCCL's flight recorder, every stuck collective with the ranks missing from it;
    ``notes`` are lines that say why (an operation a rank made and never yielded).  With
    the run's ``processes`` and ``mail``, a message sent with another tag than the one
    awaited is named, and every rank that finished while others wait for it."""
    pending = Pending(mail.unmatched()) if mail is not None else None
    finished = finished_ranks(processes)
    waiting, lines, stuck = {}, [], {}
    for proc in blocked:
        what = _waits(proc, pending, finished)
        if proc.collective is not None:
            inside = proc.collective
            stuck[(inside.group, inside.seq)] = inside.call
            what = f"{inside.call.name} #{inside.seq}: {what}"
        who = f"rank {proc.rank.id}" + ("" if proc.name == "main" else f" ({proc.name})")
        where = getattr(proc.source, "where", None)  # blocking code: the user's line
        if where is not None:
            what = f"{what} (called at {where})"
        waiting.setdefault(proc.rank.id, []).append(what)
        lines.append(f"  {who} waits in {what}")
    message = (
        f"deadlock at t={now:.6g} s: no event can ever happen again, "
        f"but {len(waiting)} rank(s) are still waiting:\n" + "\n".join(lines)
    )
    missing_by = {}
    for (group, seq), call in sorted(stuck.items(), key=lambda kv: kv[0][1]):
        joined = sorted((collective_calls or {}).get((group, seq), {}))
        missing = [r for r in group if r not in joined]
        missing_by[(group, seq, call.name)] = (joined, missing)
        message += (
            f"\ncollective {call.name} #{seq} on group {list(group)} ({call}): "
            f"ranks {joined} joined" + (f"; ranks {missing} never joined it" if missing else "")
        )
    for peer, waiters in sorted(_peers_waited_on(blocked).items()):
        if peer in finished:
            message += f"\n{finished[peer]}, while ranks {sorted(waiters)} wait for it"
    if pending is not None:  # those no waiting line above named already
        message += "".join(f"\n{m}" for m in pending.mismatches() if m not in pending.named)
    message += "".join(f"\n{note}" for note in notes)
    return DeadlockError(message, waiting, missing_by, now)


# -- the watchdog (runs with faults) -----------------------------------------------------


NEVER_STARTED = "never started"
# a flight-recorder line longer than this puts what the rank waits for on lines of its own
LINE_WIDTH = 160


class ProcessWaits(NamedTuple):
    """What one blocked process of a rank waits for: ``collective`` (``"all_reduce #3"``)
    when it waits inside one, and ``items``, one per peer and call or tag
    (:func:`~collsim.runtime.waiting.group_messages`); no items: it never started."""

    collective: str = None
    items: tuple = ()

    def __str__(self):
        if not self.items:
            return NEVER_STARTED
        return ("for " if self.collective is None else f"in {self.collective}, for ") + (
            "; ".join(self.items)
        )


@dataclass(frozen=True)
class RankReport:
    """One rank's entry in the flight recorder.

    ``entered`` and ``completed`` are ``(seq, name)`` of the last collective the rank
    entered and the last it completed (None: none yet); ``waits_for`` what each of its
    blocked processes waits for (:class:`ProcessWaits`); ``crashed_at`` the time it
    crashed, or None.  Printed on one line, or, when that would run past
    ``LINE_WIDTH`` characters, with a line per peer it waits for."""

    rank: int
    entered: tuple = None
    completed: tuple = None
    waits_for: tuple = ()
    crashed_at: float = None

    def __str__(self):
        def call(c):
            return "none" if c is None else f"#{c[0]} {c[1]}"

        head = f"rank {self.rank}: " + (
            f"CRASHED at t={format_time(self.crashed_at)}; " if self.crashed_at is not None else ""
        )
        text = f"{head}last entered {call(self.entered)}, last completed {call(self.completed)}"
        if not self.waits_for:
            return text + ("; finished" if self.crashed_at is None else "")
        verb = "was waiting" if self.crashed_at is not None else "waits"
        said = [f"{verb} {w}" if w.items else str(w) for w in self.waits_for]
        if len(text) + sum(len(w) + 3 for w in said) <= LINE_WIDTH:
            return text + "; " + " | ".join(said)
        lines = [text + ";"]
        for w in self.waits_for:
            if not w.items:
                lines.append(f"      {NEVER_STARTED}")
                continue
            lines.append(
                f"      {verb} " + ("for:" if w.collective is None else f"in {w.collective}, for:")
            )
            lines += [f"        {item}" for item in w.items]
        return "\n".join(lines)


@dataclass(frozen=True)
class Culprit:
    """What stopped the run: ``kind`` is ``"crashed rank"``, ``"failed link"`` (down,
    with no other path), ``"slow rank"`` (the slowest) or ``"program"`` (no fault explains
    it: the ranks' programs deadlock); ``rank`` or ``link`` names it, ``time`` when."""

    kind: str
    rank: int = None
    link: tuple = None
    time: float = None
    reason: str = ""

    def __str__(self):
        return self.reason


def watchdog_report(execution, blocked):
    """The :class:`~collsim.errors.WatchdogTimeout` of a run with faults that stopped
    making progress: the flight recorder's line per rank and the culprit."""
    faults, network = execution.faults, execution.network
    deadline, last = execution.engine.now, execution.last_progress
    base = deadlock_report(blocked, deadline, execution.collective_calls)
    waits = {}
    for proc in blocked:
        if proc.blocked_on is None and proc.rank.id not in execution._crashed:
            continue
        inside = proc.collective
        collective = None if inside is None else f"{inside.call.name} #{inside.seq}"
        what = ProcessWaits(collective, tuple(waited_items(proc)))
        waits.setdefault(proc.rank.id, []).append(what)
    ranks = {}
    for r in range(execution.cluster.size):
        ranks[r] = RankReport(
            r,
            _call(execution.entered.get(r)),
            _call(execution.completed.get(r)),
            tuple(waits.get(r, ())),
            execution._crashed.get(r),
        )
    culprit = _culprit(execution, network, faults)
    lines = [
        f"watchdog timeout at t={format_time(deadline)}: no progress for "
        f"{format_time(faults.watchdog_timeout)} (the watchdog timeout) since "
        f"t={format_time(last)}; NCCL's watchdog would abort the job here",
        f"culprit: {culprit}",
        "faults: " + ", ".join(r.given or repr(r) for r in faults.all()),
        "flight recorder (last collective entered and completed, by sequence number):",
    ]
    lines += [f"  {report}" for report in ranks.values()]
    if network.stalled:
        lines.append(f"stalled transfers ({len(network.stalled)}):")
        stalls = _counted(_stall(stall) for stall in network.stalled)
        lines += [f"  {stall}" for stall in stalls[:8]]
        if len(stalls) > 8:
            lines.append(f"  ... and {len(stalls) - 8} more")
    for (group, seq, name), (_joined, missing) in base.stuck.items():
        if missing:
            lines.append(
                f"collective {name} #{seq} on group {list(group)}: ranks {missing} never joined it"
            )
    return WatchdogTimeout(
        "\n".join(lines),
        base.waiting,
        base.stuck,
        deadline,
        None,
        ranks,
        culprit,
        last,
        faults.watchdog_timeout,
    )


def _call(entry):
    """``(seq, name)`` of a flight-recorder entry (the :class:`~collsim.runtime.ops.Enter`
    a rank yielded)."""
    return None if entry is None else (entry.seq, entry.call.name)


def _stall(stall):
    why = (
        f"rank {stall.rank} crashed"
        if stall.rank is not None
        else f"link {_link(stall.link)} is down and there is no other path"
    )
    ends = f"rank {stall.src} -> rank {stall.dst}" if stall.src is not None else "a combined flow"
    return (
        f"{ends}: {format_size(round(stall.remaining))} of {format_size(round(stall.nbytes))} "
        f"left since t={format_time(stall.time)} ({why})"
    )


def _link(link):
    return f"{link[0]}-{link[1]}"


def _culprit(execution, network, faults):
    """The crashed rank; else the failed link a flow stalled on; else the slowest rank."""
    if execution._crashed:
        rank, at = min(execution._crashed.items(), key=lambda kv: (kv[1], kv[0]))
        return Culprit(
            "crashed rank",
            rank=rank,
            time=at,
            reason=f"rank {rank} crashed at t={format_time(at)}; every rank waiting on it stopped",
        )
    for stall in network.stalled:
        if stall.link is not None:
            at = next(
                (r.at for r in faults.fail_links if {r.u, r.v} == set(stall.link)), stall.time
            )
            src, dst = stall.src, stall.dst
            path = (
                f"the topology has no other path from rank {src} to rank {dst}"
                if src is not None
                else "a switch-combined transfer over it cannot be rerouted"
            )
            return Culprit(
                "failed link",
                link=stall.link,
                time=at,
                reason=f"link {_link(stall.link)} went down at t={format_time(at)} and {path}",
            )
    if faults.slow_ranks:
        slow = max(faults.slow_ranks, key=lambda r: (r.factor, -r.rank))
        return Culprit(
            "slow rank",
            rank=slow.rank,
            reason=f"rank {slow.rank} is the slowest (compute {slow.factor:g}x as "
            "long); no fault stopped a transfer, so the programs themselves "
            "wait on each other",
        )
    return Culprit(
        "program",
        reason="no fault stopped a transfer: the ranks' programs wait on each other (a deadlock)",
    )
