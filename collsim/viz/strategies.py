"""The strategy table side by side: memory by category and bytes by link class per strategy.

One row per strategy; left, a stacked bar: the busiest rank's peak parameters, gradients, optimizer
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
>>> [ax.get_xlabel() for ax in fig.axes[:2]]
['peak memory of the busiest rank (KiB)', 'bytes sent per rank (KiB)']
"""

import textwrap

from matplotlib.figure import Figure

from .style import CATEGORY_COLOURS, current, language, say, styled, themed

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
def strategies_figure(rows, title=None, subtitle=""):
    """Two panels of the measured ``rows`` (dicts with the ``StrategyRow`` keys); a Figure.

    One row a strategy, its name and sizes written across at the left, so every name reads
    at slide size however many strategies there are (a vertical bar chart had to hide every
    other name under its bars)."""
    rows = [dict(r) for r in rows]
    title = say("Accelerate's ND-parallelism strategies, measured") if title is None else title
    fig = Figure(figsize=current().size((14, 6.4)), layout="constrained")
    mem_ax, link_ax = fig.subplots(1, 2, sharey=True)
    y = list(range(len(rows)))
    ran = [r for r in rows if not r.get("not_run")]

    left = [0.0] * len(rows)
    for key, label, colour in MEMORY_PARTS:
        widths = [_kib(r, "peak_memory_bytes", key) for r in rows]
        mem_ax.barh(
            y,
            widths,
            0.65,
            left=left,
            label=say(label),
            color=colour,
            edgecolor="white",
            linewidth=0.6,
        )
        left = [a + w for a, w in zip(left, widths)]
    totals = [_kib(r, "peak_memory_bytes", "total") for r in rows]
    mem_top = max([*left, *totals, 1.0])
    for i, (r, total) in enumerate(zip(rows, totals)):
        if r.get("not_run"):
            continue
        mem_ax.plot([total, total], [i - 0.4, i + 0.4], color=themed("black"), linewidth=1.6)
        mem_ax.annotate(
            f"{total:.3g}",
            (max(total, left[i]), i),
            xytext=(4, 0),
            textcoords="offset points",
            ha="left",
            va="center",
            fontsize="small",
        )
    mem_ax.plot([], [], color=themed("black"), linewidth=1.6, label=say("peak of the sum (total)"))
    mem_ax.set_xlabel(say("peak memory of the busiest rank (KiB)"))
    mem_ax.set_title(say("memory by category"), loc="left", fontsize="medium", wrap=True)
    mem_ax.set_xlim(0, mem_top * 1.18)
    # the legend under the panel, where no bar or value label can be (constrained layout
    # gives it its room)
    mem_ax.legend(
        fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2, frameon=False
    )

    height = 0.38
    link_top = max([1.0] + [_kib(r, k) for r in ran for k, _, _ in LINK_PARTS])
    for j, (key, label, colour) in enumerate(LINK_PARTS):
        widths = [_kib(r, key) for r in rows]
        offset = (j - 0.5) * height
        bars = link_ax.barh([i + offset for i in y], widths, height, label=say(label), color=colour)
        link_ax.bar_label(
            bars, [f"{w:.3g}" if w else "" for w in widths], fontsize="x-small", padding=3
        )
    link_ax.set_xlabel(say("bytes sent per rank (KiB)"))
    link_ax.set_title(say("communication by link class"), loc="left", fontsize="medium", wrap=True)
    link_ax.set_xlim(0, link_top * 1.18)
    link_ax.legend(
        fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=1, frameon=False
    )

    mem_ax.set_yticks(y, [_label(r) for r in rows], fontsize="small")
    mem_ax.set_ylim(len(rows) - 0.5, -0.5)  # the first strategy on top, as in the table
    for ax, top in ((mem_ax, mem_top), (link_ax, link_top)):
        ax.grid(axis="x", alpha=0.3)
        ax.set_axisbelow(True)
        for i, r in enumerate(rows):
            if r.get("not_run"):
                ax.text(
                    top * 0.02,
                    i,
                    say("not run (see below)"),
                    ha="left",
                    va="center",
                    fontsize="small",
                    color="#C44E52",
                )
    notes = [
        say("{name} not run: {why}", name=r["name"], why=r["not_run"])
        for r in rows
        if r.get("not_run")
    ]
    notes.append(
        say(
            "sizes beside each name: dp_replicate x dp_shard x cp x tp (Accelerate's names); "
            "each bar stacks every category's own peak, which need not come at the same "
            "moment: the upright line is the peak of their sum"
        )
    )
    fig.text(
        0.01,
        0.0,
        "\n".join(textwrap.fill(n, 160 if language() == "en" else 90) for n in notes),
        fontsize="small",
        va="bottom",
        ha="left",
        wrap=True,
    )
    fig.get_layout_engine().set(rect=(0, 0.07, 1, 0.93))
    lines = [title] + textwrap.wrap(subtitle, 120 if language() == "en" else 70)
    fig.suptitle(
        "\n".join(lines), fontweight="bold", x=0.01, ha="left", fontsize="medium", wrap=True
    )
    return fig


def _label(row):
    s = row["sizes"]
    sizes = "x".join(str(s[k]) for k in ("dp_replicate", "dp_shard", "cp", "tp"))
    # ep folds into the ranks of dp x cp x tp (Megatron-Core's MoE parallel folding); it
    # is not one more factor of the product, so it is said beside the others
    if s.get("ep", 1) > 1:
        sizes += f", ep {s['ep']}"
    return f"{row['name']}  {sizes}"


def _kib(row, key, part=None):
    """``row[key]`` (or ``row[key][part]``) in KiB, 0 for a row that did not run."""
    if row.get("not_run"):
        return 0.0
    value = row[key] if part is None else row[key][part]
    return value / KIB
