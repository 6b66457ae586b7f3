"""Which ranks form each TP, CP, EP, DP and PP group of a device mesh, drawn on the machines.

One panel per dimension of size > 1, each showing every GPU as a cell (one row per node,
``gpus_per_node`` cells a row) with its global rank in large print.  In a panel the cells of
one group share a tint and carry the group's number (g0, g1, ...), are outlined in the
dimension's colour and joined by a line of it behind them, so a reader sees at once
that the TP groups stay inside a node and the PP groups cross them.  The groups are the
grid's own (:meth:`collsim.runtime.group.RankGrid.groups`); nothing is recomputed here.

Two orders name the grid's dimensions outermost first, as the frameworks lay ranks out:

* ``megatron``: Megatron-LM's ``tp-cp-ep-dp-pp`` (``RankGenerator``'s order string, fastest
  first), so consecutive ranks share a TP group and TP stays on NVLink;
* ``accelerate``: Accelerate's ``ParallelismConfig`` mesh ``dp_replicate, dp_shard, cp, tp``
  (torch's ``init_device_mesh`` order, tp innermost), with pp outside it as collsim's
  trainer places it (:data:`collsim.parallel.config.MESH_ORDER`).

Examples
--------
>>> grid = mesh_grid(tp=2, dp=2, pp=2)
>>> grid
RankGrid({'pp': 2, 'dp': 2, 'ep': 1, 'cp': 1, 'tp': 2})
>>> fig = mesh_figure(grid, gpus_per_node=4)
>>> sorted({c.get_gid().split()[0] for c in fig.findobj() if "group" in (c.get_gid() or "")})
['dp', 'pp', 'tp']
"""

import math

from matplotlib import rcParams
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch, Rectangle

from ..errors import ConfigError
from ..runtime.group import RankGrid
from .ink import ink_on
from .limits import check_picture_ranks
from .style import PALETTE, current, say, styled

__all__ = ["ORDERS", "mesh_grid", "mesh_figure", "DIMENSION_COLOURS"]

ORDERS = {  # outermost first, as RankGrid takes them (the last varies fastest)
    "megatron": ("pp", "dp", "ep", "cp", "tp"),
    "accelerate": ("pp", "dp_replicate", "dp_shard", "cp", "tp"),
}
DIMENSION_COLOURS = {  # one Okabe-Ito colour per dimension, the same in every panel
    "tp": PALETTE[0],
    "cp": PALETTE[2],
    "ep": PALETTE[4],
    "dp": PALETTE[3],
    "dp_replicate": PALETTE[3],
    "dp_shard": PALETTE[1],
    "pp": None,  # the theme's ink: black on paper, white on a dark slide
}
TINTS = ("#DCEBF5", "#FBE9CC", "#D5EFE6", "#F6DDCC", "#F3E2EC", "#E2F0FA", "#FBF8D6", "#E6E6E6")


def mesh_grid(tp=1, cp=1, ep=1, dp=1, pp=1, order="megatron", dp_replicate=1):
    """The :class:`RankGrid` of a job's sizes in ``order`` (``megatron`` or ``accelerate``).

    With ``accelerate``, ``dp`` splits into ``dp_replicate`` (HSDP's replicas) times
    ``dp_shard``; Accelerate's mesh has no ``ep``.
    """
    if order not in ORDERS:
        raise ConfigError(f"--order {order!r}: choose one of {', '.join(ORDERS)}")
    sizes = {"tp": tp, "cp": cp, "ep": ep, "dp": dp, "pp": pp, "dp_replicate": dp_replicate}
    for name, size in sizes.items():
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ConfigError(f"--{name.replace('_', '-')} {size!r}: a whole number >= 1")
    if order == "accelerate":
        if ep > 1:
            raise ConfigError(
                f"--ep {ep}: Accelerate's mesh (dp_replicate, dp_shard, cp, tp) has no expert "
                "dimension; use --order megatron for ep"
            )
        if dp % dp_replicate:
            raise ConfigError(
                f"--dp-replicate {dp_replicate}: must divide --dp {dp} (dp = dp_replicate x "
                f"dp_shard); e.g. --dp-replicate {math.gcd(dp, 2)}"
            )
        sizes["dp_shard"] = dp // dp_replicate
    elif dp_replicate > 1:
        raise ConfigError(
            f"--dp-replicate {dp_replicate}: Megatron's order has one dp dimension; use "
            "--order accelerate to split dp into dp_replicate x dp_shard"
        )
    names = ORDERS[order]
    return RankGrid([sizes[n] for n in names], names)


@styled
def mesh_figure(grid, gpus_per_node=8, order=None, title=None):
    """The groups of every dimension of ``grid`` (size > 1), one panel each; returns a Figure.

    ``gpus_per_node`` sets the rows: rank r sits on node r // gpus_per_node.
    """
    check_picture_ranks(grid.size, "mesh", "the mesh's size")
    if isinstance(gpus_per_node, bool) or not isinstance(gpus_per_node, int) or gpus_per_node < 1:
        raise ConfigError(f"--gpus-per-node {gpus_per_node!r}: a whole number >= 1, e.g. 8")
    per = min(gpus_per_node, grid.size)
    nodes = math.ceil(grid.size / per)
    shown = [n for n, size in zip(grid.names, grid.shape) if size > 1] or [grid.names[-1]]
    shown.reverse()  # innermost first: tp, then outward
    fig = Figure(
        figsize=current().size(
            (max(6.0, 1.1 * per + 1.6), 1.0 + (0.75 * nodes + 0.7) * len(shown))
        ),
        layout="constrained",
    )
    axes = fig.subplots(len(shown), 1, squeeze=False)[:, 0]
    for ax, name in zip(axes, shown):
        _draw_panel(ax, grid, name, per, nodes)
    sizes = ", ".join(f"{n}={s}" for n, s in zip(grid.names, grid.shape))
    fig.suptitle(
        title
        or say(
            "{order} order ({names}, innermost last) on {nodes} node(s) of {gpus} GPUs",
            order=order or "mesh",
            names=sizes,
            nodes=nodes,
            gpus=per,
        ),
        fontsize="large",
        fontweight="bold",
        wrap=True,
    )
    return fig


def _place(rank, per):
    node, slot = divmod(rank, per)
    return slot, node


def _draw_panel(ax, grid, name, per, nodes):
    colour = DIMENSION_COLOURS.get(name, PALETTE[5]) or rcParams["text.color"]
    for node in range(nodes):  # the machines, behind the GPUs
        ax.add_patch(
            Rectangle(
                (-0.55, node - 0.5),
                per + 0.1,
                1.0,
                facecolor="none",
                edgecolor="#888888",
                lw=1.0,
                ls="--",
                gid=f"node {node}",
            )
        )
    ax.set_yticks(range(nodes), [say("node {node}", node=n) for n in range(nodes)])
    for index, group in enumerate(grid.groups(name)):
        tint = TINTS[index % len(TINTS)]
        places = [_place(r, per) for r in group.ranks]
        for rank, (x, y) in zip(group.ranks, places):
            ax.add_patch(
                FancyBboxPatch(
                    (x - 0.4, y - 0.34),
                    0.8,
                    0.68,
                    boxstyle="round,pad=0.02",
                    facecolor=tint,
                    edgecolor=colour,
                    lw=1.2,
                    zorder=2,
                    gid=f"{name} group {index} rank {rank}",
                )
            )
            ax.text(
                x,
                y - 0.04,
                str(rank),
                ha="center",
                va="center",
                fontsize="large",
                fontweight="bold",
                color=ink_on((1, 1, 1)),
                zorder=4,
            )
            ax.text(
                x,
                y + 0.24,
                f"g{index}",
                ha="center",
                va="center",
                fontsize="x-small",
                color=ink_on(to_rgb(tint)),  # the dimension's colour is the cell's edge
                zorder=4,
            )
        if len(places) > 1:  # join the members behind the cells: seen between them only
            xs, ys = zip(*places)
            ax.plot(
                xs,
                ys,
                color=colour,
                lw=rcParams["lines.linewidth"] * 2,
                alpha=0.7,
                zorder=1,
                gid=f"{name} group {index} line",
            )
    ax.set_xlim(-0.7, per - 0.3)
    ax.set_ylim(nodes - 0.45, -0.55)
    ax.set_xticks([])
    ax.set_title(
        say("{dim} groups", dim=name.upper().replace("_", " ")) + f" ({len(grid.groups(name))})",
        loc="left",
        color=colour,
        fontweight="bold",
        fontsize="medium",
    )
    for side in ("top", "right", "bottom", "left"):
        ax.spines[side].set_visible(False)
