"""DeepEP's normal kernels' traffic on a hardware preset, and its bandwidth as DeepEP counts it.

DeepEP (deepseek-ai/DeepEP) publishes the bandwidth of its dispatch and combine kernels for
DeepSeek-V3's pre-training setting: 4,096 tokens a rank, hidden 7,168, top-8 of 256
experts with the experts grouped by node and a token limited to 4 nodes, FP8 dispatch (one
fp32 scale per 128 values) and BF16 combine.  This module moves the same bytes, count-only,
on a collsim hardware topology (:func:`collsim.hardware.topology`):

* **intranode** (one node, EP8): each token goes once to each GPU that holds one of its
  experts, over NVLink (an all-to-allv whose counts are the distinct tokens per pair);
* **internode** (EP16 and up, the hierarchical path): a token crosses the network once per
  destination node, to the GPU with its own local index there (RDMA, one NIC a rail), which
  forwards it once to each GPU of that node holding one of its experts (NVLink).  The
  combine runs the same moves backwards, the forwarder summing before the RDMA leg.

DeepEP's tests divide by the kernel's time (``tests/test_intranode.py``,
``tests/test_internode.py``): *NVLink bandwidth* is the bytes of the tokens a rank
receives, its own included; *RDMA bandwidth* is the bytes of the (token, destination node)
pairs it sends, its own node included.  :func:`deepep_bandwidth` reports both, rank 0's
(the rank DeepEP's tests print), over the slowest rank's time.

Examples
--------
>>> bw = deepep_bandwidth(DeepEPConfig(tokens=64, hidden=128, experts=16), nodes=1)
>>> bw.ep, bw.link, round(bw.dispatch / 1e9) > 0
(8, 'NVLink', True)
"""

from dataclasses import dataclass

import numpy as np

from ...collectives.all_to_allv import direct_all_to_allv, run_all_to_allv
from ...errors import ConfigError
from ...hardware import preset, topology
from ...nn.routing import RouterConfig, choose_experts
from ...runtime.cluster import Cluster
from ...runtime.group import Group
from ...runtime.ops import CountOnly

__all__ = ["DeepEPConfig", "DeepEPBandwidth", "deepep_routing", "deepep_bandwidth"]

MAX_NODES = 16  # 128 GPUs of DeepEP's 4,096 tokens: a few seconds of simulation
FP8_ELEMENT = 1 + 4 / 128  # bytes a value: FP8 and one fp32 scale per 128 (DeepEP's factor)
BF16_ELEMENT = 2


@dataclass(frozen=True)
class DeepEPConfig:
    """DeepEP's published setting (its README's normal-kernel table), as defaults."""

    tokens: int = 4096  # per rank, per batch
    hidden: int = 7168  # values a token (DeepSeek-V3)
    top_k: int = 8  # experts a token
    experts: int = 256  # routed experts, E/ep on each rank
    max_nodes: int = 4  # node-limited routing: a token reaches at most 4 nodes
    dispatch_element: float = FP8_ELEMENT  # bytes a value on the way out
    combine_element: float = BF16_ELEMENT  # bytes a value on the way back
    seed: int = 0

    def __post_init__(self):
        for name in ("tokens", "hidden", "top_k", "experts", "max_nodes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name}={value!r} must be a whole number >= 1, like {name}=8")
        if self.top_k > self.experts:
            raise ConfigError(
                f"top_k={self.top_k} is more than experts={self.experts}; nearest valid "
                f"top_k={self.experts}"
            )
        for name in ("dispatch_element", "combine_element"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and 0 < value < 64):
                raise ConfigError(f"{name}={value!r}: bytes a value, > 0 (FP8 is 1 + 4/128)")


@dataclass(frozen=True)
class DeepEPBandwidth:
    """One configuration's simulated dispatch and combine, in DeepEP's units."""

    machine: str
    nodes: int
    ep: int
    link: str  # "NVLink" (intranode) or "RDMA" (internode): which bytes are counted
    dispatch: float  # bytes/s, rank 0's counted bytes over the dispatch's time
    combine: float  # bytes/s
    dispatch_time: float  # s
    combine_time: float  # s
    counted_bytes: float  # rank 0's bytes (at BF16) that DeepEP's formula divides
    dispatch_legs: dict  # s each leg of the dispatch took ("dispatch-inter", "-intra")
    combine_legs: dict  # s

    @property
    def overlapped(self):
        """``(dispatch, combine)`` bytes/s if the legs overlapped perfectly (DeepEP
        pipelines the RDMA and NVLink legs in chunks; collsim runs one after the other):
        the counted bytes over the longest leg alone."""
        scale = self.dispatch * self.dispatch_time  # the dispatch's counted bytes
        return scale / max(self.dispatch_legs.values()), self.counted_bytes / max(
            self.combine_legs.values()
        )


def deepep_routing(config, nodes, gpus_per_node):
    """(ep, T, ep) bool: whether source rank r's token t has an expert on rank j.  Scores
    are drawn as DeepEP's tests draw them (|N(0, 1)| + 1 per token and expert), and the
    experts chosen by :func:`collsim.nn.routing.choose_experts`, grouped by node."""
    if isinstance(nodes, bool) or not isinstance(nodes, int) or not 1 <= nodes <= MAX_NODES:
        near = MAX_NODES if isinstance(nodes, int) and nodes > MAX_NODES else 1
        raise ConfigError(
            f"nodes={nodes!r}: give 1 to {MAX_NODES} machines (a count-only run moves every "
            f"token's bytes on every rank); nearest valid nodes={near}"
        )
    ep = nodes * gpus_per_node
    if config.experts % ep:
        near = [n for n in range(1, nodes + 1) if config.experts % (n * gpus_per_node) == 0]
        raise ConfigError(
            f"experts={config.experts} is not divisible by ep={ep} ({nodes} nodes of "
            f"{gpus_per_node} GPUs): each rank holds E/ep experts; nearest valid nodes="
            f"{max(near) if near else 1}"
        )
    rng = np.random.default_rng(config.seed)
    limit = min(nodes, config.max_nodes)
    router = RouterConfig(config.experts, config.top_k, groups=nodes, topk_groups=limit)
    reaches = np.zeros((ep, config.tokens, ep), dtype=bool)
    for r in range(ep):
        scores = np.abs(rng.normal(size=(config.tokens, config.experts))) + 1.0
        _, selected = choose_experts(np.log(scores), router)  # softmax keeps the order
        token = np.repeat(np.arange(config.tokens), config.top_k)
        reaches[r, token, selected.ravel() // (config.experts // ep)] = True
    return reaches


def _element_bytes(config, hidden_bytes_per_value):
    return CountOnly(int(round(config.hidden * hidden_bytes_per_value)))


def deepep_bandwidth(config=DeepEPConfig(), nodes=1, machine="dgx-h100"):
    """Simulate DeepEP's dispatch and combine on ``nodes`` machines; a
    :class:`DeepEPBandwidth`."""
    node = preset(machine) if isinstance(machine, str) else machine
    G = node.gpus_per_node
    ep = nodes * G
    reaches = deepep_routing(config, nodes, G)  # (src, token, dst)
    pairs = reaches.sum(axis=1)  # (ep, ep): distinct tokens src sends dst
    on_node = reaches.reshape(ep, config.tokens, nodes, G).any(axis=3)  # (src, token, node)
    rail = on_node.sum(axis=1)  # (ep, nodes): tokens src sends to each node once
    # forwarder (m, l) sends node m's GPU j every token of a source (n, l) that reaches j
    forward = {m: np.zeros((G, G), dtype=np.int64) for m in range(nodes)}
    for src in range(ep):
        for m in range(nodes):
            forward[m][src % G] += pairs[src, m * G : (m + 1) * G]
    out = _element_bytes(config, config.dispatch_element)
    back = _element_bytes(config, config.combine_element)

    def legs(rank):
        n, l = divmod(rank.id, G)
        rail_group = Group([m * G + l for m in range(nodes)])
        node_group = Group([n * G + j for j in range(G)])
        rail_counts = [rail[m * G + l].tolist() for m in range(nodes)]
        return (
            (rail_group, direct_all_to_allv(rail_counts), "dispatch-inter"),
            (node_group, direct_all_to_allv(forward[n] if nodes > 1 else pairs), "dispatch-intra"),
        )

    def dispatch(rank):
        for group, schedule, call in legs(rank):
            if group.size > 1:
                yield from run_all_to_allv(rank, schedule, out, group, call)

    def combine(rank):
        for group, schedule, call in reversed(legs(rank)):
            if group.size > 1:
                backwards = direct_all_to_allv(np.transpose(schedule.counts).tolist())
                yield from run_all_to_allv(
                    rank, backwards, back, group, call.replace("dispatch", "combine")
                )

    cluster = Cluster(topology(node, nodes))
    out_run, back_run = cluster.run(dispatch), cluster.run(combine)
    if nodes == 1:  # the tokens rank 0 receives, its own included
        link, tokens = "NVLink", int(pairs[:, 0].sum())
    else:  # the (token, node) pairs rank 0 sends, its own node included
        link, tokens = "RDMA", int(rail[0].sum())
    counted = tokens * config.hidden * BF16_ELEMENT
    scale = config.dispatch_element / BF16_ELEMENT
    return DeepEPBandwidth(
        node.name,
        nodes,
        ep,
        link,
        counted * scale / out_run.time,
        counted / back_run.time,
        out_run.time,
        back_run.time,
        counted,
        _leg_times(out_run.trace),
        _leg_times(back_run.trace),
    )


def _leg_times(trace):
    """``{call: s}``: from the first transfer of each leg to the last one's end."""
    spans = {}
    for t in trace.transfers:
        start, end = spans.get(t.meta.call, (t.start, t.end))
        spans[t.meta.call] = (min(start, t.start), max(end, t.end))
    return {call: end - start for call, (start, end) in sorted(spans.items())}
