"""What one rank's row of the memory timeline shows, as numbers: the stacked layers, the
states that lasted no time, the peak in a window and when its collectives ran.

Read from the run's memory points (:func:`collsim.network.memory.memory_timeline`) and its
transfers; :mod:`.memory_timeline` draws them.

Examples
--------
>>> from collections import namedtuple
>>> Point = namedtuple("Point", "time total")
>>> transient_peaks([Point(0.0, 4), Point(1.0, 12), Point(1.0, 8)])  # 12 B for no time
[(1.0, 8, 12)]
>>> peak_in([Point(0.0, 4), Point(1.0, 12), Point(2.0, 8)], 0.5, 3.0)
(1.0, 12)
"""

from ..collectives.records import is_collective

__all__ = [
    "STACK_ORDER",
    "stacked_layers",
    "transient_peaks",
    "peak_in",
    "collective_calls",
    "end_of_run",
]

# bottom to top: what a rank holds all step long first, so that a layer that comes and
# goes (gradients, activations, a gathered unit) never lifts the steady ones above it
STACK_ORDER = ("params", "optimizer", "grads", "activations", "gathered_params", "comm_buffers")


def end_of_run(trace):
    """The last moment anything happened: the right edge of every row."""
    ends = [e.time for e in trace.memory]
    ends += [c.end for c in trace.computes] + [t.end for t in trace.transfers]
    return max(ends) or 1e-9


def stacked_layers(points, end):
    """``(times, layers)`` of one rank's stack: ``times`` from 0 to ``end`` (the state
    before the first event is empty), and per category the top of its layer at each time
    (the cumulative sum in :data:`STACK_ORDER`); the last layer's top is the total."""
    times = [0.0] + [p.time for p in points] + [end]
    running = [0] * len(times)
    layers = {}
    for c in STACK_ORDER:
        heights = [0] + [p.by_category[c] for p in points]
        heights.append(heights[-1])
        running = [a + b for a, b in zip(running, heights)]
        layers[c] = running
    return times, layers


def transient_peaks(points):
    """``[(time, held after the last event at that time, highest total within it)]`` for
    each time at which several events left a higher total for no time at all (a block
    allocated before another is freed at the same instant): the step plot cannot show it.
    """
    found = []
    i = 0
    while i < len(points):
        j = i
        while j + 1 < len(points) and points[j + 1].time == points[i].time:
            j += 1
        highest = max(p.total for p in points[i : j + 1])
        if highest > points[j].total:
            found.append((points[i].time, points[j].total, highest))
        i = j + 1
    return found


def collective_calls(trace):
    """``rank -> [(collective, start, end), ...]``: when each collective call of the rank
    was moving data, from its first transfer's start to its last one's end."""
    spans = {}
    for t in trace.transfers:
        if not is_collective(t.tag):
            continue
        key = (t.tag.group, t.tag.call, t.tag.collective)
        for rank in (t.src, t.dst):
            mine = spans.setdefault(rank, {})
            start, end = mine.get(key, (t.start, t.end))
            mine[key] = (min(start, t.start), max(end, t.end))
    return {r: [(key[2], s, e) for key, (s, e) in calls.items()] for r, calls in spans.items()}


def peak_in(points, start, end):
    """``(time, total)`` of the highest state one rank held between ``start`` and ``end``
    (the first time it was reached, or ``start`` if it was already held then), or None
    if it held nothing there.  Over the whole run it is the rank's
    :class:`~collsim.network.memory.MemoryPeak`'s ``time`` and ``total``."""
    before = [p for p in points if p.time < start][-1:]  # the state in force at start
    inside = before + [p for p in points if start <= p.time <= end]
    if not inside or max(p.total for p in inside) == 0:
        return None
    best = max(inside, key=lambda p: p.total)  # the first of equal ones
    return max(best.time, start), best.total
