"""Sweep: time and bus bandwidth against message size for several algorithms.

nccl-tests' view of a collective (log-log; busbw = S/t × 2(n-1)/n for all-reduce, ×(n-1)/n
for the scatters and gathers) with one line per algorithm on one topology, and the sizes
where the fastest algorithm changes marked (dashed): small messages are latency-bound
(fewest steps wins: naive, tree, halving-doubling), large ones bandwidth-bound (fewest
bytes on the busiest link wins: ring on a ring, halving-doubling on a switch).  A dotted
line marks where the fastest algorithm's time passes twice its latency floor, i.e. where
bytes/β outweighs steps·α.  The background is tinted by the fastest algorithm.

Times come from count-only runs of the simulator (the same schedules and network, sizes
without data, so a sweep is quick) or, with ``mode="analytical"``, from the closed forms
(:func:`collsim.collectives.api.analytical`).

Examples
--------
>>> import collsim
>>> cluster = collsim.Cluster(collsim.topology.switch(8))
>>> data = sweep(cluster, sizes=[64, 2**24])
>>> [data.fastest(i) for i in range(2)], data.bandwidth_bound(1)
(['one_shot', 'two_shot'], True)
>>> fig = sweep_figure(cluster, sizes=[2**k for k in range(4, 26, 3)])
>>> fig.axes[0].get_ylabel(), fig.axes[1].get_ylabel()  # time ticks carry their unit
('time', 'bus bandwidth (GB/s)')
"""

import math
import numbers
from dataclasses import dataclass

import numpy as np
from matplotlib import rcParams
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from ..collectives.api import analytical
from ..collectives.executor import DTYPE_BYTES
from ..collectives.formulas import bus_factor
from ..collectives.registry import algorithms_for, canonical_algorithm, canonical_collective
from ..errors import ConfigError
from ..units import format_size
from .limits import MAX_SWEEP_SIZES
from .style import current, say, styled, themed
from .times import time_tick

__all__ = [
    "sweep",
    "sweep_figure",
    "size_axis",
    "Sweep",
    "MODES",
    "ALGORITHM_COLOURS",
    "ALGORITHM_STYLES",
]

MODES = ("count-only", "analytical")
ALGORITHM_COLOURS = {  # Okabe-Ito: the algorithms of one sweep stay apart for every reader
    "ring": "#0072B2",  # blue
    "tree": "#E69F00",  # orange
    "halving_doubling": "#009E73",  # bluish green
    "naive": "#CC79A7",  # reddish purple
    "direct": "#D55E00",  # vermillion (all-to-all's only algorithm)
    # beyond Okabe-Ito's eight: four dark enough for a white page and, simulated under
    # deuteranopia and protanopia, apart from all twelve (tests/test_viz_style.py)
    "one_shot": "#993300",  # brown: vLLM's small-message all-reduce
    "two_shot": "#9933FF",  # violet
    "pat": "#FF3366",  # rose: NCCL's log-step all-gather / reduce-scatter
    "nvls_tree": "#666633",  # olive
    # NCCL's algorithms on the hardware presets
    "nccl_ring": "#56B4E9",  # sky blue
    "double_tree": "#D55E00",  # vermillion
    "hierarchical": "#000000",  # black
    "nvls": "#F0E442",  # yellow
}
# line style and marker per algorithm, so lines that coincide (naive and ring are both
# one latency per step at small sizes) stay apart in print and for colour-blind readers;
# the later-drawn lines are thinner with hollow markers, so the one beneath shows through
ALGORITHM_STYLES = {
    "ring": {"ls": "-", "marker": "o", "lw": 3.0, "ms": 7},
    "tree": {"ls": "--", "marker": "s", "lw": 2.4, "ms": 6},
    "halving_doubling": {"ls": "-.", "marker": "^", "lw": 2.0, "ms": 6},
    "naive": {"ls": ":", "marker": "D", "lw": 2.0, "ms": 5, "mfc": "white"},
    "one_shot": {"ls": (0, (4, 1)), "marker": "<", "lw": 1.8, "ms": 6},
    "two_shot": {"ls": (0, (1, 1)), "marker": ">", "lw": 1.8, "ms": 6},
    "direct": {"ls": (0, (5, 1, 1, 1)), "marker": "v", "lw": 2.0, "ms": 6, "mfc": "white"},
    "nccl_ring": {"ls": "-", "marker": "P", "lw": 1.6, "ms": 6},
    "double_tree": {"ls": "--", "marker": "X", "lw": 1.6, "ms": 6},
    "hierarchical": {"ls": "-.", "marker": "h", "lw": 1.6, "ms": 6, "mfc": "white"},
    "nvls": {"ls": ":", "marker": "*", "lw": 1.8, "ms": 8},
    "pat": {"ls": (0, (3, 1, 1, 1, 1, 1)), "marker": "d", "lw": 1.8, "ms": 6},
    "nvls_tree": {"ls": (0, (2, 2)), "marker": "p", "lw": 1.8, "ms": 7},
}


@dataclass
class Sweep:
    """Times of each algorithm at each size (``times[algorithm][i]`` seconds for
    ``sizes[i]`` bytes, S as nccl-tests defines it)."""

    collective: str
    ranks: int
    sizes: list
    times: dict
    mode: str
    topology: str

    def busbw(self, algorithm):
        """Bus bandwidth in bytes/s at each size (``nan`` where the time is zero)."""
        factor = bus_factor(self.collective, self.ranks)
        return [
            s / t * factor if t > 0 else math.nan for s, t in zip(self.sizes, self.times[algorithm])
        ]

    def winners(self, rtol=0.01):
        """The fastest algorithm at each size.  Times within ``rtol`` of the best count
        as a tie, and a tie keeps the previous size's winner (else the first listed), so
        float noise between equal algorithms is not reported as a change."""
        out = []
        for i in range(len(self.sizes)):
            best = min(t[i] for t in self.times.values())
            tied = [a for a, t in self.times.items() if t[i] <= best * (1 + rtol)]
            out.append(out[-1] if out and out[-1] in tied else tied[0])
        return out

    def fastest(self, i):
        """The algorithm with the least time at ``sizes[i]`` (see :meth:`winners`)."""
        return self.winners()[i]

    def changes(self):
        """``[(i, before, after), ...]``: the fastest algorithm differs between sizes
        ``i`` and ``i + 1``."""
        w = self.winners()
        return [(i, w[i], w[i + 1]) for i in range(len(w) - 1) if w[i] != w[i + 1]]

    def regions(self):
        """``[(first, last, algorithm), ...]``: runs of sizes with one fastest algorithm."""
        w = self.winners()
        cuts = [0] + [i + 1 for i, _, _ in self.changes()] + [len(w)]
        return [(a, b - 1, w[a]) for a, b in zip(cuts, cuts[1:])]

    def bandwidth_bound(self, i):
        """Whether the fastest algorithm at ``sizes[i]`` is bandwidth-bound there: its time
        is more than twice its latency floor (its time at the smallest size, where almost
        no bytes move), so the bytes/β term outweighs the steps·α term.  Measured, not
        derived."""
        times = self.times[self.fastest(i)]
        return times[i] > 2 * min(times)

    def bandwidth_bound_from(self):
        """The first index from which every size is bandwidth-bound, or ``None``."""
        flags = [self.bandwidth_bound(i) for i in range(len(self.sizes))]
        if not flags[-1]:
            return None
        first = len(flags) - 1
        while first > 0 and flags[first - 1]:
            first -= 1
        return first


def _default_sizes():
    return [2**k for k in range(3, 29)]  # 8 B .. 256 MiB, factor 2


def sweep(
    cluster,
    collective="all_reduce",
    algorithms=None,
    sizes=None,
    mode="count-only",
    dtype="float32",
):
    """Time ``collective`` on ``cluster`` for each algorithm and size; returns a :class:`Sweep`.

    ``mode`` is ``"count-only"`` (simulate, no data) or ``"analytical"`` (closed forms).
    Sizes are bytes; each is rounded down to whole elements of ``dtype`` (and for
    all-gather to a whole element per rank).
    """
    collective = canonical_collective(collective)
    if mode not in MODES:
        raise ConfigError(f"unknown sweep mode {mode!r}: choose one of {', '.join(MODES)}")
    if algorithms is None:
        # every algorithm that runs on this many ranks (halving-doubling reduce-scatter
        # and all-gather need a power of two)
        algorithms = algorithms_for(collective, cluster.size)
        if cluster.topology.graph.get("machine") is not None:  # and NCCL's, on a preset
            from ..collectives.auto import placement_of

            layout, switch = placement_of(cluster.topology, tuple(range(cluster.size)))
            algorithms = algorithms_for(collective, cluster.size, layout, switch)
    given = list(algorithms)
    algorithms = [canonical_algorithm(collective, a) for a in given]
    if len(set(algorithms)) < len(algorithms):
        raise ConfigError(f"algorithms {given!r}: name each algorithm once")
    k = cluster.size
    if k < 2:
        raise ConfigError(
            f"a cluster of {k} rank: a sweep compares algorithms that move data between "
            "ranks, and one rank moves none; use 2 or more"
        )
    if sizes is not None and len(sizes) > MAX_SWEEP_SIZES:
        raise ConfigError(
            f"{len(sizes)} sizes: a sweep draws at most {MAX_SWEEP_SIZES}; "
            "use a larger factor between sizes"
        )
    per = DTYPE_BYTES[dtype] * (k if collective == "all_gather" else 1)
    wrong = [s for s in sizes or () if isinstance(s, bool) or not isinstance(s, numbers.Integral)]
    if wrong:
        raise ConfigError(f"size {wrong[0]!r}: sizes are whole numbers of bytes, like 1024")
    sizes = sorted({int(s) // per * per for s in (sizes or _default_sizes()) if int(s) >= per})
    if not sizes:
        raise ConfigError(f"no size holds one {dtype} element per rank: give sizes >= {per} B")
    times = {a: [] for a in algorithms}
    for a in algorithms:
        for size in sizes:
            if mode == "analytical":
                times[a].append(analytical(cluster, collective, size, a).time_s)
            else:
                result = cluster.collective(collective, count=size // per, dtype=dtype, algorithm=a)
                times[a].append(result.time)
    name = cluster.topology.graph.get("name", "topology")
    return Sweep(collective, k, sizes, times, mode, name)


def size_axis(ax, sizes, every=None):
    """A log-2 message-size axis over ``sizes`` (bytes, ascending), ticked in binary units
    every ``every`` octaves (default: by the span), as every size sweep here draws it."""
    ax.set_xscale("log", base=2)
    lo, hi = int(math.log2(sizes[0])), int(math.ceil(math.log2(sizes[-1])))
    if every is None:
        every = 3 if hi - lo > 12 else 2 if hi - lo > 6 else 1
    ticks = [2**e for e in range(lo, hi + 1) if e % every == 0]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels(
        [format_size(t).replace(".0 ", " ") for t in ticks],
        rotation=35,
        ha="right",
        fontsize="medium",
    )
    ax.set_xlabel(say("message size S (bytes, as nccl-tests counts them)"), fontsize="medium")
    ax.grid(True, which="major", alpha=0.3)


def _tint(ax, data, label=False, bound_label=False):
    """Tint the background by the fastest algorithm, mark where it changes (dashed) and
    where the fastest becomes bandwidth-bound (dotted)."""
    sizes = data.sizes
    edges = [sizes[0]] + [math.sqrt(a * b) for a, b in zip(sizes, sizes[1:])] + [sizes[-1]]
    for index, (first, last, algorithm) in enumerate(data.regions()):
        colour = themed(ALGORITHM_COLOURS.get(algorithm, "#999999"))
        ax.axvspan(edges[first], edges[last + 1], color=colour, alpha=0.08, lw=0, zorder=0)
        if label:
            middle = math.sqrt(edges[first] * edges[last + 1])
            ax.text(
                middle,
                0.02 + 0.14 * (index % 2),  # neighbours staggered: narrow regions stay apart
                say("{algorithm}\nfastest", algorithm=algorithm.replace("_", "-")),
                transform=ax.get_xaxis_transform(),
                ha="center",
                va="bottom",
                fontsize="medium",
                color=colour,
                fontweight="bold",
            )
    for i, _, _ in data.changes():
        ax.axvline(
            edges[i + 1],
            color=rcParams["axes.edgecolor"],
            ls="--",
            lw=1.2,
            zorder=1,
            gid=f"change {i}",
        )
    bound = data.bandwidth_bound_from()
    if bound:
        ax.axvline(
            edges[bound],
            color=rcParams["axes.edgecolor"],
            ls=":",
            lw=1.6,
            zorder=1,
            gid="bandwidth-bound",
        )
        if bound_label:
            ax.text(
                edges[bound],
                0.55,  # mid-height: the legend holds the top-left corner
                say("latency-bound ←   → bandwidth-bound"),
                transform=ax.get_xaxis_transform(),
                ha="center",
                va="center",
                fontsize="medium",
                bbox={
                    "boxstyle": "round,pad=0.2",
                    "fc": rcParams["axes.facecolor"],
                    "ec": "#999999",
                },
            )


@styled
def sweep_figure(
    cluster,
    collective="all_reduce",
    algorithms=None,
    sizes=None,
    mode="count-only",
    dtype="float32",
    data=None,
):
    """Time and busbw against size, one line per algorithm; returns a Figure.

    Pass ``data`` (a :class:`Sweep`) to draw a sweep already made; otherwise the
    arguments are those of :func:`sweep`.
    """
    data = data or sweep(cluster, collective, algorithms, sizes, mode, dtype)
    fig = Figure(figsize=current().size((14, 6)), layout="constrained")
    ax_t, ax_b = fig.subplots(1, 2)
    for a, times in data.times.items():
        style = {
            "color": themed(ALGORITHM_COLOURS.get(a)),
            **ALGORITHM_STYLES.get(a, {"marker": "o"}),
        }
        # the widths are paper's (lines.linewidth 1.5); slides draw every line thicker
        style["lw"] = style.get("lw", 1.5) * rcParams["lines.linewidth"] / 1.5
        label = a.replace("_", "-")
        ax_t.plot(data.sizes, times, label=label, **style)
        ax_b.plot(data.sizes, np.array(data.busbw(a)) / 1e9, label=label, **style)
    for ax in (ax_t, ax_b):
        size_axis(ax, data.sizes)
        _tint(ax, data, label=ax is ax_b, bound_label=ax is ax_t)
        ax.set_yscale("log")
    ax_t.yaxis.set_major_formatter(FuncFormatter(time_tick))  # "10 µs", not 10⁻⁵ s
    ax_t.set_ylabel(say("time"), fontsize="large")
    ax_b.set_ylabel(say("bus bandwidth (GB/s)"), fontsize="large")
    ax_t.set_title(say("time: lower is better"), fontsize="large", wrap=True)
    ax_b.set_title(
        "busbw = S/t · "
        + (
            "2(n-1)/n"
            if data.collective == "all_reduce"
            else "(n-1)/n"
            if data.collective not in ("broadcast", "reduce")
            else "1"
        )
        + say(": higher is better"),
        fontsize="large",
        wrap=True,
    )
    # more than six algorithms (a preset's all-reduce has eleven): two columns, so the
    # legend stays in the top-left corner, clear of the mid-height bound label
    columns = 2 if len(ax_t.get_lines()) > 6 else 1
    ax_t.legend(
        title=say("algorithm"),
        fontsize="medium",
        title_fontsize="medium",
        loc="upper left",
        ncols=columns,
    )
    _annotate_changes(ax_t, data)
    how = say("count-only simulation") if data.mode == "count-only" else say("closed forms")
    name = data.collective.replace("_", "-")
    fig.suptitle(
        say(
            "{name} on {where}, {k} ranks ({how})",
            name=name,
            where=data.topology,
            k=data.ranks,
            how=how,
        ),
        fontsize="x-large",
        fontweight="bold",
        wrap=True,
    )
    return fig


def _annotate_changes(ax, data):
    """Write "tree → ring at 48 KiB" beside each dashed line."""
    sizes = data.sizes
    for n, (i, before, after) in enumerate(data.changes()):
        x = math.sqrt(sizes[i] * sizes[i + 1])
        names = {"before": before.replace("_", "-"), "after": after.replace("_", "-")}
        text = say("{before} → {after}\nat ~{size}", **names, size=format_size(x))
        ax.annotate(
            text,
            xy=(x, 0.03 + 0.12 * (n % 3)),
            xycoords=("data", "axes fraction"),
            xytext=(4, 0),
            textcoords="offset points",
            ha="left",
            va="bottom",
            fontsize="medium",
            bbox={
                "boxstyle": "round,pad=0.2",
                "fc": rcParams["axes.facecolor"],
                "ec": "#999999",
                "alpha": 0.9,
            },
        )
