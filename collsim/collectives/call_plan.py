"""What one collective call runs: the schedule (for double_tree and nvls cut into the pieces
the size calls for), the choice where the algorithm was ``auto`` and the protocol its steps
carry.  Every call goes through :func:`plan_call` on its way to the executor.  A generic
algorithm without a protocol model takes the plain path, the same schedule as on any
topology, and never loads the tuner (:mod:`collsim.collectives.auto`).

Examples
--------
>>> import collsim
>>> cluster = collsim.Cluster(collsim.topology.ring(4))
>>> plan = plan_call(cluster, "all_reduce", "ring", None, (0, 1, 2, 3), 0, 64)
>>> plan.schedule.algorithm, plan.schedule.n_steps, plan.choice, plan.protocol
('ring', 6, None, None)
"""

import contextlib
import weakref
from typing import NamedTuple

import numpy as np

from ..errors import ConfigError
from .checks import DTYPE_BYTES, check_count, check_dtype
from .hardware_forms import HARDWARE_ALGORITHMS, best_pieces
from .registry import AUTO, PIPELINED, build, canonical_algorithm

__all__ = [
    "CallPlan",
    "plan_call",
    "default_algorithm",
    "shared_schedule",
    "call_protocol",
    "first_schedule",
    "naming_the_algorithm",
    "call_size",
]


# A schedule is a pure function of these values, and a 4,096-rank ring's takes hundreds of
# MB: the live clusters that run the same one share it, and it goes with the last of them
# (each cluster holds its schedules in cluster.caches.plans); nothing here keeps it alive.
_SHARED_SCHEDULES = weakref.WeakValueDictionary()


class CallPlan(NamedTuple):
    """What one collective call runs, as :func:`plan_call` plans it."""

    schedule: object  # the Schedule to run
    choice: object  # the AutoChoice where the algorithm was "auto", else None
    protocol: object  # the Protocol its steps carry, or None


def shared_schedule(collective, algorithm, k, root, layout=None, switch=None, pieces=None):
    key = (collective, algorithm, k, root, layout, switch, pieces)
    schedule = _SHARED_SCHEDULES.get(key)
    if schedule is None:
        schedule = build(collective, algorithm, k, root, layout, switch, pieces)
        _SHARED_SCHEDULES[key] = schedule
    return schedule


def default_algorithm(name, topology):
    """``"auto"`` on a hardware preset (the graph has a ``machine``), as NCCL tunes by
    default; elsewhere the collective's first algorithm, as before."""
    if topology.graph.get("machine") is not None:
        return AUTO
    return canonical_algorithm(name, None)


def call_protocol(protocol, cluster):
    """``"auto"``, a Protocol or None: ``protocol`` as given, else the cluster's."""
    if protocol is None:
        return getattr(cluster, "protocol", None)
    if isinstance(protocol, str) and protocol.strip().lower() == AUTO:
        return AUTO
    from ..hardware.protocols import check_protocol

    return check_protocol(protocol)


def plan_call(cluster, name, algorithm, protocol, ranks, root, size):
    """The :class:`CallPlan` of one call on ``cluster``: the schedule to run, the
    :class:`~collsim.collectives.auto.AutoChoice` where ``algorithm`` was ``"auto"``
    (else None) and the Protocol its steps carry (or None).  Generic algorithms without
    a protocol model take the plain path: the same schedule as on any topology.

    Kept in ``cluster.caches.plans`` (a training loop plans the same call on every rank
    of every step), so the plans die with the cluster and keep no topology alive."""
    key = (name, algorithm, protocol, ranks, root, size)
    plans = cluster.caches.plans
    found = plans.get(key)
    if found is None:
        if len(plans) >= _KEEP_PLANS:
            plans.pop(next(iter(plans)))  # the oldest
        choice = getattr(cluster, "choice", "closed_form")
        found = plans[key] = _plan(cluster.topology, *key, choice=choice, rules=cluster.tuner)
    return found


# the plans a cluster keeps (one per call: collective, algorithm, group, size, ...)
_KEEP_PLANS = 256


def _plan(topology, name, algorithm, protocol, ranks, root, size, choice="closed_form", rules=()):
    k = len(ranks)
    hardware = algorithm in HARDWARE_ALGORITHMS.get(name, ())
    if not hardware and algorithm != AUTO and not isinstance(protocol, str):
        return CallPlan(shared_schedule(name, algorithm, k, root), None, protocol)
    # something to tune: the topology's placement, NCCL's closed forms, the protocols
    from .auto import checked_placement, choose, fabric_of

    layout, switch = checked_placement(topology, ranks, algorithm, name)
    choice = choose(topology, ranks, name, int(size), protocol, algorithm, choice, rules)
    chosen, protocol = choice.algorithm, choice.protocol
    if chosen not in HARDWARE_ALGORITHMS.get(name, ()):
        schedule = shared_schedule(name, chosen, k, root)
    else:
        switch = checked_placement(topology, ranks, chosen, name)[1]  # what sums (CollNet)
        pieces = None
        if (name, chosen) in PIPELINED:
            pieces = best_pieces(
                chosen,
                layout.n_nodes,
                layout.gpus_per_node,
                size,
                fabric_of(topology, ranks),
                protocol,
            )
        schedule = shared_schedule(name, chosen, k, root, layout, switch, pieces)
    return CallPlan(schedule, choice if algorithm == AUTO else None, protocol)


@contextlib.contextmanager
def naming_the_algorithm(given):
    """Re-raise a refusal of the algorithm (it cannot run on this group or topology) with
    the name as the user spelled it, where the message does not already say it."""
    try:
        yield
    except ConfigError as exc:
        if given is None or str(given) in str(exc):
            raise
        raise ConfigError(f"algorithm {given!r}: {exc}") from None


def call_size(name, x, count, dtype, k):
    """S in bytes of a call (0 where the input is not an array: the executor refuses it)."""
    try:
        if x is not None:
            nbytes = np.asarray(x).nbytes
        else:
            nbytes = check_count(count, check_dtype(dtype)) * DTYPE_BYTES[check_dtype(dtype)]
    except (ConfigError, TypeError, ValueError):
        return 0
    return nbytes * k if name == "all_gather" else nbytes


def first_schedule(cluster, name, algorithm, protocol, ranks, root):
    """A schedule to check the inputs against before the size is known: the algorithm's
    own (refusing a group it cannot run on), or the ring's for ``auto``."""
    if algorithm == AUTO:
        algorithm = canonical_algorithm(name, None)
    return plan_call(cluster, name, algorithm, None, ranks, root, 0).schedule
