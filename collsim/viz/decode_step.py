"""One decode step of a tensor-parallel run, rank by rank: compute, each all-reduce, idle.

Read from the run's trace, nothing re-timed: a compute span belongs to the step its
:class:`~collsim.parallel.inference.DecodePass` record names; an all-reduce of a rank is
the time from the first to the last transfer it sends or receives in that call (the
transfers' :class:`~collsim.collectives.records.CollectiveTag`); a pipeline hand-off is a
transfer whose record is a :class:`~collsim.parallel.inference.StageHandoff`; the rest of
the step is idle.  The step runs from the previous token to this one.

Examples
--------
>>> import numpy as np, collsim
>>> from collsim.nn import Decoder, DecoderConfig
>>> from collsim.parallel.inference import InferenceSplit, generate_on_cluster
>>> model = Decoder.init(DecoderConfig(vocab=16, hidden=16, heads=2, layers=1))
>>> run = generate_on_cluster(model, np.array([[1, 2]]), 3, InferenceSplit(tp=2),
...                           collsim.Cluster(collsim.topology.switch(2)))
>>> lanes = decode_step_lanes(run, step=3)
>>> [span.kind for span in lanes[0] if span.kind != "idle"]  # attention, g, MLP, g, head
['compute', 'all-reduce', 'compute', 'all-reduce', 'compute']
>>> fig = decode_step_figure(run, step=3)
>>> len([p for p in fig.axes[0].patches if p.get_gid() == "all-reduce"])  # 2 ranks x 2
4
"""

from typing import NamedTuple

from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from ..collectives.records import is_collective
from ..errors import ConfigError
from ..parallel.inference import DecodePass, StageHandoff
from ..units import format_size
from .style import PALETTE, current, say, styled
from .utilization import time_unit

__all__ = ["StepSpan", "decode_step_lanes", "decode_step_figure", "KIND_COLOURS"]

KIND_COLOURS = {
    "compute": PALETTE[0],
    "all-reduce": PALETTE[1],
    "other collective": PALETTE[2],
    "stage hand-off": PALETTE[4],
}
IDLE = "#D9D9D9"


class StepSpan(NamedTuple):
    """What one rank does from ``start`` to ``end`` (simulated seconds) in the step."""

    rank: int
    kind: str  # "compute", "all-reduce", "other collective", "stage hand-off", "idle"
    start: float
    end: float


def _window(run, step):
    """(start, end) of decode step ``step`` (2 .. new_tokens): previous token to this one."""
    times = run.token_times
    if not 2 <= step <= len(times):
        raise ConfigError(
            f"step={step}: a decode step is 2 .. {len(times)} (step 1 is the prefill); "
            f"nearest valid step: {min(max(step, 2), len(times)) if len(times) > 1 else 'none'}"
        )
    return times[step - 2], times[step - 1]


def decode_step_lanes(run, step=None):
    """Each rank's :class:`StepSpan` s through decode ``step`` (default: the last), in time
    order, idle gaps included: a tuple per rank of the run."""
    step = len(run.token_times) if step is None else step
    start, end = _window(run, step)
    trace = run.result.trace
    ranks = len(run.outputs)
    busy = {r: [] for r in range(ranks)}
    for c in trace.computes:
        if isinstance(c.meta, DecodePass) and c.meta.step == step and c.rank in busy:
            busy[c.rank].append(StepSpan(c.rank, "compute", c.start, c.end))
    calls = {}
    for n, t in enumerate(trace.transfers):
        if not (start <= t.start and t.end <= end):
            continue
        if is_collective(t.tag):
            kind = "all-reduce" if t.tag.collective == "all_reduce" else "other collective"
            key = (kind, t.tag.group, t.tag.call)
        elif isinstance(t.meta, StageHandoff):
            key = ("stage hand-off", n, None)  # each message its own span
        else:
            continue
        for rank in (t.src, t.dst):
            first, last = calls.get((rank, key), (t.start, t.end))
            calls[(rank, key)] = (min(first, t.start), max(last, t.end))
    for (rank, (kind, _, _)), (first, last) in calls.items():
        if rank in busy:
            busy[rank].append(StepSpan(rank, kind, first, last))
    return tuple(_with_idle(r, sorted(busy[r], key=lambda s: s.start), start, end) for r in busy)


def _with_idle(rank, spans, start, end):
    """``spans`` with the gaps between them (and the step's ends) as idle spans."""
    out, now = [], start
    for span in spans:
        if span.start > now:
            out.append(StepSpan(rank, "idle", now, span.start))
        out.append(span)
        now = max(now, span.end)
    if end > now:
        out.append(StepSpan(rank, "idle", now, end))
    return tuple(out)


@styled
def decode_step_figure(run, step=None, title=None):
    """Ranks x simulated time through one decode step of ``run`` (an InferenceRun);
    returns a Figure.  The title gives the step's time and the all-reduces' share of it."""
    lanes = decode_step_lanes(run, step)
    step = len(run.token_times) if step is None else step
    start, end = _window(run, step)
    divisor, unit = time_unit(end - start)
    fig = Figure(figsize=current().size((11.0, 1.9 + 0.45 * len(lanes))), layout="constrained")
    ax = fig.subplots()
    shown = []
    for y, lane in enumerate(lanes):
        for span in lane:
            colour = IDLE if span.kind == "idle" else KIND_COLOURS[span.kind]
            x0, width = (span.start - start) / divisor, (span.end - span.start) / divisor
            bar = Rectangle(
                (x0, y - 0.38),
                width,
                0.76,
                facecolor=colour,
                edgecolor="white" if span.kind != "idle" else "none",
                linewidth=0.6,
                hatch="//" if span.kind == "idle" else None,
                gid=span.kind,
            )
            ax.add_patch(bar)
            shown += [span.kind] if span.kind not in shown else []
    ax.set_xlim(0, (end - start) / divisor)
    ax.set_ylim(len(lanes) - 0.5, -0.5)
    ax.set_yticks(range(len(lanes)), [say("rank {rank}", rank=r) for r in range(len(lanes))])
    ax.set_xlabel(say("simulated time ({unit})", unit=unit))
    order = [k for k in ("compute", "all-reduce", "other collective", "stage hand-off", "idle")]
    handles = [
        Patch(
            facecolor=IDLE if k == "idle" else KIND_COLOURS[k],
            hatch="//" if k == "idle" else None,
            label=say(k),
        )
        for k in order
        if k in shown
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=len(handles))
    fig.suptitle(title or _title(run, lanes, step, start, end, divisor, unit))
    return fig


def _title(run, lanes, step, start, end, divisor, unit):
    reduces = [s for s in lanes[0] if s.kind == "all-reduce"]
    share = sum(s.end - s.start for s in reduces) / (end - start)
    size = next((c.message_bytes for c in run.all_reduces if start <= c.start), 0)
    return say(
        "Decode step {step}: {time} {unit}; rank 0 spends {share} in {calls} all-reduces of {size}",
        step=step,
        time=f"{(end - start) / divisor:.3g}",
        unit=unit,
        share=f"{share:.0%}",
        calls=len(reduces),
        size=format_size(size),
    )
