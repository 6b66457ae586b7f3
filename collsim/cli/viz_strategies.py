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
    subtitle = f"{measured.SHAPE.describe()};  {measured.describe_cluster()}"
    return strategies_figure(rows, subtitle=subtitle)
