"""Memory over simulated time: one row per rank, stacked by category, collectives marked.

Read from the run's memory events (``trace.memory``, what ``rank.alloc`` and ``rank.free``
recorded; :mod:`collsim.runtime.memory`), never computed on the side: each row is what
one rank holds, a step after each event, stacked by the categories the ZeRO paper
(Rajbhandari et al. 2020) divides it into: the steady model states at the bottom
(parameters, optimizer state), then what comes and goes (gradients, activations saved
for backward, a ZeRO-3 / FSDP unit's gathered parameters, communication buffers).  Each
rank's peak is marked and labelled; a state that lasted no time (a block allocated just
before another is freed) is drawn as a thin spike up to it.  The strip along the top of
each row shows when the rank's collectives ran (the transfers whose tag is a
:class:`~collsim.collectives.records.CollectiveStep`), coloured by collective, so that an
all-gather can be seen to come just before the memory it brings.

Examples
--------
>>> import numpy as np, collsim
>>> def program(rank):
...     rank.alloc("params", "shard", 1024)
...     gathered = rank.alloc("gathered_params", "unit 1", 2048)
...     yield from rank.all_gather(np.ones(1024))
...     yield rank.compute("2us")
...     rank.free(gathered)
>>> result = collsim.Cluster(collsim.topology.switch(2)).run(program)
>>> fig = memory_timeline_figure(result)
>>> [ax.get_ylabel() for ax in fig.axes]
['rank 0', 'rank 1']
>>> fig.axes[0].get_yticklabels()[1].get_text()
'2 KiB'
"""

from matplotlib import rcParams
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import MaxNLocator

from ..errors import ConfigError
from ..network.memory import memory_peaks, memory_timeline
from ..units import format_size, format_time, parse_time
from .memory_stack import (
    STACK_ORDER,
    collective_calls,
    end_of_run,
    peak_in,
    stacked_layers,
    transient_peaks,
)
from .style import CATEGORY_COLOURS, current, say, styled, themed
from .times import time_unit

__all__ = [
    "memory_timeline_figure",
    "stacked_layers",
    "transient_peaks",
    "peak_in",
    "STACK_ORDER",
    "CATEGORY_STYLE",
    "COLLECTIVE_COLOURS",
    "MAX_ROWS",
]

MAX_ROWS = 8  # one row per rank: past 8 rows each is too thin to read its layers

# category -> (legend label, colour): the model states in the memory_figure colours
# (collsim.viz.memory), then what a schedule holds for a while
CATEGORY_STYLE = {
    "params": ("parameters (bf16)", CATEGORY_COLOURS["params"]),
    "grads": ("gradients (bf16)", CATEGORY_COLOURS["grads"]),
    "optimizer": ("optimizer (fp32 master, Adam m, v)", CATEGORY_COLOURS["optimizer"]),
    "activations": ("activations (saved for backward)", CATEGORY_COLOURS["activations"]),
    "gathered_params": ("gathered parameters (FSDP unit)", CATEGORY_COLOURS["gathered_params"]),
    "comm_buffers": ("communication buffers", CATEGORY_COLOURS["comm_buffers"]),
}
COLLECTIVE_COLOURS = {
    "all_gather": "#000000",  # black, yellow and dark violet: apart from the categories
    "reduce_scatter": "#F0E442",  # and from each other under deuteranopia and protanopia
    "all_reduce": "#5E3C99",
}
OTHER_COLLECTIVE = "#7F7F7F"
STRIP = (0.82, 0.98)  # the collectives' strip, in axes height (above the headroom)
HEADROOM = 1.45  # y limit over the largest peak: room for the peak label and the strip


@styled
def memory_timeline_figure(source, ranks=None, title=None, window=None):
    """Each rank's memory over simulated time, stacked by category; returns a Figure.

    Parameters
    ----------
    source : RunResult or Trace
        A run whose programs registered their arrays with ``rank.alloc`` / ``rank.free``.
    ranks : sequence of int, optional
        The ranks to draw, one row each, at most :data:`MAX_ROWS` (default: every rank
        that allocated).
    title : str, optional
        The figure's title (default: the busiest rank and its peak).
    window : (start, end), optional
        The stretch of simulated time to draw, in seconds or as time strings
        (``("1ms", "1.3ms")``); default the whole run.  Each row marks its peak inside it.
    """
    trace = getattr(source, "trace", source)
    if not hasattr(trace, "memory"):
        raise ConfigError(f"memory_timeline_figure({source!r}): give a run's result or its trace")
    if not trace.memory:
        raise ConfigError(
            "the trace records no memory: register each array with rank.alloc(category, "
            "name, elements) and release it with rank.free(block) in the rank program"
        )
    ranks = _check_ranks(trace, ranks)
    size = max(max(e.rank for e in trace.memory), max(ranks)) + 1
    peaks = memory_peaks(trace, size)
    start, end = _check_window(window, end_of_run(trace))
    divisor, unit = time_unit(end)
    top = max(peaks[r].total for r in ranks) or 1
    shown = [c for c in STACK_ORDER if any(peaks[r].by_category[c] for r in ranks)]
    calls = collective_calls(trace)
    lanes = sorted({name for spans in calls.values() for name, _, _ in spans})

    # constrained layout: title, legend and labels take the room they need in any look
    fig = Figure(figsize=current().size((12.0, 2.8 + 1.9 * len(ranks))), layout="constrained")
    axes = fig.subplots(len(ranks), 1, sharex=True, sharey=True, squeeze=False)[:, 0]
    for ax, rank in zip(axes, ranks):
        points = memory_timeline(trace, rank)
        _draw_rank(ax, rank, points, max(end, end_of_run(trace)), divisor, shown)
        _mark_collectives(ax, calls.get(rank, ()), lanes, divisor)
        _mark_peak(ax, rank, peak_in(points, start, end), start, end, divisor)
        ax.set_ylabel(
            say("rank {rank}", rank=rank),
            fontsize="large",
            fontweight="bold",
            rotation=0,
            ha="right",
            va="center",
            labelpad=8,
        )
    _binary_ticks(axes[0], top)
    axes[0].set_xlim(start / divisor, end / divisor)
    axes[-1].set_xlabel(say("simulated time ({unit})", unit=unit), fontsize="large")
    fig.supylabel(say("memory held (binary units)"), fontsize="medium")
    spikes = any(ax.get_gid() == "has instants" for ax in axes)
    _legend(fig, shown, lanes, spikes)
    if title is None:
        heaviest = max((peaks[r] for r in ranks), key=lambda p: (p.total, -p.rank))
        title = say(
            "Memory per rank over simulated time · busiest: rank {rank}, peak {size}",
            rank=heaviest.rank,
            size=format_size(heaviest.total),
        )
    fig.suptitle(title, fontsize="x-large", fontweight="bold")
    return fig


def _check_ranks(trace, ranks):
    allocated = sorted({e.rank for e in trace.memory})
    if ranks is None:
        ranks = allocated
        if len(ranks) > MAX_ROWS:
            raise ConfigError(
                f"{len(ranks)} ranks allocated memory: the memory timeline stays readable up "
                f"to {MAX_ROWS} rows; pick the ranks to draw, e.g. ranks={ranks[:MAX_ROWS]}"
            )
        return ranks
    try:
        ranks = list(ranks)
    except TypeError:
        raise ConfigError(f"ranks={ranks!r}: give a list of rank ids, e.g. [0, 1]") from None
    for r in ranks:
        if isinstance(r, bool) or not isinstance(r, int) or r < 0:
            raise ConfigError(f"ranks: {r!r} is not a rank id (a whole number >= 0)")
    if not ranks or len(ranks) > MAX_ROWS:
        raise ConfigError(
            f"ranks={ranks!r}: give 1 to {MAX_ROWS} ranks, one row each (the memory "
            f"timeline stays readable up to {MAX_ROWS} rows)"
        )
    if len(set(ranks)) != len(ranks):
        raise ConfigError(f"ranks={ranks!r}: each rank once")
    return ranks


def _check_window(window, run_end):
    """``(start, end)`` seconds of the stretch to draw: the whole run by default."""
    if window is None:
        return 0.0, run_end
    if isinstance(window, str) or not hasattr(window, "__len__") or len(window) != 2:
        raise ConfigError(f"window={window!r}: give (start, end), e.g. (0, '1ms')")
    try:
        start, end = (parse_time(t) for t in window)
    except ConfigError as exc:
        raise ConfigError(f"window={window!r}: {exc}") from None
    if not (0 <= start < end < float("inf")):
        raise ConfigError(
            f"window={window!r}: needs 0 <= start < end, finite (the run lasts "
            f"{format_time(run_end)})"
        )
    return start, end


def _draw_rank(ax, rank, points, end, divisor, shown):
    times, layers = stacked_layers(points, end)
    x = [t / divisor for t in times]
    below = [0] * len(x)
    for c in STACK_ORDER:
        top = layers[c]
        if c in shown:
            label, colour = CATEGORY_STYLE[c]
            ax.fill_between(
                x,
                below,
                top,
                step="post",
                color=colour,
                linewidth=0,
                zorder=2,
                gid=f"rank {rank} {c}",
            )
            # the layer's top edge, white: separates the layers; its data are the stack
            ax.plot(
                x,
                top,
                drawstyle="steps-post",
                color="white",
                linewidth=0.6,
                zorder=3,
                gid=f"rank {rank} top of {c}",
            )
        below = top
    instants = transient_peaks(points)
    if instants:  # states that lasted no time: allocated before a free at the same moment
        ax.vlines(
            [t / divisor for t, _, _ in instants],
            [low for _, low, _ in instants],
            [high for _, _, high in instants],
            color=themed("black"),
            linewidth=1.4,
            zorder=4,
            gid=f"rank {rank} instants",
        )
        ax.set_gid("has instants")
    ax.grid(axis="y", alpha=0.3, zorder=0)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.tick_params(labelsize="medium")


def _mark_collectives(ax, spans, lanes, divisor):
    """Each collective call as a bar in the strip, one lane per collective, so that an
    all-gather prefetched while a reduce-scatter runs shows as two overlapping bars."""
    transform = ax.get_xaxis_transform()  # x in data, y in axes height
    low, high = STRIP
    lane = (high - low) / max(len(lanes), 1)
    for name, start, end in spans:
        colour = themed(COLLECTIVE_COLOURS.get(name, OTHER_COLLECTIVE))
        bottom = high - (lanes.index(name) + 1) * lane
        ax.add_patch(
            Rectangle(
                (start / divisor, bottom),
                max(end - start, 0) / divisor,
                lane,
                transform=transform,
                facecolor=colour,
                edgecolor=colour,
                linewidth=0.8,
                zorder=4,
                gid=f"collective {name}",
            )
        )
        # a faint band down the row: what the memory did while it ran
        ax.axvspan(
            start / divisor,
            end / divisor,
            ymax=low,
            color=colour,
            alpha=0.07,
            linewidth=0,
            zorder=1,
        )


def _mark_peak(ax, rank, peak, start, end, divisor):
    if peak is None:
        return
    time, total = peak
    x = time / divisor
    ax.plot(
        [x],
        [total],
        marker="v",
        color=themed("black"),
        markersize=7,
        zorder=5,
        gid=f"peak {rank}",
    )
    right = time > start + 0.7 * (end - start)  # near the right edge: label to the left
    ax.annotate(
        say("peak {size}", size=format_size(total)),
        (x, total),
        xytext=(-6 if right else 6, 4),
        textcoords="offset points",
        ha="right" if right else "left",
        va="bottom",
        fontsize="medium",
        fontweight="bold",
        zorder=6,
        bbox=dict(
            boxstyle="round,pad=0.15",
            facecolor=rcParams["axes.facecolor"],
            edgecolor="none",
            alpha=0.85,
        ),
    )


def _binary_ticks(ax, top):
    """Ticks at round numbers of one binary unit (KiB, MiB, GiB), labelled with it."""
    unit = 1
    while unit * 1024 <= top and unit < 2**40:
        unit *= 1024
    ticks = MaxNLocator(nbins=4, steps=[1, 2, 2.5, 5, 10]).tick_values(0, top / unit)
    ticks = [t * unit for t in ticks if 0 <= t * unit <= top * 1.05]
    ax.set_yticks(ticks, [format_size(t) for t in ticks])
    ax.set_ylim(0, top * HEADROOM)


def _legend(fig, shown, collectives, spikes):
    handles = [Patch(color=CATEGORY_STYLE[c][1], label=say(CATEGORY_STYLE[c][0])) for c in shown]
    handles += [
        Patch(
            color=themed(COLLECTIVE_COLOURS.get(n, OTHER_COLLECTIVE)),
            label=say("{collective} (top strip)", collective=n.replace("_", "-")),
        )
        for n in collectives
    ]
    if spikes:
        handles.append(
            Line2D(
                [],
                [],
                color=themed("black"),
                linewidth=1.4,
                label=say("held for an instant (alloc before free)"),
            )
        )
    fig.legend(
        handles=handles,
        loc="outside lower center",  # under the time axis: the title keeps the top
        ncol=min(len(handles), 3),
        frameon=False,
        fontsize="medium",
        columnspacing=1.2,  # three columns of these labels fit a slide and a 12-inch figure
        handlelength=1.5,
    )
