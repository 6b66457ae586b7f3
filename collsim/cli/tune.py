"""``collsim tune``: NCCL's own cost model for one collective on a hardware preset -- the
latency and bandwidth of every algorithm and protocol, the pair NCCL chooses at each size,
and (``--simulate``) the pair collsim's simulated network finds fastest."""

import os

from ..errors import ConfigError
from .common import Formatter, check_int
from .exit_status import Meaning

__all__ = ["register", "run"]

EXIT_STATUS = Meaning(ok="done", failed="a simulated run failed")

DESCRIPTION = """\
NCCL chooses an algorithm (ring, tree, NVLS, NVLS-Tree, CollNet, PAT) and a protocol (LL,
LL128, Simple) for every call from a cost model (src/graph/tuning.cc): a latency for each
pair -- a base cost plus a cost per hop, by link class -- and a bandwidth -- its channels'
bus bandwidth, refined per pair -- then time = latency + bytes / bandwidth, least wins.
This command prints that model the way NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING prints
its table (latency us / algorithm bandwidth GB/s), with the reason for every pair NCCL
would not run, and NCCL's choice at each size.  The latencies are NCCL's own numbers; the
channels and their bandwidth, which NCCL measures on the machine, come from the preset.

--simulate also runs the pairs collsim can simulate (ring, tree, NVLS, NVLS-Tree, PAT and,
with --sharp, CollNet) on the virtual
cluster and marks the fastest: where it differs from NCCL's choice, the reason is the
model's fixed constants against the simulated links.

NCCL_ALGO and NCCL_PROTO (or --algo/--proto) filter the pairs as NCCL does: a list,
'^' for all but, and per-collective entries: "ring,tree;allreduce:tree".  A tuner file
(--tuner-config, or NCCL_TUNER_CONFIG_FILE as NCCL's example tuner plugin reads it)
overrides the model where a rule matches: its first matching line names the pair.

examples:
  collsim tune all-reduce --topology dgx-h100 --size 1MiB
  collsim tune all-reduce --topology dgx-a100 --nodes 4 -b 8 -e 8G -f 16
  collsim tune all-gather --topology dgx-h100 --nodes 64 --gpus-per-node 1 --size 64KiB
  collsim tune all-reduce --topology dgx-h100 --nodes 2 --size 64MiB --simulate
  collsim tune all-reduce --topology dgx-h100 --nodes 16 -b 1K -e 1G -f 32 --sharp
  NCCL_PROTO=^LL collsim tune all-reduce --topology dgx-a100 --size 4KiB
  collsim tune all-reduce --nodes 2 -b 8 -e 1M --tuner-config rules.csv
      # rules.csv:  allreduce,0,65535,ring,simple,-1,-1,-1
"""


def register(subparsers):
    p = subparsers.add_parser(
        "tune",
        help="NCCL's cost model: each algorithm/protocol's latency and bandwidth, its choice",
        description=DESCRIPTION,
        formatter_class=Formatter,
    )
    p.add_argument("collective", help="all-reduce, all-gather, reduce-scatter, broadcast, reduce")
    p.add_argument(
        "--topology",
        default="dgx-h100",
        help="a hardware preset or machine file (default dgx-h100)",
    )
    p.add_argument("--nodes", type=int, default=1, help="machines (default 1)")
    p.add_argument(
        "--gpus-per-node",
        type=int,
        default=None,
        help="GPUs used per node (default: all of the preset's); PAT runs at 1",
    )
    p.add_argument("--size", "-s", default=None, help="S, e.g. 1MiB (default 1MiB unless a sweep)")
    p.add_argument("--min-bytes", "-b", default=None, help="sweep: smallest S (nccl-tests' -b)")
    p.add_argument("--max-bytes", "-e", default=None, help="sweep: largest S (nccl-tests' -e)")
    p.add_argument("--factor", "-f", default="2", help="sweep: multiply S by this (default 2)")
    p.add_argument(
        "--algo",
        default=None,
        help="as NCCL_ALGO, e.g. 'ring,tree' (default: $NCCL_ALGO, else all)",
    )
    p.add_argument(
        "--proto",
        default=None,
        help="as NCCL_PROTO, e.g. '^LL128' (default: $NCCL_PROTO, else all)",
    )
    p.add_argument(
        "--tuner-config",
        default=None,
        metavar="CSV",
        help="rules of NCCL's example tuner plugin, one a line: collective,min_bytes,"
        "max_bytes,algorithm,protocol,channels,nNodes,nRanks (default: "
        "$NCCL_TUNER_CONFIG_FILE, else none)",
    )
    p.add_argument(
        "--sharp",
        "--collnet",
        dest="collnet",
        action="store_true",
        help="in-network reduction is on (NCCL_COLLNET_ENABLE=1 on an InfiniBand SHARP "
        "fabric): CollNet Direct and Chain join the table (default: the machine's "
        "inter.sharp, off on the presets)",
    )
    p.add_argument(
        "--map",
        default=None,
        metavar="FILE",
        help="draw the choice map (sizes across, 1, 2, 4, ... --nodes nodes down) to a .png, "
        ".svg or .pdf; with --simulate a second panel of collsim's simulated fastest (a run "
        "per size and pair: about a minute a GPU count at 4 nodes, more beyond)",
    )
    p.add_argument(
        "--simulate",
        action="store_true",
        help="also run the pairs collsim simulates (count-only) and mark the fastest",
    )
    p.set_defaults(func=run)


def run(args):
    from .. import hardware
    from ..collectives.nccl_model import COLLECTIVES, graph_of, tune_table
    from ..collectives.registry import canonical_collective
    from .common import machine_from_args

    collective = canonical_collective(args.collective)
    if collective not in COLLECTIVES:
        raise ConfigError(
            f"collective {args.collective!r}: NCCL's model covers "
            + ", ".join(c.replace("_", "-") for c in COLLECTIVES)
        )
    machine = machine_from_args(args)
    if machine is None:
        raise ConfigError(
            f"--topology {args.topology!r}: NCCL's model needs a machine; choose one of "
            f"{', '.join(hardware.PRESETS)} or a machine file"
        )
    check_int(args.nodes, "--nodes", minimum=1, maximum=hardware.MAX_NODES)
    per = machine.gpus_per_node if args.gpus_per_node is None else args.gpus_per_node
    check_int(per, "--gpus-per-node", minimum=1, maximum=machine.gpus_per_node)
    algorithms, protocols = _filters(args, collective)
    sizes = _sizes(args)
    rules = _rules(args)
    graph = graph_of(machine, args.nodes, per, args.collnet or machine.inter.sharp)
    table = tune_table(graph, collective, algorithms, protocols)
    for line in _header(machine, graph, collective) + _table_lines(table):
        print(line)
    if args.map is not None:
        return _draw_map(args, machine, collective, (algorithms, protocols, rules))
    simulate = _simulator(machine, graph, collective) if args.simulate else None
    for line in _choices(graph, collective, sizes, (algorithms, protocols, rules), simulate):
        print(line)
    return 0


def _draw_map(args, machine, collective, limits):
    """The choice map over node counts 1, 2, 4, ... up to --nodes, to --map's file."""
    import sys
    from pathlib import Path

    from ..collectives.nccl_model import graph_of, predict
    from ..viz.choice_map import ChoicePanel, choice_map_figure
    from ..viz.output import save_figure
    from .limits import sweep_sizes

    fmt = Path(args.map).suffix.lstrip(".").lower()
    if fmt not in ("png", "svg", "pdf"):
        raise ConfigError(f"--map {args.map!r}: end the file name in .png, .svg or .pdf")
    if args.size is not None:
        raise ConfigError(
            "--map draws a sweep: give -b/-e/-f (default 8 B .. 8 GiB by 4), not --size"
        )
    sizes = sweep_sizes(
        args.min_bytes or "8",
        args.max_bytes or "8GiB",
        args.factor if args.min_bytes or args.max_bytes else "4",
    )
    algorithms, protocols, rules = limits
    counts = [n for n in (1, 2, 4, 8, 16, 32, 64) if n <= args.nodes] or [args.nodes]
    per = machine.gpus_per_node if args.gpus_per_node is None else args.gpus_per_node
    model_rows, simulated_rows = [], []
    for nodes in counts:
        graph = graph_of(machine, nodes, per, args.collnet or machine.inter.sharp)
        labels = [
            predict(graph, collective, s, algorithms, protocols, rules)[1].entry.label
            for s in sizes
        ]
        model_rows.append((graph.ranks, tuple(labels)))
        if args.simulate:
            print(f"# simulating {graph.ranks} GPUs ...", file=sys.stderr, flush=True)
            fastest = _simulator(machine, graph, collective)
            simulated_rows.append(
                (graph.ranks, tuple(fastest(s, algorithms, protocols)[0] for s in sizes))
            )
    panels = [ChoicePanel("NCCL's cost model", tuple(model_rows))]
    if args.simulate:
        panels.append(ChoicePanel("collsim's simulated fastest", tuple(simulated_rows)))
    from ..collectives.choices import NCCL_NAMES

    title = f"{NCCL_NAMES[collective]} on {machine.name}, {per} GPUs per node"
    save_figure(choice_map_figure(panels, sizes, title), args.map, fmt)
    print(f"# wrote {args.map}: {len(counts)} GPU counts x {len(sizes)} sizes")
    return 0


def _filters(args, collective):
    from ..collectives.nccl_filters import parse_nccl_list

    chosen = []
    for flag, variable, kind in (
        ("algo", "NCCL_ALGO", "algorithm"),
        ("proto", "NCCL_PROTO", "protocol"),
    ):
        text = getattr(args, flag)
        if text is None:
            text = os.environ.get(variable)
        chosen.append(None if text is None else parse_nccl_list(text, kind)[collective])
    return chosen


def _sizes(args):
    from .limits import size_flag, sweep_sizes

    if args.min_bytes is None and args.max_bytes is None:
        return [size_flag(args.size or "1MiB", "--size")]
    if args.size is not None:
        raise ConfigError("--size with --min-bytes/--max-bytes: give one size or a sweep")
    low = args.min_bytes or "8"
    return sweep_sizes(low, args.max_bytes or low, args.factor)


def _header(machine, graph, collective):
    from ..collectives.choices import NCCL_NAMES

    return [
        f"# NCCL's cost model (src/graph/tuning.cc, NCCL 2.23-2.27) for {NCCL_NAMES[collective]} "
        f"on {graph.nodes} x {machine.name}: {graph.ranks} GPUs, {graph.ranks_per_node} per node",
        f"# graph: {graph.channels} channels x {graph.bw_intra:.1f} GB/s inside a node"
        + (f", x {graph.bw_inter:.2f} GB/s between nodes" if graph.nodes > 1 else "")
        + f"; {graph.architecture} (sm_{graph.compute_capability}), {graph.cpu_vendor} CPU",
        "# latency us / algorithm bandwidth GB/s, by protocol:",
    ]


def _table_lines(table):
    from ..collectives.nccl_tables import PROTOCOLS

    lines = [f"#   {'algorithm':<15}" + "".join(f"{p.upper():>16}" for p in PROTOCOLS)]
    off = []
    for algorithm in dict.fromkeys(e.algorithm for e in table):
        row = [e for e in table if e.algorithm == algorithm]
        cells = []
        for e in row:
            if e.disabled:
                cells.append(f"{'off':>16}")
                if "Simple only" not in e.disabled:
                    off.append(f"#   off: {e.label}: {e.disabled}")
            else:
                cells.append(f"{e.latency_us:>8.1f}/{e.bandwidth_gbs:>7.1f}")
        lines.append(f"#   {algorithm:<15}" + "".join(cells))
    return lines + off + ["#   (NVLS, NVLS-Tree, CollNet and PAT run with Simple only)"]


def _rules(args):
    from .common import tuner_rules

    return tuner_rules(args)


LABEL = 23  # the width of an algorithm/protocol column: collnet_direct/simple and a space


def _choices(graph, collective, sizes, limits, simulate):
    from ..collectives.nccl_model import predict
    from ..units import format_size, format_time

    algorithms, protocols, rules = limits

    head = f"{'size':>10}  {'NCCL chooses':<{LABEL}}{'predicted':>12}"
    if simulate:
        head += f"  {'simulated fastest':<{LABEL}}{'simulated':>12}"
    lines = [head]
    for nbytes in sizes:
        _, winner = predict(graph, collective, nbytes, algorithms, protocols, rules)
        row = (
            f"{format_size(nbytes):>10}  {winner.entry.label:<{LABEL}}"
            f"{format_time(winner.time_us * 1e-6):>12}"
        )
        if winner.rule is not None:
            row += f"  (tuner rule {winner.rule.where})"
        if simulate:
            label, seconds = simulate(nbytes, algorithms, protocols)
            row += f"  {label:<{LABEL}}{format_time(seconds):>12}"
            if label != winner.entry.label:
                row += "  (differs: NCCL's fixed constants against the simulated links)"
        lines.append(row)
    return lines


def _simulator(machine, graph, collective):
    """A function ``(nbytes, algorithms, protocols) -> (label, seconds)``: the fastest pair
    of those collsim simulates, each run count-only on the virtual cluster."""
    from .. import hardware
    from ..collectives.nccl_choice import COUNTERPARTS
    from ..collectives.nccl_model import tune_table
    from ..collectives.nccl_tables import PROTOCOLS
    from ..collectives.simulated_choice import count_for
    from ..runtime import Cluster

    if graph.ranks_per_node != machine.gpus_per_node:
        raise ConfigError(
            f"--simulate builds whole {machine.name} nodes: drop --gpus-per-node "
            f"or give {machine.gpus_per_node}"
        )
    cluster = Cluster(hardware.topology(machine, graph.nodes, sharp=graph.collnet))
    # NCCL's NVLS across nodes is NVLS with CollNet, which collsim does not run: its nvls
    # runs inside one node
    runs = {
        n: ours for n, ours in COUNTERPARTS[collective].items() if n != "nvls" or graph.nodes == 1
    }
    k = graph.ranks

    def fastest(nbytes, algorithms, protocols):
        enabled = {
            (e.algorithm, e.protocol)
            for e in tune_table(graph, collective, algorithms, protocols)
            if not e.disabled
        }
        elements = count_for(collective, nbytes, k)  # float32, S as nccl-tests counts it
        best = None
        for nccl_name, ours in runs.items():
            for protocol in PROTOCOLS:
                if (nccl_name, protocol) not in enabled:
                    continue
                out = getattr(cluster, collective)(
                    count=elements, dtype="float32", algorithm=ours, protocol=protocol
                )
                if best is None or out.time < best[1]:
                    best = (f"{nccl_name}/{protocol}", out.time)
        if best is None:
            raise ConfigError("--simulate: the filters leave no pair collsim simulates")
        return best

    return fastest
