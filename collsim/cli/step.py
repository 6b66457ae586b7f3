"""``collsim step COLLECTIVE``: walk through a collective one step at a time."""

import sys

import numpy as np

from .. import units
from .common import Formatter, add_cluster_arguments, cluster_from_args

__all__ = ["register", "run", "pause"]

DESCRIPTION = """\
Show a collective step by step: the transfers of each step (who sends which chunk to whom,
reduced or copied, how many bytes, when in simulated time) and, after it, every rank's
buffer as chunks labelled by whose contributions they hold ("r0+r1+r3").

Enter advances when standard input is a terminal; --no-pause prints everything at once.

examples:
  collsim step all-reduce --ranks 4
  collsim step all-reduce --ranks 8 --algorithm halving_doubling --topology switch
  collsim step all-gather --ranks 4 --no-pause
"""


def register(subparsers):
    p = subparsers.add_parser("step", help="step through a collective in the terminal",
                              description=DESCRIPTION, formatter_class=Formatter)  # fmt: skip
    p.add_argument("collective", help="all-reduce, reduce-scatter, all-gather, broadcast, "
                                      "reduce or all-to-all")  # fmt: skip
    p.add_argument(
        "--algorithm", "-a", default=None, help="ring, tree, halving_doubling, naive, ..."
    )
    p.add_argument(
        "--count", type=int, default=None, help="elements per rank (default: 2 per chunk)"
    )
    p.add_argument("--no-pause", action="store_true", help="do not wait for Enter between steps")
    add_cluster_arguments(p, ranks=4)
    p.set_defaults(func=run)


def pause(args):
    """Wait for Enter, but only when a person is at the terminal."""
    if not getattr(args, "no_pause", True) and sys.stdin.isatty():
        try:
            input("  [Enter: next] ")
        except EOFError:
            pass


def run(args):
    from ..collectives.registry import canonical_collective

    cluster = cluster_from_args(args)
    name = canonical_collective(args.collective)
    k = cluster.size
    count = args.count if args.count is not None else 2 * k
    rng = np.random.default_rng(0)
    buffers = [rng.integers(0, 10, size=count).astype("float32") for _ in range(k)]
    out = cluster.collective(name, buffers, algorithm=args.algorithm)
    print(f"{name.replace('_', '-')} with the {out.algorithm} algorithm on {k} ranks, "
          f"{count} float32 elements each, over {cluster.topology.graph.get('name')}")  # fmt: skip
    print(f"{out.schedule.n_chunks} chunk(s) per buffer; {out.stats.steps} steps\n")
    for view in out.steps(include_initial=True):
        print(view)
        print()
        if view.index < out.schedule.n_steps - 1:
            pause(args)
    sent = out.stats.bytes_sent
    print(f"done in {units.format_time(out.time)} of simulated time; bytes sent per rank: "
          f"{', '.join(f'{b:,}' for b in sent)} B (buffer {buffers[0].nbytes:,} B)")  # fmt: skip
    return 0
