"""``collsim viz KIND``: draw a figure and save it (PNG or SVG, by the --out extension).

Each kind is one function decorated with :func:`kind`: it receives the parsed flags and
returns a matplotlib Figure; saving, the format check and the message are shared.  To add
a kind, write one such function here; ``arguments`` adds its flags, ``example`` is the
line its ``--help`` shows, and ``animate(args, path)`` (ring only) writes a GIF.
"""

import argparse
import textwrap
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError
from .plan import add_config_arguments

__all__ = ["register", "run", "kind", "KINDS", "FORMATS"]

FORMATS = ("png", "svg", "pdf")
ANIMATED = "gif"  # for kinds with an ``animate`` function


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

    if not args.config and all(getattr(args, k, None) is None for k in ("params", "layers")):
        # with only --out: seed 002's example, a 7B model (32 layers of 4096, Llama-2-7B's
        # shape) on one 8-GPU node, so the 16 bytes/parameter story is visible at once
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
    (topology, CollectiveResult)."""
    from .. import units
    from .common import cluster_from_args
    from .run import measure

    cluster = cluster_from_args(args)
    size = units.parse_size(args.size)
    _, result = measure(cluster, args.collective, size, args.algorithm, args.dtype, count_only=True)
    return cluster.topology, result


def _ring_arguments(parser):
    _collective_arguments(parser)
    parser.add_argument(
        "--step",
        type=int,
        default=3,
        help="which step to draw, 1-based as the titles count them; 0 is the "
        "state before the first step (default 3)",
    )
    parser.add_argument("--fps", type=float, default=1.0, help="GIF frames per second (default 1)")


def _animate_ring(args, path):
    from ..viz.ring import ring_animation

    _, result = _run_collective(args)
    return ring_animation(result, path, fps=args.fps)


@kind(
    "ring",
    help="one step of a collective: ranks on a circle, arrows per chunk, buffers coloured",
    description=(
        "Draw one step of a collective (from its schedule and a count-only run): the ranks on "
        "a circle, one arrow per transfer labelled with the chunks it carries (red: the "
        "receiver adds them in; blue: it copies them), and beside each rank its buffer as one "
        "cell per chunk, coloured by how many ranks' contributions the chunk holds.  Works "
        "for every algorithm (tree and halving-doubling draw long arrows).  With --out x.gif, "
        "every step as an animation: the initial state, then one frame per step."
    ),
    arguments=_ring_arguments,
    example="all-reduce --ranks 8 --step 3 --out ring.png    (or --out ring.gif)",
    animate=_animate_ring,
)
def ring(args):
    from ..viz.ring import ring_figure

    _, result = _run_collective(args)
    last = result.schedule.n_steps
    if args.step < 0:
        raise ConfigError(f"--step {args.step}: choose 1..{last}, or 0 for the initial state")
    return ring_figure(result, step=min(args.step, last) - 1)


@kind(
    "traffic",
    help="the topology with every link drawn by the bytes it carried",
    description=(
        "Run a collective (count-only) and draw the topology with each directed link's width "
        "and colour set by the bytes it carried, read from the trace: a circle for rings, the "
        "grid for a torus (wrap-around links as stubs), ranks around the switch, machines "
        "grouped over the fabric for hierarchical.  Ranks are circles, switches grey bars."
    ),
    arguments=_collective_arguments,
    example="all-reduce --algorithm naive --topology switch --ranks 8 --out traffic.png",
)
def traffic(args):
    from ..viz.traffic import traffic_figure

    topology, result = _run_collective(args)
    return traffic_figure(topology, result)


def _utilization_arguments(parser):
    _collective_arguments(parser)
    parser.add_argument("--bins", type=int, default=200, help="time slices (default 200)")
    parser.add_argument("--all-links", action="store_true", help="also rows for unused links")


@kind(
    "utilization",
    help="links x time heat map of bandwidth used, from the trace",
    description=(
        "Run a collective (count-only) and draw, for every link that carried bytes, the share "
        "of its bandwidth in use over simulated time (each transfer's bytes spread over its "
        "span in the trace, latency included).  Congestion shows as a dark band at 100 %: the "
        "naive root's link on a switch, the NICs a ring crosses between machines."
    ),
    arguments=_utilization_arguments,
    example="all-reduce --algorithm naive --topology switch --out utilization.png",
)
def utilization(args):
    from ..viz.utilization import utilization_figure

    topology, result = _run_collective(args)
    return utilization_figure(topology, result, bins=args.bins, only_used=not args.all_links)


def _sweep_arguments(parser):
    _collective_arguments(parser, size=False)
    parser.add_argument(
        "--algorithms",
        default=None,
        help="comma-separated (default: every algorithm of the collective)",
    )
    parser.add_argument("--min-bytes", "-b", default="8", help="smallest S (default 8)")
    parser.add_argument("--max-bytes", "-e", default="256MiB", help="largest S (default 256MiB)")
    parser.add_argument("--factor", "-f", type=float, default=2.0, help="S step (default 2)")
    parser.add_argument(
        "--analytical", action="store_true", help="closed forms instead of count-only simulation"
    )


@kind(
    "sweep",
    help="time and busbw against message size, one line per algorithm",
    description=(
        "Time and bus bandwidth (nccl-tests' busbw) against message size, log-log, for "
        "several algorithms on one topology, from count-only simulation (or --analytical "
        "closed forms).  Dashed lines mark where the fastest algorithm changes: small "
        "messages are latency-bound (fewest steps wins), large ones bandwidth-bound."
    ),
    arguments=_sweep_arguments,
    example="all-reduce --topology switch --ranks 16 --out sweep.png",
)
def sweep(args):
    from ..viz.sweep import sweep_figure
    from .common import cluster_from_args
    from .run import sizes_from_args

    args.size = None
    algorithms = args.algorithms.split(",") if args.algorithms else None
    if algorithms is None and args.algorithm:
        algorithms = [args.algorithm]
    mode = "analytical" if args.analytical else "count-only"
    return sweep_figure(
        cluster_from_args(args),
        args.collective,
        algorithms,
        sizes_from_args(args),
        mode,
        args.dtype,
    )


# -- pipeline timeline and scaling --------------------------------------------------------


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
    from ..viz.timeline import timeline_figure

    t_f = parse_time(args.t_forward)
    result = pipeline_step(
        args.schedule,
        args.stages,
        args.microbatches,
        args.virtual,
        t_f=t_f,
        t_b=t_f if args.t_backward is None else parse_time(args.t_backward),
        t_w=t_f if args.t_weight is None else parse_time(args.t_weight),
        bandwidth=args.bandwidth,
        latency=args.latency,
    )
    return timeline_figure(result)


def _scaling_arguments(parser):
    add_config_arguments(parser)
    g = parser.add_argument_group("scaling")
    g.add_argument("--max-gpus", type=int, default=1024, help="largest GPU count (default 1024)")
    g.add_argument(
        "--weak", action="store_true", help="weak scaling: the global batch grows with the GPUs"
    )
    g.add_argument(
        "--batch-per-gpu",
        type=float,
        default=None,
        help="weak scaling: sequences per data-parallel GPU (default 4)",
    )


@kind(
    "scaling",
    help="step time split into compute and communication, and efficiency, against GPUs",
    description=(
        "Seed 002's question, where adding GPUs stops paying: for one model (default 7B, a "
        "global batch of 512 sequences of 2048 tokens), step time against the number of "
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

    if args.params is None and args.layers is None and not args.config:
        args.params = DEFAULT_JOB["params"]
    if args.global_batch is None and not args.config:
        args.global_batch = DEFAULT_JOB["global_batch"]
    cfg = config_from_args(args)
    mp = cfg.tp * cfg.pp * cfg.cp
    top = args.max_gpus if args.weak else min(args.max_gpus, (cfg.global_batch or 1) * mp)
    gpus = [mp * 2**i for i in range(40) if mp * 2**i <= top]
    return scaling_figure(cfg, gpus=gpus, weak=args.weak, batch_per_gpu=args.batch_per_gpu)


def register(subparsers):
    parser = subparsers.add_parser(
        "viz",
        help="draw a figure (ring, traffic, timeline, sweep, scaling, ...) as PNG, SVG or GIF",
        description="Draw a figure and save it to --out; the format follows the extension "
        f"({', '.join('.' + f for f in FORMATS)}; ring also .{ANIMATED}, animated).  Each KIND "
        "has its own --help.",
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
            help=f"where to save; .png, .svg or .pdf{', or .gif (animated)' if k.animate else ''}"
            f" (default {k.name}.png)",
        )
        sub.set_defaults(func=run, kind=k)
    parser.set_defaults(func=lambda args: parser.print_help())


def run(args):
    """Draw ``args.kind`` and save it to ``args.out``; returns 0."""
    out = Path(args.out)
    fmt = out.suffix.lower().lstrip(".")
    if fmt == ANIMATED and args.kind.animate:
        frames = args.kind.animate(args, out)
        print(f"wrote {out} ({args.kind.name} animation, {frames} frames, GIF)")
        return 0
    if fmt not in FORMATS:
        allowed = FORMATS + ((ANIMATED,) if args.kind.animate else ())
        raise ConfigError(
            f"--out {args.out!r}: the extension picks the format; use one of "
            f"{', '.join('.' + f for f in allowed)} (e.g. {out.stem or args.kind.name}.png)"
        )
    fig = args.kind.draw(args)
    fig.savefig(out, format=fmt, dpi=150)
    print(f"wrote {out} ({args.kind.name} figure, {fmt.upper()})")
    return 0
