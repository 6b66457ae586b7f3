"""``collsim pipeline``: run one pipeline-parallel training step and measure its bubble."""

from .common import Formatter
from .console import add_progress_argument
from .exit_status import Meaning
from .fault_flags import add_fault_arguments
from .trace_flag import add_trace_argument

__all__ = ["register", "run", "human_report", "check_args", "estimate_memory", "FORMATS", "LIMITS"]

EXIT_STATUS = Meaning(
    ok="the pipeline matches one device", failed="it does not, or a crashed rank stalled it"
)

FORMATS = ("png", "svg", "pdf")  # what --out accepts, by extension
# one step runs in seconds within these; past them the table and the picture are unreadable
LIMITS = {"--stages": 64, "--microbatches": 256, "--virtual": 16, "--layers": 256}

DESCRIPTION = """\
Run one training step of a small transformer (a stack of pre-LayerNorm blocks) with a pipeline
schedule on the virtual cluster: p ranks, one per stage, each running the real numpy forward and
backward of its layers and sending real activations and gradients to its neighbours.  Prints the
schedule table, the bubble measured from the trace next to the closed form, the activations
each stage held at its peak, and whether the gradients equal one device's.

Schedules: gpipe (all forwards, then all backwards), 1f1b (warm-up, steady 1F1B, cool-down),
interleaved (v model chunks per stage: the bubble shrinks by v; m must be a multiple of p, the
classic Megatron rule that Megatron-Core relaxes), zb-h1 (zero bubble: the backward is split
into B, the input gradient, and W, the weight gradient, which fills the bubble; needs m >= p).
Times take units (1ms, 250us); sizes and rates too (100GB/s)."""

EPILOG = """\
examples:
  collsim pipeline --stages 4 --microbatches 8 --schedule 1f1b
  collsim pipeline --stages 4 --microbatches 8 --schedule interleaved --virtual 2
  collsim pipeline --stages 4 --microbatches 8 --schedule zb-h1 --t-weight 0.5ms
  free links isolate the compute bubble:  ... --latency 0 --bandwidth inf
  the figures as data:                    ... --json
  the timeline picture:                   ... --out timeline.png
  a straggler: stage 2 computes 2x slower ... --slow-rank 2:2x
  a stage that crashes (watchdog report)  ... --crash-rank 1@5ms --watchdog-timeout 1s"""


def register(subparsers):
    parser = subparsers.add_parser(
        "pipeline",
        help="run a pipeline schedule (gpipe, 1f1b, interleaved, zb-h1) and measure its bubble",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=Formatter,
    )
    sched = parser.add_argument_group("schedule")
    sched.add_argument("--schedule", default="1f1b", help="gpipe, 1f1b, interleaved or zb-h1")
    sched.add_argument("--stages", "-p", type=int, default=4, help="pipeline stages p (default 4)")
    sched.add_argument(
        "--microbatches", "-m", type=int, default=8, help="micro-batches m (default 8)"
    )
    sched.add_argument(
        "--virtual",
        "-v",
        type=int,
        default=1,
        help="model chunks per stage (interleaved; default 1)",
    )
    times = parser.add_argument_group("pass times (one micro-batch on one whole stage)")
    times.add_argument("--t-forward", default="1ms", help="forward t_f (default 1ms)")
    times.add_argument("--t-backward", default=None, help="input-gradient t_b (default t_f)")
    times.add_argument("--t-weight", default=None, help="weight-gradient t_w (default t_f)")
    model = parser.add_argument_group("model and batch")
    model.add_argument("--layers", type=int, default=None, help="transformer blocks (default p*v)")
    model.add_argument("--hidden", type=int, default=8, help="hidden size H (default 8)")
    model.add_argument("--heads", type=int, default=2, help="attention heads (default 2)")
    model.add_argument("--seq", type=int, default=4, help="sequence length S (default 4)")
    model.add_argument(
        "--micro-batch-size", type=int, default=2, help="sequences per micro-batch B (default 2)"
    )
    links = parser.add_argument_group("links (a bidirectional ring of p ranks)")
    links.add_argument("--bandwidth", default="100GB/s", help="per direction (default 100GB/s)")
    links.add_argument("--latency", default="5us", help="per message (default 5us)")
    add_fault_arguments(parser)
    out = parser.add_argument_group("output")
    out.add_argument("--json", action="store_true", help="print the figures as JSON")
    add_progress_argument(out)
    out.add_argument(
        "--out",
        metavar="FILE",
        help="also save the timeline picture (stages x time, idle hatched); .png, .svg or .pdf",
    )
    add_trace_argument(out, "the step's trace")
    parser.set_defaults(func=run)


def run(args):
    """Run the step and print the report (or JSON); 0 if the gradients match one device."""
    import json
    import sys

    from ..errors import ConfigError
    from ..network.chrome import ChromePart
    from ..parallel.runs.pipeline import toy_pipeline
    from .common import explain_time_guard
    from .console import progress
    from .trace_flag import check_trace, write_trace

    fmt, config = check_args(args)
    check_trace(args)
    options = {}
    cluster = fault_cluster(args)
    if cluster is not None:  # only with faults: every other output stays as it was
        options["cluster"] = cluster
    timing = {
        k: getattr(args, k)
        for k in ("t_forward", "t_backward", "t_weight", "bandwidth", "latency")
        if getattr(args, k) is not None
    }
    with progress("collsim pipeline: one step", args.progress), explain_time_guard(**timing):
        result = toy_pipeline(
            config,
            layers=args.layers,
            micro_batch_size=args.micro_batch_size,
            seq=args.seq,
            hidden=args.hidden,
            heads=args.heads,
            bandwidth=args.bandwidth,
            latency=args.latency,
            **options,
        )
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print(human_report(result, args))
    if fmt is not None:
        from ..viz.output import save_figure
        from ..viz.timeline import timeline_figure

        try:  # the same bytes every run, as `collsim viz timeline` writes them
            save_figure(timeline_figure(result), args.out, fmt, dpi=150)
        except OSError as exc:  # a full disk: name the file, not stdout
            raise ConfigError(f"--out {args.out}: cannot write it ({exc.strerror})") from None
        # with --json, stdout carries only the JSON
        print(f"wrote {args.out} (timeline, {fmt.upper()})", file=sys.stderr if args.json else None)
    write_trace(args, [ChromePart(result.trace)], quiet=args.json)
    return 0 if result.match else 1


def fault_cluster(args):
    """The stages' cluster with the fault flags' faults (a bidirectional ring of p ranks, as
    the step uses by default), or None without faults; checked before any work."""
    from .. import topology
    from ..runtime import Cluster
    from .fault_flags import faults_from_args

    faults = faults_from_args(args)
    if not faults:
        return None
    graph = topology.bidirectional_ring(args.stages, bandwidth=args.bandwidth, latency=args.latency)
    return Cluster(graph, compute_rate=float("inf"), faults=faults)


def estimate_memory(stages, microbatches, layers, micro_batch_size, seq, hidden, heads):
    """Bytes one step needs, about (float64): the blocks' weights (12·H² each) four times
    (one device's copy, the stages', both gradients) and every micro-batch's activations
    kept for its backward (about 20·H per token per block, and the attention scores),
    in both runs.

    >>> estimate_memory(4, 8, 4, 2, 4, 8, 2) < 2**20
    True
    """
    weights = 4 * layers * 12 * hidden * hidden
    tokens = microbatches * micro_batch_size * seq
    activations = 2 * layers * tokens * (20 * hidden + 2 * heads * seq)
    return 8 * (weights + activations)


def check_args(args):
    """Refuse, before any work, what the step cannot run; returns the output format and the
    step's `ParallelConfig` (pp, microbatches, vpp, schedule and the pass times)."""
    from ..errors import ConfigError
    from ..parallel.config import ParallelConfig
    from ..parallel.pipeline.schedules import build_schedule
    from ..runtime.guards import DEFAULT_MAX_TIME
    from ..units import format_time, parse_time
    from .common import check_int, flag_value, link_latency, link_rate
    from .limits import check_fits, check_work, transformer_seconds
    from .paths import check_output_path

    fmt = None
    if args.out is not None:
        path = check_output_path(args.out, "--out", tuple("." + f for f in FORMATS))
        fmt = path.suffix.lower().lstrip(".")
    for flag in ("stages", "microbatches", "virtual", "layers"):
        value = getattr(args, flag)
        if value is not None:
            check_int(value, f"--{flag}", minimum=1, maximum=LIMITS[f"--{flag}"])
    for flag in ("hidden", "heads", "seq", "micro_batch_size"):
        check_int(getattr(args, flag), f"--{flag.replace('_', '-')}", minimum=1)
    build_schedule(args.schedule, args.stages, args.microbatches, args.virtual)  # names the rule
    times = {}
    for key, flag, text in (
        ("t_f", "--t-forward", args.t_forward),
        ("t_b", "--t-backward", args.t_backward),
        ("t_w", "--t-weight", args.t_weight),
    ):
        if text is None:
            times[key] = times["t_f"]
            continue
        times[key] = flag_value(parse_time, text, flag)
    link_rate(args.bandwidth, "--bandwidth"), link_latency(args.latency, "--latency")
    # the step lasts at least (m + p - 1) passes of every kind: past the time guard it stops
    step = (args.microbatches + args.stages - 1) * args.virtual * sum(times.values())
    if step > DEFAULT_MAX_TIME:
        given = ", ".join(
            f"{flag} {text}"
            for flag, text in (
                ("--t-forward", args.t_forward),
                ("--t-backward", args.t_backward),
                ("--t-weight", args.t_weight),
            )
            if text is not None
        )
        raise ConfigError(
            f"{given}: the step would take at least {format_time(step)} "
            "of simulated time, past the simulation's guard (1 day); real passes take "
            "milliseconds, like --t-forward 1ms"
        )
    layers = args.stages * args.virtual if args.layers is None else args.layers
    need = estimate_memory(
        args.stages,
        args.microbatches,
        layers,
        args.micro_batch_size,
        args.seq,
        args.hidden,
        args.heads,
    )
    sizes = (
        f"--hidden {args.hidden}, --heads {args.heads}, --layers {layers}, --microbatches "
        f"{args.microbatches}, --micro-batch-size {args.micro_batch_size}, --seq "
        f"{args.seq}"
    )
    tokens = args.microbatches * args.micro_batch_size * args.seq
    seconds = transformer_seconds(
        layers=layers,
        params_per_layer=12 * args.hidden**2,
        tokens=tokens,
        sequences=args.microbatches * args.micro_batch_size,
        heads=args.heads,
        seq=args.seq,
        hidden=args.hidden,
        passes=2,  # the pipeline and one device
    )
    check_work(seconds, sizes, "the bubble and the schedule do not depend on the model's size")
    check_fits(
        need,
        f"{sizes} (float64 weights and activations)",
        "the bubble and the schedule do not depend on the model's size: the default "
        "--hidden 8 shows the same",
    )
    if args.hidden % args.heads:
        # the nearest divisor of hidden, searched near --heads only (hidden may be huge)
        near = [
            h for h in range(max(1, args.heads - 4096), args.heads + 4097) if args.hidden % h == 0
        ] or [1]
        nearest = min(near, key=lambda h: (abs(h - args.heads), h))
        raise ConfigError(
            f"--heads {args.heads} does not divide --hidden {args.hidden} "
            f"(head size = hidden / heads); nearest valid --heads {nearest}"
        )
    config = ParallelConfig(
        pp=args.stages,
        microbatches=args.microbatches,
        vpp=args.virtual,
        schedule=args.schedule,
        **times,
    )
    return fmt, config


_FORMULAS = {
    "gpipe": "(p-1)(t_f+t_b+t_w)",
    "1f1b": "(p-1)(t_f+t_b+t_w)",
    "interleaved": "(p-1)(t_f+t_b+t_w)/v",
    "zb-h1": "(p-1)(t_f+t_b-t_w)",
}


def human_report(result, args):
    """The text report: schedule table, bubble measured vs formula, memory, match."""
    from ..units import format_rate, format_size, format_time, parse_rate, parse_time

    sched, t = result.schedule, result.times
    p, m, v = sched.stages, sched.microbatches, sched.virtual
    free = parse_time(args.latency) == 0 and parse_rate(args.bandwidth) == float("inf")
    lines = [
        f"{sched.name}: p={p} stages, m={m} micro-batches" + (f", v={v} chunks" if v > 1 else ""),
        f"pass times: t_f={format_time(t['t_f'])}, t_b={format_time(t['t_b'])}, "
        f"t_w={format_time(t['t_w'])} per micro-batch per stage",
        f"links: {format_rate(parse_rate(args.bandwidth))}, "
        f"{format_time(parse_time(args.latency))} latency",
        "",
        "schedule (each stage's passes in order; columns are slots, not times):",
        sched.table(),
        "",
        f"step time          {format_time(result.step_time)}",
        f"bubble (measured)  {format_time(result.bubble_time)} idle per stage, "
        f"{result.bubble_fraction:.2%} of the step",
    ]
    formula = result.formula_bubble_time()
    if formula is None:
        lines.append("bubble (formula)   none for these times (zb-h1 needs t_w <= min(t_f, t_b))")
    else:
        lines.append(
            f"bubble (formula)   {_FORMULAS[sched.name]} = {format_time(formula)}, "
            f"{result.formula_bubble_fraction():.2%}"
        )
    if not free:
        lines.append("                   (links cost time here; --latency 0 --bandwidth inf ")
        lines[-1] += "isolates the compute bubble)"
    expected = result.formula_peak_inflight() or (None,) * p
    unit = "(micro-batch, chunk) pairs" if v > 1 else "micro-batches"
    lines += ["", f"per stage: busy, idle, peak activations held (in {unit}, and bytes)"]
    for s in range(p):
        lines.append(
            f"  stage {s}: busy {format_time(result.busy_time[s])}, "
            f"idle {format_time(result.idle_time[s])}, "
            f"peak {result.peak_inflight[s]} (formula {expected[s]}), "
            f"{format_size(result.peak_activation_bytes[s])}"
        )
    sent = sum(result.run.stats.bytes_sent)
    lines += [
        "",
        f"sent between stages: {format_size(sent)} in {sum(result.run.stats.messages_sent)} "
        "messages (activations forward, gradients backward)",
        f"gradients match one device: {'yes' if result.match else 'NO'} "
        f"(max |difference| {result.max_error:.2g})",
    ]
    cluster = fault_cluster(args) if hasattr(args, "slow_rank") else None
    if cluster is not None:
        from .faults_report import footer_lines, header_lines

        lines += [""] + [line.lstrip("# ") for line in header_lines(cluster)]
        lines += [line.lstrip("# ") for line in footer_lines(cluster, result.run)]
    return "\n".join(lines)
