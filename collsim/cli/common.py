"""Flags shared by the commands that build a cluster (run, step, viz, tour)."""

import argparse
import os
import stat
from pathlib import Path

from .. import topology
from ..errors import ConfigError

__all__ = [
    "add_cluster_arguments",
    "cluster_from_args",
    "TOPOLOGIES",
    "check_output_path",
    "check_input_file",
]

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


def check_output_path(path, flag="--out", suffixes=None):
    """Refuse an output file that cannot be written, before any expensive work starts.

    Returns the path as a :class:`~pathlib.Path`.  ``suffixes`` (like ``(".png", ".svg")``)
    limits the file types; the error names the flag, the path and the rule it broke.

    Examples
    --------
    >>> check_output_path("out.png", suffixes=(".png",)).name
    'out.png'
    >>> check_output_path("/no/such/folder/out.png")
    Traceback (most recent call last):
    ...
    collsim.errors.ConfigError: --out /no/such/folder/out.png: folder /no/such/folder does not ...
    """
    if path is None or str(path) == "":
        raise ConfigError(f"{flag} {path!r}: give a file name, like {flag} out.png")
    out = Path(path)
    if suffixes is not None and out.suffix.lower() not in suffixes:
        raise ConfigError(
            f"{flag} {path}: unknown file type {out.suffix or '(none)'!r}; "
            f"use one of {', '.join(suffixes)}"
        )
    if out.is_dir():
        raise ConfigError(f"{flag} {path}: is a folder; give a file name inside it")
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.exists():
        # a path under a regular file also lands here or below: name the file in the way
        blocker = next((p for p in parent.parents if p.exists() and not p.is_dir()), None)
        if blocker is not None or (parent.exists() and not parent.is_dir()):
            raise ConfigError(f"{flag} {path}: {blocker or parent} is a file, not a folder")
        raise ConfigError(f"{flag} {path}: folder {parent} does not exist; create it first")
    if not parent.is_dir():
        raise ConfigError(f"{flag} {path}: {parent} is a file, not a folder")
    if not os.access(parent, os.W_OK):
        raise ConfigError(f"{flag} {path}: folder {parent} is not writable")
    return out


def check_input_file(path, flag="--config", max_bytes=1 << 20):
    """Refuse an input that is not a readable regular file of at most ``max_bytes``.

    A FIFO or a device would block or never end, so only regular files are read.

    Examples
    --------
    >>> check_input_file("/dev/null")
    Traceback (most recent call last):
    ...
    collsim.errors.ConfigError: --config /dev/null: not a regular file (a device, FIFO or ...
    """
    src = Path(path)
    try:
        info = src.stat()
    except FileNotFoundError:
        raise ConfigError(f"{flag} {path}: no such file") from None
    except OSError as exc:
        raise ConfigError(f"{flag} {path}: cannot read it ({exc.strerror})") from None
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError(
            f"{flag} {path}: not a regular file (a device, FIFO or folder); "
            "give a .toml or .json file"
        )
    if info.st_size > max_bytes:
        raise ConfigError(
            f"{flag} {path}: {info.st_size} bytes, more than the {max_bytes} a settings "
            "file may have"
        )
    if not os.access(src, os.R_OK):
        raise ConfigError(f"{flag} {path}: not readable")
    return src
