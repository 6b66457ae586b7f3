"""``collsim viz strategies``: the measured strategy table of ``collsim strategies`` as a
figure (memory by category and bytes by link class, strategies side by side)."""

from .viz_kinds import kind

__all__ = ["strategies"]


@kind(
    "strategies",
    help="the ND-parallelism strategy table: memory and inter-node bytes per strategy",
    description=(
        "Run the strategies of Accelerate's ND-parallelism guide (DP, FSDP, TP, CP, HSDP, "
        "FSDP+TP, FSDP+CP, HSDP+TP, HSDP+TP+CP, and EP, DP+EP for a mixture of experts) on the "
        "same small model and 2 nodes of 4 GPUs, "
        "as `collsim strategies` does, and draw one row a strategy (its name and sizes written "
        "across, readable on a slide): the busiest rank's peak "
        "memory stacked by category (parameters, gradients, optimizer state, activations, "
        "FSDP-gathered parameters) and the bytes each rank sent inside a node and between "
        "nodes.  A strategy the trainer refuses keeps its place, marked not run, its reason "
        "under the figure."
    ),
    example="--out strategies.png",
)
def strategies(args):
    from ..verify import strategies as measured
    from ..viz.strategies import strategies_figure

    rows = [row.to_dict() for row in measured.strategy_table()]
    return strategies_figure(rows, subtitle=_subtitle(measured))


def _subtitle(measured):
    """The model and the cluster every row ran on, in the figure's words (the numbers are
    the ones `collsim strategies` prints in its heading)."""
    from ..units import format_flops, format_rate, parse_flops, parse_rate
    from ..viz.style import say

    shape = measured.SHAPE
    model = say(
        "causal transformer: {layers} blocks, hidden {hidden}, {heads} heads, seq {seq}, "
        "global batch {batch}, {steps} Adam step(s)",
        **{k: getattr(shape, k) for k in ("layers", "hidden", "heads", "seq", "batch", "steps")},
    )
    cluster = say(
        "{nodes} nodes x {gpus} GPUs: {intra} links inside a node, {inter} between nodes, "
        "{flops} per GPU",
        nodes=measured.NODES,
        gpus=measured.GPUS_PER_NODE,
        intra=format_rate(parse_rate(measured.INTRA_NODE)),
        inter=format_rate(parse_rate(measured.INTER_NODE)),
        flops=format_flops(parse_flops(measured.COMPUTE_RATE)),
    )
    return f"{model};  {cluster}"
