"""``collsim viz`` kinds that draw a training job: memory, timeline, scaling.

Flags as for ``collsim plan``; the pipeline timeline runs one real step on the cluster.
"""

import math

from ..errors import ConfigError
from .common import check_int, flag_value
from .plan import add_config_arguments
from .viz_kinds import kind, positive_number


@kind(
    "memory",
    help="memory per GPU as stacked bars for ZeRO stages 0-3",
    description=(
        "Draw memory per GPU (parameters, gradients, optimizer states, activations) for ZeRO "
        "stages 0-3 side by side, for one configuration given as for `collsim plan`.  Mixed-"
        "precision Adam keeps 16 bytes per parameter (2 weight + 2 gradient + 12 optimizer); "
        "ZeRO-1 shards the 12 over the data-parallel GPUs, ZeRO-2 also the gradients, ZeRO-3 "
        "(FSDP) everything.  Activations do not shard with ZeRO: tp, pp, sequence parallelism, "
        "smaller micro-batches and recomputation reduce them.  The dashed line is the GPU's "
        "memory.  With no model given: Llama 2 13B (--model llama2-13b) on --world-size 8 "
        "with --recompute selective, which does not fit an 80 GiB GPU at ZeRO-0 and fits "
        "from ZeRO-2 on."
    ),
    arguments=add_config_arguments,
)
def memory(args):
    from ..viz.memory import memory_figure
    from .plan import config_from_args
    from .viz_defaults import apply_default_case

    apply_default_case(args, "memory")
    return memory_figure(config_from_args(args))


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
    from .fault_flags import add_fault_arguments

    add_fault_arguments(parser)


def _timeline_movie(args):
    from ..viz.animation import playhead
    from ..viz.style import say
    from ..viz.timeline import bubble_from_spans

    fig, result = _timeline(args)
    start, end, _ = bubble_from_spans(result.spans, args.stages)  # what the axis shows
    return playhead(fig, fig.axes[:1], start, end, title=say("pipeline step over time"))


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
    movie=_timeline_movie,
)
def timeline(args):
    return _timeline(args)[0]


def _timeline(args):
    """The figure and the pipeline step's result."""
    from ..parallel.runs.pipeline import pipeline_step
    from ..units import parse_time
    from ..viz.limits import MAX_TIMELINE_PASSES
    from ..viz.timeline import timeline_figure

    for flag, value in (
        ("--stages", args.stages),
        ("--microbatches", args.microbatches),
        ("--virtual", args.virtual),
    ):
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
    for flag, text in (
        ("--t-forward", args.t_forward),
        ("--t-backward", args.t_backward),
        ("--t-weight", args.t_weight),
    ):
        if text is None:  # t_b and t_w default to t_f
            continue
        times[flag] = flag_value(parse_time, text, flag)
        if times[flag] > MAX_PASS_S:  # the run would stop at the simulation's time guard
            raise ConfigError(
                f"{flag} {text!r}: more than {MAX_PASS_S:g} s per pass, so a long schedule would "
                "pass the simulation's 1-day time guard; real passes take micro- to "
                "milliseconds, e.g. 1ms"
            )
    t_f = times["--t-forward"]
    from .pipeline import fault_cluster

    cluster = fault_cluster(args)  # None without fault flags: the step runs as before
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
        **({} if cluster is None else {"cluster": cluster}),
    )
    return timeline_figure(result), result


MAX_GPUS = 2**20  # a log axis of 21 GPU counts; far beyond any job's data-parallel reach


def _scaling_arguments(parser):
    add_config_arguments(parser)
    g = parser.add_argument_group("scaling")
    g.add_argument(
        "--max-gpus",
        type=int,
        default=1024,
        help=f"largest GPU count, up to {MAX_GPUS:,} (default 1024); strong scaling stops "
        "sooner, where every replica has one sequence of the global batch (the title says so)",
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
        batch_per_gpu = positive_number(args.batch_per_gpu, "--batch-per-gpu", 1e6, 4)
    cfg = config_from_args(args)
    mp = cfg.tp * cfg.pp * cfg.cp
    check_int(
        args.max_gpus,
        "--max-gpus",
        minimum=mp,
        maximum=max(mp, MAX_GPUS),
        hint=f"the smallest job is one model replica, tp·pp·cp = {mp}",
    )
    top = args.max_gpus if args.weak else min(args.max_gpus, (cfg.global_batch or 1) * mp)
    gpus = [mp * 2**i for i in range(int(math.log2(top // mp)) + 1)]
    return scaling_figure(
        cfg, gpus=gpus, weak=args.weak, batch_per_gpu=batch_per_gpu, max_gpus=args.max_gpus
    )


# -- memory over time, measured on a sharded run ---------------------------------------------


MAX_MEMORY_DP = 8  # one row per rank, at most the figure's 8 rows


def _memory_timeline_arguments(parser):
    g = parser.add_argument_group("the run (a small transformer, Adam, one step)")
    g.add_argument("--zero", default="3", help="ZeRO stage 0-3 (default 3: FSDP)")
    g.add_argument("--dp", default="4", help=f"data-parallel ranks, 1-{MAX_MEMORY_DP} (default 4)")
    g.add_argument(
        "--prefetch",
        default="both",
        help="FSDP prefetch: none, forward, backward, both (default both; zero 3)",
    )
    g.add_argument(
        "--no-reshard-after-forward",
        action="store_true",
        help="FSDP: keep each unit gathered from forward to backward (zero 3)",
    )
    g.add_argument("--dp-replicate", default="1", help="HSDP replicas (zero 3; default 1)")
    g.add_argument("--recompute", default="none", help="activation recomputation: none, full")
    g.add_argument("--layers", default="4", help="transformer blocks, the FSDP units (default 4)")
    g.add_argument("--hidden", default="16", help="hidden size H (default 16)")
    g.add_argument("--ranks", default="0", help="ranks to draw, comma-separated (default 0)")
    g.add_argument("--bandwidth", default="10GB/s", help="per link direction (default 10GB/s)")
    g.add_argument("--latency", default="5us", help="per message (default 5us)")
    g.add_argument("--compute-rate", default="1GFLOP/s", help="per rank (default 1GFLOP/s)")


def _memory_timeline_movie(args):
    from ..viz.animation import playhead
    from ..viz.memory_stack import end_of_run
    from ..viz.style import say

    fig, run = _memory_timeline(args)
    first = fig.axes[0]
    axes = [ax for ax in fig.axes if ax is first or first.get_shared_x_axes().joined(first, ax)]
    return playhead(fig, axes, 0.0, end_of_run(run.trace), title=say("memory over time"))


@kind(
    "memory-timeline",
    help="each rank's memory over simulated time, stacked by category, from a real run",
    description=(
        "Train a small transformer for one Adam step on the virtual cluster with a ZeRO stage "
        "(default: FSDP, zero 3, with prefetch) and draw what each rank holds over simulated "
        "time, stacked by category (parameters, gradients, optimizer state, activations, "
        "gathered parameters, communication buffers), at the declared precisions (bf16 "
        "parameters and gradients, fp32 master weights and Adam m and v: 16 bytes per "
        "parameter unsharded), with the collectives marked.  Every byte is one the run "
        "registered; the peaks are read from its trace."
    ),
    arguments=_memory_timeline_arguments,
    example="--zero 3 --dp 4 --prefetch both --out fsdp_memory.png",
    movie=_memory_timeline_movie,
)
def memory_timeline(args):
    return _memory_timeline(args)[0]


def _memory_timeline(args):
    """The figure and the training run."""
    from .. import topology
    from ..nn import Adam
    from ..parallel.config import ParallelConfig
    from ..parallel.mesh import train
    from ..parallel.runs.pipeline import toy_batch, toy_model
    from ..runtime import Cluster
    from ..units import parse_flops
    from ..viz.memory_timeline import memory_timeline_figure
    from .common import link_latency, link_rate

    zero = _int_flag(args.zero, "--zero", 0, 3)
    dp = _int_flag(args.dp, "--dp", 1, MAX_MEMORY_DP)
    replicas = _int_flag(args.dp_replicate, "--dp-replicate", 1, dp)
    layers = _int_flag(args.layers, "--layers", 1, 16)
    hidden = _int_flag(args.hidden, "--hidden", 2, 256)
    if hidden % 2:
        raise ConfigError(f"--hidden {hidden}: the toy model has 2 heads, so it must be even")
    ranks = _rank_list(args.ranks, dp)
    rate = flag_value(parse_flops, args.compute_rate, "--compute-rate")
    bandwidth = link_rate(args.bandwidth, "--bandwidth")
    latency = link_latency(args.latency, "--latency")
    prefetch = args.prefetch if zero == 3 else "none"
    try:
        config = ParallelConfig(
            dp=dp,
            zero=zero,
            prefetch=prefetch,
            dp_replicate=replicas,
            reshard_after_forward=not args.no_reshard_after_forward,
            recompute=args.recompute,
            t_f=0,
        )
    except ConfigError as exc:  # name the flag the field came from
        flags = {
            "prefetch": "--prefetch",
            "dp_replicate": "--dp-replicate",
            "recompute": "--recompute",
            "reshard_after_forward": "--no-reshard-after-forward",
        }
        named = next((flag for field, flag in flags.items() if field in str(exc)), "the flags")
        raise ConfigError(f"{named}: {exc}") from None
    model = toy_model(layers, hidden=hidden, heads=2)
    batch = toy_batch(dp, seq=8, hidden=hidden)
    graph = topology.switch(dp, bandwidth=bandwidth, latency=latency)
    run = train(
        model, [batch], config, cluster=Cluster(graph, compute_rate=rate), optimizer=Adam(1e-3)
    )
    return memory_timeline_figure(
        run, ranks=ranks, title=_run_title(zero, dp, prefetch, ranks)
    ), run


def _run_title(zero, dp, prefetch, ranks):
    """ "FSDP (ZeRO-3) on 4 ranks, prefetch both: memory of rank 0", in the figure's words."""
    from ..viz.style import say

    what = {0: "DDP (ZeRO-0)", 1: "ZeRO-1", 2: "ZeRO-2", 3: "FSDP (ZeRO-3)"}[zero]
    extra = say(", prefetch {prefetch}", prefetch=say(prefetch)) if zero == 3 else ""
    shown = ", ".join(map(str, ranks))
    return say(
        "{what} on {dp} ranks{extra}: memory of rank {ranks}",
        what=what,
        dp=dp,
        extra=extra,
        ranks=shown,
    )


def _int_flag(text, flag, minimum, maximum):
    """A whole-number flag given as text, in [minimum, maximum], named when refused."""
    try:
        value = int(str(text).strip())
    except ValueError:
        raise ConfigError(f"{flag} {text!r}: not a whole number; e.g. {flag} {minimum}") from None
    return check_int(value, flag, minimum=minimum, maximum=maximum)


def _rank_list(text, dp):
    try:
        ranks = [int(part) for part in str(text).split(",")]
    except ValueError:
        raise ConfigError(
            f"--ranks {text!r}: give rank numbers separated by commas, e.g. 0,1"
        ) from None
    bad = [r for r in ranks if not 0 <= r < dp]
    if bad:
        raise ConfigError(f"--ranks {text!r}: rank {bad[0]} is not in 0..{dp - 1} (--dp {dp})")
    return ranks
