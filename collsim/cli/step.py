"""``collsim step COLLECTIVE``: walk through a collective one step at a time."""

import numpy as np

from .. import units
from ..errors import ConfigError
from .common import (
    Formatter,
    add_cluster_arguments,
    check_int,
    cluster_from_args,
    explain_time_guard,
)
from .console import add_progress_argument, pause, progress
from .exit_status import Meaning
from .flags_read import link_lines
from .limits import check_fits

__all__ = ["register", "run", "MAX_STEP_RANKS"]

EXIT_STATUS = Meaning(
    ok="done", failed="the run stalled (a --crash-rank, or a --fail-link with no other path)"
)

# every step prints one line per rank and per transfer: past 64 ranks nobody reads it
MAX_STEP_RANKS = 64

DESCRIPTION = """\
Show a collective step by step: the transfers of each step (who sends which chunk to whom,
reduced or copied, how many bytes, when in simulated time) and, after it, every rank's
buffer as chunks labelled by whose contributions they hold ("r0+r1+r3").

Enter advances when standard input is a terminal; --no-pause prints everything at once.

examples:
  collsim step all-reduce --ranks 4
  collsim step all-reduce --ranks 8 --algorithm halving_doubling --topology switch
  collsim step all-gather --ranks 4 --no-pause
  collsim step all-reduce --topology dgx-h100 --algorithm nvls --no-pause
"""


def register(subparsers):
    p = subparsers.add_parser(
        "step",
        help="step through a collective in the terminal",
        description=DESCRIPTION,
        formatter_class=Formatter,
    )
    p.add_argument(
        "collective", help="all-reduce, reduce-scatter, all-gather, broadcast, reduce or all-to-all"
    )
    p.add_argument(
        "--algorithm",
        "-a",
        default=None,
        help="ring, tree, halving_doubling, naive, ...; for all-reduce also nccl_ring, "
        "double_tree, hierarchical, nvls, nvls_tree, collnet_direct, collnet_chain "
        "(--sharp); auto (the default on a hardware preset)",
    )
    p.add_argument(
        "--count", type=int, default=None, help="elements per rank (default: 2 per chunk)"
    )
    p.add_argument("--no-pause", action="store_true", help="do not wait for Enter between steps")
    add_progress_argument(p)
    add_cluster_arguments(p, ranks=4, computes=False)  # a collective alone computes nothing
    p.set_defaults(func=run)


def check_args(args):
    """Refuse what cannot be shown before running anything; returns (name, count)."""
    from ..collectives.registry import canonical_algorithm, canonical_collective

    name = canonical_collective(args.collective)
    canonical_algorithm(name, args.algorithm)
    k = check_int(
        args.ranks,
        "--ranks",
        minimum=1,
        maximum=MAX_STEP_RANKS,
        hint="each step prints every rank; `collsim run` takes more",
    )
    count = 2 * k if args.count is None else check_int(args.count, "--count", minimum=1)
    if name == "all_to_all" and count % k:
        lower = count - count % k
        nearest = f"{lower} or {lower + k}" if lower else f"{k}"
        raise ConfigError(
            f"--count {count}: all-to-all sends an equal block to each of the {k} ranks, so "
            f"the count must be a multiple of {k}; nearest valid --count {nearest}"
        )
    from .run import numeric_bytes  # float32 buffers, as for `collsim run`

    check_fits(
        numeric_bytes(k, 4 * count),
        f"--count {count}: {k} ranks' buffers of float32 elements",
        "the step view shows chunks, not values: a small --count shows the same",
    )
    return name, count


def run(args):
    name, count = check_args(args)
    cluster = cluster_from_args(args)
    k = cluster.size
    # small whole numbers: sums stay exact in float32, whatever the order of additions
    buffers = [((np.arange(count) * 7 + 3 * r) % 10).astype("float32") for r in range(k)]
    timing = explain_time_guard(bandwidth=args.bandwidth, latency=args.latency)
    with progress(f"collsim step: running {name} on {k} ranks", args.progress), timing:
        out = cluster.collective(name, buffers, algorithm=args.algorithm)
    if out.choice is not None:  # algorithm auto: what it chose and why
        print(out.choice.info_line())
    protocol = "" if out.protocol is None else f" (protocol {out.protocol})"
    print(
        f"{name.replace('_', '-')} with the {out.algorithm} algorithm{protocol} on {k} "
        f"ranks, {count} float32 elements each, over "
        f"{cluster.topology.graph.get('name')}"
    )
    for line in link_lines(args):  # each link flag as typed and as read
        print(line)
    print(f"{out.schedule.n_chunks} chunk(s) per buffer; {out.stats.steps} steps\n")
    views = list(out.steps(include_initial=True))
    for i, view in enumerate(views):
        print(view)
        print()
        if i < len(views) - 1:
            pause(args)
    sent = out.stats.bytes_sent
    print(
        f"done in {units.format_time(out.time)} of simulated time; bytes sent per rank: "
        f"{', '.join(f'{b:,}' for b in sent)} B (buffer {buffers[0].nbytes:,} B)"
    )
    return 0
