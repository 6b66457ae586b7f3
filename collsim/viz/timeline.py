"""Pipeline timeline: stages × time, one block per pass, idle time shaded.

Drawn like the figures of the Megatron (Narayanan et al. 2021) and zero-bubble (Qi et al.
2024) papers: one row per stage, forward passes, backward passes and (for zero-bubble
schedules) weight-gradient passes as blocks coloured by kind and labelled with their
micro-batch; interleaved schedules draw model chunk 1, 2, ... in lighter shades.  The idle
time of each stage inside the step is hatched grey, and the title gives the bubble
fraction measured from those blocks next to the schedule's closed form.

Every block is a compute span of the run's trace, matched to its pass by the
`~collsim.parallel.pipeline.schedules.PipelinePass` record the span carries, never by its label
(:func:`collsim.parallel.pipeline.result.op_spans`); nothing is re-timed here.

Examples
--------
>>> from collsim.parallel.runs.pipeline import pipeline_step
>>> result = pipeline_step("1f1b", stages=4, microbatches=8)
>>> fig = timeline_figure(result)
>>> blocks = [p for p in fig.axes[0].patches if p.get_gid().startswith("op ")]
>>> len(blocks)                       # 4 stages x 8 micro-batches x (F + B)
64
>>> fig.get_suptitle()
'1f1b: p=4 stages, m=8 micro-batches · bubble 27.3% (formula (p-1)/(m+p-1) = 27.3%)'
"""

from fractions import Fraction

from matplotlib import rcParams
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.patches import Patch, Rectangle

from ..errors import ConfigError
from .style import current, say, styled
from .times import time_unit

__all__ = ["timeline_figure", "KIND_COLOURS", "bubble_from_spans"]

KIND_COLOURS = {"F": "#0072B2", "B": "#009E73", "BW": "#009E73", "W": "#E69F00"}  # Okabe-Ito
KIND_NAMES = {
    "F": "F: forward",
    "B": "B: input gradient",
    "BW": "B: backward",
    "W": "W: weight gradient",
}
IDLE = "#D9D9D9"
CHUNK_HATCHES = ("", "..", "\\\\", "xx", "--")  # interleaved chunk 1, 2, ...: pattern and shade
_FORMULA_TEXT = {
    "gpipe": "(p-1)/(m+p-1)",
    "1f1b": "(p-1)/(m+p-1)",
    "interleaved": "(p-1)/(v·m+p-1)",
    "zb-h1": "",
}


def _shade(colour, chunk, virtual):
    """Chunk 0 in the kind's colour, later chunks mixed toward white."""
    if virtual <= 1 or chunk == 0:
        return colour
    mix = 0.55 * chunk / (virtual - 1)
    return tuple(c + (1 - c) * mix for c in to_rgb(colour))


def bubble_from_spans(spans, stages):
    """``(start, end, idle per stage)`` of the step the spans cover: the step runs from
    the first pass's start to the last pass's end; a stage idles whenever it does not
    compute inside it (the definition :class:`~collsim.parallel.pipeline.result.PipelineResult`
    uses)."""
    start = min(s.start for s in spans)
    end = max(s.end for s in spans)
    busy = [0.0] * stages
    for s in spans:
        busy[s.stage] += s.end - s.start
    return start, end, [end - start - b for b in busy]


@styled
def timeline_figure(source, schedule=None, stage_ranks=None, times=None, title=None):
    """The pipeline timeline of one step; returns a Figure.

    Parameters
    ----------
    source : PipelineResult or Trace
        What :func:`collsim.parallel.pipeline.run_pipeline` returned (it carries the
        schedule, the trace, the stage ranks and the pass times), or a bare trace whose
        compute spans carry `~collsim.parallel.pipeline.schedules.PipelinePass` records
        (``meta``; their labels are only shown, never read).
    schedule : Schedule, optional
        Needed with a bare trace.
    stage_ranks : sequence of int, optional
        The rank that ran each stage (default: the result's, else stage s on rank s).
    times : dict, optional
        ``{"t_f", "t_b", "t_w"}`` for the closed form in the title (default: the result's).
    """
    from ..parallel.pipeline.result import op_spans

    schedule = schedule or getattr(source, "schedule", None)
    if schedule is None:
        raise ConfigError("a bare trace needs its pipeline schedule: timeline_figure(trace, sched)")
    trace = getattr(source, "trace", source)
    stage_ranks = stage_ranks or getattr(source, "stage_ranks", None) or range(schedule.stages)
    times = times or getattr(source, "times", None)
    spans = op_spans(schedule, trace, list(stage_ranks))
    expected = sum(len(row) for row in schedule.ops)
    if len(spans) != expected:
        raise ConfigError(
            f"the trace holds {len(spans)} of the schedule's {expected} passes: each pass's "
            "compute span must carry its PipelinePass record (meta=) on its stage's rank of "
            "stage_ranks"
        )
    p, v = schedule.stages, schedule.virtual
    start, end, idle = bubble_from_spans(spans, p)
    divisor, unit = time_unit(end - start)

    # constrained layout: the legend, phase marks and title take their room in any look
    fig = Figure(figsize=current().size((14.0, 2.4 + 0.62 * p)), layout="constrained")
    ax = fig.subplots()
    axes_inches = fig.get_figwidth() * 0.9
    for span in spans:
        kind = span.op.kind
        x0, x1 = (span.start - start) / divisor, (span.end - start) / divisor
        colour = _shade(KIND_COLOURS[kind], span.op.chunk, v)
        ax.add_patch(
            Rectangle(
                (x0, span.stage - 0.4),
                x1 - x0,
                0.8,
                facecolor=colour,
                edgecolor="white",
                hatch=CHUNK_HATCHES[span.op.chunk % len(CHUNK_HATCHES)] if v > 1 else None,
                lw=0.8,
                zorder=3,
                gid=f"op {span.stage} {span.op.label(v > 1)}",
            )
        )
        inches = (span.end - span.start) / (end - start) * axes_inches
        if inches >= 0.12:
            # micro-batches count from 1, as GPipe, Megatron and collsim's steps do
            text = str(span.op.microbatch + 1)
            base = FontProperties(size="medium").get_size_in_points()
            size = min(base * 1.1, 72 * inches / (0.62 * len(text) + 0.4))
            ink = "white" if span.op.chunk == 0 else "#222222"
            ax.text(
                (x0 + x1) / 2,
                span.stage,
                text,
                ha="center",
                va="center",
                fontsize=size,
                color=ink,
                fontweight="bold",
                zorder=4,
                gid=f"microbatch {span.stage} {span.op.label(v > 1)}",
            )
    stretches = _shade_idle(ax, spans, p, start, end, divisor)
    measured = sum(idle) / len(idle) / (end - start) if end > start else 0.0
    _label_bubble(ax, stretches, schedule, times, measured, (end - start) / divisor)
    _mark_phases(ax, spans, start, end, divisor)

    ax.set_xlim(0, (end - start) / divisor)
    ax.set_ylim(p - 0.5, -1.25)  # the top band holds the warm-up / steady / cool-down marks
    ax.set_yticks(range(p), [say("stage {stage}", stage=s) for s in range(p)], fontsize="large")
    if getattr(trace, "faults", None) is not None:  # a straggler's row says so (viz/faults.py)
        from .faults import mark_slow_stages

        mark_slow_stages(ax, trace.faults, list(stage_ranks))
    ax.set_xlabel(say("simulated time ({unit})", unit=unit), fontsize="large")
    ax.tick_params(axis="x", labelsize="medium")
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    kinds = [k for k in ("F", "BW", "B", "W") if schedule.counts()[k]]
    handles = [Patch(color=KIND_COLOURS[k], label=say(KIND_NAMES[k])) for k in kinds]
    handles.append(Patch(facecolor=IDLE, hatch="///", edgecolor="#999999", label=say("idle")))
    for chunk in range(1, v if v > 1 else 0):  # interleaved: later chunks by pattern too
        handles.append(
            Patch(
                facecolor=_shade(KIND_COLOURS["F"], chunk, v),
                hatch=CHUNK_HATCHES[chunk % len(CHUNK_HATCHES)],
                edgecolor="white",
                label=say("model chunk {chunk}", chunk=chunk + 1),
            )
        )
    ax.legend(
        handles=handles,
        loc="lower center",
        bbox_to_anchor=(0.5, 1.0),
        ncol=min(len(handles), 5),
        frameon=False,
        fontsize="medium",
        title=say("numbers: micro-batch (from 1)"),
        title_fontsize="medium",
    )
    fig.suptitle(
        title or _title(schedule, idle, end - start, times),
        fontsize="x-large",
        fontweight="bold",
        wrap=True,
    )
    return fig


def _label_bubble(ax, stretches, schedule, times, measured, width):
    """Name the bubble where it is widest: its measured share of the step, and the closed
    form's fraction (the schedule's own formula, the one the planner uses)."""
    text = say("bubble {percent} idle", percent=f"{measured:.1%}")
    try:
        formula = schedule.formula_bubble_fraction(**(times or {}))
    except ValueError:  # zb-h1 with t_w > min(t_f, t_b): no closed form
        formula = None
    if formula:
        ratio = Fraction(formula).limit_denominator(10 * schedule.stages * schedule.microbatches)
        text += "\n" + say("closed form {ratio}", ratio=f"{ratio.numerator}/{ratio.denominator}")
    if not stretches:
        return
    stage, x, run = max(stretches, key=lambda s: s[2])
    ax.text(
        x + run / 2,
        stage,
        text,
        ha="center",
        va="center",
        fontsize="small",
        zorder=5,
        gid="bubble label",
        bbox={
            "boxstyle": "round,pad=0.25",
            "fc": rcParams["axes.facecolor"],
            "ec": "#999999",
            "alpha": 0.9,
        },
    )


def _mark_phases(ax, spans, start, end, divisor):
    """Warm-up (until the first backward pass starts), steady (forward and backward
    passes interleave) and cool-down (after the last forward pass ends), across the top."""
    backward = [s.start for s in spans if s.op.kind != "F"]
    forward = [s.end for s in spans if s.op.kind == "F"]
    if not backward:
        return
    edges = [start, min(backward), max(max(forward), min(backward)), end]
    for (a, b), name in zip(zip(edges, edges[1:]), ("warm-up", "steady", "cool-down")):
        if b <= a:
            continue
        x0, x1 = (a - start) / divisor, (b - start) / divisor
        ax.annotate(
            "",
            xy=(x0, -0.8),
            xytext=(x1, -0.8),
            arrowprops={"arrowstyle": "<->", "color": "#555555", "lw": 1.2},
        )
        ax.text(
            (x0 + x1) / 2,
            -0.88,
            say(name),
            ha="center",
            va="bottom",
            fontsize="small",
            gid=f"phase {name}",
        )


def _shade_idle(ax, spans, stages, start, end, divisor):
    """Hatched grey over every stretch inside the step where a stage does not compute;
    returns them as ``(stage, x, width)`` in axis units."""
    stretches = []
    for stage in range(stages):
        t = start
        for span in sorted((s for s in spans if s.stage == stage), key=lambda s: s.start):
            if span.start > t:
                stretches.append((stage, (t - start) / divisor, (span.start - t) / divisor))
            t = max(t, span.end)
        if end > t:
            stretches.append((stage, (t - start) / divisor, (end - t) / divisor))
    for stage, x, width in stretches:
        _idle(ax, stage, x, width)
    return stretches


def _idle(ax, stage, x, width):
    ax.add_patch(
        Rectangle(
            (x, stage - 0.4),
            width,
            0.8,
            facecolor=IDLE,
            edgecolor="#999999",
            hatch="///",
            lw=0,
            zorder=2,
            gid=f"idle {stage}",
        )
    )


def _title(schedule, idle, step, times):
    p, m, v = schedule.stages, schedule.microbatches, schedule.virtual
    head = say("{name}: p={p} stages, m={m} micro-batches", name=schedule.name, p=p, m=m)
    head += f", v={v}" if v > 1 else ""
    measured = sum(idle) / len(idle) / step if step > 0 else 0.0
    text = say("{head} · bubble {measured}", head=head, measured=f"{measured:.1%}")
    if times and schedule.name in _FORMULA_TEXT:
        try:
            formula = schedule.formula_bubble_fraction(**times)
        except ValueError:  # zb-h1 with t_w > min(t_f, t_b) has no closed form
            return text
        shape = _FORMULA_TEXT[schedule.name]
        value = f"{formula:.1%}"
        text += (
            say(" (formula {shape} = {value})", shape=shape, value=value)
            if shape
            else say(" (formula {value})", value=value)
        )
    return text
