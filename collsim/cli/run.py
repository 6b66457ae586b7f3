"""``collsim run COLLECTIVE``: run a collective, verify it, and print nccl-tests columns."""

import json
import sys

import numpy as np

from .. import units
from ..errors import ConfigError
from .common import Formatter, add_cluster_arguments, cluster_from_args

__all__ = ["register", "run", "measure"]

DESCRIPTION = """\
Run one collective on a virtual cluster, check every output against numpy, and print the
columns nccl-tests prints:

  algbw = S / t                      (S as nccl-tests defines it, t simulated time)
  busbw = algbw * 2(n-1)/n           all-reduce
        = algbw * (n-1)/n            reduce-scatter, all-gather, all-to-all
        = algbw                      broadcast, reduce

Size S: for all-reduce, reduce-scatter, broadcast, reduce and all-to-all the buffer each
rank starts with; for all-gather the buffer each rank ends with (each contributes S/K).

examples:
  collsim run all-reduce --ranks 8 --size 64MiB --algorithm ring --topology ring
  collsim run all-reduce --ranks 8 --min-bytes 8 --max-bytes 128MiB --factor 4
  collsim run all-reduce --ranks 16 --size 1KiB --topology switch --algorithm tree --json
  collsim run all-reduce --ranks 1024 --size 1GiB --count-only     # sizes, no data
  collsim run all-reduce --ranks 4096 --size 1GiB --analytical     # closed form, instant
"""


def register(subparsers):
    from ..collectives.formulas import ALGORITHMS

    p = subparsers.add_parser("run", help="run a collective and print nccl-tests style results",
                              description=DESCRIPTION, formatter_class=Formatter)  # fmt: skip
    p.add_argument(
        "collective", help="one of " + ", ".join(c.replace("_", "-") for c in ALGORITHMS)
    )
    p.add_argument(
        "--algorithm",
        "-a",
        default=None,
        help="ring, tree, halving_doubling (hd), naive, direct; default: the "
        "collective's first (ring; tree for broadcast/reduce; direct for all-to-all)",
    )
    p.add_argument("--size", "-s", default=None, help="S, e.g. 64MiB (default 1MiB unless a sweep)")
    p.add_argument("--min-bytes", "-b", default=None, help="sweep: smallest S")
    p.add_argument("--max-bytes", "-e", default=None, help="sweep: largest S")
    p.add_argument("--factor", "-f", type=float, default=2.0, help="sweep: multiply S by this")
    p.add_argument(
        "--dtype",
        "-d",
        default="float32",
        choices=("float64", "float32", "float16", "bfloat16", "int32", "int64"),
        help="element type (bfloat16 only with --count-only)",
    )
    p.add_argument("--op", "-o", default="sum", choices=("sum", "avg", "prod", "max", "min"))
    p.add_argument("--root", type=int, default=0, help="broadcast/reduce root (group rank)")
    p.add_argument("--seed", type=int, default=0, help="seed of the input values")
    p.add_argument(
        "--count-only",
        action="store_true",
        help="move sizes, not data: same schedule and network, no memory needed",
    )
    p.add_argument(
        "--analytical",
        action="store_true",
        help="no simulation: the closed form's time and steps (instant for any K); "
        "bytes_sent then lists the busiest rank's bytes for every rank",
    )
    p.add_argument("--json", action="store_true", help='print {"results": [row, ...]}')
    p.add_argument(
        "--trace",
        metavar="FILE",
        default=None,
        help="write the (last) run's Chrome/Perfetto trace JSON here",
    )
    add_cluster_arguments(p)
    p.set_defaults(func=run)


def sizes_from_args(args):
    """The list of S values in bytes: one --size, or a --min/--max/--factor sweep."""
    if args.min_bytes is None and args.max_bytes is None:
        return [units.parse_size(args.size or "1MiB")]
    if args.size is not None:
        raise ConfigError("give either --size or --min-bytes/--max-bytes, not both")
    lo = units.parse_size(args.min_bytes or "8")
    hi = units.parse_size(args.max_bytes or lo)
    if hi < lo or args.factor <= 1:
        raise ConfigError(f"sweep needs --max-bytes >= --min-bytes and --factor > 1 "
                          f"(got {lo} B .. {hi} B, factor {args.factor})")  # fmt: skip
    sizes, s = [], lo
    while s <= hi:
        sizes.append(int(s))
        s *= args.factor
    return sizes


def measure(cluster, collective, size, algorithm=None, dtype="float32", op="sum", root=0,
            seed=0, count_only=False, analytical=False):  # fmt: skip
    """Run once and return (row dict, CollectiveResult), as ``--json`` prints it.

    With ``analytical=True`` nothing is simulated: the row holds the closed form and the
    result is ``None``."""
    from ..collectives import bus_factor, reference
    from ..collectives.executor import DTYPE_BYTES, integer_inputs
    from ..collectives.registry import canonical_collective

    name = canonical_collective(collective)
    k = cluster.size
    itemsize = DTYPE_BYTES[dtype]
    per_rank = size // k if name == "all_gather" else size
    if per_rank % itemsize or (name == "all_gather" and size % k):
        whose = f"each rank's share S/K = {size}/{k} B" if name == "all_gather" else f"{size} B"
        unit = k * itemsize if name == "all_gather" else itemsize
        lower = size - size % unit
        raise ConfigError(f"size {size} B: {whose} is not a whole number of {dtype} elements "
                          f"({itemsize} B each); nearest valid sizes {lower} B or "
                          f"{lower + unit} B")  # fmt: skip
    count = per_rank // itemsize
    if analytical:
        return _analytical_row(cluster, name, size, count, algorithm, dtype, op), None
    if dtype == "bfloat16" and not count_only:
        raise ConfigError("numpy has no bfloat16: use --count-only (only its 2-byte size matters)")
    if count_only:
        out = cluster.collective(name, count=count, dtype=dtype, algorithm=algorithm, op=op,
                                 root=root)  # fmt: skip
        correct = None
    else:
        buffers = integer_inputs(k, count, dtype, op, seed)
        out = cluster.collective(name, buffers, algorithm=algorithm, op=op, root=root)
        expected = reference(name, buffers, op, root)
        wrong = sum(0 if (a is None and b is None) else int(np.count_nonzero(a != b))
                    for a, b in zip(out.outputs, expected))  # fmt: skip
        correct = wrong == 0
    t = out.time
    algbw = size / t / 1e9 if t > 0 else None
    row = {
        "collective": name,
        "algorithm": out.algorithm,
        "topology": cluster.topology.graph.get("name"),
        "ranks": k,
        "size_bytes": size,
        "count": count,
        "dtype": dtype,
        "op": op,
        "bytes_sent": out.stats.bytes_sent,
        "bytes_received": out.stats.bytes_received,
        "steps": out.stats.steps,
        "time_s": t,
        "algbw": algbw,
        "busbw": None if algbw is None else algbw * bus_factor(name, k),
        "correct": correct,
    }
    return row, out


def _analytical_row(cluster, name, size, count, algorithm, dtype, op):
    from ..collectives import analytical, bus_factor
    from ..collectives.registry import canonical_algorithm

    cost = analytical(cluster, name, size, algorithm)
    k, t = cluster.size, cost.time_s
    algbw = size / t / 1e9 if t > 0 else None
    busiest = [int(cost.bytes_per_rank)] * k
    return {
        "collective": name,
        "algorithm": canonical_algorithm(name, algorithm),
        "topology": cluster.topology.graph.get("name"),
        "ranks": k,
        "size_bytes": size,
        "count": count,
        "dtype": dtype,
        "op": op,
        "bytes_sent": busiest,
        "bytes_received": busiest,
        "steps": cost.steps,
        "time_s": t,
        "algbw": algbw,
        "busbw": None if algbw is None else algbw * bus_factor(name, k),
        "correct": None,
    }


def run(args):
    cluster = cluster_from_args(args)
    rows, last = [], None
    for size in sizes_from_args(args):
        row, last = measure(cluster, args.collective, size, args.algorithm, args.dtype,
                            args.op, args.root, args.seed, args.count_only,
                            args.analytical)  # fmt: skip
        rows.append(row)
        if not args.json and len(rows) == 1:
            _print_header(row, args)
        if not args.json:
            _print_row(row)
            sys.stdout.flush()
    if args.trace and last is not None:
        last.trace.to_chrome(args.trace)
        if not args.json:
            print(f"# trace written to {args.trace} (open it at ui.perfetto.dev)")
    if args.json:
        print(json.dumps({"results": rows}, indent=1))
    return 0 if all(r["correct"] is not False for r in rows) else 1


def _print_header(row, args):
    print(f"# collsim run {row['collective'].replace('_', '-')}: {row['ranks']} ranks, "
          f"algorithm {row['algorithm']}, topology {row['topology']}, "
          f"{args.bandwidth} per link, {args.latency} latency, model {args.model}")  # fmt: skip
    print("#" + " " * 11 + "size       count    type  redop  steps     time  algbw   busbw"
          "   sent/rank  #wrong")  # fmt: skip
    print("#" + " " * 11 + " (B)  (elements)                          (us) (GB/s)  (GB/s)"
          "         (B)")  # fmt: skip


def _print_row(row):
    def bw(v):
        return f"{v:7.2f}" if v is not None else "    n/a"

    wrong = {True: "0", False: "WRONG", None: "n/a"}[row["correct"]]
    print(f"{row['size_bytes']:>16} {row['count']:>11} {row['dtype']:>7} {row['op']:>6} "
          f"{row['steps']:>6} {row['time_s'] * 1e6:>8.2f} {bw(row['algbw'])} {bw(row['busbw'])} "
          f"{max(row['bytes_sent']):>11} {wrong:>7}")  # fmt: skip
