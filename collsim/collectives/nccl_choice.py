"""``auto`` as NCCL decides: NCCL's cost model (:mod:`.nccl_model`) picks the algorithm and
protocol of a call on a hardware preset, among the ones collsim runs there.

NCCL's names map onto collsim's schedules: ring is ``nccl_ring`` for all-reduce (the ring
laid through the nodes) and ``ring`` for the others, tree is ``double_tree``, NVLS is
``nvls``, NVLS-Tree ``nvls_tree``, PAT ``pat``, CollNet ``collnet_direct`` and
``collnet_chain`` (Direct also for all-gather and reduce-scatter; where the machine's
network reduces: ``sharp=True``).

Examples
--------
>>> from collsim import hardware
>>> from collsim.collectives.auto import placement_of
>>> graph = hardware.topology("dgx-a100", nodes=2)
>>> small = nccl_choice(graph, placement_of(graph, range(16)), "all_reduce", 8, "auto")
>>> (small.algorithm, small.protocol.name), small.source
(('double_tree', 'll'), 'nccl')
"""

from ..errors import ConfigError
from .choices import AutoChoice, Candidate
from .nccl_model import graph_of, predict
from .nccl_tables import BASE_LATENCY_US

__all__ = ["nccl_choice", "COUNTERPARTS", "base_latency", "call_launch", "opening"]

# NCCL's algorithm -> collsim's schedule, per collective
COUNTERPARTS = {
    "all_reduce": {
        "ring": "nccl_ring",
        "tree": "double_tree",
        "nvls": "nvls",
        "nvls_tree": "nvls_tree",
        "collnet_direct": "collnet_direct",
        "collnet_chain": "collnet_chain",
    },
    "all_gather": {"ring": "ring", "pat": "pat", "collnet_direct": "collnet_direct"},
    "reduce_scatter": {"ring": "ring", "pat": "pat", "collnet_direct": "collnet_direct"},
    "broadcast": {"ring": "ring"},
    "reduce": {"ring": "ring"},
}


def base_latency(collective, algorithm, protocol):
    """Seconds NCCL's cost model charges once per call of collsim's ``algorithm`` with
    ``protocol`` (a Protocol): the base latency of its NCCL counterpart, 0 where NCCL has
    none (NVLS, NVLS-Tree, CollNet; an algorithm NCCL does not run, such as
    halving_doubling or the plain ring all-reduce).

    >>> from collsim.hardware.protocols import PROTOCOLS
    >>> [round(base_latency("all_reduce", a, PROTOCOLS["simple"]) * 1e6, 1)
    ...  for a in ("nccl_ring", "double_tree", "nvls", "halving_doubling")]
    [8.4, 8.4, 0.0, 0.0]
    >>> round(base_latency("all_gather", "pat", PROTOCOLS["simple"]) * 1e6, 1)
    8.0
    """
    if protocol is None:
        return 0.0
    for nccl, ours in COUNTERPARTS.get(collective, {}).items():
        if ours == algorithm:
            us = BASE_LATENCY_US[nccl].of(protocol.name)
            return 0.0 if us is None else us * 1e-6
    return 0.0


def call_launch(graph, collective, algorithm, protocol):
    """The :func:`base_latency` a call of ``algorithm`` on topology ``graph`` pays: on a
    machine (a hardware preset or machine file) only, so a plain α-β topology keeps its
    times even with a protocol."""
    if protocol is None or graph.graph.get("machine") is None:
        return 0.0
    return base_latency(collective, algorithm, protocol)


def opening(graph, collective, algorithm, protocol):
    """``protocol`` as a call's first step carries it: with the :func:`call_launch`
    base latency, which its messages pay once for the call."""
    launch = call_launch(graph, collective, algorithm, protocol)
    return protocol.with_launch(launch) if launch else protocol


def nccl_choice(graph, placement, collective, size, protocol, algorithm="auto", rules=()):
    """The :class:`~collsim.collectives.auto.AutoChoice` NCCL's model makes for this call,
    or None where the model does not apply (no machine, nodes of unequal size, a
    collective NCCL does not tune, or an algorithm it has no name for).

    ``placement`` is the group's ``(NodeLayout, NvlsSwitch or None)``
    (:func:`~collsim.collectives.auto.placement_of`); ``protocol`` the setting: ``"auto"``
    weighs LL, LL128 and Simple, a Protocol only itself; ``algorithm`` a collsim name to
    choose only the protocol for, or ``"auto"``; ``rules`` a tuner file's
    (:mod:`.nccl_tuner_file`): the first that matches and names a pair collsim runs here
    decides, as NCCL's example tuner plugin does."""
    from ..hardware.protocols import PROTOCOLS

    machine = graph.graph.get("machine")
    counterparts = COUNTERPARTS.get(collective)
    layout, switch = placement
    if machine is None or counterparts is None or protocol is None or layout.ranks < 2:
        return None
    if layout.gpus_per_node is None:
        return None
    runnable = dict(counterparts)
    if switch is None or layout.n_nodes > 1:
        runnable.pop("nvls", None)  # NVLS runs inside one node
    if switch is None or layout.n_nodes == 1:
        runnable.pop("nvls_tree", None)  # NVLS-Tree across nodes whose switches reduce
    # CollNet where the network's switches reduce (SHARP), as NCCL_COLLNET_ENABLE=1
    sharp = machine.inter.sharp and layout.n_nodes > 1
    if not sharp:
        runnable.pop("collnet_direct", None)
        runnable.pop("collnet_chain", None)
    if algorithm != "auto":
        runnable = {n: ours for n, ours in runnable.items() if ours == algorithm}
        if not runnable:
            return None
    protocols = None if isinstance(protocol, str) else {protocol.name}
    model = graph_of(machine, layout.n_nodes, layout.gpus_per_node, collnet=sharp)
    try:
        predictions, winner = predict(model, collective, int(size), set(runnable), protocols, rules)
    except ConfigError:  # NCCL would not run any of them here (LL128 off PCIe, say)
        return None
    candidates = tuple(
        Candidate(
            runnable[p.entry.algorithm],
            PROTOCOLS[p.entry.protocol],
            p.time_us * 1e-6,
        )
        for p in sorted((p for p in predictions if p.time_us is not None), key=lambda p: p.time_us)
    )
    unrun = ""
    if algorithm == "auto":  # what NCCL itself would take, were every algorithm here
        best = predict(model, collective, int(size), None, protocols, rules)[1].entry
        if best.algorithm not in runnable:
            unrun = (
                f"NCCL's model prefers {best.algorithm}/{best.protocol}, which collsim does "
                f"not run {_WHY_NOT.get(best.algorithm, 'here')}"
            )
    return AutoChoice(
        collective,
        int(size),
        runnable[winner.entry.algorithm],
        PROTOCOLS[winner.entry.protocol],
        winner.time_us * 1e-6,
        candidates,
        source="nccl",
        rule=winner.rule,
        unrun=unrun,
    )


# why collsim has no schedule where NCCL's model weighs one
_WHY_NOT = {
    "nvls": "across nodes (NVLS with SHARP: the NVSwitch sums in the node, the network across)",
}
