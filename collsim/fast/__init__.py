"""The fast path: a collective run alone on a cluster, a whole step at a time.

Its one contract: **the same outputs, simulated times, trace and counts as the reference
path, byte for byte.**  The reference path is the plain one a student reads: a schedule
of :class:`~collsim.collectives.schedule.ChunkMove` steps run as messages on the event
engine (:mod:`collsim.collectives.executor`).  Everything here exists only for speed --
schedules as numpy columns (:mod:`collsim.fast.columns`), step timing on arrays instead
of engine events, reductions as one indexed operation, a working block reused between
calls, caches kept on the cluster (``cluster.caches.fast``), the trace's transfers packed
into columns (:mod:`collsim.fast.packed`), the cyclic collector off while a run makes
millions of acyclic objects -- and nothing outside this package knows how it works.  It is
reached through one seam, this module, with two doors, both used only when the cluster's
``fast`` setting is on (``Cluster(fast=False)`` or ``COLLSIM_FAST=0`` leave this package
unused and unimported):

* :func:`run_alone`, which ``cluster.all_reduce(...)`` and its siblings call; where it
  cannot promise the contract it says so (:class:`Unbatched`) before touching a buffer,
  and the reference path runs;
* :func:`engine_run`, around every :meth:`Cluster.run <collsim.runtime.cluster.Cluster.run>`
  (rank programs, and the collectives the batched path hands back): the same engine and
  matching, recording into :class:`~collsim.fast.packed.PackedTransfers`.

``tests/test_fast_equivalence.py`` and ``tests/test_batched.py`` hold it to the contract.

Examples
--------
>>> import numpy as np, collsim
>>> fast = collsim.Cluster(collsim.topology.ring(4)).all_reduce([np.ones(8)] * 4)
>>> plain = collsim.Cluster(collsim.topology.ring(4), fast=False).all_reduce([np.ones(8)] * 4)
>>> fast.time == plain.time, fast.trace.transfers == plain.trace.transfers
(True, True)
"""

import gc
from contextlib import contextmanager

from ..network.trace import Trace
from .batched import Unbatched, run_batched
from .packed import PackedTransfers

__all__ = ["run_alone", "engine_run", "Unbatched"]


def run_alone(cluster, schedule, group, buffers, count, dtype, op, protocol):
    """Run ``schedule`` on ``group`` of ``cluster``, where nothing else moves, and return
    the :class:`~collsim.runtime.cluster.RunResult` the reference path would, or an
    :class:`Unbatched` saying why the reference path must run it instead."""
    return run_batched(cluster, schedule, group, buffers, count, dtype, op, protocol)


@contextmanager
def engine_run():
    """A run on the engine at speed: yields the :class:`~collsim.network.trace.Trace` it
    records into (transfers packed as they arrive) and keeps the cyclic collector off
    until the run is over and released.

    The run allocates millions of small, acyclic objects (events, flows, trace records,
    and a collective's schedule, built when the programs first run); the collector, left
    on, rescans the objects in flight again and again: 0.7-0.9x the speed, 0.56x at 4,096
    ranks.  Its state is restored after, as it was.

    >>> import gc
    >>> with engine_run() as trace:
    ...     gc.isenabled(), trace.transfer_count
    (False, 0)
    >>> gc.isenabled()
    True
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield Trace(PackedTransfers())
    finally:
        if collecting:
            gc.enable()
