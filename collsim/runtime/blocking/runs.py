"""A blocking run: every rank's function in a thread of its own, driven by the engine, and
what every thread was doing when a run ended with an error."""

import functools
import time

from ...errors import ConfigError
from .strand import Aborted, Strand, proxy
from .threads import threads_are_strands

__all__ = ["run", "MAX_THREADS"]

# a thread is cheap but not free (a stack each); past this, write a generator program
MAX_THREADS = 1024
# after Ctrl-C, how long the ranks' threads get to end before the interrupt goes on without
# them (daemon threads, they end at their next line of Python or with the interpreter)
INTERRUPT_WAIT_S = 0.5


def run(cluster, main, *args, **kwargs):
    """Run ``main(*args, **kwargs)`` on every rank of ``cluster``, each in its own thread;
    returns the :class:`~collsim.runtime.cluster.RunResult` (``returns[r]`` is rank r's
    return value).  An exception in a rank's code ends the run with it; every thread has
    ended when this returns or raises, those the ranks started too."""
    if not callable(main):
        raise ConfigError(f"run({main!r}): give the function each rank runs")
    if cluster.size > MAX_THREADS:
        raise ConfigError(
            f"a blocking run of {cluster.size} ranks needs a thread each, more than the "
            f"{MAX_THREADS} collsim starts; write the program as a generator "
            "(cluster.run(program)) for that many ranks"
        )
    team = []  # every strand of the run: the ranks' own code, then the threads they start
    body = functools.partial(main, *args, **kwargs)

    def program(rank):
        return (yield from proxy(rank, Strand(rank, body, team)))

    deadline = None  # wait for every thread to end, except after Ctrl-C
    try:
        with threads_are_strands():  # still in place while the strands unwind
            try:
                return cluster.run(program)
            except BaseException as exc:
                if not isinstance(exc, Aborted):
                    _note_others(exc, team, cluster.size)
                if isinstance(exc, KeyboardInterrupt):  # the person waits: stop within 1 s
                    deadline = time.monotonic() + INTERRUPT_WAIT_S
                raise
            finally:
                done = 0
                while done < len(team):  # a strand unwinding may start one more
                    team[done].abort(deadline)
                    done += 1
    finally:
        for strand in team:
            left = None if deadline is None else max(0, deadline - time.monotonic())
            strand.thread.join(left)
            strand.release()
        team.clear()  # each strand named the team: a cycle that would keep the run


def _note_others(exc, team, size):
    """Say on ``exc`` what every other rank, and every thread a rank started, was doing
    when the run ended."""
    failed = getattr(exc, "rank", None)
    by_rank = {}
    for strand in team:
        by_rank.setdefault(strand.rank.id, []).append(strand)
    lines = []
    for r in range(size):
        for strand in by_rank.get(r, [None]):
            if r == failed and (strand is None or strand.main):
                continue
            who = f"rank {r}" if strand is None or strand.main else f"rank {r} {strand.name}"
            lines.append(f"  {who}: {_state(strand)}")
    if lines:
        others = "the other ranks" if failed is not None else "the ranks"
        exc.add_note(f"{others} when the run ended:\n" + "\n".join(lines))


def _state(strand):
    """``"blocked at ring.py:12 in main"``, ``"finished"``, ...: what ``strand`` was doing."""
    if strand is not None and strand.running:  # interrupted (Ctrl-C) while its code ran
        return f"running at {strand.running_at()}"
    if strand is None or not strand.request:
        return "not started"
    kind = strand.request[0]
    return {
        "call": f"blocked at {strand.where}",
        "return": "finished",
        "raise": "raised too",
        "aborted": "stopped",
    }.get(kind, kind)
