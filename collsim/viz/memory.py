"""Memory per GPU for ZeRO stages 0-3 side by side: what each stage shards away.

One stacked bar per stage, bottom to top: parameters, gradients, optimizer states,
activations (the same estimate as :mod:`collsim.plan.memory`: 16 bytes per parameter
for mixed-precision Adam, divided as Rajbhandari et al. 2020 describe; activations from
Korthikanti et al. 2022).  A dashed line marks the GPU's memory; the configured stage is
marked.

Examples
--------
>>> fig = memory_figure(params="7B", world_size=8, micro_batch=1, gpu_memory="80GiB")
>>> ax = fig.axes[0]
>>> len(ax.containers), [len(c) for c in ax.containers]
(4, [4, 4, 4, 4])
>>> ax.get_ylabel()
'memory per GPU (GiB)'
"""

from matplotlib.colors import to_rgb
from matplotlib.figure import Figure

from .ink import ink_on
from .style import CATEGORY_COLOURS, current, say, styled

__all__ = ["memory_figure", "PARTS", "STAGES"]

# (key in the plan's memory dict, legend label, colour)
PARTS = (
    ("params", "parameters", CATEGORY_COLOURS["params"]),
    ("grads", "gradients", CATEGORY_COLOURS["grads"]),
    ("optimizer", "optimizer states (fp32 copy, Adam m, v)", CATEGORY_COLOURS["optimizer"]),
    ("activations", "activations", CATEGORY_COLOURS["activations"]),
)
STAGES = (
    "ZeRO-0\nnothing sharded\n(DDP)",
    "ZeRO-1\noptimizer\nsharded",
    "ZeRO-2\n+ gradients\nsharded",
    "ZeRO-3 / FSDP\n+ parameters\nsharded",
)
GIB = 2**30


@styled
def memory_figure(config=None, /, **inputs):
    """Stacked memory bars for ZeRO stages 0-3 of one configuration; returns a Figure.

    ``config`` and ``inputs`` are what :func:`collsim.plan.plan` takes (a PlanConfig, a
    mapping, a TOML/JSON path, or keyword settings).
    """
    from ..plan import as_config
    from ..plan.config import derive
    from ..plan.memory import estimate
    from ..plan.report import format_count

    cfg = as_config(config, **inputs)
    base = derive(cfg)
    stages = [estimate(c, derive(c)) for c in (cfg.replace(zero=z) for z in range(4))]
    capacity = cfg.gpu_memory / GIB

    fig = Figure(figsize=current().size((9, 5.6)), layout="constrained")
    ax = fig.add_subplot()
    x = range(4)
    totals = [m["total"] / GIB for m in stages]
    top = max(max(totals), capacity)
    bottom = [0.0] * 4
    for key, label, colour in PARTS:
        if key == "activations" and not (cfg.layers and cfg.hidden):
            label += " (not estimated: give layers, hidden, heads)"
        heights = [m[key] / GIB for m in stages]
        bars = ax.bar(
            x,
            heights,
            0.6,
            bottom=bottom,
            label=say(label),
            color=colour,
            edgecolor="white",
            linewidth=0.8,
        )
        # name the size of each part that is tall enough to hold its label
        ax.bar_label(
            bars,
            [f"{h:.3g} GiB" if h > 0.06 * top else "" for h in heights],
            label_type="center",
            color=ink_on(to_rgb(colour)),
            fontsize="small",
        )
        bottom = [b + h for b, h in zip(bottom, heights)]

    ax.axhline(capacity, color="#C44E52", linestyle="--", linewidth=1.5)
    # the line's label sits outside the plot, on the right axis, where no bar can be
    gpu = ax.secondary_yaxis("right")
    gpu.set_yticks(
        [capacity],
        [say("GPU memory\n{size} GiB", size=f"{capacity:.4g}")],
        color="#C44E52",
        fontsize="medium",
    )
    gpu.tick_params(colors="#C44E52", length=6, width=1.5)
    gpu.spines["right"].set_visible(False)
    for i, (total, m) in enumerate(zip(bottom, stages)):
        verdict = say("fits") if m["fits"] else say("does not fit")
        ax.annotate(
            f"{total:.3g} GiB\n{verdict}",
            (i, total),
            xytext=(0, 4),
            textcoords="offset points",
            ha="center",
            va="bottom",
            fontsize="small",
            color="black" if m["fits"] else "#C44E52",
            bbox=dict(boxstyle="round,pad=0.2", facecolor="white", edgecolor="none", alpha=0.9),
        )

    ax.set_xticks(
        list(x),
        [
            say(s) + ("\n" + say("(configured)") if i == base.zero else "")
            for i, s in enumerate(STAGES)
        ],
    )
    for i, tick in enumerate(ax.get_xticklabels()):
        tick.set_fontweight("bold" if i == base.zero else "normal")
    ax.set_xlim(-0.6, 3.6)
    ax.set_ylim(0, top * 1.15)
    ax.set_ylabel(say("memory per GPU (GiB)"))
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    # below the plot, where it can cover neither a bar nor the GPU-memory line
    fig.legend(loc="outside lower center", ncol=4, fontsize="small", frameon=False)
    ax.set_title(_title(cfg, base, format_count), fontsize="medium", loc="left", wrap=True)
    fig.suptitle(
        say("Memory per GPU by ZeRO stage"), fontweight="bold", x=0.02, ha="left", wrap=True
    )
    return fig


def _title(cfg, d, format_count):
    def n(v):
        return f"{v:g}"

    shard = n(d.dp * cfg.cp)
    parts = [say("{count} parameters", count=format_count(d.params))]
    parts.append(f"tp={cfg.tp} pp={cfg.pp} dp={n(d.dp)}")
    parts.append(say("ZeRO shards over {n} GPUs", n=shard))
    if cfg.layers:
        parts.append(
            say(
                "micro-batch {micro} × seq {seq}, recompute {recompute}",
                micro=n(d.micro_batch),
                seq=cfg.seq,
                recompute=say(cfg.recompute),
            )
        )
    return ", ".join(parts) + f", {cfg.precision}"
