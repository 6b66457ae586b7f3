"""The constants of NCCL's cost model, as NCCL publishes them.

Source: NVIDIA NCCL (BSD licence), ``src/graph/tuning.cc`` of the 2.23-2.27 releases, the
first with PAT: ``baseLat``, ``hwLat``, ``llMaxBws``, ``perChMax*Bws`` and
``treeCorrectionFactor``.  Latencies are in microseconds, bandwidths in GB/s (10^9 B/s),
as NCCL keeps them; :mod:`collsim.collectives.nccl_model` turns them into a time.

Each row is a :class:`PerProtocol` (LL, LL128, Simple); ``None`` marks a pair NCCL does
not run (NVLS and CollNet run Simple only, PAT too).

Examples
--------
>>> HOP_LATENCY_US["nvlink"]["ring"].simple      # one ring step over NVLink, Simple
3.4
>>> BASE_LATENCY_US["tree"].of("ll")
6.8
"""

from typing import NamedTuple

__all__ = [
    "ALGORITHMS",
    "PROTOCOLS",
    "ARCHITECTURES",
    "PerProtocol",
    "BASE_LATENCY_US",
    "HOP_LATENCY_US",
    "LL_MAX_BW",
    "RING_LL128_MAX_BW_PER_CHANNEL",
    "TREE_LL128_MAX_BW_PER_CHANNEL",
    "TREE_MAX_BW_PER_CHANNEL",
    "TREE_CORRECTION",
    "NET_OVERHEAD_US",
]

# NCCL's order (NCCL_ALGO names in lower case)
ALGORITHMS = ("tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat")
PROTOCOLS = ("ll", "ll128", "simple")
# compute capability -> the row NCCL reads in its per-architecture tables
ARCHITECTURES = {70: "volta", 80: "ampere", 90: "hopper", 100: "blackwell"}


class PerProtocol(NamedTuple):
    """One value per protocol; ``None`` where NCCL does not run the pair."""

    ll: float | None
    ll128: float | None
    simple: float | None

    def of(self, protocol):
        return getattr(self, protocol)


def _simple_only(value):
    return PerProtocol(None, None, value)


# the fixed cost of launching one operation, by algorithm (NCCL writes PAT's 8 us into
# its latency formula; it is the same per-call term)
BASE_LATENCY_US = {
    "tree": PerProtocol(6.8, 14.0, 8.4),
    "ring": PerProtocol(6.6, 14.0, 8.4),
    "collnet_direct": _simple_only(0.0),
    "collnet_chain": _simple_only(0.0),
    "nvls": _simple_only(0.0),
    "nvls_tree": _simple_only(0.0),
    "pat": _simple_only(8.0),
}

# the latency of one hop, by the class of link it crosses
HOP_LATENCY_US = {
    "nvlink": {
        "tree": PerProtocol(0.6, 1.25, 4.0),
        "ring": PerProtocol(0.6, 1.9, 3.4),
        "collnet_direct": _simple_only(3.7),
        "collnet_chain": _simple_only(2.8),
        "nvls": _simple_only(25.0),
        "nvls_tree": _simple_only(25.0),
        "pat": _simple_only(4.0),
    },
    "pci": {
        "tree": PerProtocol(1.0, 1.9, 4.0),
        "ring": PerProtocol(1.0, 2.5, 5.7),
        "collnet_direct": _simple_only(3.7),
        "collnet_chain": _simple_only(2.8),
        "nvls": _simple_only(0.0),
        "nvls_tree": _simple_only(0.0),
        "pat": _simple_only(4.0),
    },
    "net": {
        "tree": PerProtocol(5.0, 8.5, 14.0),
        "ring": PerProtocol(2.7, 4.0, 14.0),
        "collnet_direct": _simple_only(31.0),
        "collnet_chain": _simple_only(30.0),
        "nvls": _simple_only(18.0),
        "nvls_tree": _simple_only(14.0),
        "pat": _simple_only(14.0),
    },
}

# caps by (row, node bucket): the node bucket is 1 node, 2 nodes, more.  LL's cap is read by
# GPU architecture on one node and by CPU vendor across nodes (Intel's row is Volta's, AMD's
# Ampere's), as NCCL does
LL_MAX_BW = {
    "volta": (39.0, 39.0, 20.4),
    "ampere": (87.7, 22.5, 19.0),
    "hopper": (141.0, 45.0, 35.0),
    "blackwell": (282.0, 90.0, 70.0),
}
RING_LL128_MAX_BW_PER_CHANNEL = {
    "volta": (20.0, 20.0, 20.0),
    "ampere": (20.0, 20.0, 20.0),
    "hopper": (36.7, 36.7, 36.7),
    "blackwell": (73.4, 73.4, 73.4),
}
TREE_LL128_MAX_BW_PER_CHANNEL = {
    "volta": (20.0, 20.0, 20.0),
    "ampere": (20.0, 20.0, 20.0),
    "hopper": (36.7, 36.7, 29.0),
    "blackwell": (73.4, 73.4, 58.0),
}
TREE_MAX_BW_PER_CHANNEL = {
    "volta": (26.5, 18.5, 10.0),
    "ampere": (24.0, 23.6, 17.8),
    "hopper": (38.7, 41.4, 36.0),
    "blackwell": (77.4, 82.8, 72.0),
}

# the tree all-reduce's measured shortfall at medium sizes: a factor on its bandwidth for
# sizes 64 B << i (i = 0 .. 22, i.e. 64 B to 256 MiB), by protocol
TREE_CORRECTION = PerProtocol(
    (1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.7, 0.7, 0.7, 0.7, 0.6, 0.5)
    + (0.4, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.0, 1.0, 1.0),
    (1.0, 1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.8, 0.8, 0.7, 0.6, 0.6)
    + (0.6, 0.6, 0.6, 0.6, 0.8, 0.9, 0.9, 0.9, 0.9, 1.0, 1.0),
    (0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.8, 0.7, 0.6, 0.6, 0.5)
    + (0.5, 0.5, 0.5, 0.6, 0.7, 0.8, 0.7, 0.7, 0.8, 0.9, 0.9),
)

# the host's cost of posting a network operation, by CPU vendor (x86 Intel 1 us, AMD 2 us)
NET_OVERHEAD_US = {"intel": 1.0, "amd": 2.0, "other": 1.0}
