"""Link utilisation over time: a links × time heat map read from the trace.

Each row is one directed link, each column a slice of simulated time; the colour is the
share of the link's bandwidth that the transfers crossing it used in that slice.  A
transfer first waits out its path's latency α (no bytes flow yet), then its bytes flow
until the last one arrives (:mod:`collsim.network.flows`): the map spreads the bytes over
that bandwidth phase only and draws the latency phase apart, hatched grey.  So a
latency-bound run shows mostly grey hatching with thin coloured slivers, and a congested
link (the naive root's, a shared uplink) a dark band at 100 %.  For a collective, thin
lines mark where each step of the schedule ended.

Examples
--------
>>> import collsim
>>> g = collsim.topology.switch(4)
>>> result = collsim.Cluster(g).all_reduce(count=2**22, dtype="float32", algorithm="naive")
>>> fig = utilization_figure(g, result)
>>> fig.axes[1].get_ylabel()
'utilisation (% of link bandwidth)'
>>> times, links, share = utilization(g, result.trace, bins=50)
>>> links[:2], round(float(share.max()), 3)      # the root's down-link is saturated
([(0, 'switch'), (1, 'switch')], 1.0)
>>> waits = latency_intervals(g, result.trace)   # r1's message waits out 2 links' α
>>> waits[(1, 'switch')][0]
(0.0, 1e-05)
"""

import numpy as np
from matplotlib import colormaps
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from ..hardware.protocols import slowest_class
from .limits import MAX_BINS, check_count
from .style import current, say, styled
from .times import time_tick, time_unit

__all__ = ["utilization_figure", "utilization", "latency_intervals", "time_unit", "time_tick"]

CMAP = "YlOrRd"
LATENCY = {"facecolor": "#E2E2E2", "edgecolor": "#8A8A8A", "hatch": "////", "linewidth": 0}


def _carried_by(edges, t):
    """Bytes a link has carried by each time in ``t``; ``edges`` is a list of
    ``(start, end, nbytes)``.  Each transfer runs at ``nbytes / (end - start)``, so the
    total is piecewise linear: prefix sums over sorted starts and ends evaluate it."""
    s, e, b = (np.asarray(x, dtype=float) for x in zip(*edges))
    instant = e <= s
    rate = np.where(instant, 0.0, b / np.where(instant, 1.0, e - s))
    total = np.zeros_like(t)
    # bytes by time t = Σ_{s_i < t} q_i (t - s_i) - Σ_{e_i < t} q_i (t - e_i), plus instant ones
    for points, sign in ((s, 1.0), (e, -1.0)):
        order = np.argsort(points)
        p, q = points[order], rate[order]
        cum_q = np.concatenate([[0.0], np.cumsum(q)])
        cum_qp = np.concatenate([[0.0], np.cumsum(q * p)])
        n = np.searchsorted(p, t, side="left")
        total += sign * (cum_q[n] * t - cum_qp[n])
    if instant.any():
        order = np.argsort(s[instant])
        steps = np.concatenate([[0.0], np.cumsum(b[instant][order])])
        total += steps[np.searchsorted(s[instant][order], t, side="right")]
    return total


def _phases(topology, trace):
    """``link -> [(start, flowing, end, nbytes), ...]`` and the run's end: each transfer
    waits from ``start`` to ``flowing`` (its path's summed latency, as the network model
    charges it), then moves its bytes until ``end``."""
    per_link = {}
    end = 0.0
    for t in trace.transfers:
        end = max(end, t.end)
        alpha = sum(topology.edges[link]["latency"] for link in t.links)
        protocol = getattr(t.tag, "protocol", None)  # NCCL's protocol adds its own latency
        if protocol is not None and t.links:
            classes = [topology.edges[link].get("link_class") for link in t.links]
            alpha += protocol.latency_for(slowest_class(classes))
        flowing = min(t.start + alpha, t.end)
        for link in t.links:
            per_link.setdefault(link, []).append((t.start, flowing, t.end, t.nbytes))
    return per_link, end


def latency_intervals(topology, trace):
    """``link -> [(start, end), ...]``: the merged times at which a message crossing the
    link was in its latency phase (sent, its first byte not yet flowing)."""
    per_link, _ = _phases(topology, trace)
    out = {}
    for link, rows in per_link.items():
        waits = sorted((s, f) for s, f, _, _ in rows if f > s)
        merged = []
        for s, f in waits:
            if merged and s <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], f))
            else:
                merged.append((s, f))
        if merged:
            out[link] = merged
    return out


def utilization(topology, trace, bins=200, only_used=True):
    """``(bin_edges, links, share)``: time bin edges (s), the links drawn (rows) and
    ``share[row, bin]``, the fraction of each link's bandwidth used in each bin.

    A transfer's bytes count from the end of its latency phase to its last byte.  Links
    follow the topology's edge order; ``only_used`` drops links that carried nothing.
    Links of unlimited bandwidth count as 0.
    """
    bins = check_count(bins, "bins", 1, MAX_BINS)
    per_link, end = _phases(topology, trace)
    per_link = {link: [(f, e, b) for _, f, e, b in rows] for link, rows in per_link.items()}
    links = [e for e in topology.edges if not only_used or e in per_link]
    edges = np.linspace(0.0, end if end > 0 else 1.0, bins + 1)
    share = np.zeros((len(links), bins))
    width = edges[1] - edges[0]
    for row, link in enumerate(links):
        if link not in per_link:
            continue
        bandwidth = topology.edges[link]["bandwidth"]
        if not np.isfinite(bandwidth):
            continue
        carried = np.diff(_carried_by(per_link[link], edges))
        share[row] = carried / (bandwidth * width)
    return edges, links, share


def _step_ends(source):
    """End time of each step of a collective (from its trace), or ``[]``."""
    if not hasattr(source, "steps") or not hasattr(source, "schedule"):
        return []
    ends = []
    for view in source.steps():
        times = [row[6] for row in view.transfers]
        if times:
            ends.append(max(times))
    return ends


def _name(node):
    return f"r{node}" if isinstance(node, int) else str(node)


def _protocol_note(trace):
    """What the colours mean under NCCL's protocols: they count payload bytes, and LL puts
    only half of the bytes it sends on the wire to use (LL128 120 of 128)."""
    protocols = {getattr(t.tag, "protocol", None) for t in trace.transfers} - {None}
    lossy = sorted((p for p in protocols if p.efficiency < 1), key=lambda p: p.name)
    if not lossy:
        return ""
    parts = ", ".join(f"{p.name} {p.efficiency:.0%}" for p in lossy)
    return "\n" + say(
        "colours count payload: protocol {parts} of its wire bytes are data, so a link it "
        "keeps busy shows that much",
        parts=parts,
    )


@styled
def utilization_figure(topology, source, bins=200, only_used=True, title=None):
    """Links × time heat map of utilisation; returns a Figure.

    Parameters
    ----------
    topology : networkx.DiGraph
        The graph the run used (its link bandwidths are the 100 % mark).
    source : Trace or result with a ``.trace``
        The run: a :class:`~collsim.network.trace.Trace`, or what ``cluster.run`` or a
        cluster collective returned (a collective also gets its step boundaries drawn).
    bins : int
        Time slices across the run.
    only_used : bool
        Leave out links that carried nothing.
    """
    trace = getattr(source, "trace", source)
    edges, links, share = utilization(topology, trace, bins, only_used)
    divisor, unit = time_unit(edges[-1])
    rows = max(len(links), 1)
    if not links:  # nothing moved (one rank): one empty row keeps the axes drawable
        share = np.zeros((1, share.shape[1]))
    height = min(10.0, max(4.0, 1.6 + 0.24 * rows))
    fig = Figure(figsize=current().size((12, height)), layout="constrained")
    ax = fig.add_subplot()
    # latency first, underneath: where bytes flow the colour covers it
    waits = latency_intervals(topology, trace)
    for row, link in enumerate(links):
        spans = [(a / divisor, (b - a) / divisor) for a, b in waits.get(link, [])]
        if spans:
            ax.broken_barh(spans, (row - 0.5, 1.0), zorder=1, gid=f"latency {row}", **LATENCY)
    cmap = colormaps[CMAP].with_extremes(bad=(1, 1, 1, 0))  # no bytes: see through
    percent = np.ma.masked_less_equal(100 * share, 0.0)
    image = ax.pcolormesh(
        edges / divisor,
        np.arange(rows + 1) - 0.5,
        percent,
        cmap=cmap,
        vmin=0,
        vmax=100,
        shading="flat",
        zorder=2,
    )
    ax.set_xlim(edges[0] / divisor, edges[-1] / divisor)
    ax.set_yticks(range(len(links)))
    # one size for every row count: where rows crowd, style.thin_crowded_ticks labels
    # every other one instead of shrinking them all below reading size
    fontsize = "medium" if rows <= 24 else "small"
    ax.set_yticklabels([f"{_name(u)} → {_name(v)}" for u, v in links], fontsize=fontsize)
    ax.set_ylim(rows - 0.5, -0.5)
    ax.set_xlabel(say("simulated time ({unit})", unit=unit), fontsize="large")
    ax.set_ylabel(say("link (sender → receiver)"), fontsize="large")
    ax.tick_params(axis="x", labelsize="medium")
    ends = _step_ends(source)
    for t in ends:
        ax.axvline(t / divisor, color="#2B6CB0", lw=0.8, alpha=0.6, zorder=3)
    if ends:  # name the steps along the top: "s3" is where step 3 ended
        top = ax.secondary_xaxis("top")
        # at most about 16 names, none nearer the last than 1/16 of the run: steps of a
        # pipelined algorithm end close together, and their names would run into each other
        gap, shown = (edges[-1] - edges[0]) / 16, []
        for i, end in enumerate(ends):
            if not shown or end - ends[shown[-1]] >= gap:
                shown.append(i)
        top.set_xticks([ends[i] / divisor for i in shown], [f"s{i + 1}" for i in shown])
        top.tick_params(labelsize="small", colors="#2B6CB0")
    bar = fig.colorbar(image, ax=ax, pad=0.01, fraction=0.04)
    bar.set_label(say("utilisation (% of link bandwidth)"), fontsize="medium")
    name = topology.graph.get("name", "topology")
    if title is None:
        what = ""
        if hasattr(source, "collective"):
            what = f"{source.algorithm} {source.collective} ".replace("_", "-")
        title = say("link utilisation over time: {what}on {name}", what=what, name=name)
    fig.suptitle(title, fontsize="x-large", fontweight="bold", wrap=True)
    busiest = share.max() if share.size else 0.0
    note = say(
        "run time {time}, {bins} time slices; busiest slice {busiest}",
        time=time_tick(edges[-1]),
        bins=bins,
        busiest=f"{busiest:.0%}",
    )
    if ends:
        note += say("; blue lines: end of each step")
    note += _protocol_note(trace)
    ax.set_title(note, fontsize="medium", pad=18 if ends else 6, wrap=True)
    keys = []
    if waits:
        keys.append(Patch(label=say("latency α: message sent, no bytes flowing yet"), **LATENCY))
    log = getattr(trace, "faults", None)  # a run with faults: mark them (viz/faults.py)
    if log is not None:
        from .faults import mark_faults

        keys += mark_faults(ax, links, log, divisor, edges[-1])
        if log.stalls:
            stalled = say(
                "; STALLED: no progress after t={time}, the watchdog stopped the run",
                time=time_tick(edges[-1]),
            )
            ax.set_title(
                note + stalled,
                fontsize="medium",
                pad=18 if ends else 6,
                wrap=True,
            )
    if keys:
        fig.legend(
            handles=keys,
            loc="outside lower left",
            fontsize="medium",
            frameon=False,
            ncol=min(len(keys), 3),
        )
    return fig
