"""Faults acting on one run: a straggler's slower compute, degraded and failed links, and
crashed ranks, applied to an :class:`~collsim.runtime.execution.Execution` (the records
themselves, and how they are read and checked, are :mod:`collsim.runtime.faults`'s).

Slow links and ranks act from the start; a link goes down and a rank crashes at its time,
an engine event of START priority (at t=0: before any program starts).  The execution keeps
what the rest of the run reads: ``_slow`` (rank -> factor, for every compute span) and
``_crashed`` (rank -> when it crashed, for the scheduler, the watchdog and the fault log).
"""

from functools import partial

from ..network import START

__all__ = ["install_faults"]


def install_faults(execution, faults):
    """Degrade links and ranks now; take links down and crash ranks at their times
    (at t=0: before any program starts)."""
    network = execution.network
    execution._slow = {r.rank: r.factor for r in faults.slow_ranks}
    for record in faults.slow_links:
        network.scale_link(record.u, record.v, record.factor)
    if faults.fail_links or faults.crash_ranks:
        network.tracking = True
    timed = [(r.at, partial(_fail, execution), r) for r in faults.fail_links]
    timed += [(r.at, partial(_crash, execution), r) for r in faults.crash_ranks]
    for at, apply, record in timed:
        if at == 0:
            apply(record)
        else:  # START: flows that end at that instant still arrive, new ones see it
            execution.engine.at(at, START, partial(_when_running, execution), (apply, record))


def _when_running(execution, fault):
    """Apply a timed fault, unless every process has ended: then it changes nothing
    and must not move the clock, since the run ended at its last progress."""
    if all(p.handle.done for p in execution.processes):
        execution.engine.now = execution.last_progress
        return
    apply, record = fault
    apply(record)


def _fail(execution, record):
    execution.network.fail_link(record.u, record.v)


def _crash(execution, record):
    now, rank = execution.engine.now, record.rank
    execution._crashed[rank] = now
    execution.network.crash_rank(rank)
    # its compute stream stops too: a span it was running ends now, queued ones never ran
    computes = execution.trace.computes
    if any(c.rank == rank and c.end > now for c in computes):
        computes[:] = [
            c._replace(end=now) if c.rank == rank and c.end > now else c
            for c in computes
            if not (c.rank == rank and c.start > now)
        ]
