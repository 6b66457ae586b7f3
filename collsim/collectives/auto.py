"""``algorithm="auto"``: per call, the (algorithm, protocol) the closed forms say is fastest,
as NCCL's tuner picks one from its cost model and ``NCCL_DEBUG=INFO`` says which.

On a hardware preset the candidates are NCCL's own kind, the topology-aware algorithms
that can run on the group (nccl_ring, double_tree, hierarchical, nvls); elsewhere they
are the collective's algorithms for K ranks, and on a generic topology with nodes
(``topology.hierarchical``) the topology-aware ones too.  Each candidate's time is its closed form
(:func:`~collsim.collectives.hardware_forms.hardware_cost` for the topology-aware all-reduce
algorithms, :func:`~collsim.collectives.formulas.closed_form` with the slowest hop's α and
β for the others) on the group's :class:`Fabric`: α and β of a GPU-to-GPU hop inside a
node and of a same-rail hop between nodes, read from the topology.
A protocol adds its latency for the hop's link class to α and multiplies β by its payload
fraction; on a machine a call of an algorithm NCCL runs also pays NCCL's base latency
once (:func:`~collsim.collectives.nccl_choice.call_launch`), as its simulated run does.
NVLS runs with Simple only, as in NCCL.  Ties go to the earlier candidate
(algorithms in ``algorithms_for`` order, protocols Simple, LL128, LL), so the choice is
deterministic.

A call reaches the tuner through :func:`collsim.collectives.call_plan.plan_call`, only when it
has something to tune (``auto``, a protocol model, a topology-aware algorithm); the plain
ring on a plain topology never imports this module.
:func:`collsim.collectives.analytical.analytical_plan` asks it without running anything.

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

from ..errors import ConfigError
from ..topology import path_alpha_beta, route
from .choices import NCCL_NAMES, AutoChoice, Candidate
from .formulas import closed_form
from .hardware_forms import HARDWARE_ALGORITHMS, Fabric, hardware_cost
from .nccl_choice import call_launch
from .registry import algorithms_for

__all__ = [
    "AutoChoice",
    "Candidate",
    "choose",
    "fabric_of",
    "placement_of",
    "checked_placement",
    "NCCL_NAMES",
]


PROTOCOL_ORDER = ("simple", "ll128", "ll")
# the intra-node hop is the slowest route from a node's first GPU to the next MAX_SCAN - 1
# (a machine's node has at most 16 GPUs; a generic topology's one "node" may have 100,000)
MAX_SCAN = 16


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
    """``(NodeLayout, switch)`` of group ``ranks`` (cluster ranks) on ``graph``: where the
    ranks sit, and the NVSwitch that can reduce for them -- an NvlsSwitch inside one node,
    the NodeSwitches of every node for a group of equal nodes that all reduce (NVLS-Tree),
    or None."""
    from ..hardware.layout import node_layout
    from .nvls import node_switches, nvls_switch

    layout = node_layout(graph, ranks)
    ranks = tuple(ranks)
    try:
        if layout.n_nodes == 1:
            return layout, nvls_switch(graph, ranks)
        if layout.gpus_per_node is not None:
            return layout, node_switches(graph, ranks, layout)
    except ConfigError:
        pass
    return layout, None


def checked_placement(topology, ranks, algorithm, collective="all_reduce"):
    """The group's :func:`~collsim.collectives.auto.placement_of`, after refusing an
    ``algorithm`` the group cannot run (for ``collective``), naming the rule it breaks."""
    from .collnet import COLLNET, sharp_rails
    from .hierarchical import check_equal_nodes
    from .nvls import nvls_switch

    layout, switch = placement_of(topology, ranks)
    if algorithm == "nvls" and (switch is None or layout.n_nodes > 1):
        nvls_switch(topology, ranks)  # raises, naming the rule the group breaks
    if algorithm in ("double_tree", "hierarchical", "nvls_tree", *COLLNET):
        check_equal_nodes(layout, algorithm)
    if algorithm in COLLNET:  # the network's switches sum, not the NVSwitches
        return layout, sharp_rails(topology, ranks, layout, algorithm, collective)
    return layout, switch


def fabric_of(graph, ranks, placement=None):
    """The :class:`Fabric` of group ``ranks`` on ``graph``: the slowest way from its
    first node's first rank to the node's others for the intra-node hop (the CPU link on
    a PCIe machine), the first ranks of its first two nodes for the inter-node one (a
    hop as slow as the intra one where there is a single node).  ``placement`` is the
    group's :func:`placement_of`, where the caller has it already."""
    layout, switch = placement_of(graph, ranks) if placement is None else placement
    first = [ranks[i] for i in layout.nodes[0]]
    intra = None
    if len(first) > 1:  # the slowest way from the node's first GPU to another of its GPUs
        hops = [_hop(graph, first[0], other) for other in first[1:MAX_SCAN]]
        intra = (
            max(h[0] for h in hops),
            min(h[1] for h in hops),
            max(hops, key=lambda h: (h[0], -h[1]))[2],
        )
    inter = None
    if layout.n_nodes > 1:
        inter = _hop(graph, first[0], ranks[layout.nodes[1][0]])
    intra = intra or inter or (0.0, float("inf"), None)
    inter = inter or intra
    return Fabric(
        intra[0],
        intra[1],
        inter[0],
        inter[1],
        intra[2],
        inter[2],
        1.0 if switch is None else switch.efficiency,
    )


SIMPLE_ONLY = ("nvls", "collnet_direct", "collnet_chain")  # NCCL has no LL/LL128 kernels


def _time(collective, algorithm, layout, size, fabric, protocol):
    m, g = layout.n_nodes, layout.gpus_per_node
    if algorithm in HARDWARE_ALGORITHMS.get(collective, ()):
        if g is None:  # nccl_ring on unequal nodes: one ring, every hop as slow as the net
            alpha, beta = fabric.hop(m > 1, protocol)
            return closed_form(collective, "ring", layout.ranks, size, alpha, beta).time_s
        return hardware_cost(algorithm, m, g, size, fabric, protocol, collective=collective).time_s
    alpha, beta = fabric.hop(m > 1, protocol)
    return closed_form(collective, algorithm, layout.ranks, size, alpha, beta).time_s


def choose(
    graph, ranks, collective, size, protocol, algorithm="auto", choice="closed_form", rules=()
):
    """The :class:`AutoChoice` for ``collective`` of S = ``size`` bytes on group ``ranks``
    of ``graph``.  ``protocol`` is the setting (``"auto"``, a Protocol, or None);
    ``algorithm`` a name to choose only the protocol for, or ``"auto"``.  ``choice`` says
    who predicts: ``"nccl"`` NCCL's cost model where it applies (a hardware preset, equal
    nodes), ``"closed_form"`` collsim's closed forms, ``"simulated"`` a run of each
    candidate.  ``rules`` are a tuner file's (NCCL's example plugin), which override
    NCCL's model where one matches."""
    placement = placement_of(graph, ranks)  # where the ranks sit: read once, used by both
    if choice == "nccl":
        from .nccl_choice import nccl_choice

        found = nccl_choice(graph, placement, collective, size, protocol, algorithm, rules)
        if found is not None:
            return found
    ranked = _closed_form_choice(graph, ranks, placement, collective, size, protocol, algorithm)
    if choice == "simulated" and len(ranked.candidates) > 1:
        from .simulated_choice import simulated_choice

        return simulated_choice(graph, ranks, ranked)
    return ranked


def _closed_form_choice(graph, ranks, placement, collective, size, protocol, algorithm):
    layout, switch = placement
    fabric = fabric_of(graph, ranks, placement)
    k = len(ranks)
    if algorithm == "auto":
        machine = graph.graph.get("machine") is not None
        # a flat topology is one node, where the topology-aware algorithms are the ring
        # and a chain again: weigh them where there are nodes
        names = algorithms_for(
            collective, k, layout if machine or layout.n_nodes > 1 else None, switch
        )
        nccl = [a for a in names if a in HARDWARE_ALGORITHMS.get(collective, ())]
        if machine and nccl:
            names = tuple(nccl)  # on a real machine, weigh what NCCL would run
        if not (layout.n_nodes > 1 and layout.gpus_per_node == 1):
            names = tuple(a for a in names if a != "pat")  # NCCL: one GPU per node only
    else:
        names = (algorithm,)
    found = []

    def timed(name, proto):  # the closed form, and NCCL's base latency once a call
        launch = call_launch(graph, collective, name, proto) if size else 0.0
        return Candidate(name, proto, _time(collective, name, layout, size, fabric, proto) + launch)

    for name in names:
        for proto in _protocols(protocol):
            if name in SIMPLE_ONLY and proto is not None and proto.name != "simple":
                continue  # NVLS and CollNet run with Simple only (NCCL's kernels)
            found.append(timed(name, proto))
    if not found:  # nvls or CollNet with a forced LL/LL128: run it with Simple, as NCCL would
        from ..hardware.protocols import PROTOCOLS

        found.append(timed(algorithm, PROTOCOLS["simple"]))
    ordered = tuple(sorted(found, key=lambda c: c.time_s))  # sorted() is stable: ties keep order
    best = ordered[0]
    return AutoChoice(collective, int(size), best.algorithm, best.protocol, best.time_s, ordered)
