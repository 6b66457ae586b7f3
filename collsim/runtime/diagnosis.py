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

from ..errors import DeadlockError
from .ops import Exchange, Recv, Send, Wait

__all__ = ["deadlock_report", "describe"]


def describe(op):
    """How the deadlock report says what a process waits for."""
    if isinstance(op, Send):
        return f"send to rank {op.dst} (tag {op.tag!r}): rank {op.dst} never posted the recv"
    if isinstance(op, Recv):
        return f"recv from rank {op.src} (tag {op.tag!r}): rank {op.src} never sent it"
    if isinstance(op, Wait | Exchange):
        return "wait" if isinstance(op, Wait) else "exchange"
    return type(op).__name__.lower()


def deadlock_report(blocked, now, collective_calls=None):
    """A :class:`DeadlockError` naming every waiting rank and what it waits for, and,
    like NCCL's flight recorder, every stuck collective with the ranks missing from it."""
    waiting, lines, stuck = {}, [], {}
    for proc in blocked:
        op = proc.blocked_on
        if isinstance(op, Wait):
            what = "wait for " + "; ".join(h.describe() for h in op.handles if not h.done)
        else:
            what = describe(op) if op is not None else "(not started)"
        if proc.collective is not None:
            group, seq, call = proc.collective
            stuck[(group, seq)] = call
            what = f"{call.name} #{seq}: {what}"
        who = f"rank {proc.rank.id}" + ("" if proc.name == "main" else f" ({proc.name})")
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
    return DeadlockError(message, waiting, missing_by, now)
