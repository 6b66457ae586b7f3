"""What the collectives keep between calls on one cluster, held by the cluster itself.

A training loop calls the same collective on the same group thousands of times, so the
routes, layouts and working block of a call are kept for the next one.  They hang off the
cluster they serve and die with it: a module-level table keyed by clusters (or their
topologies) would keep every cluster a program ever made alive, with its buffers.  Nothing
kept here refers back to the cluster, so a dropped cluster is freed by reference counting
alone, with the cyclic collector off.

Examples
--------
>>> import gc, weakref, numpy as np, collsim
>>> cluster = collsim.Cluster(collsim.topology.ring(4))
>>> _ = cluster.all_reduce([np.ones(8)] * 4)
>>> sorted(cluster.caches.fast)  # the fast path's own: what it keeps is its business
['columns', 'routings']
>>> gone = weakref.ref(cluster)
>>> gc.disable(); del cluster; dead = gone() is None; gc.enable()
>>> dead
True
"""

from dataclasses import dataclass, field

__all__ = ["ClusterCaches"]


@dataclass
class ClusterCaches:
    """The per-cluster caches of the collectives; see the module docstring."""

    # what the fast path (collsim.fast) keeps for this cluster; nothing else reads it
    fast: dict = field(default_factory=dict)
    # collectives.call_plan.plan_call: (collective, algorithm, protocol, group ranks, root,
    # size) -> the CallPlan (schedule, auto's choice, protocol) of a call
    plans: dict = field(default_factory=dict)
