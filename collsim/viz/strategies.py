"""The strategy table side by side: memory by category and bytes by link class per strategy.

Left, one stacked bar per strategy: the busiest rank's peak parameters, gradients, optimizer
state, activations and FSDP-gathered parameters (each category's own peak), with the peak
of their sum marked.  Right, the bytes each rank sent over links inside a node and between
nodes.  A strategy the trainer refused keeps its place, marked "not run", its reason below.
The rows are what :func:`collsim.verify.strategies.strategy_table` measured (as dicts).

Examples
--------
>>> row = dict(name="DP", sizes=dict(dp_replicate=2, dp_shard=1, cp=1, tp=1), not_run=None,
...            peak_memory_bytes=dict(params=4096, grads=4096, optimizer=8192, activations=2048,
...                                   gathered_params=0, comm_buffers=0, total=18432),
...            intra_node_bytes=1024, inter_node_bytes=512)
>>> fig = strategies_figure([row, dict(row, name="X", not_run="refused: why")])
>>> [ax.get_ylabel() for ax in fig.axes[:2]]
['peak memory of the busiest rank (KiB)', 'bytes sent per rank (KiB)']
"""

import textwrap

from matplotlib.figure import Figure

from .style import CATEGORY_COLOURS, current, say, styled, themed

__all__ = ["strategies_figure", "MEMORY_PARTS", "LINK_PARTS"]

# (key in the row's peak_memory_bytes, legend label, colour): colours as in memory.py
MEMORY_PARTS = (
    ("params", "parameters", CATEGORY_COLOURS["params"]),
    ("grads", "gradients", CATEGORY_COLOURS["grads"]),
    ("optimizer", "optimizer state (Adam m, v)", CATEGORY_COLOURS["optimizer"]),
    ("activations", "activations", CATEGORY_COLOURS["activations"]),
    ("gathered_params", "gathered parameters (FSDP)", CATEGORY_COLOURS["gathered_params"]),
    (
        "comm_buffers",
        "communication buffers (K/V blocks, gradient buffers)",
        CATEGORY_COLOURS["comm_buffers"],
    ),
)
LINK_PARTS = (
    ("intra_node_bytes", "inside a node (fast links)", "#64B5CD"),
    ("inter_node_bytes", "between nodes (slow links)", "#C44E52"),
)
KIB = 2**10


@styled
def strategies_figure(rows, title="Accelerate's ND-parallelism strategies, measured", subtitle=""):
    """Two panels of the measured ``rows`` (dicts with the ``StrategyRow`` keys); a Figure."""
    rows = [dict(r) for r in rows]
    fig = Figure(figsize=current().size((14, 6.4)), layout="constrained")
    mem_ax, link_ax = fig.subplots(1, 2)
    x = list(range(len(rows)))
    labels = [_label(r) for r in rows]
    ran = [r for r in rows if not r.get("not_run")]

    bottom = [0.0] * len(rows)
    for key, label, colour in MEMORY_PARTS:
        heights = [_kib(r, "peak_memory_bytes", key) for r in rows]
        mem_ax.bar(
            x,
            heights,
            0.65,
            bottom=bottom,
            label=say(label),
            color=colour,
            edgecolor="white",
            linewidth=0.6,
        )
        bottom = [b + h for b, h in zip(bottom, heights)]
    totals = [_kib(r, "peak_memory_bytes", "total") for r in rows]
    mem_top = max([*bottom, *totals, 1.0])
    for i, (r, total) in enumerate(zip(rows, totals)):
        if r.get("not_run"):
            continue
        mem_ax.plot([i - 0.36, i + 0.36], [total, total], color=themed("black"), linewidth=1.6)
        top = max(total, bottom[i])
        mem_ax.annotate(
            f"{total:.3g}",
            (i, top),
            xytext=(0, 3),
            textcoords="offset points",
            ha="center",
            va="bottom",
            fontsize="small",
        )
    mem_ax.plot([], [], color=themed("black"), linewidth=1.6, label=say("peak of the sum (total)"))
    mem_ax.set_ylabel(say("peak memory of the busiest rank (KiB)"))
    mem_ax.set_title(say("memory by category"), loc="left", fontsize="medium", wrap=True)
    mem_ax.set_ylim(0, mem_top * 1.12)
    # the legend under the panel, where no bar or value label can be (constrained layout
    # gives it its room)
    mem_ax.legend(
        fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=2, frameon=False
    )

    width = 0.38
    link_top = max([1.0] + [_kib(r, k) for r in ran for k, _, _ in LINK_PARTS])
    for j, (key, label, colour) in enumerate(LINK_PARTS):
        heights = [_kib(r, key) for r in rows]
        offset = (j - 0.5) * width
        bars = link_ax.bar([i + offset for i in x], heights, width, label=say(label), color=colour)
        link_ax.bar_label(
            bars, [f"{h:.3g}" if h else "" for h in heights], fontsize="x-small", padding=2
        )
    link_ax.set_ylabel(say("bytes sent per rank (KiB)"))
    link_ax.set_title(say("communication by link class"), loc="left", fontsize="medium", wrap=True)
    link_ax.set_ylim(0, link_top * 1.15)
    link_ax.legend(fontsize="small", loc="upper left", frameon=True, framealpha=0.9)

    for ax, top in ((mem_ax, mem_top), (link_ax, link_top)):
        ax.set_xticks(x, labels, fontsize="small")
        ax.set_xlim(-0.6, len(rows) - 0.4)
        ax.grid(axis="y", alpha=0.3)
        ax.set_axisbelow(True)
        for i, r in enumerate(rows):
            if r.get("not_run"):
                ax.text(
                    i,
                    top * 0.04,
                    "not run\n(see below)",
                    ha="center",
                    va="bottom",
                    fontsize="small",
                    color="#C44E52",
                    rotation=90,
                )
    notes = [f"{r['name']} not run: {r['not_run']}" for r in rows if r.get("not_run")]
    notes.append(
        "sizes under each name: dp_replicate x dp_shard x cp x tp (Accelerate's names); "
        "each bar stacks every category's own peak, which need not come at the same "
        "moment: the black line is the peak of their sum"
    )
    fig.text(
        0.01,
        0.0,
        "\n".join(textwrap.fill(n, 160) for n in notes),
        fontsize="small",
        va="bottom",
        ha="left",
        wrap=True,
    )
    fig.get_layout_engine().set(rect=(0, 0.07, 1, 0.93))
    lines = [title] + textwrap.wrap(subtitle, 120)
    fig.suptitle(
        "\n".join(lines), fontweight="bold", x=0.01, ha="left", fontsize="medium", wrap=True
    )
    return fig


def _label(row):
    s = row["sizes"]
    sizes = "x".join(str(s[k]) for k in ("dp_replicate", "dp_shard", "cp", "tp"))
    if s.get("ep", 1) > 1:  # expert parallelism is carved from dp x cp: said beside them
        sizes += f", ep {s['ep']}"
    return row["name"].replace("+", "\n+") + f"\n{sizes}"


def _kib(row, key, part=None):
    """``row[key]`` (or ``row[key][part]``) in KiB, 0 for a row that did not run."""
    if row.get("not_run"):
        return 0.0
    value = row[key] if part is None else row[key][part]
    return value / KIB
