"""``algorithm="auto"``: per call, the (algorithm, protocol) the closed forms say is fastest,
as NCCL's tuner picks one from its cost model and ``NCCL_DEBUG=INFO`` says which.

On a hardware preset the candidates are NCCL's own kind, the topology-aware algorithms
that can run on the group (nccl_ring, double_tree, hierarchical, nvls); elsewhere they
are the collective's algorithms for K ranks, and on a generic topology with nodes
(``topology.hierarchical``) the topology-aware ones too.  Each candidate's time is its closed form
(:func:`~collsim.collectives.formulas.hardware_cost` for the topology-aware all-reduce
algorithms, :func:`~collsim.collectives.formulas.closed_form` with the slowest hop's α and
β for the others) on the group's :class:`Fabric`: α and β of a GPU-to-GPU hop inside a
node and of a same-rail hop between nodes, read from the topology.
A protocol adds its latency for the hop's link class to α and multiplies β by its payload
fraction.  NVLS runs with Simple only, as in NCCL.  Ties go to the earlier candidate
(algorithms in ``algorithms_for`` order, protocols Simple, LL128, LL), so the choice is
deterministic.

:func:`plan_call` is what every collective call goes through on its way to the executor:
the schedule to run (for double_tree and nvls cut into the pieces the size calls for),
the choice where the algorithm was ``auto`` and the protocol its steps carry; a generic
algorithm without a protocol model takes the plain path, the same schedule as on any
topology.  :func:`analytical_plan` says the same without running anything.

Examples
--------
>>> from collsim import hardware
>>> g = hardware.topology("dgx-a100", nodes=4)
>>> small = choose(g, tuple(range(32)), "all_reduce", 8, "auto")
>>> large = choose(g, tuple(range(32)), "all_reduce", 2**30, "auto")
>>> (small.algorithm, small.protocol.name), (large.algorithm, large.protocol.name)
(('double_tree', 'll'), ('nccl_ring', 'simple'))
>>> print(large.info_line())                  # doctest: +ELLIPSIS
# NCCL INFO AllReduce 1 GiB: algorithm nccl_ring protocol simple, predicted ... ms (...)
"""

import contextlib
import weakref
from dataclasses import dataclass

import numpy as np

from .. import units
from ..errors import ConfigError
from ..runtime.group import Group
from ..topology import path_alpha_beta, route
from .checks import DTYPE_BYTES, check_count, check_dtype
from .formulas import HARDWARE_ALGORITHMS, Fabric, best_pieces, closed_form, hardware_cost
from .hierarchical import check_equal_nodes
from .nvls import nvls_switch
from .registry import (
    AUTO,
    PIPELINED,
    algorithms_for,
    build,
    canonical_algorithm,
    canonical_collective,
)

__all__ = ["AutoChoice", "Candidate", "choose", "fabric_of", "placement_of", "NCCL_NAMES",
           "plan_call", "default_algorithm", "analytical_plan", "AnalyticalPlan"]  # fmt: skip

NCCL_NAMES = {"all_reduce": "AllReduce", "reduce_scatter": "ReduceScatter",
              "all_gather": "AllGather", "broadcast": "Broadcast", "reduce": "Reduce",
              "all_to_all": "AllToAll"}  # fmt: skip
PROTOCOL_ORDER = ("simple", "ll128", "ll")
# the intra-node hop is the slowest route from a node's first GPU to the next MAX_SCAN - 1
# (a machine's node has at most 16 GPUs; a generic topology's one "node" may have 100,000)
MAX_SCAN = 16


@dataclass(frozen=True)
class Candidate:
    """One (algorithm, protocol) the tuner weighed, and its closed-form time."""

    algorithm: str
    protocol: object  # a collsim.hardware.protocols.Protocol, or None (no protocol model)
    time_s: float

    @property
    def label(self):
        return self.algorithm if self.protocol is None else f"{self.algorithm}/{self.protocol}"


@dataclass(frozen=True)
class AutoChoice:
    """What ``auto`` chose for one call: the winner and every candidate, fastest first."""

    collective: str
    size: int  # S in bytes, as nccl-tests counts it
    algorithm: str
    protocol: object  # Protocol or None
    time_s: float  # the winner's predicted (closed-form) time
    candidates: tuple  # Candidate, fastest first

    def info_line(self):
        """The choice as ``NCCL_DEBUG=INFO`` prints its tuner's, with the best time of every
        other algorithm."""
        proto = "" if self.protocol is None else f" protocol {self.protocol}"
        best = {}
        for c in self.candidates:
            if c.algorithm != self.algorithm:
                best.setdefault(c.algorithm, c)
        others = ", ".join(f"{c.label} {units.format_time(c.time_s)}" for c in best.values())
        others = f" ({others})" if others else ""
        return (f"# NCCL INFO {NCCL_NAMES[self.collective]} {units.format_size(self.size)}: "
                f"algorithm {self.algorithm}{proto}, predicted "
                f"{units.format_time(self.time_s)}{others}")  # fmt: skip


def _protocols(setting):
    """The protocols to weigh for a cluster's ``protocol`` setting."""
    if setting is None:
        return (None,)
    if isinstance(setting, str):  # "auto"
        from ..hardware.protocols import PROTOCOLS

        return tuple(PROTOCOLS[name] for name in PROTOCOL_ORDER)
    return (setting,)


def _hop(graph, src, dst):
    """``(α, β, slowest link class)`` of the route from ``src`` to ``dst``."""
    from ..hardware.protocols import slowest_class

    alpha, beta = path_alpha_beta(graph, src, dst)
    classes = [graph.edges[link].get("link_class") for link in route(graph, src, dst)]
    return alpha, beta, slowest_class(classes)


def placement_of(graph, ranks):
    """``(NodeLayout, NvlsSwitch or None)`` of group ``ranks`` (cluster ranks) on
    ``graph``: where the ranks sit, and the NVSwitch that can reduce for them."""
    from ..hardware.layout import node_layout
    from .nvls import nvls_switch

    layout = node_layout(graph, ranks)
    try:
        switch = nvls_switch(graph, ranks)
    except ConfigError:
        switch = None
    return layout, switch


def fabric_of(graph, ranks):
    """The :class:`Fabric` of group ``ranks`` on ``graph``: the slowest way from its
    first node's first rank to the node's others for the intra-node hop (the CPU link on
    a PCIe machine), the first ranks of its first two nodes for the inter-node one (a
    hop as slow as the intra one where there is a single node)."""
    layout, switch = placement_of(graph, ranks)
    first = [ranks[i] for i in layout.nodes[0]]
    intra = None
    if len(first) > 1:  # the slowest way from the node's first GPU to another of its GPUs
        hops = [_hop(graph, first[0], other) for other in first[1:MAX_SCAN]]
        intra = (max(h[0] for h in hops), min(h[1] for h in hops),
                 max(hops, key=lambda h: (h[0], -h[1]))[2])  # fmt: skip
    inter = None
    if layout.n_nodes > 1:
        inter = _hop(graph, first[0], ranks[layout.nodes[1][0]])
    intra = intra or inter or (0.0, float("inf"), None)
    inter = inter or intra
    return Fabric(intra[0], intra[1], inter[0], inter[1], intra[2], inter[2],
                  1.0 if switch is None else switch.efficiency)  # fmt: skip


def _time(collective, algorithm, layout, size, fabric, protocol):
    m, g = layout.n_nodes, layout.gpus_per_node
    if algorithm in HARDWARE_ALGORITHMS.get(collective, ()):
        if g is None:  # nccl_ring on unequal nodes: one ring, every hop as slow as the net
            alpha, beta = fabric.hop(m > 1, protocol)
            return closed_form(collective, "ring", layout.ranks, size, alpha, beta).time_s
        return hardware_cost(algorithm, m, g, size, fabric, protocol).time_s
    alpha, beta = fabric.hop(m > 1, protocol)
    return closed_form(collective, algorithm, layout.ranks, size, alpha, beta).time_s


def choose(graph, ranks, collective, size, protocol, algorithm="auto"):
    """The :class:`AutoChoice` for ``collective`` of S = ``size`` bytes on group ``ranks``
    of ``graph``.  ``protocol`` is the setting (``"auto"``, a Protocol, or None);
    ``algorithm`` a name to choose only the protocol for, or ``"auto"``."""
    layout, switch = placement_of(graph, ranks)
    fabric = fabric_of(graph, ranks)
    k = len(ranks)
    if algorithm == "auto":
        machine = graph.graph.get("machine") is not None
        # a flat topology is one node, where the topology-aware algorithms are the ring
        # and a chain again: weigh them where there are nodes
        names = algorithms_for(collective, k, layout if machine or layout.n_nodes > 1
                               else None, switch)  # fmt: skip
        nccl = [a for a in names if a in HARDWARE_ALGORITHMS.get(collective, ())]
        if machine and nccl:
            names = tuple(nccl)  # on a real machine, weigh what NCCL would run
    else:
        names = (algorithm,)
    found = []
    for name in names:
        for proto in _protocols(protocol):
            if name == "nvls" and proto is not None and proto.name != "simple":
                continue  # NVLS runs with Simple only
            found.append(Candidate(name, proto, _time(collective, name, layout, size, fabric,
                                                      proto)))  # fmt: skip
    if not found:  # nvls with a forced LL/LL128: run it with Simple, as NCCL would
        from ..hardware.protocols import PROTOCOLS

        simple = PROTOCOLS["simple"]
        time = _time(collective, algorithm, layout, size, fabric, simple)
        found.append(Candidate(algorithm, simple, time))
    ordered = tuple(sorted(found, key=lambda c: c.time_s))  # sorted() is stable: ties keep order
    best = ordered[0]
    return AutoChoice(collective, int(size), best.algorithm, best.protocol, best.time_s, ordered)


# -- what one call runs: the schedule, the choice and the protocol ---------------------


# A schedule is a pure function of these values, and a 4,096-rank ring's takes hundreds of
# MB: the live clusters that run the same one share it, and it goes with the last of them
# (each cluster holds its schedules in cluster.caches.plans); nothing here keeps it alive.
_SHARED_SCHEDULES = weakref.WeakValueDictionary()


def _schedule(collective, algorithm, k, root, layout=None, switch=None, pieces=None):
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


def _protocol_setting(protocol, cluster):
    """``"auto"``, a Protocol or None: ``protocol`` as given, else the cluster's."""
    if protocol is None:
        return getattr(cluster, "protocol", None)
    if isinstance(protocol, str) and protocol.strip().lower() == AUTO:
        return AUTO
    from ..hardware.protocols import check_protocol

    return check_protocol(protocol)


def plan_call(cluster, name, algorithm, protocol, ranks, root, size):
    """``(schedule, choice, protocol)`` of one call on ``cluster``: the schedule to run,
    the :class:`~collsim.collectives.auto.AutoChoice` where ``algorithm`` was ``"auto"``
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
        found = plans[key] = _plan(cluster.topology, *key)
    return found


# the plans a cluster keeps (one per call: collective, algorithm, group, size, ...)
_KEEP_PLANS = 256


def _plan(topology, name, algorithm, protocol, ranks, root, size):
    k = len(ranks)
    hardware = algorithm in HARDWARE_ALGORITHMS.get(name, ())
    if not hardware and algorithm != AUTO and not isinstance(protocol, str):
        return _schedule(name, algorithm, k, root), None, protocol
    layout, switch = placement_of(topology, ranks)
    if algorithm == "nvls" and switch is None:
        nvls_switch(topology, ranks)  # raises, naming the rule the group breaks
    if algorithm in ("double_tree", "hierarchical"):
        check_equal_nodes(layout, algorithm)
    choice = choose(topology, ranks, name, int(size), protocol, algorithm)
    chosen, protocol = choice.algorithm, choice.protocol
    if chosen not in HARDWARE_ALGORITHMS.get(name, ()):
        schedule = _schedule(name, chosen, k, root)
    else:
        pieces = None
        if (name, chosen) in PIPELINED:
            pieces = best_pieces(chosen, layout.n_nodes, layout.gpus_per_node, size,
                                 fabric_of(topology, ranks), protocol)  # fmt: skip
        schedule = _schedule(name, chosen, k, root, layout, switch, pieces)
    return schedule, (choice if algorithm == AUTO else None), protocol


@contextlib.contextmanager
def _naming(given):
    """Re-raise a refusal of the algorithm (it cannot run on this group or topology) with
    the name as the user spelled it, where the message does not already say it."""
    try:
        yield
    except ConfigError as exc:
        if given is None or str(given) in str(exc):
            raise
        raise ConfigError(f"algorithm {given!r}: {exc}") from None


def _size_of(name, x, count, dtype, k):
    """S in bytes of a call (0 where the input is not an array: the executor refuses it)."""
    try:
        if x is not None:
            nbytes = np.asarray(x).nbytes
        else:
            nbytes = check_count(count, check_dtype(dtype)) * DTYPE_BYTES[check_dtype(dtype)]
    except (ConfigError, TypeError, ValueError):
        return 0
    return nbytes * k if name == "all_gather" else nbytes


def _first_schedule(cluster, name, algorithm, protocol, ranks, root):
    """A schedule to check the inputs against before the size is known: the algorithm's
    own (refusing a group it cannot run on), or the ring's for ``auto``."""
    if algorithm == AUTO:
        algorithm = canonical_algorithm(name, None)
    return plan_call(cluster, name, algorithm, None, ranks, root, 0)[0]


@dataclass(frozen=True)
class AnalyticalPlan:
    """What the closed form says a call would run and cost, without running it."""

    algorithm: str  # the algorithm (``auto`` resolved)
    protocol: object  # the Protocol, or None
    cost: object  # a formulas.Cost or formulas.HardwareCost
    choice: object = None  # the AutoChoice where ``auto`` chose


def analytical_plan(cluster, name, size, algorithm=None, group=None, protocol=None):
    """The :class:`AnalyticalPlan` of one call of S = ``size`` bytes."""

    with _naming(algorithm):
        return _analytical_plan(cluster, name, size, algorithm, group, protocol)


def _analytical_plan(cluster, name, size, algorithm, group, protocol):
    name = canonical_collective(name)
    topology = cluster.topology
    if algorithm is None:
        algorithm = default_algorithm(name, topology)
    algorithm = canonical_algorithm(name, algorithm)
    group = Group.of(group, cluster.size)
    protocol = _protocol_setting(protocol, cluster)
    hardware = algorithm in HARDWARE_ALGORITHMS.get(name, ()) or algorithm == AUTO
    if not hardware and protocol is None:
        if group.size == 1:
            return AnalyticalPlan(algorithm, None, closed_form(name, algorithm, 1, size, 0.0,
                                                               float("inf")))  # fmt: skip
        alpha, beta = path_alpha_beta(topology, group.ranks[0], group.ranks[1])
        cost = closed_form(name, algorithm, group.size, size, alpha, beta)
        return AnalyticalPlan(algorithm, None, cost)
    layout, switch = placement_of(topology, group.ranks)
    if algorithm == "nvls" and switch is None:
        nvls_switch(topology, group.ranks)
    if algorithm in ("double_tree", "hierarchical"):
        check_equal_nodes(layout, algorithm)
    choice = choose(topology, group.ranks, name, int(size), protocol, algorithm)
    chosen, protocol = choice.algorithm, choice.protocol
    fabric = fabric_of(topology, group.ranks)
    if chosen in HARDWARE_ALGORITHMS.get(name, ()) and layout.gpus_per_node is not None:
        cost = hardware_cost(chosen, layout.n_nodes, layout.gpus_per_node, size, fabric,
                             protocol)  # fmt: skip
    else:
        alpha, beta = fabric.hop(layout.n_nodes > 1, protocol)
        cost = closed_form(name, "ring" if chosen == "nccl_ring" else chosen, group.size, size,
                           alpha, beta)  # fmt: skip
    return AnalyticalPlan(chosen, protocol, cost, choice if algorithm == AUTO else None)
