"""The memory-timeline picture: one row per rank, stacked by category, read from the run.

The stacked layers are checked against the tracker's own timeline (memory_timeline), the
collectives strip against the trace's CollectiveStep transfers, and the bytes of the
saved SVG against a second run's.
"""

import io

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from collsim import Cluster, topology
from collsim.errors import ConfigError
from collsim.network.trace import Trace
from collsim.runtime.memory import CATEGORIES, MemoryEvent, memory_peaks, memory_timeline
from collsim.viz.memory_timeline import (
    MAX_ROWS,
    STACK_ORDER,
    memory_timeline_figure,
    peak_in,
    transient_peaks,
)
from collsim.viz.output import save_figure

SHARD = 256


def sharded_step(rank):
    """A ZeRO-3-like step: a gathered unit around a forward, a full gradient that is
    reduce-scattered to a shard (allocated before the unit is freed: an instant peak);
    rank 1 keeps more activations, so the ranks differ."""
    n = rank.size
    rank.alloc("params", "bf16 shard", SHARD)
    rank.alloc("optimizer", "fp32 master, m, v", 3 * SHARD)
    unit = rank.alloc("gathered_params", "unit 1", n * SHARD)
    yield from rank.all_gather(np.ones(SHARD))
    yield rank.compute(seconds=5e-6)
    acts = rank.alloc("activations", "unit 1 input", 100 * (rank.id + 1))
    yield rank.compute(seconds=5e-6)
    full = rank.alloc("grads", "full grad", n * SHARD)
    rank.free(unit)
    rank.free(acts)
    yield from rank.reduce_scatter(np.ones(n * SHARD))
    rank.free(full)
    rank.alloc("grads", "grad shard", SHARD)
    yield rank.compute(seconds=2e-6)


def run(n=3, program=sharded_step):
    return Cluster(topology.switch(n, bandwidth="1GB/s", latency="1us")).run(program)


def _top_line(ax, rank, category):
    (line,) = [ln for ln in ax.lines if ln.get_gid() == f"rank {rank} top of {category}"]
    return [float(v) for v in line.get_ydata()]


def test_returns_a_figure_with_one_axes_per_rank():
    fig = memory_timeline_figure(run(3))
    assert isinstance(fig, Figure)
    assert [ax.get_ylabel() for ax in fig.axes] == ["rank 0", "rank 1", "rank 2"]
    assert fig.axes[-1].get_xlabel() == "simulated time (µs)"
    assert "busiest: rank 2" in fig.get_suptitle()
    assert len(memory_timeline_figure(run(3), ranks=[2, 0]).axes) == 2


def test_stacked_layers_sum_to_the_trackers_totals_at_event_times():
    result = run(3)
    fig = memory_timeline_figure(result)
    for ax, rank in zip(fig.axes, range(3)):
        points = memory_timeline(result.trace, rank)
        shown = [c for c in STACK_ORDER if any(p.by_category[c] for p in points)]
        assert shown == ["params", "optimizer", "grads", "activations", "gathered_params"]
        # the state before the first event is empty; the last one lasts to the run's end
        assert _top_line(ax, rank, shown[-1]) == [0] + [p.total for p in points] + [
            points[-1].total
        ]
        below = [0.0] * (len(points) + 2)
        for c in shown:  # each layer is its category's bytes, stacked in STACK_ORDER
            top = _top_line(ax, rank, c)
            heights = [t - b for t, b in zip(top, below)]
            assert heights[1:-1] == [p.by_category[c] for p in points]
            below = top
        fills = [coll.get_gid() for coll in ax.collections if coll.get_gid()]
        assert [f"rank {rank} {c}" for c in shown] == [f for f in fills if "instants" not in f]


def test_each_peak_is_marked_at_the_trackers_peak():
    result = run(3)
    fig = memory_timeline_figure(result)
    peaks = memory_peaks(result.trace, 3)
    for ax, peak in zip(fig.axes, peaks):
        (marker,) = [ln for ln in ax.lines if ln.get_gid() == f"peak {peak.rank}"]
        assert float(marker.get_ydata()[0]) == peak.total
        assert f"peak {peak.total / 1024:.4g} KiB" in [t.get_text() for t in ax.texts]


def test_the_instant_peak_is_drawn():
    """The full gradient is allocated before the unit and the activations are freed, at
    the same time: a state that lasts no time, drawn as a spike up to the peak."""
    result = run(3)
    points = memory_timeline(result.trace, 0)
    (instant,) = transient_peaks(points)
    assert instant[2] == memory_peaks(result.trace, 3)[0].total > instant[1]
    ax = memory_timeline_figure(result).axes[0]
    assert [c.get_gid() for c in ax.collections].count("rank 0 instants") == 1


def test_collectives_are_marked_on_every_rank_they_ran_on():
    fig = memory_timeline_figure(run(3))
    for ax in fig.axes:
        marks = [p.get_gid() for p in ax.patches if str(p.get_gid()).startswith("collective")]
        assert marks == ["collective all_gather", "collective reduce_scatter"]
    for ax in fig.axes:  # one lane per collective: overlapping calls never hide each other
        lanes = {p.get_gid(): p.get_y() for p in ax.patches if str(p.get_gid()).startswith("c")}
        assert lanes["collective all_gather"] > lanes["collective reduce_scatter"]
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "all-gather (top strip)" in legend and "reduce-scatter (top strip)" in legend


def test_y_ticks_are_binary_units():
    ax = memory_timeline_figure(run(2)).axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[0] == "0 B" and all(label.endswith(" KiB") for label in labels[1:])


def test_more_than_eight_ranks_is_refused_with_the_limit():
    def program(rank):
        rank.alloc("params", "w", 4)
        yield rank.compute(seconds=1e-6)

    result = run(MAX_ROWS + 1, program)
    with pytest.raises(ConfigError, match=f"9 ranks allocated.*up to {MAX_ROWS} rows"):
        memory_timeline_figure(result)
    with pytest.raises(ConfigError, match=f"1 to {MAX_ROWS} ranks"):
        memory_timeline_figure(result, ranks=range(9))
    assert len(memory_timeline_figure(result, ranks=range(8)).axes) == 8


@pytest.mark.parametrize(
    "ranks, bad",
    [
        ([0, 0], "each rank once"),
        ([-1], "-1"),
        (["0"], "'0'"),
        ([True], "True"),
        ([], "1 to 8"),
        (3, "3"),
    ],
)
def test_bad_ranks_are_refused(ranks, bad):
    with pytest.raises(ConfigError, match=bad):
        memory_timeline_figure(run(2), ranks=ranks)


def test_a_trace_without_memory_is_refused():
    with pytest.raises(ConfigError, match="rank.alloc"):
        memory_timeline_figure(Trace())
    with pytest.raises(ConfigError, match="trace"):
        memory_timeline_figure(42)


def test_a_run_with_memory_only_at_time_zero_still_draws():
    trace = Trace()
    trace.add_memory(MemoryEvent(0, 0.0, "params", "w", 3 * 2**20))
    ax = memory_timeline_figure(trace, title="t").axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()][-1].endswith("MiB")


def test_svg_bytes_are_the_same_every_run():
    first, second = io.BytesIO(), io.BytesIO()
    save_figure(memory_timeline_figure(run(3)), first, "svg")
    save_figure(memory_timeline_figure(run(3)), second, "svg")
    assert first.getvalue() == second.getvalue() and len(first.getvalue()) > 10_000


def test_the_stack_order_holds_every_category_once():
    assert sorted(STACK_ORDER) == sorted(CATEGORIES)


@pytest.mark.parametrize("n", [1, 3, MAX_ROWS])
def test_legend_and_labels_stay_inside_the_figure(n):
    """Nothing a student reads is cut off at the figure's edge (the legend once was)."""
    fig = memory_timeline_figure(run(n))
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    box = fig.bbox
    texts = [fig.legends[0], fig._suptitle] + [ax.yaxis.label for ax in fig.axes]
    texts += [t for ax in fig.axes for t in ax.texts]
    for artist in texts:
        extent = artist.get_window_extent(renderer)
        assert box.x0 <= extent.x0 and extent.x1 <= box.x1, artist
        assert box.y0 <= extent.y0 and extent.y1 <= box.y1, artist


def test_peak_in_the_whole_run_is_the_trackers_peak_and_a_window_has_its_own():
    result = run(3)
    peaks = memory_peaks(result.trace, 3)
    for rank in range(3):
        points = memory_timeline(result.trace, rank)
        assert peak_in(points, 0.0, result.time) == (peaks[rank].time, peaks[rank].total)
    points = memory_timeline(result.trace, 0)
    last = points[-1]
    # after the last event: the state then in force, marked at the window's start
    assert peak_in(points, last.time + 1e-6, last.time + 2e-6) == (last.time + 1e-6, last.total)
    assert peak_in(points, 0.0, 0.0) == (0.0, max(p.total for p in points if p.time == 0))
    assert peak_in([], 0.0, 1.0) is None


def test_a_window_zooms_in_on_simulated_time():
    result = run(3)
    peak = memory_peaks(result.trace, 3)[0]
    fig = memory_timeline_figure(result, window=("19us", 25e-6))
    ax = fig.axes[0]
    assert ax.get_xlim() == pytest.approx((19, 25))
    (marker,) = [ln for ln in ax.lines if ln.get_gid() == "peak 0"]
    assert float(marker.get_xdata()[0]) == pytest.approx(19)  # the state held at 19 us
    assert float(marker.get_ydata()[0]) < peak.total  # the run's peak came before


@pytest.mark.parametrize(
    "window, bad",
    [
        (("2us", "1us"), "start < end"),
        ((-1, 1), ">= 0"),
        (("x", "1us"), "'x'"),
        ((0, float("inf")), "finite"),
        ((0, 1, 2), "(start, end)"),
        ("1us", "(start, end)"),
        (5, "(start, end)"),
    ],
)
def test_bad_windows_are_refused(window, bad):
    with pytest.raises(ConfigError) as info:
        memory_timeline_figure(run(2), window=window)
    assert bad in str(info.value) and "window=" in str(info.value)
