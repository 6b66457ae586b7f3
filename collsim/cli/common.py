"""Flags shared by the commands that build a cluster (run, step, viz, tour, exec).

The cluster flags (--ranks, --topology, --nodes, --bandwidth, ...) read into a
:class:`~collsim.runtime.Cluster`, the help formatter every command uses and a negative value
kept with its flag (both from :mod:`.parsing`, which loads nothing heavy), and the time guard
reworded to name the flags behind it.  Every check runs before the expensive work and raises a
:class:`~collsim.errors.ConfigError` that names the flag, the value as the user gave it,
the rule and the nearest valid choice.  The checks of one flag's value are in
:mod:`.flag_checks` (re-exported here); the other shared checks have their own modules:
:mod:`.paths` (files to write or read), :mod:`.limits` (sweep sizes, memory, numpy work)
:mod:`.console` (pausing and progress only for a person) and :mod:`.fault_flags` (what
goes wrong in a run).

Examples
--------
>>> import argparse
>>> parser = argparse.ArgumentParser()
>>> _ = add_cluster_arguments(parser)
>>> args = parser.parse_args(["--ranks", "4", "--topology", "switch"])
>>> machine_from_args(args) is None, args.bandwidth
(True, '100GB/s')
"""

import contextlib
import difflib
import math
import os

from .. import topology
from ..errors import ConfigError
from ..hardware.build import MAX_NODES
from ..hardware.presets import PRESETS
from .fault_flags import add_fault_arguments, faults_from_args
from .flag_checks import (
    MAX_ANALYTICAL_RANKS,
    MAX_LATENCY_S,
    MAX_SIMULATED_RANKS,
    check_int,
    check_ranks,
    check_seed,
    flag_value,
    link_latency,
    link_rate,
)
from .parsing import Formatter, join_negative_values

__all__ = [
    "flag_value",
    "add_cluster_arguments",
    "cluster_from_args",
    "tuner_rules",
    "resolve_cluster_args",
    "machine_from_args",
    "TOPOLOGIES",
    "HARDWARE",
    "Formatter",
    "check_int",
    "check_seed",
    "check_ranks",
    "MAX_SIMULATED_RANKS",
    "MAX_ANALYTICAL_RANKS",
    "MAX_LATENCY_S",
    "join_negative_values",
    "explain_time_guard",
    "link_rate",
    "link_latency",
]

TOPOLOGIES = ("ring", "bidirectional_ring", "fully_connected", "switch", "torus2d", "hierarchical")
HARDWARE = tuple(PRESETS)  # the hardware presets --topology also takes


def add_cluster_arguments(
    parser, ranks=8, computes=True, rank_flags=("--ranks", "-k"), rank_help=None
):
    """--ranks, --topology (a generic shape, a hardware preset or a machine file), --nodes,
    --bandwidth, --latency, --model, --protocol, --gpus-per-node, ... and the fault flags;
    ``computes=False`` for a command whose ranks only communicate (no --slow-rank).  A
    command may spell --ranks its own way (``collsim exec``: mpirun's ``-n``) with
    ``rank_flags`` and ``rank_help``."""
    g = parser.add_argument_group("cluster")
    g.add_argument(
        *rank_flags,
        dest="ranks",
        type=int,
        default=None,
        metavar="K",
        help=(rank_help or "number of ranks K") + f" (default {ranks}; on a hardware preset: "
        "--nodes x its GPUs per node)",
    )
    parser.set_defaults(_default_ranks=ranks)
    g.add_argument(
        "--topology",
        default="ring",
        metavar="NAME|FILE",
        help="how ranks are wired (default ring: rank i -> i+1): "
        + ", ".join(TOPOLOGIES)
        + "; 'switch' puts one switch in the middle, so a rank-to-rank path is 2 links. "
        "A real machine: " + ", ".join(HARDWARE) + " (cited NVLink, NVSwitch, PCIe and "
        "InfiniBand rates; --bandwidth and --latency then do not apply), or a machine file "
        "(.toml or .json, see collsim.hardware.files)",
    )
    g.add_argument(
        "--nodes",
        type=int,
        default=None,
        help="hardware presets: how many machines (default 1), e.g. --topology dgx-h100 "
        "--nodes 4 is 32 GPUs on 8 rails",
    )
    g.add_argument(
        "--sharp",
        action="store_true",
        help="hardware presets: the network's switches reduce (InfiniBand SHARP), so "
        "NCCL's CollNet runs (--algorithm collnet_direct or collnet_chain, and auto may "
        "take them, as with NCCL_COLLNET_ENABLE=1); off by default",
    )
    g.add_argument(
        "--bandwidth",
        default="100GB/s",
        help="per link and direction, e.g. 100GB/s, 400Gbit/s, inf; a number needs its unit "
        "(default 100GB/s)",
    )
    g.add_argument(
        "--latency",
        default="5us",
        help="per link, e.g. 5us, 2ms, 0; a number other than 0 needs its unit (default 5us)",
    )
    g.add_argument(
        "--model",
        default="maxmin",
        choices=("maxmin", "ideal"),
        help="maxmin shares links fairly among flows (congestion); ideal ignores "
        "other flows (alpha + n/beta per message) (default maxmin)",
    )
    g.add_argument(
        "--protocol",
        default=None,
        metavar="NAME",
        help="NCCL's wire protocol (NCCL_PROTO): simple, ll128, ll, or auto (pick by size, as "
        "NCCL's tuner does). Default: auto on a hardware preset, none elsewhere",
    )
    g.add_argument(
        "--choice",
        default="nccl",
        metavar="WHO",
        help="who decides --algorithm auto on a hardware preset: nccl (NCCL's own cost "
        "model, as NCCL decides; see `collsim tune`), closed-form (collsim's closed forms "
        "on the preset's links) or simulated (run every candidate, take the fastest); "
        "default nccl",
    )
    g.add_argument(
        "--tuner-config",
        default=None,
        metavar="CSV",
        help="rules of NCCL's example tuner plugin, one a line: collective,min_bytes,"
        "max_bytes,algorithm,protocol,channels,nNodes,nRanks; where one matches a call, it "
        "decides --choice nccl's pick, as under NCCL (default: $NCCL_TUNER_CONFIG_FILE, "
        "else none; see `collsim tune --help`)",
    )
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
    add_fault_arguments(parser, computes)
    return g


def machine_from_args(args):
    """The :class:`~collsim.hardware.Machine` ``--topology`` names (a preset or a machine
    file), or ``None`` for a generic topology; a bad name is refused with the nearest one."""
    from .. import hardware

    name = args.topology
    if name in TOPOLOGIES:
        return None
    if str(name).lower().endswith(hardware.FILE_SUFFIXES):
        return hardware.load(name)
    key = str(name).strip().lower().replace("_", "-")
    if key in hardware.PRESETS:
        return hardware.PRESETS[key]
    known = list(TOPOLOGIES) + list(hardware.PRESETS)
    near = difflib.get_close_matches(str(name), known, n=1)
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    raise ConfigError(
        f"--topology {name!r}{hint}: choose one of {', '.join(known)}, or a "
        "machine file ending in .toml or .json"
    )


def resolve_cluster_args(args):
    """Fill in ``args.ranks`` (from ``--nodes`` on a hardware preset) and check ``--nodes``
    and ``--protocol``, before any command reads them; returns the Machine or ``None``."""
    machine = machine_from_args(args)
    default = getattr(args, "_default_ranks", 8)
    if getattr(args, "choice", None) is not None:
        from ..runtime.cluster import choice_setting

        args.choice = flag_value(choice_setting, args.choice, "--choice")
    if args.protocol is not None and str(args.protocol).strip().lower() != "auto":
        from ..hardware import check_protocol

        flag_value(check_protocol, args.protocol, "--protocol")
    if machine is None:
        if args.nodes is not None:
            raise ConfigError(
                f"--nodes {args.nodes}: only hardware presets and machine files "
                f"have nodes (e.g. --topology dgx-h100 --nodes {args.nodes}); "
                "for a generic two-level network use --topology hierarchical "
                "--gpus-per-node"
            )
        if getattr(args, "sharp", False):
            raise ConfigError(
                f"--sharp on --topology {args.topology!r}: in-network reduction is a switch "
                "of a hardware preset's network (e.g. --topology dgx-h100 --nodes 2 --sharp)"
            )
        if args.ranks is None:
            args.ranks = default
        return None
    per = machine.gpus_per_node
    if args.nodes is not None:
        check_int(args.nodes, "--nodes", minimum=1, maximum=MAX_NODES)
    if args.ranks is not None:
        check_int(args.ranks, "--ranks", minimum=1)
        nodes = args.nodes if args.nodes is not None else max(1, round(args.ranks / per))
        if args.ranks != nodes * per:
            raise ConfigError(
                f"--ranks {args.ranks} on {machine.name} ({per} GPUs per node): "
                f"ranks must be --nodes x {per}; nearest valid --ranks "
                f"{nodes * per} (--nodes {nodes})"
            )
    nodes = args.nodes if args.nodes is not None else 1
    args.nodes, args.ranks = nodes, nodes * per
    return machine


def build_topology(args, analytical=None):
    machine = resolve_cluster_args(args)
    k, name = args.ranks, args.topology
    if analytical is None:
        analytical = bool(getattr(args, "analytical", False))
    check_ranks(k, analytical)
    if machine is not None:
        from .. import hardware

        return hardware.topology(machine, args.nodes, sharp=getattr(args, "sharp", False) or None)
    # parsed here so that a bad value is named by its flag; the topology gets the text
    bandwidth, latency = args.bandwidth, args.latency
    link_rate(bandwidth, "--bandwidth"), link_latency(latency, "--latency")
    if name == "torus2d":
        rows = max(r for r in range(1, math.isqrt(k) + 1) if k % r == 0)
        return topology.torus2d(rows, k // rows, bandwidth, latency)
    if name == "hierarchical":
        per = args.gpus_per_node
        if per < 1 or k % per:
            divisors = [d for d in range(1, min(k, 4096) + 1) if k % d == 0]
            near = min(divisors, key=lambda d: (abs(d - per), d))
            raise ConfigError(
                f"--ranks {k} is not a multiple of --gpus-per-node {per}; "
                f"nearest valid --gpus-per-node {near}"
            )
        link_rate(args.inter_bandwidth, "--inter-bandwidth")
        link_latency(args.inter_latency, "--inter-latency")
        return topology.hierarchical(
            k // per, per, bandwidth, args.inter_bandwidth, latency, args.inter_latency
        )
    return topology.PRESETS[name](k, bandwidth, latency)


def cluster_from_args(args, analytical=None, **options):
    """The Cluster the cluster flags describe; ``--ranks`` is bounded by the mode
    (:data:`MAX_SIMULATED_RANKS`, or :data:`MAX_ANALYTICAL_RANKS` with ``--analytical``).
    ``options`` are further Cluster keywords (the guards)."""
    from ..runtime import Cluster

    faults = faults_from_args(args)
    if faults and (analytical if analytical is not None else getattr(args, "analytical", False)):
        raise ConfigError(
            f"{faults.all()[0].given} with --analytical: the closed form models "
            "no faults; drop --analytical (a simulation, or --count-only, "
            "does)"
        )
    return Cluster(
        build_topology(args, analytical),
        choice=getattr(args, "choice", "nccl"),
        tuner=tuner_rules(args),
        model=args.model,
        protocol=args.protocol,
        faults=faults,
        **options,
    )


def tuner_rules(args):
    """The rules of ``--tuner-config`` (or ``$NCCL_TUNER_CONFIG_FILE``), () for none."""
    path = getattr(args, "tuner_config", None) or os.environ.get("NCCL_TUNER_CONFIG_FILE")
    if not path:
        return ()
    from ..collectives.nccl_tuner_file import read_rules

    return tuple(read_rules(path))


@contextlib.contextmanager
def explain_time_guard(**flags):
    """Turn the simulation's time guard into an error that names the flags behind it.

    ``flags`` maps a flag to the value the user gave (``bandwidth="1e-300B/s"`` for
    ``--bandwidth``); the guard is read from the error's ``guard`` field.
    """
    from ..errors import SimulationLimitError

    try:
        yield
    except SimulationLimitError as exc:
        if exc.guard != "max_time":
            raise
        given = ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in flags.items())
        raise ConfigError(
            f"the run passed the simulation's time guard ({exc.limit:,.0f} s of simulated "
            f"time) with {given}: a link, a size or a compute rate is far from "
            "real hardware (links 10-900 GB/s and 1-10 us, GPUs 10-1000 TFLOP/s)"
        ) from None
