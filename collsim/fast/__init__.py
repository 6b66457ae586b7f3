"""The fast path: a collective run alone on a cluster, a whole step at a time.

Its one contract: **the same outputs, simulated times, trace and counts as the reference
path, byte for byte.**  The reference path is the plain one a student reads: a schedule
of :class:`~collsim.collectives.schedule.ChunkMove` steps run as messages on the event
engine (:mod:`collsim.collectives.executor`).  Everything here exists only for speed --
schedules as numpy columns (:mod:`collsim.fast.columns`), step timing on arrays instead
of engine events, reductions as one indexed operation, a working block reused between
calls, caches kept on the cluster (``cluster.caches.fast``) -- and nothing outside this
package knows how it works.  It is reached through one seam, :func:`run_alone`, which
``cluster.all_reduce(...)`` and its siblings call when the cluster's ``fast`` setting is
on (``Cluster(fast=False)`` or ``COLLSIM_FAST=0`` leave this package unused and
unimported); where it cannot promise the contract it says so (:class:`Unbatched`) before
touching a buffer, and the reference path runs.  ``tests/test_fast_equivalence.py`` and
``tests/test_batched.py`` hold it to the contract.

Examples
--------
>>> import numpy as np, collsim
>>> fast = collsim.Cluster(collsim.topology.ring(4)).all_reduce([np.ones(8)] * 4)
>>> plain = collsim.Cluster(collsim.topology.ring(4), fast=False).all_reduce([np.ones(8)] * 4)
>>> fast.time == plain.time, fast.trace.transfers == plain.trace.transfers
(True, True)
"""

from .batched import Unbatched, run_batched

__all__ = ["run_alone", "Unbatched"]


def run_alone(cluster, schedule, group, buffers, count, dtype, op, protocol):
    """Run ``schedule`` on ``group`` of ``cluster``, where nothing else moves, and return
    the :class:`~collsim.runtime.cluster.RunResult` the reference path would, or an
    :class:`Unbatched` saying why the reference path must run it instead."""
    return run_batched(cluster, schedule, group, buffers, count, dtype, op, protocol)
