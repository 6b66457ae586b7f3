"""Faults drawn on a links x time picture: the slow link, the failed link, the crashed rank.

The link-utilisation heat map (:mod:`collsim.viz.utilization`) calls :func:`mark_faults`
when its trace carries a fault log (``trace.faults``, kept by ``Cluster.run``): the rows of
a slow link get an orange label and the factor, a failed link a red cross at the time it went
down and a red wash after it, a crashed rank's links a grey wash after its crash and one
dashed line across the picture, and the links a failure sent traffic over (the detour) a
blue label.  So the picture says where the time went: which row stayed busy, and why.

Examples
--------
>>> import collsim
>>> from collsim.runtime.faults import Faults
>>> from collsim.viz.utilization import utilization_figure
>>> g = collsim.topology.bidirectional_ring(4)
>>> cluster = collsim.Cluster(g, faults=Faults.parse(fail_link=["1-2@10us"]))
>>> fig = utilization_figure(g, cluster.all_reduce(count=2**16))
>>> [c.get_gid() for c in fig.axes[0].collections if "failed" in (c.get_gid() or "")]
['failed 1-2']
"""

from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from .style import say
from .times import time_tick as format_time  # "20 µs", as the time axis says it

__all__ = ["mark_faults", "mark_slow_stages", "SLOW", "FAILED", "CRASHED", "DETOUR"]

SLOW, FAILED, CRASHED, DETOUR = "#DD6B20", "#C53030", "#4A5568", "#2B6CB0"


def _name(node):
    return f"r{node}" if isinstance(node, int) else str(node)


def mark_faults(ax, links, log, divisor, end):
    """Mark the faults of ``log`` (a :class:`~collsim.runtime.fault_log.FaultLog`) on ``ax``,
    whose rows are ``links`` and whose x axis is seconds / ``divisor`` up to ``end`` s.
    Returns the legend handles to add."""
    faults, rows = log.faults, {link: i for i, link in enumerate(links)}
    labels = ax.get_yticklabels()
    handles = []

    def colour(row, c):
        if row < len(labels):
            labels[row].set_color(c)
            labels[row].set_fontweight("bold")

    detour = {link for r in log.reroutes for link in r.new_links}
    for link in detour:
        if link in rows:
            colour(rows[link], DETOUR)
    if detour & set(rows):
        handles.append(Patch(color=DETOUR, label=say("detour: traffic rerouted off a failed link")))
    for record in faults.slow_links:
        for link in ((record.u, record.v), (record.v, record.u)):
            if link in rows:
                colour(rows[link], SLOW)
                ax.text(
                    1.0,
                    rows[link],
                    f"x{record.factor:g} ",
                    transform=ax.get_yaxis_transform(),
                    ha="right",
                    va="center",
                    fontsize="small",
                    color=SLOW,
                    fontweight="bold",
                    zorder=5,
                )
        handles.append(
            Patch(
                color=SLOW,
                label=say(
                    "slow link {link}: x{factor} bandwidth",
                    link=f"{_name(record.u)}-{_name(record.v)}",
                    factor=f"{record.factor:g}",
                ),
            )
        )
    for record in faults.fail_links:
        at = record.at / divisor
        for link in ((record.u, record.v), (record.v, record.u)):
            if link in rows:
                row = rows[link]
                colour(row, FAILED)
                width = max(end / divisor - at, 0.0)
                ax.broken_barh(
                    [(at, width)],
                    (row - 0.5, 1.0),
                    facecolor=FAILED,
                    alpha=0.15,
                    zorder=3,
                    gid=f"failed {link[0]}-{link[1]}",
                )
                ax.plot([at], [row], marker="X", color=FAILED, markersize=11, zorder=6)
        handles.append(
            Line2D(
                [],
                [],
                color=FAILED,
                marker="X",
                linestyle="none",
                markersize=9,
                label=say(
                    "link {link} down at t={time}",
                    link=f"{_name(record.u)}-{_name(record.v)}",
                    time=format_time(record.at),
                ),
            )
        )
    for rank, at in sorted(log.crashed.items()):
        x = at / divisor
        ax.axvline(x, color=CRASHED, lw=1.4, ls="--", zorder=6)
        for link, row in rows.items():
            if rank in link:
                colour(row, CRASHED)
                ax.broken_barh(
                    [(x, max(end / divisor - x, 0.0))],
                    (row - 0.5, 1.0),
                    facecolor=CRASHED,
                    alpha=0.18,
                    zorder=3,
                    gid=f"crashed {rank}",
                )
        handles.append(
            Line2D(
                [],
                [],
                color=CRASHED,
                ls="--",
                label=say("rank {rank} crashed at t={time}", rank=rank, time=format_time(at)),
            )
        )
    for record in faults.slow_ranks:
        label = say(
            "slow rank {rank}: compute x{factor} (no row: links only)",
            rank=record.rank,
            factor=f"{record.factor:g}",
        )
        handles.append(Patch(color="none", label=label))
    return handles


def mark_slow_stages(ax, log, stage_ranks):
    """On a pipeline timeline (rows: stages), label each straggler's row with its factor
    in orange: its blocks are the long ones."""
    slow = {r.rank: r.factor for r in log.faults.slow_ranks}
    labels = ax.get_yticklabels()
    for stage, rank in enumerate(stage_ranks):
        if rank in slow and stage < len(labels):
            factor = f"{slow[rank]:g}"
            labels[stage].set_text(
                say("stage {stage}\n(x{factor} slow)", stage=stage, factor=factor)
            )
            labels[stage].set_color(SLOW)
            labels[stage].set_fontweight("bold")
    ax.set_yticks(ax.get_yticks(), labels)
