"""``collsim viz KIND``: draw a figure and save it (PNG, SVG or PDF, by the --out extension).

Each kind is one function decorated with :func:`kind`: it receives the parsed flags and
returns a matplotlib Figure; saving, the format check and the message are shared.  To add
a kind, write one such function here; ``arguments`` adds its flags, ``example`` is the
line its ``--help`` shows, and ``animate(args, path)`` (ring only) writes a GIF or an
HTML page.  ``--out`` is checked before anything runs, and each kind checks its own
numbers before it simulates, so a bad flag costs nothing.  Every format is written the
same, byte for byte, each run (:mod:`collsim.viz.output`).
"""

import argparse
import math
import textwrap
from dataclasses import dataclass

from ..errors import ConfigError
from .common import check_int
from .paths import check_output_path
from .plan import add_config_arguments

__all__ = ["register", "run", "kind", "KINDS", "FORMATS", "ANIMATED"]

FORMATS = ("png", "svg", "pdf")
ANIMATED = ("gif", "html")  # for kinds with an ``animate`` function


@dataclass(frozen=True)
class Kind:
    name: str
    help: str  # one line for `collsim viz --help`
    description: str  # what the figure teaches, for `collsim viz NAME --help`
    arguments: object  # function(parser) that adds the kind's flags, or None
    draw: object  # function(args) -> matplotlib Figure
    example: str = "--params 7B --world-size 8 --out out.svg"  # flags for the --help example
    animate: object = None  # function(args, path) -> frames written, for .gif


KINDS = {}  # name -> Kind, in the order `collsim viz --help` lists them


def kind(name, help, description, arguments=None, **extra):
    """Register the decorated ``draw(args) -> Figure`` as ``collsim viz NAME``
    (``extra``: ``example=``, ``animate=``)."""

    def register_kind(draw):
        KINDS[name] = Kind(name, help, description, arguments, draw, **extra)
        return draw

    return register_kind


@kind(
    "memory",
    help="memory per GPU as stacked bars for ZeRO stages 0-3",
    description=(
        "Draw memory per GPU (parameters, gradients, optimizer states, activations) for ZeRO "
        "stages 0-3 side by side, for one configuration given as for `collsim plan`.  Mixed-"
        "precision Adam keeps 16 bytes per parameter (2 weight + 2 gradient + 12 optimizer); "
        "ZeRO-1 shards the 12 over the data-parallel GPUs, ZeRO-2 also the gradients, ZeRO-3 "
        "(FSDP) everything.  Activations do not shard with ZeRO: tp, pp, sequence parallelism, "
        "smaller micro-batches and recomputation reduce them.  The dashed line is the GPU's memory."
    ),
    arguments=add_config_arguments,
)
def memory(args):
    from ..viz.memory import memory_figure
    from .plan import config_from_args

    given = ("model", "params", "layers")
    if not args.config and all(getattr(args, k, None) is None for k in given):
        # with only --out: the 7B memory example, Llama 2 7B's shape (32 layers of 4096;
        # Touvron et al. 2023) on one 8-GPU node, so the 16 bytes/parameter of
        # mixed-precision Adam (Rajbhandari et al. 2020, ZeRO) is visible at once
        defaults = dict(layers=32, hidden=4096, heads=32, seq=4096, vocab=32000,
                        world_size=8, global_batch=8, micro_batch=1)  # fmt: skip
        for key, value in defaults.items():
            if getattr(args, key, None) is None:
                setattr(args, key, value)
        print("no model given: drawing a 7B model (32 layers, hidden 4096) on 8 GPUs")
    return memory_figure(config_from_args(args))


# -- collectives: ring, traffic, utilization, sweep ---------------------------------------


def _collective_arguments(parser, size=True):
    from .common import add_cluster_arguments

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
        parser.add_argument("--size", "-s", default="1MiB", help="S, e.g. 64MiB (default 1MiB)")
    dtypes = ("float64", "float32", "float16", "bfloat16", "int32", "int64")
    parser.add_argument("--dtype", "-d", default="float32", choices=dtypes, help="element type")
    add_cluster_arguments(parser)


def _run_collective(args):
    """Run the collective count-only (same schedule and network, no data) and return
    (topology, CollectiveResult).  Count-only allocates no buffers, so no size needs a
    memory check; a size so large that the run passes the time guard is named."""
    from .. import units
    from .common import cluster_from_args, explain_time_guard
    from .run import measure

    cluster = cluster_from_args(args)
    size = units.parse_size(args.size)
    with explain_time_guard(size=args.size, bandwidth=args.bandwidth, latency=args.latency):
        _, result = measure(
            cluster, args.collective, size, args.algorithm, args.dtype, count_only=True
        )
    return cluster.topology, result


def _check_ranks(args, what):
    """The picture's rank limit, checked before the cluster is built."""
    from ..viz.limits import check_picture_ranks, check_ring_ranks

    check_int(args.ranks, "--ranks", minimum=1)
    if what == "ring":
        check_ring_ranks(args.ranks, "--ranks")
    else:
        check_picture_ranks(args.ranks, what, "--ranks")


def _number(text, flag, high, example):
    """A positive finite number flag (``--fps``), named as typed when it is refused."""
    from ..viz.limits import check_rate

    try:
        value = float(text)
    except ValueError:
        raise ConfigError(f"{flag} {text!r}: not a number; give e.g. {flag} {example}") from None
    return check_rate(value, flag, high, example, shown=repr(text))


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
        "--fps", default="1", help="frames per second of a .gif or .html animation (default 1)"
    )


def _animate_ring(args, path):
    from ..viz.limits import MAX_FPS
    from ..viz.ring import ring_animation

    _check_ranks(args, "ring")
    fps = _number(args.fps, "--fps", MAX_FPS, 1)
    if args.step is not None:
        check_int(args.step, "--step", minimum=0)
    _, result = _run_collective(args)
    _ring_step(args, result)  # an animation shows every step, but a wrong --step is wrong
    return ring_animation(result, path, fps=fps)


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
        "cell per chunk, coloured by how many ranks' contributions the chunk holds.  Works "
        "for every algorithm (tree and halving-doubling draw long arrows), up to 16 ranks.  "
        "Steps count from 1 ('step 1 of 14'); --step 0 is the initial state.  With --out "
        "x.gif, every step as an animation (the initial state, then one frame per step); "
        "with --out x.html, the same as one self-contained web page with play, pause and "
        "step buttons, for a lecture in any browser."
    ),
    arguments=_ring_arguments,
    example="all-reduce --ranks 8 --step 3 --out ring.png    (or --out ring.gif, ring.html)",
    animate=_animate_ring,
)
def ring(args):
    from ..viz.ring import ring_figure

    _check_ranks(args, "ring")
    if args.step is not None:
        check_int(args.step, "--step", minimum=0)
    _, result = _run_collective(args)
    return ring_figure(result, step=_ring_step(args, result))


@kind(
    "traffic",
    help="the topology with every link drawn by the bytes it carried",
    description=(
        "Run a collective (count-only) and draw the topology with each directed link's width "
        "and colour set by the bytes it carried, read from the trace: a circle for rings, the "
        "grid for a torus (wrap-around links as stubs), ranks around the switch, machines "
        "grouped over the fabric for hierarchical.  Ranks are circles, switches grey bars.  "
        "Up to 64 ranks."
    ),
    arguments=_collective_arguments,
    example="all-reduce --algorithm naive --topology switch --ranks 8 --out traffic.png",
)
def traffic(args):
    from ..viz.traffic import traffic_figure

    _check_ranks(args, "traffic")
    topology, result = _run_collective(args)
    return traffic_figure(topology, result)


def _utilization_arguments(parser):
    _collective_arguments(parser)
    parser.add_argument("--bins", default="200", help="time slices, 1-2000 (default 200)")
    parser.add_argument("--all-links", action="store_true", help="also rows for unused links")


@kind(
    "utilization",
    help="links x time heat map of bandwidth used, latency hatched, from the trace",
    description=(
        "Run a collective (count-only) and draw, for every link that carried bytes, the share "
        "of its bandwidth in use over simulated time.  Each transfer first waits out its "
        "path's latency (drawn hatched grey: the link is held, no bytes flow), then its bytes "
        "flow (coloured).  Congestion shows as a dark band at 100 %: the naive root's link on "
        "a switch, the NICs a ring crosses between machines; a latency-bound run is mostly "
        "hatching.  Up to 64 ranks."
    ),
    arguments=_utilization_arguments,
    example="all-reduce --algorithm naive --topology switch --out utilization.png",
)
def utilization(args):
    from ..viz.limits import MAX_BINS, check_count
    from ..viz.utilization import utilization_figure

    try:
        bins = int(args.bins)
    except ValueError:
        raise ConfigError(f"--bins {args.bins!r}: not a whole number; e.g. --bins 200") from None
    bins = check_count(bins, "--bins", 1, MAX_BINS, shown=args.bins)
    _check_ranks(args, "utilization")
    topology, result = _run_collective(args)
    return utilization_figure(topology, result, bins=bins, only_used=not args.all_links)


def _sweep_arguments(parser):
    _collective_arguments(parser, size=False)
    parser.add_argument(
        "--algorithms",
        default=None,
        help="comma-separated, each once (default: every algorithm of the collective)",
    )
    parser.add_argument("--min-bytes", "-b", default="8", help="smallest S (default 8)")
    parser.add_argument("--max-bytes", "-e", default="256MiB", help="largest S (default 256MiB)")
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
        "bandwidth-bound."
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


# -- pipeline timeline and scaling --------------------------------------------------------


# one pass: 3 kinds x (1,024 passes + stages) of them still end before the 1-day time guard
MAX_PASS_S = 10.0


def _timeline_arguments(parser):
    g = parser.add_argument_group("schedule (as for `collsim pipeline`)")
    g.add_argument("--schedule", default="1f1b", help="gpipe, 1f1b (default), interleaved, zb-h1")
    g.add_argument("--stages", "-p", type=int, default=4, help="pipeline stages p (default 4)")
    g.add_argument("--microbatches", "-m", type=int, default=8, help="micro-batches m (default 8)")
    g.add_argument("--virtual", "-v", type=int, default=1, help="chunks per stage (interleaved)")
    g.add_argument("--t-forward", default="1ms", help="forward t_f (default 1ms)")
    g.add_argument("--t-backward", default=None, help="input-gradient t_b (default t_f)")
    g.add_argument("--t-weight", default=None, help="weight-gradient t_w (default t_f)")
    g.add_argument("--bandwidth", default="100GB/s", help="per direction (default 100GB/s)")
    g.add_argument("--latency", default="5us", help="per message (default 5us)")


@kind(
    "timeline",
    help="pipeline stages x time: F/B/W blocks per micro-batch, idle shaded",
    description=(
        "Run one pipeline step (as `collsim pipeline` does) and draw stages against time: "
        "forward, backward and weight-gradient passes coloured by kind and numbered by "
        "micro-batch, idle time hatched, and the bubble fraction measured from the trace "
        "next to the closed form in the title."
    ),
    arguments=_timeline_arguments,
    example="--schedule interleaved --stages 4 --microbatches 8 --virtual 2 --out timeline.png",
)
def timeline(args):
    from ..parallel.pipeline import pipeline_step
    from ..units import parse_time
    from ..viz.limits import MAX_TIMELINE_PASSES
    from ..viz.timeline import timeline_figure

    for flag, value in (("--stages", args.stages), ("--microbatches", args.microbatches),
                        ("--virtual", args.virtual)):  # fmt: skip
        check_int(value, flag, minimum=1)
    passes = args.stages * args.microbatches * args.virtual
    if passes > MAX_TIMELINE_PASSES:
        raise ConfigError(
            f"--stages {args.stages} x --microbatches {args.microbatches} x --virtual "
            f"{args.virtual} = {passes:,} forward passes: a timeline stays readable up to "
            f"{MAX_TIMELINE_PASSES:,} (e.g. --stages 8 --microbatches 32); the bubble formula "
            "is in `collsim pipeline`"
        )
    times = {}
    for flag, text in (("--t-forward", args.t_forward), ("--t-backward", args.t_backward),
                       ("--t-weight", args.t_weight)):  # fmt: skip
        if text is None:  # t_b and t_w default to t_f
            continue
        try:
            times[flag] = parse_time(text)
        except ConfigError as exc:
            raise ConfigError(f"{flag} {text!r}: {exc}") from None
        if times[flag] > MAX_PASS_S:  # the run would stop at the simulation's time guard
            raise ConfigError(
                f"{flag} {text!r}: more than {MAX_PASS_S:g} s per pass, so a long schedule would "
                "pass the simulation's 1-day time guard; real passes take micro- to "
                "milliseconds, e.g. 1ms"
            )
    t_f = times["--t-forward"]
    result = pipeline_step(
        args.schedule,
        args.stages,
        args.microbatches,
        args.virtual,
        t_f=t_f,
        t_b=times.get("--t-backward", t_f),
        t_w=times.get("--t-weight", t_f),
        bandwidth=args.bandwidth,
        latency=args.latency,
    )
    return timeline_figure(result)


MAX_GPUS = 2**20  # a log axis of 21 GPU counts; far beyond any job's data-parallel reach


def _scaling_arguments(parser):
    add_config_arguments(parser)
    g = parser.add_argument_group("scaling")
    g.add_argument(
        "--max-gpus",
        type=int,
        default=1024,
        help=f"largest GPU count, up to {MAX_GPUS:,} (default 1024)",
    )
    g.add_argument(
        "--weak", action="store_true", help="weak scaling: the global batch grows with the GPUs"
    )
    g.add_argument(
        "--batch-per-gpu",
        default=None,
        help="weak scaling: sequences per data-parallel GPU (default 4)",
    )


@kind(
    "scaling",
    help="step time split into compute and communication, and efficiency, against GPUs",
    description=(
        "Where adding GPUs stops paying: for one model (default 7B, a global batch of 512 "
        "sequences of 2048 tokens: the 7B memory example), "
        "step time against the number of "
        "GPUs split into compute (6·N·tokens / (GPUs·P)) and communication (its bandwidth "
        "term bytes/β and latency term steps·α, on the intra-node link until the job leaves "
        "one node, then the inter-node one), and the efficiency that follows.  Strong "
        "scaling by default (fixed global batch); --weak keeps the batch per GPU fixed.  "
        "Closed forms from the planner; flags as for `collsim plan` (--world-size is ignored)."
    ),
    arguments=_scaling_arguments,
    example="--params 7B --global-batch 512 --inter-bandwidth 50GB/s --out scaling.png",
)
def scaling(args):
    from ..viz.scaling import DEFAULT_JOB, scaling_figure
    from .plan import config_from_args

    if args.params is None and args.layers is None and args.model is None and not args.config:
        args.params = DEFAULT_JOB["params"]
    if args.global_batch is None and not args.config:
        args.global_batch = DEFAULT_JOB["global_batch"]
    batch_per_gpu = None
    if args.batch_per_gpu is not None:
        batch_per_gpu = _number(args.batch_per_gpu, "--batch-per-gpu", 1e6, 4)
    cfg = config_from_args(args)
    mp = cfg.tp * cfg.pp * cfg.cp
    check_int(args.max_gpus, "--max-gpus", minimum=mp, maximum=max(mp, MAX_GPUS),
              hint=f"the smallest job is one model replica, tp·pp·cp = {mp}")  # fmt: skip
    top = args.max_gpus if args.weak else min(args.max_gpus, (cfg.global_batch or 1) * mp)
    gpus = [mp * 2**i for i in range(int(math.log2(top // mp)) + 1)]
    return scaling_figure(cfg, gpus=gpus, weak=args.weak, batch_per_gpu=batch_per_gpu)


def register(subparsers):
    parser = subparsers.add_parser(
        "viz",
        help="draw a figure (ring, traffic, timeline, sweep, scaling, ...) as PNG, SVG or GIF",
        description="Draw a figure and save it to --out; the format follows the extension "
        f"({', '.join('.' + f for f in FORMATS)}; ring also .gif or .html, animated).  The "
        "same input gives the same file, byte for byte.  Each KIND has its own --help.",
    )
    kinds = parser.add_subparsers(title="kinds", metavar="KIND")
    for k in KINDS.values():
        sub = kinds.add_parser(
            k.name,
            help=k.help,
            description=textwrap.fill(k.description, 88),
            epilog=f"example:\n  collsim viz {k.name} {k.example}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        if k.arguments:
            k.arguments(sub)
        sub.add_argument(
            "--out",
            default=f"{k.name}.png",
            metavar="FILE",
            help=f"where to save; .png, .svg or .pdf"
            f"{', or .gif / .html (animated)' if k.animate else ''} (default {k.name}.png)",
        )
        sub.set_defaults(func=run, kind=k)
    parser.set_defaults(func=lambda args: parser.print_help())


def _suffixes(k):
    return tuple("." + f for f in FORMATS + (ANIMATED if k.animate else ()))


def run(args):
    """Check ``--out``, draw ``args.kind`` and save it there; returns 0."""
    from ..viz.output import save_figure

    out = check_output_path(args.out, "--out", suffixes=_suffixes(args.kind))
    fmt = out.suffix.lower().lstrip(".")
    if fmt in ANIMATED:
        frames = args.kind.animate(args, out)
        print(f"wrote {out} ({args.kind.name} animation, {frames} frames, {fmt.upper()})")
        return 0
    fig = args.kind.draw(args)
    save_figure(fig, out, fmt, dpi=150)
    print(f"wrote {out} ({args.kind.name} figure, {fmt.upper()})")
    return 0
