"""``collsim viz`` kinds that draw a collective: ring, traffic, utilization, sweep.

Each runs the collective count-only (the same schedule and network, no data), so no size
needs a memory check; every flag is checked before the run.
"""

from ..errors import ConfigError
from .common import check_int
from .viz_kinds import kind, positive_number

# -- collectives: ring, traffic, utilization, sweep ---------------------------------------


def _collective_arguments(parser, size=True, default_case=None):
    """The collective, its algorithm and size and the cluster; ``default_case``: the kind
    whose case (:mod:`.viz_defaults`) is drawn when no cluster or algorithm is given."""
    from .common import add_cluster_arguments
    from .viz_defaults import kind_cluster_arguments

    parser.add_argument(
        "collective",
        nargs="?",
        default="all-reduce",
        help="all-reduce (default), reduce-scatter, all-gather, broadcast, reduce or all-to-all",
    )
    parser.add_argument(
        "--algorithm",
        "-a",
        default=None,
        help="ring, tree, halving_doubling (hd), naive, direct (default: the collective's first)",
    )
    if size:
        parser.add_argument(
            "--size",
            "-s",
            default="1MiB",
            help="S, e.g. 64MiB, 64MB or 64M (= 64MiB) (default 1MiB)",
        )
    dtypes = ("float64", "float32", "float16", "bfloat16", "int32", "int64")
    parser.add_argument("--dtype", "-d", default="float32", choices=dtypes, help="element type")
    if default_case is None:
        add_cluster_arguments(parser, computes=False)  # a collective alone computes nothing
    else:
        kind_cluster_arguments(parser, default_case)


def _run_collective(args, stalled_ok=False):
    """Run the collective count-only (same schedule and network, no data) and return
    (topology, CollectiveResult).  Count-only allocates no buffers, so no size needs a
    memory check; a size so large that the run passes the time guard is named.  With
    ``stalled_ok``, a run that faults stalled gives its trace up to the stall instead (the
    picture shows where it stopped; the watchdog's report goes to stderr)."""
    import sys

    from .. import units
    from ..errors import WatchdogTimeout
    from .common import cluster_from_args, explain_time_guard
    from .run_measure import measure

    cluster = cluster_from_args(args)
    size = units.parse_size(args.size)
    with explain_time_guard(size=args.size, bandwidth=args.bandwidth, latency=args.latency):
        try:
            _, result = measure(
                cluster, args.collective, size, args.algorithm, args.dtype, count_only=True
            )
        except WatchdogTimeout as stalled:
            if not stalled_ok or stalled.trace is None:
                raise
            print(
                f"collsim viz: the run stalled; drawing it up to the stall\n{stalled}",
                file=sys.stderr,
            )
            return cluster.topology, stalled.trace
    return cluster.topology, result


def _check_ranks(args, what):
    """The picture's rank limit, checked before the cluster is built."""
    from ..viz.limits import check_picture_ranks, check_ring_ranks

    check_int(args.ranks, "--ranks", minimum=1)
    if what == "ring":
        check_ring_ranks(args.ranks, "--ranks")
    else:
        check_picture_ranks(args.ranks, what, "--ranks")


def _ring_arguments(parser):
    _collective_arguments(parser)
    parser.add_argument(
        "--step",
        type=int,
        default=None,
        help="which step to draw, counted from 1 as the title counts it ('step 3 of 14'); "
        "0 is the state before the first step (default 3, or the last if there are fewer)",
    )
    parser.add_argument(
        "--channel",
        type=int,
        default=None,
        help="nccl_ring: draw this channel's ring alone (default 0); double_tree: one of its "
        "two trees (default both)",
    )
    parser.add_argument(
        "--cells",
        default="count",
        choices=("count", "sources"),
        help="colour each buffer cell by how many ranks contributed (count, default) or "
        "stripe it with the colour of every rank that did (sources)",
    )


def _ring_movie(args):
    from ..viz.limits import MAX_FPS
    from ..viz.ring import ring_movie
    from ..viz.shapes import SHAPES, shape_movie

    _check_ranks(args, "ring")
    positive_number(args.fps, "--fps", MAX_FPS, 1)
    if args.step is not None:
        check_int(args.step, "--step", minimum=0)
    topology, result = _run_collective(args)
    _ring_step(args, result)  # an animation shows every step, but a wrong --step is wrong
    if result.algorithm in SHAPES:
        return shape_movie(result, _channel(args, result), _layout(topology, result), args.cells)
    _channel(args, result)
    return ring_movie(result, cells=args.cells)


def _layout(topology, result):
    """The group's nodes, as the algorithms that read them see them."""
    from ..hardware.layout import node_layout

    return node_layout(topology, result.group.ranks)


def _channel(args, result):
    """--channel, checked against the schedule's lanes (channels, trees)."""
    from ..viz.shapes import lanes_shown

    if args.channel is None:
        return None
    try:
        lanes_shown(result.schedule, args.channel)
    except ConfigError as exc:
        raise ConfigError(f"--{exc}") from None
    return args.channel


def _ring_step(args, result):
    """The step --step names (default 3, or the last step if there are fewer)."""
    last = result.schedule.n_steps
    step = min(3, last) if args.step is None else args.step
    if step > last:
        name = f"{result.algorithm} {result.collective}".replace("_", "-")
        raise ConfigError(
            f"--step {args.step}: the {name} on {result.group.size} ranks has {last} steps; "
            + (f"choose 1..{last}, or 0 for the initial state" if last else "choose --step 0")
        )
    return step


@kind(
    "ring",
    help="one step of a collective: ranks on a circle, arrows per chunk, buffers coloured",
    description=(
        "Draw one step of a collective (from its schedule and a count-only run): the ranks on "
        "a circle, one arrow per transfer labelled with the chunks it carries (red: the "
        "receiver adds them in; blue: it copies them), and beside each rank its buffer as one "
        "cell per chunk, coloured by how many ranks' contributions the chunk holds (or, with "
        "--cells sources, striped with each contributing rank's colour).  Other algorithms "
        "are drawn in their own shape: tree and double_tree as layered trees (the double "
        "tree's two side by side), halving_doubling as a row of ranks with an arc per "
        "exchange (pat too: partners 1, 2, 4, ... back), nvls with the NVSwitch in the middle "
        "reducing and multicasting, nvls_tree as nodes each with its own NVSwitch and a "
        "tree across them, "
        "hierarchical and nccl_ring as nodes of GPUs (--channel C: one of NCCL's rings).  "
        "Up to 16 ranks.  "
        "Steps count from 1 ('step 1 of 14'); --step 0 is the initial state.  With --out "
        "x.gif, every step as an animation (the initial state, then one frame per step); "
        "with --out x.html, the same as one self-contained web page with play, pause and "
        "step buttons, for a lecture in any browser."
    ),
    arguments=_ring_arguments,
    example="all-reduce --ranks 8 --step 3 --out ring.png    (or --out ring.gif, ring.html)",
    movie=_ring_movie,
)
def ring(args):
    from ..viz.limits import MAX_FPS
    from ..viz.ring import ring_figure
    from ..viz.shapes import SHAPES, shape_figure

    _check_ranks(args, "ring")
    # a still picture ignores --fps, but a bad value is still a mistake worth naming
    positive_number(args.fps, "--fps", MAX_FPS, 1)
    if args.step is not None:
        check_int(args.step, "--step", minimum=0)
    topology, result = _run_collective(args)
    step = _ring_step(args, result)
    if result.algorithm in SHAPES:
        layout = _layout(topology, result)
        return shape_figure(result, step, _channel(args, result), layout, args.cells)
    _channel(args, result)
    return ring_figure(result, step=step, cells=args.cells)


@kind(
    "traffic",
    help="the topology with every link drawn by the bytes it carried",
    description=(
        "Run a collective (count-only) and draw the topology with each directed link's width "
        "and colour set by the bytes it carried, read from the trace: a circle for rings, the "
        "grid for a torus (wrap-around links as stubs), ranks around the switch, machines "
        "grouped over the fabric for hierarchical.  Ranks are circles, switches grey bars.  "
        "Up to 64 ranks.  With no cluster or algorithm given: the naive all-reduce on a "
        "switch of 8 ranks, whose root's link carries every rank's bytes."
    ),
    arguments=lambda parser: _collective_arguments(parser, default_case="traffic"),
    example="all-reduce --algorithm ring --topology dgx-a100 --nodes 2 --out traffic.png",
)
def traffic(args):
    from ..viz.traffic import traffic_figure

    _check_ranks(args, "traffic")
    topology, result = _run_collective(args, stalled_ok=True)
    return traffic_figure(topology, result)


def _utilization_arguments(parser):
    _collective_arguments(parser, default_case="utilization")
    parser.add_argument("--bins", default="200", help="time slices, 1-2000 (default 200)")
    parser.add_argument("--all-links", action="store_true", help="also rows for unused links")


def _utilization_movie(args):
    from ..viz.animation import playhead
    from ..viz.style import say

    fig, (start, end) = _utilization(args)
    return playhead(fig, fig.axes[:1], start, end, title=say("link utilisation over time"))


@kind(
    "utilization",
    help="links x time heat map of bandwidth used, latency hatched, from the trace",
    description=(
        "Run a collective (count-only) and draw, for every link that carried bytes, the share "
        "of its bandwidth in use over simulated time.  Each transfer first waits out its "
        "path's latency (drawn hatched grey: the link is held, no bytes flow), then its bytes "
        "flow (coloured).  Congestion shows as a dark band at 100 %: the naive root's link on "
        "a switch, the NICs a ring crosses between machines; a latency-bound run is mostly "
        "hatching.  Up to 64 ranks.  --out x.html or x.gif (or --frames DIR) sweeps a "
        "playhead across the run, what has not happened yet greyed.  With no cluster or "
        "algorithm given: the naive all-reduce on a switch of 8 ranks."
    ),
    arguments=_utilization_arguments,
    example="all-reduce --topology dgx-a100 --nodes 2 --out utilization.png",
    movie=_utilization_movie,
)
def utilization(args):
    return _utilization(args)[0]


def _utilization(args):
    """The figure and the run's span in seconds (what its time axis shows)."""
    from ..viz.limits import MAX_BINS, check_count
    from ..viz.utilization import utilization as link_shares
    from ..viz.utilization import utilization_figure

    try:
        bins = int(args.bins)
    except ValueError:
        raise ConfigError(f"--bins {args.bins!r}: not a whole number; e.g. --bins 200") from None
    bins = check_count(bins, "--bins", 1, MAX_BINS, shown=args.bins)
    _check_ranks(args, "utilization")
    topology, result = _run_collective(args, stalled_ok=True)
    fig = utilization_figure(topology, result, bins=bins, only_used=not args.all_links)
    edges = link_shares(topology, getattr(result, "trace", result), 1)[0]  # the figure's axis
    return fig, (edges[0], edges[-1])


def _sweep_arguments(parser):
    _collective_arguments(parser, size=False, default_case="sweep")
    parser.add_argument(
        "--algorithms",
        default=None,
        help="comma-separated, each once (default: every algorithm of the collective; with "
        "no cluster or algorithm flag, nccl_ring,double_tree on --topology dgx-a100 "
        "--nodes 2)",
    )
    parser.add_argument(
        "--min-bytes",
        "-b",
        default="8",
        help="smallest S, as nccl-tests' -b (1K = 1KiB) (default 8)",
    )
    parser.add_argument(
        "--max-bytes",
        "-e",
        default="256MiB",
        help="largest S, as nccl-tests' -e (8G = 8GiB) (default 256MiB)",
    )
    parser.add_argument(
        "--factor", "-f", default="2", help="S step, > 1; at most 64 sizes (default 2)"
    )
    parser.add_argument(
        "--analytical", action="store_true", help="closed forms instead of count-only simulation"
    )


def _algorithm_list(args):
    """The --algorithms list (or --algorithm alone), each named once."""
    from ..collectives.registry import canonical_algorithm, canonical_collective

    if not args.algorithms:
        return [args.algorithm] if args.algorithm else None
    names = [a.strip() for a in args.algorithms.split(",")]
    if not all(names):
        raise ConfigError(
            f"--algorithms {args.algorithms!r}: an empty name; separate names by single "
            "commas, e.g. --algorithms ring,tree"
        )
    collective = canonical_collective(args.collective)
    seen = {}
    for name in names:
        canonical = canonical_algorithm(collective, name)
        if canonical in seen:
            again = (
                f"{name!r} is listed twice"
                if name == seen[canonical]
                else f"{seen[canonical]!r} and {name!r} are the same algorithm"
            )
            raise ConfigError(f"--algorithms {args.algorithms!r}: {again}; name each once")
        seen[canonical] = name
    return names


@kind(
    "sweep",
    help="time and busbw against message size, one line per algorithm",
    description=(
        "Time and bus bandwidth (nccl-tests' busbw) against message size, log-log, for "
        "several algorithms on one topology (2 to 64 ranks), from count-only simulation (or "
        "--analytical closed forms).  Each algorithm has its own colour, line style and "
        "marker, so lines that coincide stay visible.  Dashed lines mark where the fastest "
        "algorithm changes: small messages are latency-bound (fewest steps wins), large ones "
        "bandwidth-bound.  With no cluster or algorithm given: NCCL's ring and double "
        "binary tree on 2 DGX A100 machines, where the tree wins below about 3 MiB and the "
        "ring above."
    ),
    arguments=_sweep_arguments,
    example="all-reduce --topology switch --ranks 16 --out sweep.png",
)
def sweep(args):
    from ..viz.sweep import sweep_figure
    from .common import cluster_from_args
    from .limits import sweep_sizes

    check_int(args.ranks, "--ranks", minimum=2, hint="a sweep compares algorithms that move data")
    _check_ranks(args, "sweep")
    algorithms = _algorithm_list(args)
    sizes = sweep_sizes(args.min_bytes, args.max_bytes, args.factor)
    mode = "analytical" if args.analytical else "count-only"
    cluster = cluster_from_args(args)
    return sweep_figure(cluster, args.collective, algorithms, sizes, mode, args.dtype)
