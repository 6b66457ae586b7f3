"""A mixture-of-experts step in pictures: where tokens went, what moved, who carried most.

Three figures of one run of :func:`~collsim.parallel.experts.step.expert_parallel_step`
(``collsim verify moe``'s step), each read from what the run produced:

* :func:`routing_figure`: the token → expert matrix, each chosen expert's gate as the
  cell's colour, the choices capacity dropped crossed out, tokens in blocks of their
  source rank (from the :class:`~collsim.nn.routing.Routing`);
* :func:`traffic_figure`: the bytes each rank sent each rank in the dispatch and in the
  combine (from the trace's transfers, selected by their
  :class:`~collsim.collectives.all_to_allv.RaggedTransfer` record);
* :func:`load_figure`: tokens per expert (kept, and dropped above them) against the
  capacity, and the rows each rank's experts computed, with each rank's dropped choices.

Examples
--------
>>> import numpy as np
>>> from collsim.nn.routing import RouterConfig, route
>>> routing = route(np.eye(4)[[0, 0, 1, 3]] * 5, RouterConfig(4, 1, capacity_factor=1.0), ranks=2)
>>> routing.dropped  # rank 0's two tokens both chose expert 0, which takes ceil(2·1/4) = 1
1
>>> fig = routing_figure(routing, ep=2)
>>> fig.axes[0].get_xlabel()
'token (blocks: the source rank that routes it)'
"""

import numpy as np
from matplotlib.figure import Figure

from ..collectives.all_to_allv import RaggedTransfer
from ..parallel.experts.step import FORWARD_CALLS
from ..units import format_size
from .ink import ink_on
from .style import PALETTE, current, say, styled, themed

__all__ = ["routing_figure", "traffic_matrix", "traffic_figure", "load_figure", "KEPT", "DROP"]

KEPT, DROP = PALETTE[0], PALETTE[3]  # blue: routed and computed; vermillion: dropped


def _rank_lines(ax, ep, per, vertical):
    """Thin lines between the blocks of consecutive ranks."""
    for r in range(1, ep):
        line = ax.axvline if vertical else ax.axhline
        line(r * per - 0.5, color=themed("#000000"), linewidth=1.0, alpha=0.6)


@styled
def routing_figure(routing, ep, title=None):
    """Experts × tokens: the gate of every chosen expert, a cross where capacity dropped
    it; ``ep`` source ranks route consecutive blocks of the tokens."""
    T, k = routing.selected.shape
    E = routing.scores.shape[1]
    gate = np.full((E, T), np.nan)  # nothing chosen: blank
    tokens = np.repeat(np.arange(T), k)
    gate[routing.selected.ravel(), tokens] = routing.gates.ravel()
    fig = Figure(figsize=current().size((min(16.0, 4 + T * 0.12), 2.4 + 0.35 * E)))
    fig.set_layout_engine("constrained")
    ax = fig.subplots()
    image = ax.imshow(gate, aspect="auto", cmap="viridis", vmin=0, vmax=1, interpolation="none")
    lost = ~routing.kept.ravel()
    ax.scatter(
        tokens[lost],
        routing.selected.ravel()[lost],
        marker="x",
        s=40 if T <= 128 else 12,  # many tokens: small crosses that stay apart
        color=DROP,
        linewidths=2.0,
        label=say("dropped by capacity ({count})", count=int(lost.sum())),
        zorder=3,
    )
    _rank_lines(ax, ep, T // ep, vertical=True)
    _rank_lines(ax, ep, E // ep, vertical=False)
    ax.set_xlabel(say("token (blocks: the source rank that routes it)"))
    ax.set_ylabel(say("expert (blocks: the rank that holds it)"))
    ax.set_yticks(range(E))
    cap = (
        say("dropless")
        if routing.capacity is None
        else say("capacity {capacity} per expert per rank", capacity=routing.capacity)
    )
    ax.set_title(
        title or say("Token → expert routing: top-{k} of {E} experts, {cap}", k=k, E=E, cap=cap),
        fontsize="large",
    )
    bar = fig.colorbar(image, ax=ax, pad=0.01)
    bar.set_label(say("gate weight (0-1)"))
    if lost.any():
        fig.legend(loc="outside lower left", fontsize="small", frameon=False)
    return fig


def traffic_matrix(trace, ep, phase):
    """(ep, ep) bytes rank i sent rank j in the forward pass's ``phase`` (``"dispatch"`` or
    ``"combine"``), summed over both levels of a hierarchical dispatcher.

    >>> traffic_matrix(type("T", (), {"transfers": []})(), 2, "dispatch").tolist()
    [[0, 0], [0, 0]]
    """
    moved = np.zeros((ep, ep), dtype=np.int64)
    for t in trace.transfers:
        if isinstance(t.meta, RaggedTransfer) and FORWARD_CALLS.get(t.meta.call) == phase:
            moved[t.src, t.dst] += t.nbytes
    return moved


def _unit(most):
    for name, size in (("MiB", 2**20), ("KiB", 2**10)):
        if most >= size:
            return name, size
    return "B", 1


@styled
def traffic_figure(dispatch, combine, title=None):
    """The bytes between ranks, ``dispatch`` and ``combine`` ((ep, ep) each, sender by row),
    as two heat maps on one colour scale; the diagonal stays home and moves nothing."""
    ep = len(dispatch)
    unit, size = _unit(max(int(dispatch.max()), int(combine.max()), 1))
    vmax = max(int(dispatch.max()), int(combine.max()), 1) / size
    side = 2.2 + 0.75 * ep
    fig = Figure(figsize=current().size((2 * side + 1.6, side + 0.9)), layout="constrained")
    axes = fig.subplots(1, 2)
    for ax, matrix, name in zip(axes, (dispatch, combine), ("dispatch", "combine")):
        shown = matrix / size
        image = ax.imshow(shown, cmap="viridis", vmin=0, vmax=vmax)
        ax.set_title(
            say(
                "{phase}: tokens out" if name == "dispatch" else "{phase}: outputs back",
                phase=say(name),
            ),
            fontsize="large",
        )
        ax.set_xlabel(say("receiving rank"))
        ax.set_ylabel(say("sending rank"))
        ax.set_xticks(range(ep))
        ax.set_yticks(range(ep))
        if ep <= 8:
            for i in range(ep):
                for j in range(ep):
                    text = say("home") if i == j else format_size(int(matrix[i, j]))
                    fill = image.cmap(image.norm(shown[i, j]))
                    ax.text(
                        j, i, text, ha="center", va="center", fontsize="x-small", color=ink_on(fill)
                    )
    bar = fig.colorbar(image, ax=axes, shrink=0.9)
    bar.set_label(say("bytes sent ({unit})", unit=unit))
    total = format_size(int(dispatch.sum()))
    fig.suptitle(
        title or say("All-to-all traffic between ranks: {total} dispatched", total=total),
        fontsize="x-large",
        fontweight="bold",
    )
    return fig


@styled
def load_figure(routing, ep, loads, title=None):
    """Left: tokens routed to each expert, kept and dropped, against its capacity (all
    source ranks together: ep × the per-rank capacity).  Right: the rows each rank's experts
    computed, the mean dashed, and how many of each rank's choices were dropped."""
    E = routing.scores.shape[1]
    chosen = routing.tokens_per_expert.sum(axis=0)  # before dropping
    kept = np.bincount(routing.slot_expert[routing.slot_choice >= 0], minlength=E)
    fig = Figure(figsize=current().size((11.5, 4.8)), layout="constrained")
    by_expert, by_rank = fig.subplots(1, 2, width_ratios=[max(E, 4), max(ep, 3) + 1])
    x = np.arange(E)
    by_expert.bar(x, kept, color=KEPT, label=say("kept: computed"))
    by_expert.bar(x, chosen - kept, bottom=kept, color=DROP, hatch="//", label=say("dropped"))
    if routing.capacity is not None:
        limit = routing.capacity * ep
        by_expert.axhline(
            limit,
            color=themed("#000000"),
            linestyle="--",
            linewidth=1.5,
            label=say(
                "capacity: {ep} ranks × {c} = {limit}", ep=ep, c=routing.capacity, limit=limit
            ),
        )
    by_expert.set_xticks(x)
    by_expert.set_xlabel(say("expert"))
    by_expert.set_ylabel(say("tokens routed to it"))
    by_expert.set_title(say("per expert"), fontsize="large")
    by_expert.legend(fontsize="small", loc="upper right")
    by_expert.margins(y=0.3)
    rows = [load.rows_received for load in loads]
    bars = by_rank.bar(range(ep), rows, color=PALETTE[2])
    by_rank.axhline(
        np.mean(rows),
        color=themed("#000000"),
        linestyle=":",
        linewidth=1.5,
        label=say("mean {mean:.1f}", mean=float(np.mean(rows))),
    )
    for bar, load in zip(bars, loads):
        by_rank.annotate(
            say("{n} dropped", n=load.dropped),
            (bar.get_x() + bar.get_width() / 2, bar.get_height()),
            xytext=(0, 3),
            textcoords="offset points",
            ha="center",
            va="bottom",
            fontsize="x-small",
        )
    by_rank.set_xticks(range(ep))
    by_rank.set_xlabel(say("rank"))
    by_rank.set_ylabel(say("rows its experts computed"))
    by_rank.set_title(
        say("per rank: max / mean {ratio:.2f}x", ratio=max(rows) / max(np.mean(rows), 1e-9)),
        fontsize="large",
    )
    by_rank.legend(fontsize="small", loc="upper right")
    by_rank.margins(y=0.3)
    dropped = int((~routing.kept).sum())
    fig.suptitle(
        title
        or say(
            "Expert load: {dropped} of {choices} choices dropped",
            dropped=dropped,
            choices=routing.kept.size,
        ),
        fontsize="x-large",
        fontweight="bold",
    )
    return fig
