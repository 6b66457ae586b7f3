"""Scaling: where does adding GPUs stop paying?

Answered with first-principles costs: about 6 FLOPs per parameter per token of training
compute (Kaplan et al. 2020, "Scaling Laws for Neural Language Models"; Narayanan et al.
2021, Megatron-LM) against the data-parallel gradient all-reduce, 2(D-1)/D of the
gradient bytes per GPU.

For one model and one cluster, step time against the number of GPUs, split into compute
and communication, the communication further into its bandwidth term (bytes / β) and
its latency term (steps · α), and the efficiency that follows (the share of the step that
is useful compute: 6·N·tokens / (GPUs · rate) over the step time).

Strong scaling (the default) keeps the global batch fixed, so each GPU's tokens shrink as
GPUs are added while the gradient it all-reduces does not: the compute-to-communication
ratio 3·D·BW/(P·b) falls with D.  Weak scaling keeps the batch per data-parallel rank
fixed instead.  The jump where the job outgrows one node is the bandwidth dropping from
the intra-node to the inter-node figure.

Every number is the planner's (:mod:`collsim.plan.cost`): compute 6·N·tokens/(GPUs·P)
stretched by any pipeline bubble, and each collective's closed form
(:func:`collsim.collectives.formulas.closed_form`) on the intra- or inter-node link; the
latency term is each collective's steps times its link's α.

Examples
--------
>>> rows = scaling_rows({"params": "7B", "global_batch": 1024}, gpus=[8, 16])
>>> [r["link"] for r in rows]
['intra-node', 'inter-node']
>>> rows[1]["comm_bandwidth_s"] > 10 * rows[0]["comm_bandwidth_s"]   # 300 vs 25 GB/s
True
>>> fig = scaling_figure({"params": "7B", "global_batch": 1024}, gpus=[1, 8, 64])
>>> fig.axes[0].get_ylabel()
'time per optimizer step (s)'
"""

import numbers

from matplotlib import rcParams
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, NullLocator

from ..errors import ConfigError
from ..units import format_rate
from .limits import check_rate
from .style import current, say, styled, themed

__all__ = ["scaling_figure", "scaling_rows", "DEFAULT_JOB"]

# the 7B memory and communication example: a 7B model, about a million tokens per step
DEFAULT_JOB = {"params": "7B", "global_batch": 512, "seq": 2048}
COLOURS = {
    "compute": "#4C72B0",
    "bandwidth": "#DD8452",
    "latency": "#C44E52",
    "step": "#222222",
}


def _config(config, inputs):
    from ..plan import as_config

    if config is None and not inputs:
        config = DEFAULT_JOB
    return as_config(config, **inputs)


def scaling_rows(config=None, gpus=None, weak=False, batch_per_gpu=None, **inputs):
    """One dict per GPU count: ``gpus``, ``compute_s``, ``comm_bandwidth_s``,
    ``comm_latency_s``, ``step_s``, ``efficiency``, ``efficiency_overlapped``,
    ``global_batch`` and ``link`` (the data-parallel group's link).

    ``config`` and ``inputs`` describe the job as for :func:`collsim.plan.plan`; its
    ``world_size`` is replaced by each entry of ``gpus`` (default 1, 2, 4, ... up to the
    global batch or 1024).  ``weak=True`` scales the global batch with the data-parallel
    degree, ``batch_per_gpu`` sequences per data-parallel rank (default 4).
    """
    from ..plan.config import derive
    from ..plan.cost import communication, compute, scaling

    cfg = _config(config, inputs)
    if cfg.global_batch is None:
        cfg = cfg.replace(global_batch=DEFAULT_JOB["global_batch"])
    model_parallel = cfg.tp * cfg.pp * cfg.cp
    if gpus is None:
        top = min(1024, cfg.global_batch * model_parallel) if not weak else 1024
        gpus = [model_parallel * 2**i for i in range(12) if model_parallel * 2**i <= top]
    wrong = [n for n in gpus if isinstance(n, bool) or not isinstance(n, numbers.Integral)]
    if wrong or not gpus:
        raise ConfigError(
            f"GPU counts {list(gpus)!r}: give whole numbers, like [8, 16, 32]"
            + (f"; {wrong[0]!r} is not one" if wrong else "")
        )
    gpus = [int(n) for n in gpus]
    bad = [n for n in gpus if n < 1 or n % model_parallel]
    if bad:
        raise ConfigError(f"GPU counts {bad} are not multiples of tp·pp·cp = {model_parallel}")
    if weak and batch_per_gpu is None:
        batch_per_gpu = 4
    if batch_per_gpu is not None:
        check_rate(batch_per_gpu, "batch_per_gpu", 1e6, example=4)
    rows = []
    for n in gpus:
        dp = n // model_parallel
        batch = batch_per_gpu * dp if weak else cfg.global_batch
        job = cfg.replace(
            world_size=n, dp=None, global_batch=max(1, round(batch)), accumulation=None
        )
        d = derive(job)
        comm, comp = communication(job, d), compute(job, d)
        summary = scaling(job, d, comm, comp)
        latency = 0.0
        for dim in ("tp", "cp", "dp", "pp"):
            for op in comm[dim]["ops"].values():
                alpha = job.intra_latency if op["link"] == "intra-node" else job.inter_latency
                latency += op["calls"] * op["steps_per_call"] * alpha
        total = comm["total"]["time_s"]
        rows.append(
            {
                "gpus": n,
                "global_batch": job.global_batch,
                "compute_s": comp["time_s"],
                "comm_bandwidth_s": total - latency,
                "comm_latency_s": latency,
                "step_s": summary["step_time_s"],
                "efficiency": summary["efficiency"],
                "efficiency_overlapped": summary["efficiency_overlapped"],
                "link": comm["dp"]["link"],
            }
        )
    return rows


def _gpu_axis(ax, gpus):
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(gpus))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([str(n) for n in gpus], fontsize="medium")
    ax.set_xlabel(say("GPUs"), fontsize="large")
    ax.grid(True, alpha=0.3)


@styled
def scaling_figure(config=None, gpus=None, weak=False, batch_per_gpu=None, max_gpus=None, **inputs):
    """Step time split and efficiency against GPUs; returns a Figure.

    Arguments are those of :func:`scaling_rows`; ``max_gpus``, the count asked for, is
    said in the title when strong scaling stops short of it (one sequence a replica).
    """
    cfg = _config(config, inputs)
    rows = scaling_rows(cfg, gpus, weak, batch_per_gpu)
    n = [r["gpus"] for r in rows]
    fig = Figure(figsize=current().size((14, 6.8)), layout="constrained")
    ax_t, ax_e = fig.subplots(1, 2)
    series = (
        ("compute_s", "compute 6·N·tokens / (GPUs·P), + any bubble", COLOURS["compute"], "-"),
        ("comm_bandwidth_s", "communication: bandwidth term (bytes/β)", COLOURS["bandwidth"], "-"),
        ("comm_latency_s", "communication: latency term (steps·α)", COLOURS["latency"], "-"),
        ("step_s", "step = compute + communication", COLOURS["step"], "--"),
    )
    for key, label, colour, style in series:
        values = [r[key] for r in rows]
        shown = [(x, y) for x, y in zip(n, values) if y > 0]
        if shown:
            ax_t.plot(*zip(*shown), style, color=colour, lw=2.2, marker="o", ms=4, label=say(label))
    ax_t.set_yscale("log")
    _gpu_axis(ax_t, n)
    ax_t.set_ylabel(say("time per optimizer step (s)"), fontsize="large")

    # right: the step as shares, and the efficiency those shares mean
    bottoms = [0.0] * len(rows)
    width = [x * 0.5 for x in n]  # bars half an octave wide on the log axis
    for key, label, colour in (
        ("compute_s", "compute", COLOURS["compute"]),
        ("comm_bandwidth_s", "bandwidth term", COLOURS["bandwidth"]),
        ("comm_latency_s", "latency term", COLOURS["latency"]),
    ):
        share = [100 * r[key] / r["step_s"] if r["step_s"] else 0.0 for r in rows]
        ax_e.bar(
            n,
            share,
            width=width,
            bottom=bottoms,
            color=colour,
            alpha=0.55,
            label=say(label),
            align="center",
        )
        bottoms = [b + s for b, s in zip(bottoms, share)]
    ax_e.plot(
        n,
        [100 * r["efficiency"] for r in rows],
        "-o",
        color=themed("black"),
        lw=2.2,
        ms=4,
        label=say("efficiency (nothing overlapped)"),
    )
    ax_e.plot(
        n,
        [100 * r["efficiency_overlapped"] for r in rows],
        "--",
        color=themed("black"),
        lw=1.6,
        label=say("efficiency (DP all-reduce hidden behind compute)"),
    )
    _gpu_axis(ax_e, n)
    ax_e.set_ylim(0, 105)
    ax_e.set_ylabel(say("share of the step (%)"), fontsize="large")
    # one legend under both panels: constrained layout gives it its room in any look
    handles, labels = (
        sum(pair, []) for pair in zip(*(a.get_legend_handles_labels() for a in (ax_t, ax_e)))
    )
    fig.legend(handles, labels, fontsize="medium", loc="outside lower center", ncol=2)
    _mark_node_edge(fig, (ax_t, ax_e), rows, cfg)
    _mark_half(ax_e, rows)
    per = 4 if batch_per_gpu is None else batch_per_gpu
    mode = (
        say("weak scaling: {per} sequences per data-parallel GPU", per=f"{per:g}")
        if weak
        else say(
            "strong scaling: global batch fixed at {batch} sequences",
            batch=f"{rows[0]['global_batch']:,}",
        )
    )
    if not weak and max_gpus is not None and max_gpus > n[-1]:  # the batch ran out first
        mode += say(", so at most {gpus} GPUs (one sequence a replica)", gpus=f"{n[-1]:,}")
    fig.suptitle(
        say("where does adding GPUs stop paying?  {model}, {mode}", model=_model(cfg), mode=mode),
        fontsize="x-large",
        fontweight="bold",
        wrap=True,
    )
    ax_t.set_title(
        say(
            "P = {rate} TFLOP/s per GPU, {gpus} GPUs per node, links {intra} inside a node "
            "and {inter} between",
            rate=f"{cfg.compute_rate / 1e12:.4g}",
            gpus=cfg.gpus_per_node,
            intra=format_rate(cfg.intra_bandwidth),
            inter=format_rate(cfg.inter_bandwidth),
        ),
        fontsize="medium",
        wrap=True,
    )
    ax_e.set_title(
        say(
            "{seq}-token sequences, {precision} gradients, tp={tp}, pp={pp}, data parallel "
            "over the rest",
            seq=f"{cfg.seq:,}",
            precision=cfg.precision,
            tp=cfg.tp,
            pp=cfg.pp,
        ),
        fontsize="medium",
        wrap=True,
    )
    return fig


def _model(cfg):
    from ..plan.config import derive

    params = derive(cfg).params
    count = f"{params / 1e9:.3g}B" if params >= 1e9 else f"{params / 1e6:.3g}M"
    return say("{count} parameters", count=count)


def _mark_node_edge(fig, axes, rows, cfg):
    """A line where the data-parallel group first leaves one node."""
    for before, after in zip(rows, rows[1:]):
        if before["link"] == "intra-node" and after["link"] == "inter-node":
            x = (before["gpus"] * after["gpus"]) ** 0.5
            for ax in axes:
                ax.axvline(x, color="#555555", ls=":", lw=1.5)
            text = say(
                "data-parallel group\nleaves one node:\n{intra} → {inter}",
                intra=format_rate(cfg.intra_bandwidth),
                inter=format_rate(cfg.inter_bandwidth),
            )
            box = {"boxstyle": "round,pad=0.2", "fc": rcParams["axes.facecolor"], "ec": "#999999"}
            where = axes[0].get_xaxis_transform()
            axes[0].text(
                x,
                0.33,
                text,
                transform=where,
                ha="center",
                va="center",
                fontsize="medium",
                bbox=box,
            )
            return


def _mark_half(ax, rows):
    """Name the first GPU count whose efficiency is below 50 %."""
    for r in rows:
        if r["efficiency"] < 0.5:
            ax.annotate(
                say("below 50 % from {gpus} GPUs:\ncommunication > compute", gpus=r["gpus"]),
                xy=(r["gpus"], 100 * r["efficiency"]),
                xytext=(-120, -70),
                textcoords="offset points",
                ha="center",
                fontsize="medium",
                arrowprops={"arrowstyle": "->", "color": "black"},
                bbox={
                    "boxstyle": "round,pad=0.2",
                    "fc": rcParams["axes.facecolor"],
                    "ec": "#999999",
                },
            )
            return
