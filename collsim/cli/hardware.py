"""``collsim hardware [NAME|FILE]``: the machines collsim knows, their links and sources.

Without a name it lists the presets; with one (a preset or a machine file) it prints the
machine, every class of link it builds for ``--nodes`` nodes with its line rate and the
effective rate the simulator uses, and where each number comes from.
"""

from .common import Formatter, check_int
from .exit_status import Meaning

__all__ = ["register", "run"]

EXIT_STATUS = Meaning(ok="done", failed="a machine file could not be read")

DESCRIPTION = """\
The machines collsim can simulate: the GPUs of a node, how they are wired (NVSwitch or PCIe),
the NICs between nodes, and the compute rate of each GPU.  Every number is cited: line rates
from the vendors' datasheets, effective rates from NCCL's own topology model (the rate per
NVLink it assumes), NIC efficiencies as measured.

Any command that takes --topology takes these names (and --nodes):
  collsim run all-reduce --topology dgx-h100 --size 1GiB --count-only
  collsim run all-reduce --topology dgx-a100 --nodes 2 --min-bytes 8 --max-bytes 8GiB --count-only

Your own machine: a TOML or JSON file with the same fields, or starting from a preset:
  base = "dgx-a100"
  name = "a100-4nic"
  [inter]
  nics = 4
  fabric = "switch"

examples:
  collsim hardware                          # the presets, one line each
  collsim hardware dgx-h100 --nodes 2       # its links, rates and sources
  collsim hardware my-cluster.toml
"""


def register(subparsers):
    p = subparsers.add_parser(
        "hardware",
        help="the hardware presets: links, rates, sources",
        description=DESCRIPTION,
        formatter_class=Formatter,
    )
    p.add_argument(
        "machine",
        nargs="?",
        default=None,
        metavar="NAME|FILE",
        help="a preset (dgx-a100, dgx-h100, pcie-8gpu) or a .toml/.json file",
    )
    p.add_argument("--nodes", type=int, default=1, help="nodes to build (default 1)")
    p.set_defaults(func=run)


def run(args):
    from .. import hardware

    if args.machine is None:
        for machine in hardware.PRESETS.values():
            print(machine.describe().splitlines()[0])
        print("# `collsim hardware NAME` shows one machine's links and sources")
        return 0
    if str(args.machine).lower().endswith(hardware.FILE_SUFFIXES):
        machine = hardware.load(args.machine)
    else:
        machine = hardware.preset(args.machine)
    check_int(args.nodes, "--nodes", minimum=1, maximum=hardware.MAX_NODES)
    graph = hardware.topology(machine, args.nodes)
    print(machine.describe())
    print(
        f"# {graph.graph['name']}: {machine.gpus_per_node * args.nodes} GPUs; links by class "
        "(per direction):"
    )
    for line in link_table(graph):
        print(line)
    if machine.sources:
        print("# sources:")
        for source in machine.sources:
            print(f"#   {source}")
    return 0


def link_table(graph):
    """One line per link class: how many directed links, line and effective rate, latency."""
    from ..units import format_rate, format_time

    def end(node):
        data = graph.nodes[node]
        return "gpu" if data.get("kind") == "rank" else data.get("role", "switch")

    rows = {}
    for u, v, data in graph.edges(data=True):
        between = "-".join(sorted((end(u), end(v))))
        key = (data["link_class"], between, data["line_rate"], data["bandwidth"], data["latency"])
        rows[key] = rows.get(key, 0) + 1
    lines = [
        f"  {'class':<7} {'between':<14} {'links':>6} {'line rate':>12} {'effective':>12} "
        f"{'latency':>9}"
    ]
    for (cls, between, line, eff, lat), n in sorted(rows.items()):
        lines.append(
            f"  {cls:<7} {between:<14} {n:>6} {format_rate(line):>12} "
            f"{format_rate(eff):>12} {format_time(lat):>9}"
        )
    return lines
