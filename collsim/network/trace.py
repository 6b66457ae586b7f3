"""What happened: every transfer, compute span and memory event, and the accounting read
from them.

A :class:`Trace` is the single record of a run.  Byte counts (:class:`Stats`), memory
timelines and peaks (:mod:`collsim.network.memory`), the step-through view, every picture
and the Chrome/Perfetto export all read it; nothing counts on the side.

Examples
--------
>>> trace = Trace()
>>> trace.add_transfer(0, 1, 0, 800, 0.0, 1e-6, ((0, 1),), "send")
>>> trace.add_compute(1, 1e-6, 2e-6, "matmul")
>>> stats = trace.stats(2)
>>> stats.bytes_sent, stats.bytes_received, stats.link_bytes
([800, 0], [0, 800], {(0, 1): 800})
>>> trace, len(trace)
(Trace(1 transfer, 1 compute span, 800 B sent, 0 s .. 2 us), 2)
>>> [type(record).__name__ for record in trace]     # every record, in time order
['Transfer', 'Compute']
"""

from collections import namedtuple
from dataclasses import dataclass, field
from operator import attrgetter

from ..errors import ConfigError
from ..units import available_memory, format_size, format_time

__all__ = ["Trace", "TransferLog", "Stats", "Transfer", "Compute"]

Transfer = namedtuple("Transfer", "src dst tag nbytes start end links label meta", defaults=(None,))
Transfer.__doc__ = """One message: ``start`` when both sides were posted (rendezvous), ``end``
when its last byte arrived; ``links`` the directed links it crossed; ``label`` what it
was, for display only (e.g. ``"all_reduce step 2 chunk 5"``: steps count from 1).
Read its meaning from fields: ``tag`` matched the send with its receive (a collective's
is a :class:`~collsim.collectives.records.CollectiveStep`: collective, call, step, mesh
dimension; a pipeline message's a ``PipelineMessage``), and ``meta`` is the typed record
its sender gave (a collective's transfer carries its schedule's
:class:`~collsim.collectives.schedule.ChunkMove`: which chunks), or None."""
Compute = namedtuple("Compute", "rank start end label meta", defaults=(None,))
Compute.__doc__ = """One span of work on a rank's compute stream, ``start`` to ``end`` seconds.
``label`` is for display only; ``meta`` is what the span belongs to, as the typed record
its maker gave ``rank.compute(..., meta=...)`` (a pipeline pass is a
:class:`~collsim.parallel.pipeline.schedules.PipelinePass`, a rank module's pass of one layer a
:class:`~collsim.parallel.modules.LayerPass`), or None. The trace stores it as it is; read the
span's meaning from its fields."""


@dataclass
class Stats:
    """Accounting of a run, in bytes and messages (read from the trace)."""

    bytes_sent: list  # per rank
    bytes_received: list  # per rank
    messages_sent: list  # per rank
    link_bytes: dict = field(default_factory=dict)  # (u, v) -> bytes carried
    compute_time: list = field(default_factory=list)  # per rank, seconds busy computing

    @property
    def total_bytes(self):
        """Bytes sent by all ranks together."""
        return sum(self.bytes_sent)

    def __str__(self):
        rows = [f"{'rank':>4} {'sent (B)':>14} {'received (B)':>14} {'messages':>9}"]
        for r, (s, v, m) in enumerate(
            zip(self.bytes_sent, self.bytes_received, self.messages_sent)
        ):
            rows.append(f"{r:>4} {s:>14,} {v:>14,} {m:>9}")
        return "\n".join(rows)


class Trace:
    """Transfers and compute spans, and memory events (``memory``:
    :class:`~collsim.network.memory.MemoryEvent`) in the order recorded.

    ``transfers`` are in the order they ended; those that end at the same instant by
    start time, then sender, then receiver rank, so the order is the same however the
    engine happened to settle them (one event each, or a batched step at once).

    ``store`` keeps the transfers as they are recorded: by default a :class:`TransferLog`
    (one :class:`Transfer` record each, read back as it is); the fast path
    (:mod:`collsim.fast`) gives its runs a store of its own with the same methods."""

    def __init__(self, store=None):
        self.store = TransferLog() if store is None else store
        self._transfers = None  # the records in order, built when first read
        self.computes = []
        self.memory = []  # what rank.alloc and rank.free recorded (collsim.runtime.memory)
        self.faults = None  # a run with faults: its FaultLog (collsim.runtime.fault_log)

    @property
    def transfer_count(self):
        """How many transfers were recorded (without building their records)."""
        return len(self.store)

    @property
    def transfers(self):
        """Every transfer as a :class:`Transfer`, in the order they ended (ties: by start,
        then sender, then receiver)."""
        if self._transfers is None or len(self._transfers) != self.transfer_count:
            self._check_records_fit()
            self._transfers = self.store.in_order()
        return self._transfers

    def _check_records_fit(self):
        """Refuse to build more records than half the free memory holds: a batched run
        keeps millions of transfers as a few bytes of columns each, where their records
        take about RECORD_BYTES each."""
        n = self.transfer_count
        if n < 1 << 20:
            return
        need, free = n * RECORD_BYTES, available_memory()
        if free is not None and need > free // 2:
            raise ConfigError(
                f"trace.transfers: {n:,} transfer records need about {format_size(need)}, "
                f"more than half the {format_size(free)} of memory available; the run's "
                "figures are in trace.stats(...) and trace.transfer_count, or run fewer ranks "
                "to read every transfer"
            )

    def add_transfer(self, src, dst, tag, nbytes, start, end, links, label, meta=None):
        """Record one transfer (the fields of a :class:`Transfer`)."""
        self.store.add(src, dst, tag, nbytes, start, end, links, label, meta)

    def add_compute(self, rank, start, end, label, meta=None):
        self.computes.append(Compute(rank, start, end, label, meta))

    def add_memory(self, event):
        """Record one :class:`~collsim.network.memory.MemoryEvent` (an allocation or a
        release)."""
        self.memory.append(event)

    def __len__(self):
        """Records: transfers and compute spans (memory events are in ``memory``)."""
        return self.transfer_count + len(self.computes)

    def __iter__(self):
        """Every record (:class:`Transfer` and :class:`Compute`) in time order: by start,
        then end; records that tie keep the order they were recorded in."""
        records = list(self.transfers) + self.computes
        return iter(sorted(records, key=lambda r: (r.start, r.end)))

    def __repr__(self):
        n, m = self.transfer_count, len(self.computes)
        parts = [
            f"{n:,} transfer{'' if n == 1 else 's'}",
            f"{m:,} compute span{'' if m == 1 else 's'}",
        ]
        if n:
            parts.append(f"{format_size(self.store.bytes_sent())} sent")
        if n or m:
            spans = [self.store.span()] if n else []
            spans += [(c.start, c.end) for c in self.computes]
            first = min(start for start, _ in spans)
            last = max(end for _, end in spans)
            parts.append(f"{format_time(first)} .. {format_time(last)}")
        if self.memory:  # a run that never allocates prints as it always did
            k = len(self.memory)
            parts.append(f"{k:,} memory event{'' if k == 1 else 's'}")
        return f"Trace({', '.join(parts)})"

    def stats(self, n_ranks):
        """Bytes sent, received and carried per link, and message counts."""
        stats = Stats([0] * n_ranks, [0] * n_ranks, [0] * n_ranks, {}, [0.0] * n_ranks)
        self.store.count_into(stats)
        if self.faults is not None and self.faults.reroutes:
            _split_rerouted(stats.link_bytes, self.faults.reroutes)
        for c in self.computes:
            stats.compute_time[c.rank] += c.end - c.start
        return stats

    def to_chrome(self, path=None):
        """The trace in Chrome/Perfetto JSON (:mod:`collsim.network.chrome`): one process per
        rank, one thread per stream, a flow arrow from each send to its receive.

        Returns the JSON text; also writes it to ``path`` when given.  Open it at
        ui.perfetto.dev or chrome://tracing; compute and communication overlap shows as
        two tracks of one rank.  A compute span's record (``meta``) appears as its
        event's ``args`` (a pipeline pass's kind, micro-batch, chunk and stage), and a typed
        transfer tag's fields (``to_args()``) and its record's (``meta``: a collective's
        chunks) join its transfer's.
        """
        from .chrome import ChromePart, chrome_json, write_chrome

        parts = [ChromePart(self)]
        return chrome_json(parts) if path is None else write_chrome(parts, path)


class TransferLog:
    """A run's transfers as the reference path keeps them: one :class:`Transfer` record
    each, in the order they arrived.

    A :class:`Trace` reads its transfers through these methods only (``add``, ``len``,
    iteration in the order recorded, ``in_order``, ``count_into``, ``bytes_sent`` and
    ``span``), so a store that keeps them another way (the fast path's) can stand in.

    >>> log = TransferLog()
    >>> log.add(1, 0, 0, 8, 0.0, 2e-6, ((1, 0),), "late")
    >>> log.add(0, 1, 0, 8, 0.0, 1e-6, ((0, 1),), "early")
    >>> [t.label for t in log], [t.label for t in log.in_order()]
    (['late', 'early'], ['early', 'late'])
    """

    def __init__(self):
        self.records = []  # Transfer records, in the order they arrived

    def add(self, src, dst, tag, nbytes, start, end, links, label, meta=None):
        self.records.append(Transfer(src, dst, tag, nbytes, start, end, links, label, meta))

    def __len__(self):
        return len(self.records)

    def __iter__(self):
        return iter(self.records)

    def in_order(self):
        """The records in the trace's order: by end, start, sender, receiver (a stable
        sort: records that tie on all four keep the order they arrived in)."""
        return sorted(self.records, key=transfer_order)

    def count_into(self, stats):
        """Add every record to ``stats`` (a :class:`Stats`), one by one, in order."""
        for t in self.records:
            count_transfers(stats, t.src, t.dst, t.nbytes, t.links)

    def bytes_sent(self):
        return sum(t.nbytes for t in self.records)

    def span(self):
        """``(first start, last end)`` of the records, in seconds."""
        return min(t.start for t in self.records), max(t.end for t in self.records)


# the key the trace orders its transfers by
transfer_order = attrgetter("end", "start", "src", "dst")


def count_transfers(stats, src, dst, nbytes, links, times=1):
    """Add ``times`` transfers of ``nbytes`` from ``src`` to ``dst`` over ``links`` to
    ``stats`` (a :class:`Stats`).

    A rank sent what left it on its own link and received what reached it: every
    point-to-point transfer; of a group a switch combined (in-switch reduction), only the
    member that carried the shared leg counts there."""
    total = nbytes * times
    if not links or links[0][0] == src:
        stats.bytes_sent[src] += total
    if not links or links[-1][1] == dst:
        stats.bytes_received[dst] += total
    stats.messages_sent[src] += times
    link_bytes = stats.link_bytes
    for link in links:
        link_bytes[link] = link_bytes.get(link, 0) + total


# what one Transfer record with its label and move takes, measured (benchmarks/bench_scale.py:
# 738 B at 1,024 ranks); the check above reads it
RECORD_BYTES = 800


def _split_rerouted(link_bytes, reroutes):
    """Move the bytes a rerouted transfer moved before each failure off the path its record
    names (the one it ended on) and onto the paths it left, so every link is charged what
    it carried.  A transfer rerouted twice leaves two records that chain: the second leaves
    the links the first took."""
    chained = {(r.src, r.dst, r.old_links) for r in reroutes}
    for r in reroutes:
        for link in r.old_links:
            link_bytes[link] = link_bytes.get(link, 0) + r.moved
        # the record charged every byte to the final path: take back what earlier legs
        # carried, once per transfer (at its last reroute)
        if (r.src, r.dst, r.new_links) not in chained:
            total_before = _moved_before(r, reroutes)
            for link in r.new_links:
                link_bytes[link] -= total_before
    for link, nbytes in link_bytes.items():
        if isinstance(nbytes, float) and nbytes == int(nbytes):
            link_bytes[link] = int(nbytes)


def _moved_before(last, reroutes):
    """Bytes of ``last``'s transfer that crossed earlier legs: its own ``moved`` and that
    of the reroutes it chains back through."""
    total, links = last.moved, last.old_links
    for r in reversed(reroutes[: reroutes.index(last)]):
        if (r.src, r.dst, r.new_links) == (last.src, last.dst, links):
            total += r.moved
            links = r.old_links
    return total
