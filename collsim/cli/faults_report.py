"""What ``collsim run`` prints about faults: a ``# faults:`` line per fault above the table,
and below it which link or rank set the time, read from the trace.

Nothing is printed for a run without faults, so every existing output stays the same.

Examples
--------
>>> import collsim
>>> from collsim.runtime.faults import Faults
>>> cluster = collsim.Cluster(collsim.topology.ring(4),
...                           faults=Faults.parse(slow_link=["1-2:0.25"]))
>>> header_lines(cluster)
['# faults: slow link 1-2: 0.25x its bandwidth']
>>> result = cluster.all_reduce(count=1024)
>>> print(footer_lines(cluster, result)[0])  # doctest: +NORMALIZE_WHITESPACE
# time set by link 1->2: busy 30.25 us of the 30.25 us run,
  at 0.25x its bandwidth (--slow-link 1-2:0.25)
"""

from .. import units

__all__ = ["header_lines", "footer_lines", "print_header", "print_footer"]


def header_lines(cluster):
    """``# faults: ...`` per fault of ``cluster`` (none without faults)."""
    faults = getattr(cluster, "faults", None)
    if not faults:
        return []
    return [f"# faults: {line}" for line in faults.describe()] + (
        [f"# watchdog timeout {units.format_time(faults.watchdog_timeout)}"]
        if faults.fail_links or faults.crash_ranks
        else []
    )


def footer_lines(cluster, result):
    """Which link (busy longest) or rank (computing longest) set the run's time, and what
    the failed links rerouted; none without faults."""
    from ..collectives.degraded import bottleneck_link, rank_busy_times

    faults = getattr(cluster, "faults", None)
    if not faults or result is None:
        return []
    trace, lines = result.trace, []
    end = result.time
    bandwidth = {(u, v): d["bandwidth"] for u, v, d in cluster.topology.edges(data=True)}
    for record in faults.slow_links:  # the degraded rate: a tie goes to the slow link
        for link in ((record.u, record.v), (record.v, record.u)):
            if link in bandwidth:
                bandwidth[link] *= record.factor
    busiest = bottleneck_link(trace, bandwidth)
    computes = rank_busy_times(trace, cluster.size)
    if any(computes):
        rank = max(range(cluster.size), key=lambda r: (computes[r], -r))
        slow = {r.rank: r for r in faults.slow_ranks}
        why = (
            f", compute {slow[rank].factor:g}x as long ({_flag(slow[rank])})"
            if rank in slow
            else ""
        )
        lines.append(
            f"# slowest rank: rank {rank}, computing {units.format_time(computes[rank])}"
            f" of the {units.format_time(end)} run{why}"
        )
    if busiest is not None and busiest.busy > 0 and busiest.busy >= max(computes):
        u, v = busiest.link
        why = ""
        for record in faults.slow_links:
            if {record.u, record.v} == {u, v}:
                why = f", at {record.factor:g}x its bandwidth ({_flag(record)})"
        lines.append(
            f"# time set by link {u}->{v}: busy {units.format_time(busiest.busy)} of the "
            f"{units.format_time(end)} run{why}"
        )
    log = getattr(trace, "faults", None)
    if log is not None and log.reroutes:
        moved = sum(r.remaining for r in log.reroutes)
        detour = dict.fromkeys(link for r in log.reroutes for link in r.new_links)
        shown = ", ".join(f"{a}->{b}" for a, b in list(detour)[:6])
        more = f" and {len(detour) - 6} more" if len(detour) > 6 else ""
        lines.append(
            f"# rerouted: {len(log.reroutes)} transfer(s) off failed links, "
            f"{units.format_size(round(moved))} over {shown}{more}"
        )
    return lines


def _flag(record):
    """The flag as the user typed it, ``--slow-link 2-3:0.25``."""
    flag, _, text = record.given.partition(" ")
    return f"{flag} {text.strip(chr(39))}" if text else repr(record)


def print_header(cluster, args):
    """Print :func:`header_lines` (not with ``--json``)."""
    if not getattr(args, "json", False):
        for line in header_lines(cluster):
            print(line)


def print_footer(cluster, result, args):
    """Print :func:`footer_lines` of the last run (not with ``--json``)."""
    if not getattr(args, "json", False):
        for line in footer_lines(cluster, result):
            print(line)
