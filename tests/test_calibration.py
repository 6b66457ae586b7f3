"""collsim's all-reduce on the hardware presets against the figures NVIDIA published.

The large-message end: each preset's busbw within 10 % of the figure NCCL's maintainers
quote (collsim.viz.calibration.PUBLISHED names who said it and where).  The small-message
end: the time of an 8-byte all-reduce is its latency floor -- the closed form's steps · α,
α being the links' latency plus the protocol's -- and its busbw is a tiny fraction of the
large-message one.  Count-only runs: the same schedules and network as with data, sizes
only, so a run at 8 GiB costs what a run at 8 B costs.
"""

import pytest
from matplotlib.figure import Figure

from collsim import Cluster, hardware
from collsim.errors import ConfigError
from collsim.topology import route
from collsim.viz.calibration import (
    CURVES,
    PUBLISHED,
    CurveSpec,
    calibration_figure,
    calibration_sizes,
    latency_floor,
    measure_curve,
)

TOLERANCE = 0.10  # the issue's ±10 %
SMALL = 8  # bytes: two float32, nccl-tests' smallest all-reduce


@pytest.fixture(scope="module")
def curves():
    """Every published curve at 8 B and at the size its figure was read at."""
    return {spec.key: measure_curve(spec, sizes=[SMALL, 8 * 2**30]) for spec in CURVES}


@pytest.mark.parametrize("point", PUBLISHED, ids=lambda p: p.key)
def test_large_message_busbw_is_within_ten_percent_of_the_published_figure(point, curves):
    curve = curves[point.key]
    assert curve.sizes[-1] == point.size
    ratio = curve.busbw_GBps[-1] / point.busbw_GBps
    assert 1 - TOLERANCE <= ratio <= 1 + TOLERANCE, (
        f"{point.key}: collsim {curve.busbw_GBps[-1]:.1f} GB/s, published "
        f"~{point.busbw_GBps:g} GB/s ({point.who}, {point.source}): ratio {ratio:.3f}"
    )


@pytest.mark.parametrize("spec", CURVES, ids=lambda s: s.key)
def test_an_eight_byte_all_reduce_sits_on_its_latency_floor(spec, curves):
    curve = curves[spec.key]
    floor, time = curve.floors[0], curve.times[0]
    assert floor > 0
    # the bytes of 8 B add almost nothing: the time is the steps' latencies, and no more
    # than a small factor of them (what moves still queues behind the latency)
    assert floor <= time * (1 + 1e-9)
    assert time <= 1.5 * floor, f"{spec.key}: {time * 1e6:.2f} µs, floor {floor * 1e6:.2f} µs"
    # and the bus bandwidth there is a thousandth of the large-message one or less
    assert curve.busbw_GBps[0] < curve.busbw_GBps[-1] / 1000


def _one_hop_alpha(graph, protocol):
    path = route(graph, 0, 1)  # GPU -> NVSwitch -> GPU
    return sum(graph.edges[u, v]["latency"] for u, v in path) + (
        0.0 if protocol is None else protocol.latency_for("nvlink")
    )


@pytest.mark.parametrize("preset", ["dgx-a100", "dgx-h100"])
def test_the_one_node_ring_floor_is_the_closed_form_2_k_minus_1_alphas(preset):
    """The ring's 2(K-1) steps, each one NVSwitch hop: α = 2 link latencies + the
    protocol's NVLink latency (NCCL's hwLat, Ring row), summed, and NCCL's base latency
    of the call once (baseLat, Ring row); an oracle apart from latency_floor's reading of
    the trace."""
    graph = hardware.topology(preset)
    out = Cluster(graph).all_reduce(count=2, dtype="float32", algorithm="nccl_ring")
    protocols = {t.tag.protocol.name for t in out.trace.transfers}
    assert protocols == {"ll"}  # one protocol for the whole call: LL at 8 bytes
    k = graph.graph["gpus_per_node"]
    ll = hardware.PROTOCOLS["ll"]
    expected = 6.6e-6 + 2 * (k - 1) * _one_hop_alpha(graph, ll)
    assert out.stats.steps == 2 * (k - 1)
    assert latency_floor(graph, out) == pytest.approx(expected)
    assert out.time == pytest.approx(expected, rel=1e-3)


def test_the_small_message_floor_is_near_nccls_own_model():
    """NCCL's tuner predicts a one-node ring all-reduce in the LL protocol at
    baseLat + 2(K-1)·hwLat = 6.6 + 14 · 0.6 = 15.0 µs on 8 NVLink GPUs (src/graph/
    tuning.cc); collsim's 8-byte time is within a factor 1.5 of it."""
    out = Cluster(hardware.topology("dgx-a100")).all_reduce(count=2, dtype="float32")
    nccl_model = 6.6e-6 + 14 * 0.6e-6
    assert nccl_model / 1.5 <= out.time <= 1.5 * nccl_model, f"{out.time * 1e6:.2f} µs"


def test_the_figure_marks_every_published_point_and_names_its_source(curves):
    fig = calibration_figure([curves[spec.key] for spec in CURVES])
    assert isinstance(fig, Figure)
    bw, small = fig.axes[:2]
    stars = [line for line in bw.get_lines() if line.get_marker() == "*" and len(line.get_xdata())]
    assert sorted(float(s.get_ydata()[0]) for s in stars) == sorted(p.busbw_GBps for p in PUBLISHED)
    text = " ".join(t.get_text() for t in fig.findobj(match=lambda a: hasattr(a, "get_text")))
    for p in PUBLISHED:
        assert p.source in text and p.who.split(" (")[0] in text
    assert small.get_ylabel() == "time (µs)"


def test_a_curve_without_a_published_point_draws_without_stars():
    curve = measure_curve(CurveSpec("pcie-8gpu", algorithm="ring"), sizes=[SMALL, 2**20])
    fig = calibration_figure([curve])
    assert not [
        line
        for line in fig.axes[0].get_lines()
        if line.get_marker() == "*" and len(line.get_xdata())
    ]


@pytest.mark.parametrize("factor, bad", [(1, "1"), (2.5, "2.5"), ("4", "'4'")])
def test_a_bad_factor_is_refused_with_its_value(factor, bad):
    with pytest.raises(ConfigError, match=bad):
        calibration_sizes(8, 1024, factor)


def test_a_bad_dtype_or_preset_is_refused_with_its_value():
    with pytest.raises(ConfigError, match="'float8'"):
        measure_curve(CurveSpec("dgx-a100"), sizes=[8], dtype="float8")
    with pytest.raises(ConfigError, match="dgx-a200"):
        measure_curve(CurveSpec("dgx-a200"), sizes=[8])


def test_nothing_to_draw_is_refused():
    with pytest.raises(ConfigError, match="no curves"):
        calibration_figure([])
