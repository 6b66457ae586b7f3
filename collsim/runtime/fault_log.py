"""What the faults of a run did, kept on its trace (``trace.faults``) for reports and
pictures: a :class:`FaultLog`.  Only a run with faults imports this module.

Examples
--------
>>> import numpy as np, collsim
>>> from collsim.runtime.faults import Faults
>>> faults = Faults.parse(crash_rank=["1@0s"], watchdog="1ms")
>>> cluster = collsim.Cluster(collsim.topology.ring(2), faults=faults)
>>> try:
...     cluster.all_reduce([np.ones(2), np.ones(2)])
... except collsim.errors.WatchdogTimeout as exc:
...     exc.trace.faults.crashed
{1: 0.0}
"""

from dataclasses import dataclass

__all__ = ["FaultLog", "record_faults"]


@dataclass(frozen=True)
class FaultLog:
    """The faults of a run (``faults``) and what they did: the flows rerouted off failed
    links (:class:`~collsim.network.faults.Reroute`), the flows that stalled
    (:class:`~collsim.network.faults.Stall`) and the ranks that crashed, with their times."""

    faults: object
    reroutes: tuple
    stalls: tuple
    crashed: dict


def record_faults(execution):
    """Keep what the faults of ``execution`` did on its trace, as a :class:`FaultLog`."""
    network = execution.network
    execution.trace.faults = FaultLog(
        execution.faults,
        tuple(network.reroutes),
        tuple(network.stalled),
        dict(execution._crashed),
    )
