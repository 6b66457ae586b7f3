"""``collsim run COLLECTIVE``: run a collective, verify it, and print nccl-tests columns.

``--json`` prints ``{"results": [row, ...]}``, one row per size, with the fields of
:data:`JSON_FIELDS` (units in the names: ``_bytes``, ``_s``, ``_GBps``).
"""

import json
import sys
import textwrap

from .. import units
from ..errors import ConfigError
from . import faults_report, run_table
from .common import (
    Formatter,
    add_cluster_arguments,
    check_int,
    check_seed,
    cluster_from_args,
    explain_time_guard,
)
from .console import add_progress_argument, progress
from .exit_status import Meaning
from .limits import check_fits, parse_factor, size_flag, sweep_sizes
from .paths import check_output_path
from .run_measure import check_size, choice_of, measure

__all__ = ["register", "run", "measure", "sizes_from_args", "numeric_bytes", "JSON_FIELDS"]

EXIT_STATUS = Meaning(
    ok="every output equals numpy's (or there is no data to check)",
    failed="an output differs from numpy's, or the run stalled (the watchdog's report)",
)

# the --json row, documented once: `collsim run --help` prints this table
JSON_FIELDS = {
    "collective": "all_reduce, reduce_scatter, all_gather, broadcast, reduce or all_to_all",
    "algorithm": "the algorithm that ran (ring, tree, halving_doubling, naive, one_shot, "
    "two_shot, direct, pat, nccl_ring, double_tree, hierarchical, nvls, nvls_tree, "
    "collnet_direct, collnet_chain; what auto chose)",
    "protocol": "NCCL's protocol the messages used (simple, ll128, ll; what auto chose), "
    "or null where none is modelled (generic topologies)",
    "topology": "the topology's name",
    "ranks": "K, the number of ranks",
    "size_bytes": "S in bytes (see 'Size S' above)",
    "count": "elements per rank buffer (all-gather: per rank's share)",
    "dtype": "element type",
    "op": "reduction op, or null for collectives without one",
    "bytes_sent": "bytes each rank sent, a list by rank",
    "bytes_received": "bytes each rank received, a list by rank",
    "steps": "algorithm steps (latency terms)",
    "time_s": "simulated time in seconds",
    "algbw_GBps": "S / time_s in GB/s (1e9 B/s), null when time_s is 0",
    "busbw_GBps": "algbw_GBps times the bus factor, in GB/s",
    "wrong": "output elements that differ from numpy's; null without data",
    "correct": "wrong == 0, or null without data",
}

DESCRIPTION = (
    """\
Run one collective on a virtual cluster, check every output against numpy, and print the
columns nccl-tests prints:

  algbw = S / t                      (S as nccl-tests defines it, t simulated time)
  busbw = algbw * 2(n-1)/n           all-reduce
        = algbw * (n-1)/n            reduce-scatter, all-gather, all-to-all
        = algbw                      broadcast, reduce

Size S: for all-reduce, reduce-scatter, broadcast, reduce and all-to-all the buffer each
rank starts with; for all-gather the buffer each rank ends with (each contributes S/K).
"max sent/rank" is the bytes the busiest rank sent; "#wrong" counts the output elements
that differ from numpy's (n/a with --count-only or --analytical).

"""
    + textwrap.fill(units.SPELLING, 88)
    + """

--json fields of each row:
"""
    + "\n".join(f"  {key:<16}{meaning}" for key, meaning in JSON_FIELDS.items())
    + """

examples:
  collsim run all-reduce --ranks 8 --size 64MiB --algorithm ring --topology ring
  collsim run all-reduce --ranks 8 --min-bytes 8 --max-bytes 128MiB --factor 4
  collsim run all-reduce --ranks 16 --size 1KiB --topology switch --algorithm tree --json
  collsim run all-reduce --ranks 1024 --size 1GiB --count-only     # sizes, no data
  collsim run all-reduce --ranks 4096 --size 1GiB --analytical     # closed form, instant
"""
)


def register(subparsers):
    from ..collectives.formulas import ALGORITHMS

    p = subparsers.add_parser(
        "run",
        help="run a collective and print nccl-tests style results",
        description=DESCRIPTION,
        formatter_class=Formatter,
    )
    p.add_argument(
        "collective", help="one of " + ", ".join(c.replace("_", "-") for c in ALGORITHMS)
    )
    p.add_argument(
        "--algorithm",
        "-a",
        default=None,
        help="ring, tree, halving_doubling (hd), naive, direct; for all-reduce also "
        "one_shot and two_shot (vLLM's custom all-reduce for small messages: 1 step of "
        "(K-1)·S, 2 steps of 2(K-1)/K·S), nccl_ring, double_tree, hierarchical, nvls, "
        "nvls_tree, and with --sharp collnet_direct and collnet_chain (the network's "
        "switches sum across nodes); "
        "or auto (the least closed-form time, "
        "said in a '# NCCL INFO' line, as NCCL_DEBUG=INFO says it). Default: auto on a "
        "hardware preset; elsewhere the collective's first (ring; tree for broadcast/reduce; "
        "direct for all-to-all)",
    )
    p.add_argument(
        "--size",
        "-s",
        default=None,
        help="S, e.g. 64MiB, 64MB or 64M (= 64MiB) (default 1MiB unless a sweep)",
    )
    p.add_argument(
        "--min-bytes",
        "-b",
        default=None,
        help="sweep: smallest S, as nccl-tests' -b (8K = 8KiB) (default 8)",
    )
    p.add_argument(
        "--max-bytes",
        "-e",
        default=None,
        help="sweep: largest S, as nccl-tests' -e (8G = 8GiB) (default --min-bytes)",
    )
    p.add_argument(
        "--factor",
        "-f",
        default="2",
        help="sweep: multiply S by this, > 1; at most 64 sizes (default 2)",
    )
    p.add_argument(
        "--dtype",
        "-d",
        default="float32",
        choices=("float64", "float32", "float16", "bfloat16", "int32", "int64"),
        help="element type (bfloat16 only with --count-only or --analytical; default float32)",
    )
    p.add_argument(
        "--op",
        "-o",
        default="sum",
        choices=("sum", "avg", "prod", "max", "min"),
        help="reduction of all-reduce, reduce-scatter and reduce (default sum); broadcast, "
        "all-gather and all-to-all have none",
    )
    p.add_argument("--root", type=int, default=0, help="broadcast/reduce root (group rank)")
    p.add_argument("--seed", type=int, default=0, help="seed of the input values, >= 0")
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
        help="write the (last) run's Chrome/Perfetto trace JSON here (not with --analytical)",
    )
    add_progress_argument(p)
    add_cluster_arguments(p, computes=False)  # a collective alone computes nothing
    p.set_defaults(func=run)


def sizes_from_args(args):
    """The list of S values in bytes: one --size, or a --min/--max/--factor sweep of at
    most :data:`~collsim.cli.limits.MAX_SWEEP_SIZES` sizes."""
    size = getattr(args, "size", None)
    factor = getattr(args, "factor", 2)
    parse_factor(factor)  # a bad --factor is an error even without a sweep
    if args.min_bytes is None and args.max_bytes is None:
        return [size_flag("1MiB" if size is None else size, "--size")]
    if size is not None:
        raise ConfigError(
            f"--size {size} with --min-bytes/--max-bytes: give either one size or a sweep"
        )
    lo = "8" if args.min_bytes is None else args.min_bytes
    hi = lo if args.max_bytes is None else args.max_bytes
    return sweep_sizes(lo, hi, factor)


def numeric_bytes(k, size):
    """Bytes a run with data needs, about: K input buffers, K outputs and the executor's
    working copies (about 3K buffers of S), plus numpy's reference (measured with
    tracemalloc: 2-3.1·K·S at K = 8, 4.5-5.1·K·S at K = 2)."""
    return (3 * k + 4) * size


def check_args(args):
    """Every refusal that needs no simulation, before any: returns (cluster, sizes)."""
    from ..collectives.registry import canonical_algorithm, canonical_collective

    name = canonical_collective(args.collective)
    canonical_algorithm(name, args.algorithm)
    check_seed(args.seed)
    if args.analytical and args.count_only:
        raise ConfigError(
            "--analytical and --count-only: give one (the closed form, or a "
            "simulation that moves sizes only)"
        )
    if args.analytical and args.trace is not None:
        raise ConfigError(
            f"--trace {args.trace} with --analytical: the closed form simulates "
            "nothing, so there is no trace; drop --analytical or use "
            "--count-only"
        )
    if args.trace is not None:
        check_output_path(args.trace, "--trace")
    sizes = sizes_from_args(args)
    cluster = cluster_from_args(args, analytical=args.analytical)
    k = cluster.size
    check_int(args.root, "--root", minimum=0, maximum=k - 1, hint=f"a group rank of {k}")
    given = _size_flags(args)
    for size in sizes:
        try:
            check_size(name, k, size, args.dtype)
        except ConfigError as exc:
            raise ConfigError(f"{given}: {exc}") from None
    if args.dtype == "bfloat16" and not (args.count_only or args.analytical):
        raise ConfigError(
            "--dtype bfloat16: numpy has no bfloat16; use --count-only or "
            "--analytical (only its 2-byte size matters)"
        )
    largest = max(sizes)
    if not args.analytical:
        _check_time_guard(cluster, name, largest, args)
    if not (args.count_only or args.analytical):
        check_fits(
            numeric_bytes(k, largest),
            f"{given}: {k} ranks' {units.format_size(largest)} {args.dtype} buffers and their "
            "copies",
            "--count-only runs the same schedule and network without data, --analytical gives "
            "the closed form",
        )
    return cluster, sizes


def _check_time_guard(cluster, name, size, args):
    """A simulation that would pass Cluster's max_time guard stops part-way: refuse it."""
    from ..collectives import analytical

    seconds = analytical(cluster, name, size, args.algorithm).time_s
    if seconds > cluster.max_time:
        given = ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in _timing_flags(args).items())
        raise ConfigError(
            f"{units.format_size(size)} with {given}: the closed form alone takes "
            f"{units.format_time(seconds)} of simulated time, past the simulation's guard of "
            f"{cluster.max_time:,.0f} s; use --analytical, a smaller size or a faster "
            "--bandwidth"
        )


def run(args):
    cluster, sizes = check_args(args)
    rows, last, shown = [], None, None
    mode = "closed form" if args.analytical else "simulating"
    timing = _timing_flags(args)
    with (
        progress(f"collsim run: {mode} {cluster.size} ranks", args.progress) as note,
        explain_time_guard(**timing),
    ):
        for i, size in enumerate(sizes):
            note(f"size {i + 1} of {len(sizes)}, {units.format_size(size)}")
            row, last = measure(
                cluster,
                args.collective,
                size,
                args.algorithm,
                args.dtype,
                args.op,
                args.root,
                args.seed,
                args.count_only,
                args.analytical,
            )
            rows.append(row)
            if not args.json and len(rows) == 1:
                faults_report.print_header(cluster, args)  # "# faults: ..." lines
                print("\n".join(run_table.header_lines(row, args, sizes)))
            if not args.json:
                choice = choice_of(cluster, args.collective, size, args.algorithm, last)
                if choice is not None and _changed(choice, shown):
                    print(choice.info_line())
                    shown = choice
                print(run_table.row_line(row))
                sys.stdout.flush()
    faults_report.print_footer(cluster, last, args)  # which link or rank set the time
    if args.trace and last is not None:
        n = last.trace.transfer_count
        try:
            last.trace.to_chrome(args.trace)
        except OSError as exc:  # a full disk, /dev/full: name the file, not stdout
            raise ConfigError(f"--trace {args.trace}: cannot write it ({exc.strerror})") from None
        except ConfigError as exc:  # more transfer records than the memory holds
            raise ConfigError(
                f"--trace {args.trace}: the run's {n:,} transfers are too many to write one "
                f"by one ({str(exc).split(': ', 1)[-1].split(';')[0]}); the figures above "
                "are complete: drop --trace, or pass a smaller --ranks"
            ) from None
        if not args.json:
            print(f"# trace written to {args.trace} (open it at ui.perfetto.dev)")
    if args.json:
        print(json.dumps({"results": rows}, indent=1))
    return 0 if all(r["correct"] is not False for r in rows) else 1


def _changed(choice, shown):
    """Whether ``auto`` chose another (algorithm, protocol) than the last line said: a
    sweep prints a '# NCCL INFO' line where the choice changes, not at every size."""
    return shown is None or (choice.algorithm, choice.protocol) != (shown.algorithm, shown.protocol)


def _size_flags(args):
    """The size flags as the user gave them, for a message."""
    given = [
        (flag, getattr(args, flag.lstrip("-").replace("-", "_")))
        for flag in ("--size", "--min-bytes", "--max-bytes")
    ]
    return ", ".join(f"{flag} {value}" for flag, value in given if value is not None) or (
        "the default --size 1MiB"
    )


def _timing_flags(args):
    """The flags that set how long a run takes, as the user gave them."""
    sizes = {k: getattr(args, k) for k in ("size", "min_bytes", "max_bytes")}
    sizes = {k: v for k, v in sizes.items() if v is not None}
    links = {"bandwidth": args.bandwidth, "latency": args.latency}
    if args.topology == "hierarchical":
        links.update(inter_bandwidth=args.inter_bandwidth, inter_latency=args.inter_latency)
    return {**sizes, **links}
