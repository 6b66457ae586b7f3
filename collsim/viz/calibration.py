"""Calibration: collsim's all-reduce on the hardware presets next to NVIDIA's own figures.

The NCCL maintainers have published what ``all_reduce_perf`` (nccl-tests) reaches on the
machines of :mod:`collsim.hardware`; :data:`PUBLISHED` holds those figures with who said
them and where (:mod:`collsim.viz.nccl_published`).  :func:`measure_curve` runs collsim's
count-only all-reduce over a range of sizes on one preset (the same schedules and network
as with data, sizes only, so a sweep to 8 GiB takes seconds), and
:func:`calibration_figure` draws the curves with the published points on them: bus
bandwidth against size (the large-message end, where the figures were measured) and time
at small sizes, where every curve sits on its latency floor, the sum of its steps'
latencies (:func:`latency_floor`).

``benchmarks/calibration.py`` prints the table and writes ``docs/calibration.png``;
``tests/test_calibration.py`` holds each preset to within 10 % of its figure.

Examples
--------
>>> [p.busbw_GBps for p in PUBLISHED]
[230.0, 370.0, 480.0, 192.0]
>>> curve = measure_curve(CurveSpec("dgx-a100", algorithm="ring"), sizes=[8, 2**30])
>>> round(curve.busbw_GBps[1]), curve.busbw_GBps[0] < 0.01
(238, True)
>>> fig = calibration_figure([curve])
>>> fig.axes[0].get_ylabel(), fig.axes[1].get_ylabel()
('bus bandwidth (GB/s)', 'time (µs)')
"""

import math
from dataclasses import dataclass

from matplotlib import rcParams
from matplotlib.figure import Figure

from .. import hardware
from ..collectives.executor import DTYPE_BYTES
from ..collectives.formulas import bus_factor
from ..collectives.records import is_collective
from ..errors import ConfigError
from ..runtime.cluster import Cluster
from ..topology import route
from ..units import format_size
from .nccl_published import (
    NCCL_RING_FLOOR,
    NCCL_RING_FLOOR_SOURCE,
    PUBLISHED,
    GiB,
    Published,
    curve_key,
)
from .style import current, styled
from .sweep import size_axis

__all__ = [
    "Published",
    "PUBLISHED",
    "CurveSpec",
    "CURVES",
    "Curve",
    "measure_curve",
    "latency_floor",
    "calibration_sizes",
    "calibration_figure",
    "published_for",
    "SMALL_MAX",
    "NCCL_RING_FLOOR",
]

SMALL_MAX = 64 * 2**10  # the latency panel shows sizes up to 64 KiB


@dataclass(frozen=True)
class CurveSpec:
    """One line of the picture: an all-reduce on ``nodes`` x ``preset`` with ``algorithm``
    (``None``: the preset's default, ``auto``)."""

    preset: str
    nodes: int = 1
    algorithm: str | None = None

    @property
    def key(self):
        """``"dgx-h100/nvls"``, ``"dgx-a100x2"``, as :attr:`Published.key`."""
        return curve_key(self.preset, self.nodes, self.algorithm)


# the four lines of docs/calibration.png, one per published figure
CURVES = tuple(CurveSpec(p.preset, p.nodes, p.algorithm) for p in PUBLISHED)
COLOURS = ("#4C72B0", "#DD8452", "#C44E52", "#55A868")
MARKERS = ("o", "s", "^", "D")


@dataclass
class Curve:
    """What :func:`measure_curve` measured: ``times[i]`` seconds for ``sizes[i]`` bytes;
    ``chosen[i]`` is what ran there (``"nccl_ring/ll"``: algorithm / protocol) and
    ``floors[i]`` the sum of its steps' latencies (:func:`latency_floor`), of which
    ``launches[i]`` is NCCL's base latency of the call (its first step carries it)."""

    spec: CurveSpec
    ranks: int
    sizes: list
    times: list
    chosen: list
    steps: list
    floors: list
    launches: list = None  # seconds; None: none measured

    @property
    def busbw_GBps(self):
        """busbw = S/t · 2(K-1)/K in GB/s at each size (``nan`` where t is 0)."""
        factor = bus_factor("all_reduce", self.ranks)
        return [s / t * factor / 1e9 if t > 0 else math.nan for s, t in zip(self.sizes, self.times)]

    def label(self):
        """``"dgx-a100 x2, 16 GPUs, auto: nccl_ring"``: preset, GPUs, what ran at the
        largest size."""
        s = self.spec
        where = s.preset if s.nodes == 1 else f"{s.preset} x{s.nodes}"
        asked = s.algorithm or "auto"
        ran = self.chosen[-1].split("/")[0]
        return f"{where}, {self.ranks} GPUs, {asked}" + ("" if ran == asked else f": {ran}")


def calibration_sizes(lo=8, hi=8 * GiB, factor=2):
    """Sizes in bytes from ``lo`` to ``hi``, each ``factor`` times the last (nccl-tests'
    ``-b 8 -e 8G -f 2``).

    >>> calibration_sizes(8, 128, 4)
    [8, 32, 128]
    """
    if not (isinstance(factor, int) and factor >= 2):
        raise ConfigError(f"factor {factor!r}: give a whole number >= 2, e.g. 2 or 4")
    if not (isinstance(lo, int) and isinstance(hi, int) and 4 <= lo <= hi):
        raise ConfigError(f"sizes {lo!r}..{hi!r}: give whole bytes with 4 <= lo <= hi")
    sizes = [lo]
    while sizes[-1] * factor <= hi:
        sizes.append(sizes[-1] * factor)
    return sizes


def latency_floor(graph, result):
    """The closed form's latency term of one all-reduce: for every step, the largest
    α of its messages (the links' latencies along the route plus the step's protocol
    latency for the route's slowest link class; the first step's also NCCL's base latency
    of the call), summed over the steps.  The time of a tiny message is this and almost
    nothing else."""
    alphas = {}
    for t in result.trace.transfers:
        if not is_collective(t.tag) or t.src == t.dst:
            continue
        path = route(graph, t.src, t.dst)
        alpha = sum(graph.edges[u, v]["latency"] for u, v in path)
        protocol = t.tag.protocol
        if protocol is not None:
            classes = [graph.edges[u, v].get("link_class") for u, v in path]
            alpha += protocol.latency_for(hardware.protocols.slowest_class(classes))
        alphas[t.tag.step] = max(alphas.get(t.tag.step, 0.0), alpha)
    return sum(alphas.values())


def _launch(result):
    """NCCL's base latency the call paid: what its first step's protocol carries."""
    first = [t.tag.protocol for t in result.trace.transfers if is_collective(t.tag)]
    return max((p.launch for p in first if p is not None), default=0.0)


def _chosen(result):
    protocols = {t.tag.protocol for t in result.trace.transfers if is_collective(t.tag)}
    names = sorted({p.name for p in protocols if p is not None})  # step 1's carries the launch
    return result.algorithm + ("/" + "+".join(names) if names else "")


def measure_curve(spec, sizes=None, dtype="float32", note=None):
    """Run the count-only all-reduce of ``spec`` at every size; returns a :class:`Curve`.

    ``note(text)``, if given, hears "dgx-h100/nvls: size 3 of 31" before each run (a
    progress line)."""
    graph = hardware.topology(spec.preset, nodes=spec.nodes)
    cluster = Cluster(graph)
    sizes = calibration_sizes() if sizes is None else list(sizes)
    if dtype not in DTYPE_BYTES:
        raise ConfigError(f"dtype {dtype!r}: choose one of {', '.join(DTYPE_BYTES)}")
    itemsize = DTYPE_BYTES[dtype]
    times, chosen, steps, floors, launches = [], [], [], [], []
    for i, size in enumerate(sizes):
        if note is not None:
            note(f"{spec.key}: size {i + 1} of {len(sizes)} ({format_size(size)})")
        out = cluster.collective(
            "all_reduce", count=size // itemsize, dtype=dtype, algorithm=spec.algorithm
        )
        times.append(out.time)
        chosen.append(_chosen(out))
        steps.append(out.stats.steps)
        floors.append(latency_floor(graph, out))
        launches.append(_launch(out))
    return Curve(spec, cluster.size, sizes, times, chosen, steps, floors, launches)


def published_for(curve, published=PUBLISHED):
    """The published points that belong to ``curve`` (same preset, nodes, algorithm)."""
    return [p for p in published if p.key == curve.spec.key]


def _style(n):
    return COLOURS[n % len(COLOURS)], MARKERS[n % len(MARKERS)]


def _draw_bandwidth(ax, curves, published):
    """busbw against size, a star per published figure numbered as the footnote is, and
    a box comparing each star with collsim's value at its size."""
    sizes = sorted({s for c in curves for s in c.sizes})
    top, rows = 0.0, []
    numbers = {id(p): n for n, p in enumerate(published, 1)}
    for n, curve in enumerate(curves):
        colour, marker = _style(n)
        busbw = curve.busbw_GBps
        ax.plot(curve.sizes, busbw, color=colour, marker=marker, ms=4, lw=2, label=curve.label())
        top = max([top] + [b for b in busbw if b == b])
        for p in published_for(curve, published):
            ax.plot(
                [p.size],
                [p.busbw_GBps],
                marker="*",
                ms=19,
                color=colour,
                mec="black",
                mew=1.0,
                ls="none",
                zorder=5,
            )
            ax.annotate(
                f"[{numbers[id(p)]}]",
                xy=(p.size, p.busbw_GBps),
                xytext=(11, 0),
                textcoords="offset points",
                va="center",
                fontsize="medium",
                color=colour,
                fontweight="bold",
            )
            mine = busbw[max(i for i, s in enumerate(curve.sizes) if s <= p.size)]
            rows.append(
                (
                    numbers[id(p)],
                    colour,
                    f"[{numbers[id(p)]}] ~{p.busbw_GBps:g} → "
                    f"{mine:.0f}  ({mine / p.busbw_GBps:.2f}x)  {p.key}",
                )
            )
            top = max(top, p.busbw_GBps)
    ax.plot(
        [],
        [],
        marker="*",
        ms=14,
        color="white",
        mec="black",
        ls="none",
        label="published by NVIDIA's NCCL team [n]: sources below",
    )
    size_axis(ax, sizes, 3 if len(sizes) > 12 else 1)
    ax.set_xlim(sizes[0] / 2, sizes[-1] * 8)  # room for the stars' numbers
    ax.set_ylim(0, top * 1.15)
    ax.set_ylabel("bus bandwidth (GB/s)", fontsize="large")
    ax.set_title(
        "large messages: busbw = S/t · 2(K-1)/K meets the published figures",
        fontsize="large",
        wrap=True,
    )
    ax.legend(fontsize="medium", loc="upper left")
    # the comparison sits where no curve is: small sizes, below the legend
    for row, (_, colour, text) in enumerate(sorted(rows)):
        ax.text(
            0.02,
            0.42 - 0.06 * row,
            text,
            transform=ax.transAxes,
            fontsize="medium",
            color=colour,
            fontweight="bold",
            family="monospace",
        )
    if rows:
        ax.text(
            0.02,
            0.42 + 0.06,
            "published → collsim, GB/s at 8 GiB:",
            transform=ax.transAxes,
            fontsize="medium",
            color="#333333",
        )


def _draw_floor(ax, curves, small_max):
    """Time against size up to ``small_max``, each curve's latency floor dotted, and
    NCCL's own model of the one-node ring as a cross."""
    sizes = sorted({s for c in curves for s in c.sizes if s <= small_max})
    if not sizes:
        sizes = [min(s for c in curves for s in c.sizes)]
    groups = {}  # floors that coincide get one label
    top = 0.0
    for n, curve in enumerate(curves):
        colour, marker = _style(n)
        small = [(s, t * 1e6) for s, t in zip(curve.sizes, curve.times) if s <= sizes[-1]]
        ax.plot(*zip(*small), color=colour, marker=marker, ms=4, lw=2)
        floor = curve.floors[0] * 1e6
        ax.axhline(floor, color=colour, ls=":", lw=1.5)
        launch = curve.launches[0] * 1e6 if curve.launches else 0.0
        group = groups.setdefault(
            round(floor, 2),
            {"colour": colour, "keys": [], "steps": curve.steps[0], "launch": launch},
        )
        ran = curve.chosen[0]
        if curve.spec.algorithm is None:
            ran = f"auto: {ran}"
        elif ran.startswith(curve.spec.algorithm + "/"):
            ran = ran[len(curve.spec.algorithm) + 1 :]
        group["keys"].append(f"{curve.spec.key} ({ran})")
        top = max([top] + [t for _, t in small])
    for floor, group in groups.items():
        launch = group["launch"]
        per_step = (floor - launch) / group["steps"] if group["steps"] else 0.0
        base = f"{launch:.1f} µs + " if launch else ""  # NCCL's base latency, once a call
        ax.annotate(
            f"{base}{group['steps']} steps × {per_step:.2f} µs = {floor:.1f} µs\n"
            + ", ".join(group["keys"]),
            xy=(0.02, floor),
            xycoords=("axes fraction", "data"),
            xytext=(0, 4),
            textcoords="offset points",
            va="bottom",
            fontsize="small",
            color=group["colour"],
            fontweight="bold",
            bbox={
                "boxstyle": "round,pad=0.1",
                "fc": rcParams["axes.facecolor"],
                "ec": "none",
                "alpha": 0.8,
            },
        )
    model, what = NCCL_RING_FLOOR
    ax.plot([sizes[0]], [model * 1e6], marker="X", ms=11, color="black", ls="none", zorder=5)
    ax.annotate(
        f"NCCL's own model: {model * 1e6:.1f} µs ({what})",
        xy=(sizes[0], model * 1e6),
        xytext=(10, -6),
        textcoords="offset points",
        va="top",
        fontsize="small",
    )
    size_axis(ax, sizes, 3 if len(sizes) > 8 else 1)
    ax.set_xlim(sizes[0] / 1.5, sizes[-1] * 1.5)
    ax.set_ylim(0, max(top, model * 1e6) * 1.2)
    ax.set_ylabel("time (µs)", fontsize="large")
    ax.set_title(
        "small messages: the time is the latency floor\n(dotted: NCCL's base latency + steps · α)",
        fontsize="large",
        wrap=True,
    )


@styled
def calibration_figure(curves, published=PUBLISHED, small_max=SMALL_MAX):
    """busbw against size for each curve with its published point (left) and time at
    sizes up to ``small_max`` with each curve's latency floor (right); returns a Figure."""
    if not curves:
        raise ConfigError("no curves to draw: measure at least one (measure_curve)")
    fig = Figure(figsize=current().size((14, 6.8)), layout="constrained")
    ax_bw, ax_t = fig.subplots(1, 2, width_ratios=(1.5, 1))
    _draw_bandwidth(ax_bw, curves, published)
    _draw_floor(ax_t, curves, small_max)
    fig.suptitle(
        "All-reduce on collsim's hardware presets against NVIDIA's published "
        "nccl-tests figures (count-only simulation, float32)",
        fontsize="x-large",
        fontweight="bold",
        wrap=True,
    )
    lines = [
        f"[{n}] ~{p.busbw_GBps:g} GB/s {p.key}: {p.who}, {p.source}: {p.short}"
        for n, p in enumerate(published, 1)
    ]
    lines.append(f"The cross: {NCCL_RING_FLOOR_SOURCE}")
    # a supxlabel, so that the constrained layout makes room for it under the axes
    fig.supxlabel(
        "\n".join(lines), x=0.01, ha="left", fontsize="small", color="#333333", linespacing=1.35
    )
    return fig
