"""``collsim viz moe-routing``, ``moe-traffic``, ``moe-load`` and ``moe-timeline``: one
step of ``collsim verify moe`` in pictures (:mod:`collsim.viz.moe`,
:mod:`collsim.viz.moe_timeline`).

The flags are ``collsim verify moe``'s (the same checks, the same refusals); the pictures
default to a skewed routing with a capacity, so that dropping and imbalance show.
"""

from dataclasses import dataclass

from .viz_kinds import kind

__all__ = ["moe_routing", "moe_traffic", "moe_load", "moe_timeline", "moe_step"]

FLAGS = {
    "ep": "--ep",
    "experts": "--experts",
    "top_k": "--top-k",
    "capacity_factor": "--capacity-factor",
    "routing": "--routing",
    "dispatcher": "--dispatcher",
    "gpus_per_node": "--gpus-per-node",
    "batch": "--batch",
    "seq": "--seq",
    "seed": "--seed",
    "compute_rate": "--compute-rate",
}
WHOLE = ("ep", "experts", "top_k", "gpus_per_node", "batch", "seq", "seed")
DISPATCHERS = ("alltoall", "hierarchical")
MIN_COMPUTE_RATE = 1e6  # FLOP/s  # the ones whose messages carry a RaggedTransfer


def _arguments(parser):
    g = parser.add_argument_group("the MoE step (as collsim verify moe)")
    g.add_argument("--ep", default="4", help="expert-parallel ranks (default 4)")
    g.add_argument("--experts", default="8", help="experts, divisible by --ep (default 8)")
    g.add_argument("--top-k", default="2", help="experts each token goes to (default 2)")
    g.add_argument(
        "--capacity-factor",
        default="1.25",
        help="cap each expert at ceil(T·k/E·cf) of a rank's T tokens (default 1.25; "
        "'none': dropless)",
    )
    g.add_argument(
        "--routing",
        default="zipf",
        help="which experts tokens prefer: uniform, zipf (default), lognormal, hot, adversarial",
    )
    g.add_argument(
        "--dispatcher",
        default="alltoall",
        help="alltoall (default) or hierarchical (DeepEP's two levels, with --gpus-per-node)",
    )
    g.add_argument("--gpus-per-node", default=None, help="the ep ranks as nodes of this many GPUs")
    g.add_argument("--batch", default=None, help="samples, split over --ep (default 2·ep)")
    g.add_argument("--seq", default="8", help="tokens a sample (default 8)")
    g.add_argument("--seed", default="0", help="random seed of the layer and tokens (default 0)")
    g.add_argument(
        "--compute-rate",
        default="1GFLOP/s",
        help="FLOP/s per rank (default 1GFLOP/s, so that the toy experts' compute shows at "
        "the scale of their messages)",
    )


@dataclass(frozen=True)
class MoEStep:
    """What the pictures read: the sizes, the routing that happened and the check's report."""

    sizes: object  # collsim.verify.moe.MoESizes
    routing: object  # collsim.nn.routing.Routing of every token, each rank's block on its own
    report: object  # collsim.verify.moe_report.MoEReport: loads and trace


def moe_step(args):
    """Check the flags as ``collsim verify moe`` does, run its step, return a :class:`MoEStep`."""
    from ..errors import ConfigError, check_choice
    from ..units import parse_flops
    from ..verify.config import VerifyConfig
    from ..verify.moe import moe_inputs, verify_moe
    from .common import flag_value

    given = {}
    for key in WHOLE:
        text = getattr(args, key)
        try:
            given[key] = None if text is None else int(text)
        except ValueError:
            flag = FLAGS[key]
            raise ConfigError(f"{flag} {text!r}: must be a whole number, like {flag} 4") from None
    cf = args.capacity_factor
    if str(cf).lower() in ("none", "dropless"):
        cf = None
    else:
        try:
            cf = float(cf)
        except ValueError:
            raise ConfigError(
                f"--capacity-factor {cf!r}: a number > 0 like --capacity-factor 1.25, or none"
            ) from None
    dispatcher = check_choice(args.dispatcher, "--dispatcher", DISPATCHERS)
    rate = flag_value(parse_flops, args.compute_rate, "--compute-rate")
    if not rate >= MIN_COMPUTE_RATE:  # the toy experts' FLOPs would last simulated days
        raise ConfigError(
            f"--compute-rate {args.compute_rate}: under 1MFLOP/s the step's compute outlasts "
            "the picture's clock; nearest valid --compute-rate 1MFLOP/s"
        )
    config = VerifyConfig(
        scheme="moe",
        capacity_factor=cf,
        routing=args.routing,
        dispatcher=dispatcher,
        compute_rate=rate,
        names=FLAGS,
        **given,
    )
    sizes = config.sizes
    moe, x, _, prior = moe_inputs(sizes)
    routing = moe.forward(x, ranks=sizes.ep, prior=prior)[1]["routing"]  # as the ranks route
    return MoEStep(sizes, routing, verify_moe(sizes))


EXAMPLE = "--ep 4 --experts 8 --top-k 2 --capacity-factor 1.25 --routing zipf --out {name}.png"


@kind(
    "moe-routing",
    help="MoE: which experts each token chose, with its gate; dropped choices crossed out",
    description=(
        "Run one step of `collsim verify moe` and draw its token → expert routing: experts "
        "down, tokens across in blocks of the rank that routes them, each chosen expert's "
        "gate as the colour, and a cross where the expert's capacity (ceil(T·k/E·cf) of a "
        "rank's T tokens, Megatron-Core's) was full and the choice was dropped: that token "
        "keeps only its residual there."
    ),
    arguments=_arguments,
    example=EXAMPLE.format(name="moe-routing"),
)
def moe_routing(args):
    from ..viz.moe import routing_figure

    step = moe_step(args)
    return routing_figure(step.routing, ep=step.sizes.ep)


@kind(
    "moe-traffic",
    help="MoE: the bytes each rank sent each rank in the dispatch and the combine",
    description=(
        "Run one step of `collsim verify moe` and draw the all-to-all's traffic matrices, "
        "read from the trace: the bytes each rank sent each rank with the tokens (dispatch) "
        "and with the experts' outputs (combine, the same matrix transposed).  A rank's own "
        "tokens for its own experts stay home.  Skewed routing shows as a bright column: "
        "the rank holding the popular experts receives most."
    ),
    arguments=_arguments,
    example=EXAMPLE.format(name="moe-traffic"),
)
def moe_traffic(args):
    from ..viz.moe import traffic_figure, traffic_matrix

    step = moe_step(args)
    trace, ep = step.report.trace, step.sizes.ep
    return traffic_figure(
        traffic_matrix(trace, ep, "dispatch"), traffic_matrix(trace, ep, "combine")
    )


@kind(
    "moe-load",
    help="MoE: tokens per expert against capacity (dropped counted) and rows per rank",
    description=(
        "Run one step of `collsim verify moe` and draw the load: for each expert the tokens "
        "routed to it, kept and dropped, against its capacity summed over the ranks; for "
        "each rank the rows its experts computed, with the mean, max/mean and the number of "
        "its tokens' choices that were dropped.  The busiest rank sets the step's time."
    ),
    arguments=_arguments,
    example=EXAMPLE.format(name="moe-load"),
)
def moe_load(args):
    from ..viz.moe import load_figure

    step = moe_step(args)
    return load_figure(step.routing, step.sizes.ep, step.report.loads)


@kind(
    "moe-timeline",
    help="MoE: each rank's compute and dispatch/combine messages on the simulated clock",
    description=(
        "Run one step of `collsim verify moe` and draw every rank on the simulated clock: "
        "the router and expert compute (forward and backward) and the messages it sent, by "
        "exchange: the dispatch, the combine and the backward's two.  The rank whose "
        "experts computed longest is in bold: every rank's combine waits for it, so the "
        "dispatch, that compute and the combine are the step's critical path."
    ),
    arguments=_arguments,
    example=EXAMPLE.format(name="moe-timeline"),
)
def moe_timeline(args):
    from ..viz.moe_timeline import moe_timeline_figure

    step = moe_step(args)
    return moe_timeline_figure(step.report.trace, step.report.loads)
