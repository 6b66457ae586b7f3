"""NCCL's own cost model: the latency, bandwidth and time NCCL predicts for every
(algorithm, protocol) of a collective, and the pair it therefore chooses.

NCCL picks an algorithm and a protocol per call from a published model
(``ncclTopoTuneModel`` and ``ncclTopoGetAlgoTime`` in ``src/graph/tuning.cc``): a latency
per pair (a base cost plus a cost per hop, by link class) and a bandwidth per pair (the
channels' bus bandwidth, refined per algorithm and protocol and turned into algorithm
bandwidth), then ``time = latency + bytes / bandwidth`` and the least time wins.  This
module is that model as data and a few lines of arithmetic, with the constants of
:mod:`.nccl_tables`; ``collsim tune`` prints it.

What NCCL's topology search measures on a real machine (channels, bandwidth per channel)
is derived here from the hardware preset (:func:`graph_of`): the bus bandwidth of the
channels is the preset's effective NVLink rate per GPU inside a node and its NIC rate per
GPU between nodes.  The latencies do not depend on that, so they are NCCL's exactly.

Examples
--------
>>> from collsim import hardware
>>> g = graph_of(hardware.preset("dgx-h100"), nodes=1)
>>> [round(e.latency_us, 1) for e in tune_table(g, "all_reduce") if e.algorithm == "ring"]
[15.0, 40.6, 56.0]
>>> pat = graph_of(hardware.preset("dgx-h100"), nodes=64, gpus_per_node=1)
>>> {e.algorithm: round(e.latency_us, 1) for e in tune_table(pat, "all_gather")
...  if e.protocol == "simple" and e.algorithm in ("ring", "pat")}
{'ring': 890.4, 'pat': 211.2}
"""

from dataclasses import dataclass

from ..errors import ConfigError
from .nccl_tables import (
    ALGORITHMS,
    ARCHITECTURES,
    BASE_LATENCY_US,
    HOP_LATENCY_US,
    LL_MAX_BW,
    NET_OVERHEAD_US,
    PROTOCOLS,
    RING_LL128_MAX_BW_PER_CHANNEL,
    TREE_CORRECTION,
    TREE_LL128_MAX_BW_PER_CHANNEL,
    TREE_MAX_BW_PER_CHANNEL,
)

__all__ = ["NcclGraph", "ModelEntry", "Prediction", "graph_of", "tune_table", "predict"]

COLLECTIVES = ("broadcast", "reduce", "all_gather", "reduce_scatter", "all_reduce")
# which algorithms NCCL models for each collective (the rest it never runs for it)
RUNS = {
    "broadcast": ("ring",),
    "reduce": ("ring",),
    "all_gather": ("ring", "nvls", "collnet_direct", "pat"),
    "reduce_scatter": ("ring", "nvls", "collnet_direct", "pat"),
    "all_reduce": ("tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree"),
}
GATHERS = ("all_gather", "reduce_scatter")


@dataclass(frozen=True)
class NcclGraph:
    """What NCCL's topology search hands its tuner for one communicator."""

    nodes: int
    ranks: int
    intra: str  # the link class inside a node: "nvlink" or "pci"
    channels: int
    bw_intra: float  # GB/s per channel inside a node
    bw_inter: float  # GB/s per channel between nodes
    architecture: str  # "volta", "ampere", "hopper", "blackwell"
    compute_capability: int
    cpu_vendor: str
    nvswitch: bool
    nvls: bool  # the NVSwitch reduces and multicasts (NVLink SHARP)
    collnet: bool = False  # in-network reduction is on (NCCL_COLLNET_ENABLE=1, IB SHARP)

    @property
    def ranks_per_node(self):
        return self.ranks // self.nodes

    @property
    def node_bucket(self):
        """NCCL's column in its per-architecture caps: 1 node, 2 nodes, more."""
        return min(self.nodes, 3) - 1


@dataclass(frozen=True)
class ModelEntry:
    """One (collective, algorithm, protocol) of the model: its latency and algorithm
    bandwidth, or why NCCL would not run it (``disabled``)."""

    collective: str
    algorithm: str
    protocol: str
    latency_us: float
    bandwidth_gbs: float  # algorithm bandwidth: bytes of the buffer per second
    disabled: str = ""

    @property
    def label(self):
        return f"{self.algorithm}/{self.protocol}"


@dataclass(frozen=True)
class Prediction:
    """NCCL's predicted time for one pair at one size (``time_us`` None when disabled)."""

    entry: ModelEntry
    time_us: float | None
    rule: object = None  # the tuner file's rule that chose it (nccl_tuner_file.TunerRule)


def graph_of(machine, nodes=1, gpus_per_node=None, collnet=False):
    """The :class:`NcclGraph` of ``nodes`` nodes of a hardware preset ``machine``.

    NCCL's search finds the channels and their bandwidth on the machine; here the channels
    are one per NVLink of a GPU (two on PCIe), carrying together the preset's effective
    NVLink rate per GPU inside a node, and across nodes the effective rate of the NICs the
    node's GPUs use (one per GPU, up to the node's NICs)."""
    per_node = machine.gpus_per_node if gpus_per_node is None else gpus_per_node
    if not isinstance(nodes, int) or nodes < 1:
        raise ConfigError(f"nodes={nodes!r}: NCCL's model needs a whole number of nodes >= 1")
    if not isinstance(per_node, int) or not 1 <= per_node <= machine.gpus_per_node:
        raise ConfigError(
            f"gpus_per_node={per_node!r}: a {machine.name} node has 1..{machine.gpus_per_node}"
        )
    intra = machine.intra
    nvswitch = intra.kind == "nvswitch"
    channels = intra.links if nvswitch else 2
    bw_intra = intra.effective_rate / channels / 1e9
    bw_inter = bw_intra
    if nodes > 1:
        # a ring leaves each node once per channel, spread over the NICs of the GPUs used:
        # the channels together get those NICs' rate, and the ring runs at the slower speed
        nics = min(machine.inter.nics, per_node)
        bw_inter = machine.inter.effective_rate * nics / channels / 1e9
        bw_intra = min(bw_intra, bw_inter)
    return NcclGraph(
        nodes=nodes,
        ranks=nodes * per_node,
        intra="nvlink" if nvswitch else "pci",
        channels=channels,
        bw_intra=bw_intra,
        bw_inter=bw_inter,
        architecture=ARCHITECTURES[machine.compute_capability],
        compute_capability=machine.compute_capability,
        cpu_vendor=machine.cpu_vendor,
        nvswitch=nvswitch,
        nvls=intra.reduces,
        collnet=collnet,
    )


def tune_table(graph, collective, algorithms=None, protocols=None):
    """Every (algorithm, protocol) NCCL models for ``collective``, in NCCL's order.

    ``algorithms`` and ``protocols`` are the sets ``NCCL_ALGO`` and ``NCCL_PROTO`` leave
    enabled (default: all)."""
    if collective not in COLLECTIVES:
        raise ConfigError(f"collective {collective!r}: NCCL models {', '.join(COLLECTIVES)}")
    if graph.ranks < 2:
        raise ConfigError("NCCL's model needs 2 or more ranks: one rank moves nothing")
    return [
        _entry(graph, collective, a, p, algorithms, protocols)
        for a in ALGORITHMS
        if a in RUNS[collective]
        for p in PROTOCOLS
    ]


def predict(graph, collective, nbytes, algorithms=None, protocols=None, rules=()):
    """``(predictions, winner)``: NCCL's time for every pair at ``nbytes`` and the pair
    with the least time (ties go to NCCL's order) -- or, when a tuner file's ``rules``
    name an enabled pair for this call, that pair (its ``rule`` says which line)."""
    from .nccl_tuner_file import matching_rule

    predictions = [
        Prediction(e, _time_us(graph, e, nbytes))
        for e in tune_table(graph, collective, algorithms, protocols)
    ]
    timed = [p for p in predictions if p.time_us is not None]
    if not timed:
        raise ConfigError(f"every {collective} algorithm/protocol is disabled: enable one")
    enabled = {(p.entry.algorithm, p.entry.protocol): p for p in timed}
    rule = matching_rule(rules, collective, nbytes, graph.nodes, graph.ranks, enabled)
    if rule is not None:
        chosen = enabled[(rule.algorithm, rule.protocol)]
        return predictions, Prediction(chosen.entry, chosen.time_us, rule)
    return predictions, min(timed, key=lambda p: p.time_us)


def _entry(graph, coll, algo, proto, algorithms, protocols):
    why = _disabled(graph, coll, algo, proto, algorithms, protocols)
    if why:
        return ModelEntry(coll, algo, proto, 0.0, 0.0, why)
    bandwidth = _bandwidth(graph, coll, algo, proto)
    if bandwidth <= 0:
        return ModelEntry(coll, algo, proto, 0.0, 0.0, "no bandwidth in NCCL's model")
    return ModelEntry(coll, algo, proto, _latency(graph, coll, algo, proto), bandwidth)


def _disabled(g, coll, algo, proto, algorithms, protocols):
    """The reason NCCL would not run this pair here, or ''."""
    if BASE_LATENCY_US[algo].of(proto) is None:
        return f"{algo} runs with Simple only"
    if algorithms is not None and algo not in algorithms:
        return "left out by NCCL_ALGO"
    if protocols is not None and proto not in protocols:
        return "left out by NCCL_PROTO"
    if algo == "pat" and g.ranks_per_node != 1:
        return "PAT needs one GPU per node"
    if algo == "nvls_tree" and g.nodes == 1:
        return "NVLS-Tree runs across nodes only"
    if algo in ("nvls", "nvls_tree") and not g.nvls:
        return "no NVLink SHARP (NVSwitch reduction) on this machine"
    collnet = algo.startswith("collnet") or (algo == "nvls" and g.nodes > 1)
    if collnet and not g.collnet:
        return "needs CollNet (NCCL_COLLNET_ENABLE=1 on a SHARP network)"
    if algo == "nvls" and coll in GATHERS and g.nodes > 1:  # NCCL's enqueue.cc says so
        return "NVLS all-gather and reduce-scatter run inside one node only"
    if algo == "collnet_direct" and not g.nvswitch:
        return "CollNet Direct needs NVSwitch"
    if algo == "collnet_direct" and g.ranks_per_node > 8:  # NCCL_MAX_DIRECT_ARITY + 1
        return "CollNet Direct runs with at most 8 GPUs a node"
    if proto == "ll128" and (g.intra != "nvlink" or g.compute_capability < 70):
        return "LL128 runs by default only over NVLink"
    return ""


def _bandwidth(g, coll, algo, proto):
    """NCCL's algorithm bandwidth of one pair, GB/s."""
    ppn, nodes, channels = g.ranks_per_node, g.nodes, g.channels
    bucket, arch = g.node_bucket, g.architecture
    # LL's cap: by GPU on one node, by CPU vendor across nodes (AMD has Ampere's row)
    ll_row = arch if nodes == 1 else ("ampere" if g.cpu_vendor == "amd" else "volta")
    ll_max = LL_MAX_BW[ll_row][bucket]
    collnet = algo.startswith("collnet")
    bw = g.bw_intra if nodes <= 2 or collnet else g.bw_inter
    if algo == "nvls":
        if coll == "all_reduce":
            bw = min(g.bw_intra, g.bw_inter)
        else:
            bw = min(g.bw_intra * (ppn - 1) / ppn, g.bw_inter * 0.9)
    if algo == "nvls_tree":
        bw = min(g.bw_intra, g.bw_inter if nodes <= 2 else g.bw_inter / 2)
    bus = channels * bw
    if algo == "ring" and proto == "ll":
        bus = min(ll_max, bus * 0.5)  # 4 bytes of data in every 8 on the wire
    if algo == "ring" and proto == "ll128":
        bus = min(bus * 0.92, channels * RING_LL128_MAX_BW_PER_CHANNEL[arch][bucket])
    if algo == "tree" and coll == "all_reduce":
        bus = min(bus * 0.92, channels * TREE_MAX_BW_PER_CHANNEL[arch][bucket])
    if algo == "tree" and proto == "ll":
        bus = min(bus / 3.8, ll_max)
    if algo == "tree" and proto == "ll128":
        share = 7.0 / 9.0 if nodes == 1 else 120.0 / 128.0
        bus = min(bus * share, channels * TREE_LL128_MAX_BW_PER_CHANNEL[arch][bucket])
    if algo == "pat":
        bus *= 0.75
    if algo == "collnet_direct":
        if coll in GATHERS:
            bus = ppn * min(g.bw_intra, g.bw_inter * 0.9)
        else:  # full speed needs a NIC per GPU
            factor = ppn / channels
            factor -= (factor - 1) / 2
            bus /= factor
            if g.compute_capability >= 90:
                bus *= 0.85
    if algo != "ring" and coll in GATHERS:
        return bus  # PAT, NVLS and CollNet gathers: bus bandwidth is algorithm bandwidth
    if algo == "ring":
        return bus * g.ranks / _ring_steps(coll, g.ranks)
    return bus * (5.0 / 6.0 if algo in ("nvls", "nvls_tree") else 0.5)


def _latency(g, coll, algo, proto):
    """NCCL's latency of one pair, microseconds."""
    ppn, nodes = g.ranks_per_node, g.nodes
    base = BASE_LATENCY_US[algo].of(proto)
    intra = HOP_LATENCY_US[g.intra][algo].of(proto)
    # with one GPU per node every hop is exposed: NCCL charges the tree's network latency
    inter = HOP_LATENCY_US["net"]["tree" if ppn == 1 else algo].of(proto)
    if algo == "ring":
        if coll in ("broadcast", "reduce"):  # NCCL's rings share channels: one hop's latency
            return base + HOP_LATENCY_US[g.intra if nodes == 1 else "net"]["ring"].of(proto)
        steps = _ring_steps(coll, g.ranks)
        inter_steps = 0 if nodes == 1 else (2 if coll == "all_reduce" else 1) * (nodes - 1)
        overhead = 0.0
        if nodes > 1:  # an inter-node ring still posts a network operation every step
            overhead = NET_OVERHEAD_US[g.cpu_vendor] * (3 if proto == "simple" else 1)
        intra = max(intra, overhead)
        return base + (steps - inter_steps) * intra + inter_steps * inter
    if algo == "tree":
        return base + 2 * ((ppn - 1) * intra + _log2i(nodes) * inter)
    if algo == "collnet_direct":  # 0.4 us to serialise the arity
        return base + 2 * (min(1, ppn - 1) * intra + (ppn - 1) * 0.4) + inter
    if algo == "collnet_chain":
        return base + 2 * (ppn - 1) * intra + inter
    if algo == "nvls":
        return intra + (inter if nodes > 1 else 0.0)
    if algo == "nvls_tree":
        return base + intra + 2 * _log2i(nodes) * inter
    # pat: a base, a logarithmic part across nodes and a linear part NCCL has yet to remove
    return base + _log2i(nodes) * (inter / 3.5) + g.ranks * 2.8


def _time_us(g, entry, nbytes):
    """``ncclTopoGetAlgoTime`` for one call: latency plus bytes over bandwidth, µs."""
    if entry.disabled:
        return None
    bandwidth, latency = entry.bandwidth_gbs, entry.latency_us
    log_size = _log2i(nbytes >> 6)
    if entry.algorithm == "tree" and entry.collective == "all_reduce" and 0 <= log_size < 23:
        bandwidth *= TREE_CORRECTION.of(entry.protocol)[log_size]
    plateau = nbytes / (g.channels * g.ranks) >= 64
    if (entry.algorithm, entry.protocol, entry.collective) == ("ring", "simple", "all_reduce"):
        if g.nodes > 1 and plateau:  # the ring's measured plateau across nodes
            latency *= 1.9 if g.compute_capability < 80 else 1.4
    return latency + nbytes / (1000 * bandwidth)


def _ring_steps(coll, ranks):
    if coll == "all_reduce":
        return 2 * (ranks - 1)
    return ranks - 1 if coll in GATHERS else ranks


def _log2i(n):
    """floor(log2(n)) for n >= 1, -1 for 0 (NCCL's log2i)."""
    return int(n).bit_length() - 1 if n > 0 else -1
