"""``collsim viz mesh``: which ranks form each TP, CP, EP, DP and PP group of a device mesh,
on the machines they run on (:mod:`collsim.viz.mesh`)."""

from .common import check_int
from .viz_kinds import kind

__all__ = ["mesh"]


def _mesh_arguments(parser):
    g = parser.add_argument_group("the mesh")
    for name, default, what in (
        ("tp", 2, "tensor parallel"),
        ("cp", 1, "context parallel"),
        ("ep", 1, "expert parallel (Megatron's order only)"),
        ("dp", 4, "data parallel"),
        ("pp", 2, "pipeline parallel"),
    ):
        g.add_argument(f"--{name}", default=str(default), help=f"{what} size (default {default})")
    g.add_argument(
        "--dp-replicate",
        default="1",
        help="Accelerate's order: HSDP replicas; dp = dp_replicate x dp_shard (default 1)",
    )
    g.add_argument(
        "--order",
        default="megatron",
        help="megatron (default: tp-cp-ep-dp-pp, tp fastest) or accelerate (dp_replicate, "
        "dp_shard, cp, tp, tp innermost; pp outside)",
    )
    g.add_argument(
        "--gpus-per-node", default="8", help="GPUs a machine (default 8, as a DGX): the rows"
    )


@kind(
    "mesh",
    help="a device mesh: which ranks form each TP, CP, EP, DP and PP group, on their nodes",
    description=(
        "Lay out a job's ranks as Megatron-LM (order tp-cp-ep-dp-pp, tp fastest) or "
        "Accelerate (dp_replicate, dp_shard, cp, tp) number them, and draw one panel per "
        "dimension: every GPU a cell with its global rank, one row per node, the cells of a "
        "group tinted alike, numbered g0, g1, ... and joined in the dimension's colour.  "
        "Consecutive ranks share a node, so the innermost dimension (tp) talks over NVLink "
        "and the outer ones cross machines.  Up to 64 ranks."
    ),
    arguments=_mesh_arguments,
    example="--tp 2 --dp 4 --pp 2 --gpus-per-node 8 --out mesh.png",
)
def mesh(args):
    from ..viz.mesh import mesh_figure, mesh_grid

    sizes = {}
    for flag in ("tp", "cp", "ep", "dp", "pp", "dp_replicate", "gpus_per_node"):
        text = getattr(args, flag)
        shown = "--" + flag.replace("_", "-")
        try:
            value = int(str(text).strip())
        except ValueError:
            value = text
        sizes[flag] = check_int(value, shown, minimum=1, maximum=4096)
    per = sizes.pop("gpus_per_node")
    grid = mesh_grid(order=args.order, **sizes)
    return mesh_figure(grid, gpus_per_node=per, order=args.order)
