"""Flags shared by the commands that build a cluster (run, step, viz, tour)."""

import argparse

from .. import topology
from ..errors import ConfigError

__all__ = ["add_cluster_arguments", "cluster_from_args", "TOPOLOGIES"]

TOPOLOGIES = ("ring", "bidirectional_ring", "fully_connected", "switch", "torus2d",
              "hierarchical")  # fmt: skip


def add_cluster_arguments(parser, ranks=8):
    """--ranks, --topology, --bandwidth, --latency, --model, --gpus-per-node, ..."""
    g = parser.add_argument_group("cluster")
    g.add_argument(
        "--ranks", "-k", type=int, default=ranks, help=f"number of ranks K (default {ranks})"
    )
    g.add_argument("--topology", default="ring", choices=TOPOLOGIES,
                   help="how ranks are wired (default ring: rank i -> i+1). 'switch' puts one "
                        "switch in the middle, so a rank-to-rank path is 2 links")  # fmt: skip
    g.add_argument(
        "--bandwidth",
        default="100GB/s",
        help="per link and direction, e.g. 100GB/s, 400Gbit/s, inf (default 100GB/s)",
    )
    g.add_argument("--latency", default="5us", help="per link, e.g. 5us, 2ms, 0 (default 5us)")
    g.add_argument("--model", default="maxmin", choices=("maxmin", "ideal"),
                   help="maxmin shares links fairly among flows (congestion); ideal ignores "
                        "other flows (alpha + n/beta per message)")  # fmt: skip
    g.add_argument(
        "--gpus-per-node", type=int, default=4, help="hierarchical only: GPUs per node (default 4)"
    )
    g.add_argument(
        "--inter-bandwidth",
        default="50GB/s",
        help="hierarchical only: NIC bandwidth between nodes (default 50GB/s)",
    )
    g.add_argument(
        "--inter-latency",
        default="5us",
        help="hierarchical only: NIC latency between nodes (default 5us)",
    )
    return g


def build_topology(args):
    k, name = args.ranks, args.topology
    if k < 1:
        raise ConfigError(f"--ranks {k}: a cluster needs at least 1 rank")
    if name == "torus2d":
        rows = max(r for r in range(1, int(k**0.5) + 1) if k % r == 0)
        return topology.torus2d(rows, k // rows, args.bandwidth, args.latency)
    if name == "hierarchical":
        per = args.gpus_per_node
        if per < 1 or k % per:
            raise ConfigError(f"--ranks {k} is not a multiple of --gpus-per-node {per}")
        return topology.hierarchical(k // per, per, args.bandwidth, args.inter_bandwidth,
                                     args.latency, args.inter_latency)  # fmt: skip
    return topology.PRESETS[name](k, args.bandwidth, args.latency)


def cluster_from_args(args):
    from ..runtime import Cluster

    return Cluster(build_topology(args), model=args.model)


class Formatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Keep the description's line breaks (they carry examples)."""
