"""Pictures a student can read on a slide (issue 11, item 19): numbers contrast with their
cells, labels do not sit on bars, coinciding lines stay apart, latency is drawn apart from
bandwidth use, and a ring too large to read is refused with the limit named."""

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_rgba

import collsim
from collsim import cli
from collsim.errors import ConfigError
from collsim.viz.ink import contrast
from collsim.viz.limits import MAX_RING_RANKS
from collsim.viz.memory import memory_figure
from collsim.viz.ring import ring_animation, ring_figure
from collsim.viz.sweep import ALGORITHM_STYLES, Sweep, sweep_figure
from collsim.viz.utilization import latency_intervals, utilization, utilization_figure

T = collsim.topology
WCAG_SMALL_TEXT = 4.5  # the contrast ratio WCAG 2 asks of small text


def all_reduce(g, count=64, algorithm="ring"):
    return collsim.Cluster(g).all_reduce(count=count, dtype="float32", algorithm=algorithm)


@pytest.mark.parametrize("k", [3, 5, 8])  # above 8 the cells are too small for digits
def test_every_number_on_a_buffer_cell_has_readable_contrast(k):
    result = all_reduce(T.ring(k), count=16 * k)
    n = result.schedule.n_steps
    for step in (0, k - 1, n):  # pale (start), half-reduced, every cell full (darkest)
        ax = ring_figure(result, step=step).axes[0]
        cells = {p.get_gid()[5:]: p.get_facecolor() for p in ax.patches if "cell" in p.get_gid()}
        numbers = [t for t in ax.texts if (t.get_gid() or "").startswith("count")]
        assert numbers, "the cells carry their counts"
        for text in numbers:
            fill = cells[text.get_gid()[6:]]
            ratio = contrast(to_rgba(text.get_color()), fill)
            assert ratio >= WCAG_SMALL_TEXT, (k, step, text.get_gid(), text.get_text(), ratio)


def extent(artist, renderer):
    return artist.get_window_extent(renderer)


@pytest.mark.parametrize("params", ["1B", "7B"])  # the line above the bars, and across them
def test_gpu_memory_label_touches_no_bar_and_no_other_label(params):
    fig = memory_figure(params=params, layers=32, hidden=4096, heads=32, world_size=8)
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    axes = [a for ax in fig.axes for a in (ax, *ax.child_axes)]  # + the right-hand axis
    texts = [t for a in axes for t in [*a.texts, *a.get_yticklabels()]]
    (label,) = [t for t in texts if "GPU memory" in t.get_text()]
    box = extent(label, renderer)
    ax = fig.axes[0]
    for bar in ax.patches:
        assert not box.overlaps(extent(bar, renderer)), bar
    for other in ax.texts + [t for leg in fig.legends for t in leg.get_texts()]:
        if other is not label and other.get_text():
            assert not box.overlaps(extent(other, renderer)), other.get_text()
    # and the legend covers no bar either
    legend = fig.legends[0].get_window_extent(renderer)
    assert not any(legend.overlaps(extent(bar, renderer)) for bar in ax.patches)


def test_sweep_lines_differ_in_style_and_marker_not_only_colour():
    # ring and naive take the same time at small sizes: the ring line must show through
    sizes = [2**k for k in range(3, 12)]
    same = [1e-4] * len(sizes)
    data = Sweep("all_reduce", 8, sizes, {"ring": same, "naive": same}, "count-only", "ring(8)")
    fig = sweep_figure(None, data=data)
    lines = {ln.get_label(): ln for ln in fig.axes[0].lines[:2]}
    ring, naive = lines["ring"], lines["naive"]
    assert ring.get_linestyle() != naive.get_linestyle()
    assert ring.get_marker() != naive.get_marker()
    assert ring.get_linewidth() > naive.get_linewidth()  # the one beneath is wider
    assert naive.get_markerfacecolor() == "white"  # hollow, so the ring marker shows
    styles = {(s["ls"], s["marker"]) for s in ALGORITHM_STYLES.values()}
    assert len(styles) == len(ALGORITHM_STYLES)


def test_utilization_separates_latency_from_bandwidth_use():
    g = T.ring(4, "100GB/s", "5us")
    result = all_reduce(g, count=16)  # 64 B: latency-bound, 6 steps of 5 us wait each
    waits = latency_intervals(g, result.trace)
    for link in g.edges:
        spans = waits[link]
        assert len(spans) == 6
        assert all(b - a == pytest.approx(5e-6) for a, b in spans)
    edges, links, share = utilization(g, result.trace, bins=400)
    centres = (edges[:-1] + edges[1:]) / 2
    row = links.index((0, 1))
    inside = np.zeros_like(centres, dtype=bool)
    for a, b in waits[(0, 1)]:
        inside |= (centres > a + (edges[1] - edges[0])) & (centres < b - (edges[1] - edges[0]))
    assert inside.any() and share[row, inside].max() == 0  # no bytes while waiting out α
    carried = result.trace.stats(4).link_bytes[(0, 1)]
    total = share[row].sum() * g.edges[(0, 1)]["bandwidth"] * (edges[1] - edges[0])
    assert total == pytest.approx(carried, rel=1e-9)  # every byte still drawn, after α
    fig = utilization_figure(g, result, bins=400)
    hatched = [c for c in fig.axes[0].collections if (c.get_gid() or "").startswith("latency")]
    assert len(hatched) == len(links) and all(c.get_hatch() for c in hatched)
    assert "latency" in fig.legends[0].get_texts()[0].get_text()


def test_a_ring_above_the_limit_is_refused_with_the_limit_named(tmp_path, capsys):
    big = all_reduce(T.ring(MAX_RING_RANKS + 1))
    with pytest.raises(ConfigError, match=f"17 ranks: .* up to {MAX_RING_RANKS} ranks"):
        ring_figure(big)
    with pytest.raises(ConfigError, match="up to 16 ranks"):
        ring_animation(big, tmp_path / "big.gif")
    assert ring_figure(all_reduce(T.ring(MAX_RING_RANKS))).axes  # 16 still draws
    out = tmp_path / "r.png"
    assert cli.main(["viz", "ring", "--ranks", "17", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--ranks 17" in err and "--ranks 16 or fewer" in err and not out.exists()
