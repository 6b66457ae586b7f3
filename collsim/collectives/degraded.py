"""A degraded ring, in closed form, and which link set a run's time, read from its trace.

A ring all-reduce runs 2(K-1) steps; in each, every rank sends one chunk of S/K bytes to
its neighbour and waits for the chunk from the other side before the next step
(rendezvous, as NCCL's ring does).  With every link at β, a step takes α + S/(Kβ).  With
one link of the ring at ``f·β``, that link's transfer is the slowest of every step and the
next step's transfer over it can start only when the last one has arrived, so each step
takes α + S/(K·f·β) and the whole ring

    t = 2(K-1) · (α + S / (K·f·β))

-- one slow link sets the pace of every rank, which is why one bad cable slows a whole job
(a tree suffers it only on the ranks below that link).

Examples
--------
>>> import collsim
>>> from collsim.runtime.faults import Faults
>>> g = collsim.topology.ring(8, bandwidth="100GB/s", latency="5us")
>>> cluster = collsim.Cluster(g, faults=Faults.parse(slow_link=["2-3:0.25"]))
>>> result = cluster.all_reduce(count=2**18, dtype="float32")
>>> closed = degraded_ring_all_reduce_time(8, 2**20, alpha=5e-6, beta=100e9, factor=0.25)
>>> abs(result.time - closed) < 1e-15, round(closed * 1e6, 2)
(True, 143.4)
>>> bottleneck_link(result.trace).link
(2, 3)
"""

from dataclasses import dataclass

from ..errors import ConfigError

__all__ = [
    "degraded_ring_all_reduce_time",
    "link_busy_times",
    "bottleneck_link",
    "LinkBusy",
    "rank_busy_times",
]


def degraded_ring_all_reduce_time(k, size, alpha, beta, factor=1.0):
    """Seconds of a ring all-reduce of ``size`` bytes on ``k`` ranks whose slowest ring
    link runs at ``factor`` times ``beta`` (bytes/s); ``alpha`` is one hop's latency.

    >>> degraded_ring_all_reduce_time(4, 4e9, alpha=0.0, beta=1e9)     # 6 steps of 1 s
    6.0
    >>> degraded_ring_all_reduce_time(4, 4e9, alpha=0.0, beta=1e9, factor=0.5)
    12.0
    """
    for name, value in (
        ("k", k),
        ("size", size),
        ("alpha", alpha),
        ("beta", beta),
        ("factor", factor),
    ):
        if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
            raise ConfigError(
                f"degraded_ring_all_reduce_time({name}={value!r}): give a number >= 0"
            )
    if k < 1 or beta == 0 or factor == 0:
        raise ConfigError(
            f"degraded_ring_all_reduce_time(k={k!r}, beta={beta!r}, factor={factor!r}): "
            "k >= 1 ranks and a bandwidth and factor > 0"
        )
    return 2 * (k - 1) * (alpha + size / (k * factor * beta))


@dataclass(frozen=True)
class LinkBusy:
    """A directed ``link``'s ``busy`` seconds (some transfer crossing it was in flight)
    and the bytes it carried."""

    link: tuple
    busy: float
    nbytes: float


def link_busy_times(trace):
    """``{link: LinkBusy}``: for every link that carried a transfer, the length of the
    union of its transfers' ``[start, end]`` intervals, read from the trace."""
    spans, carried = {}, {}
    for t in trace.transfers:
        for link in t.links:
            spans.setdefault(link, []).append((t.start, t.end))
            carried[link] = carried.get(link, 0) + t.nbytes
    out = {}
    for link, intervals in spans.items():
        busy, end = 0.0, None
        for a, b in sorted(intervals):
            if end is None or a > end:
                busy += b - a
                end = b
            elif b > end:
                busy += b - end
                end = b
        out[link] = LinkBusy(link, busy, carried[link])
    return out


def bottleneck_link(trace, bandwidth=None):
    """The :class:`LinkBusy` of the link busy longest, or None if nothing moved: the link
    that set a communication-bound run's time.

    Links of one path are busy equally long (a slow hop keeps the whole path's transfer in
    flight); among links busy as long as the longest (to one part in a million), the
    narrowest by ``bandwidth`` (``{link: bytes/s}``, when given) wins, then the first to
    carry bytes."""
    busy = link_busy_times(trace)
    if not busy:
        return None
    longest = max(b.busy for b in busy.values())
    tied = [b for b in busy.values() if b.busy >= longest * (1 - 1e-6)]
    if bandwidth is None:
        return tied[0]
    return min(tied, key=lambda b: bandwidth.get(b.link, float("inf")))


def rank_busy_times(trace, k):
    """Seconds each of ``k`` ranks spent computing, from the trace's compute spans."""
    busy = [0.0] * k
    for c in trace.computes:
        busy[c.rank] += c.end - c.start
    return busy
