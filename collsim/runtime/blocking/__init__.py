"""Blocking rank code: each rank runs an ordinary function in its own thread, and the engine
passes a baton so that only one thread of the run runs at any moment.

A rank program written as a generator yields its operations; code written the way people
write MPI or torch.distributed programs calls them and blocks.  Here each rank's function
runs in a thread of its own, but a thread runs only while it holds the baton: the engine
resumes it with the result of its last call and waits until it posts the next one (or
returns), so the order of everything is the engine's, in simulated time, and the same
inputs give the same trace byte for byte, with no locks in the user's code.

Each thread is driven by a small generator program (a proxy) that the engine runs like any
other, so point-to-point matching, collectives, the deadlock report (which also names the
line of the user's blocking call), the guards and the trace all work unchanged.  A thread
that a rank's code starts is driven the same way, by a process of its own (see
:mod:`~collsim.runtime.blocking.threads`).

The modules: ``strand`` (one thread and its baton), ``threads`` (the threads a rank starts,
and the thread primitives they wait on), ``calls`` (what rank code calls), ``runs`` (a whole
run) and ``callsite`` (the user's line in reports).

Compute between calls costs no simulated time unless the program says so with
:func:`compute`: ``compute(seconds=1e-3)`` or ``compute(flops=2e12)``.

Examples
--------
>>> import numpy as np, collsim
>>> from collsim.runtime.blocking import run, call, current_rank
>>> def main():
...     rank = current_rank()
...     x = np.full(4, float(rank.id))
...     total = call(rank.all_reduce(x))          # blocks until the all-reduce is done
...     if rank.id == 0:
...         call(rank.send(1, total))
...     elif rank.id == 1:
...         return float(call(rank.recv(0)).sum())
>>> result = run(collsim.Cluster(collsim.topology.ring(4)), main)
>>> result.returns[1]
24.0
"""

from .calls import call, calling_rank, compute, current_rank, in_main_thread, now, stopped
from .runs import MAX_THREADS, run
from .strand import Aborted

__all__ = [
    "run",
    "current_rank",
    "calling_rank",
    "call",
    "now",
    "compute",
    "stopped",
    "in_main_thread",
    "MAX_THREADS",
    "Aborted",
]
