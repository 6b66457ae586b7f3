"""``collsim viz compare A B``: two algorithms of one collective side by side, at the same
scale and on one step clock (:mod:`collsim.viz.compare`).

Both run count-only on the same cluster, size and dtype; each flag is checked before
either runs.
"""

import copy

from ..errors import ConfigError
from .common import check_int
from .viz_collectives import _check_ranks, _layout, _run_collective
from .viz_kinds import kind


def _compare_arguments(parser):
    from .viz_defaults import kind_cluster_arguments

    parser.add_argument(
        "first",
        metavar="A",
        nargs="?",
        default="ring",
        help="an algorithm: ring (default), tree, hd, nccl_ring, ...",
    )
    parser.add_argument(
        "second",
        metavar="B",
        nargs="?",
        default="tree",
        help="the algorithm to set beside it (default tree: many short steps against few "
        "long ones)",
    )
    parser.add_argument(
        "--collective",
        "-c",
        default="all-reduce",
        help="all-reduce (default), reduce-scatter, all-gather, broadcast or reduce",
    )
    parser.add_argument("--size", "-s", default="1MiB", help="S, e.g. 64MiB (default 1MiB)")
    dtypes = ("float64", "float32", "float16", "bfloat16", "int32", "int64")
    parser.add_argument("--dtype", "-d", default="float32", choices=dtypes, help="element type")
    parser.add_argument(
        "--step",
        type=int,
        default=None,
        help="which step of both to draw, from 1 (0: the initial state; default 3, or the "
        "longer one's last if it has fewer)",
    )
    parser.add_argument(
        "--cells",
        default="count",
        choices=("count", "sources"),
        help="buffer cells by how many ranks contributed (count) or which (sources)",
    )
    kind_cluster_arguments(parser, "compare")  # a switch unless a cluster is given


def _both(args):
    """Both algorithms run count-only on one cluster: ((topology, result), ...)."""
    from ..collectives.registry import canonical_algorithm, canonical_collective

    _check_ranks(args, "ring")
    if args.step is not None:
        check_int(args.step, "--step", minimum=0)
    collective = canonical_collective(args.collective)
    names = [canonical_algorithm(collective, a) for a in (args.first, args.second)]
    if names[0] == names[1]:
        raise ConfigError(
            f"compare {args.first} {args.second}: the same algorithm twice; name two, "
            "e.g. collsim viz compare ring tree"
        )
    runs = []
    for name in (args.first, args.second):
        one = copy.copy(args)  # the same flags, one algorithm each
        one.algorithm, one.collective = name, collective
        runs.append(_run_collective(one))
    return runs


def _step(args, results):
    last = max(r.schedule.n_steps for r in results)
    step = min(3, last) if args.step is None else args.step
    if step > last:
        raise ConfigError(
            f"--step {args.step}: {results[0].algorithm} takes {results[0].schedule.n_steps} "
            f"steps and {results[1].algorithm} {results[1].schedule.n_steps}; choose 0..{last}"
        )
    return step


def _compare_movie(args):
    from ..viz.compare import compare_movie

    runs = _both(args)
    results = [r for _, r in runs]
    _step(args, results)
    layouts = [_layout(t, r) for t, r in runs]
    return compare_movie(*results, layouts=layouts, cells=args.cells)


@kind(
    "compare",
    help="two algorithms of one collective side by side, same scale, one step clock",
    description=(
        "Run two algorithms of one collective (count-only, the same cluster and size) and "
        "draw them side by side at the same step: each in its own shape (the ring on its "
        "circle, a tree as a tree, NVLS through its switch), the buffers on one colour "
        "scale, and under them one simulated-time axis with every step of both as a span, "
        "the current one outlined, so the step counts and the step lengths compare at a "
        "glance.  --out x.html or x.gif steps both together; --frames DIR writes a PNG a "
        "step.  Up to 16 ranks; with no cluster given, on a switch of 8 (every rank one hop "
        "from every other, as on an NVSwitch)."
    ),
    arguments=_compare_arguments,
    example="ring tree --topology switch --ranks 8 --out compare.png",
    movie=_compare_movie,
)
def compare(args):
    from ..viz.compare import compare_figure

    runs = _both(args)
    results = [r for _, r in runs]
    layouts = [_layout(t, r) for t, r in runs]
    return compare_figure(*results, step=_step(args, results), layouts=layouts, cells=args.cells)
