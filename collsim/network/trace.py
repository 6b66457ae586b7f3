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

import gc
from collections import Counter, namedtuple
from dataclasses import dataclass, field
from operator import itemgetter

import numpy as np

from ..errors import ConfigError
from ..units import available_memory, format_size, format_time

__all__ = ["Trace", "Stats", "Transfer", "Compute"]

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
    engine happened to settle them (one event each, or a batched step at once)."""

    def __init__(self):
        # the transfers recorded one at a time: the latest as plain tuples (one C append
        # each), every PACK_RECORDS of them packed into columns (see pack())
        self._raw = []
        self._packed = []  # (src, dst, tag, nbytes, start, end, links, label, meta) columns
        self._blocks = []  # blocks of transfers the fast path recorded (see add_block)
        self._transfers = None
        self.computes = []
        self.memory = []  # what rank.alloc and rank.free recorded (collsim.runtime.memory)
        self.faults = None  # a run with faults: its FaultLog (collsim.runtime.fault_log)

    @property
    def transfer_count(self):
        """How many transfers were recorded (without building their records)."""
        packed = sum(len(columns[0]) for columns in self._packed)
        return len(self._raw) + packed + sum(len(b) for b in self._blocks)

    def pack(self):
        """Pack the transfers recorded one at a time so far into columns, nine tuples,
        and free their tuples.  The engine calls it every PACK_RECORDS transfers: the
        tuples were just made, so packing them is cheap, and what stays is a few
        pointers a transfer.  Left as tuples, a run's millions of records would each be
        visited by the cyclic collector when it next runs (most of a second at four
        million) and would take twice the memory.  The order and the records read back
        are the same.

        >>> trace = Trace()
        >>> trace.add_transfer(0, 1, 0, 8, 0.0, 1e-6, ((0, 1),), "")
        >>> trace.pack(); trace.add_transfer(1, 0, 0, 4, 0.0, 2e-6, ((1, 0),), "")
        >>> trace.transfer_count, [t.nbytes for t in trace.transfers]
        (2, [8, 4])
        """
        raw = self._raw
        if raw:
            self._packed.append(tuple(zip(*raw)))
            raw.clear()  # the same list: the engine's recorder appends to it

    def _records(self):
        """Every transfer recorded one at a time, as its tuple, in the order recorded."""
        for columns in self._packed:
            yield from zip(*columns)
        yield from self._raw

    @property
    def transfers(self):
        """Every transfer as a :class:`Transfer`, in the order they ended (ties: by start,
        then sender, then receiver)."""
        if self._transfers is None or len(self._transfers) != self.transfer_count:
            self._check_records_fit()
            # millions of acyclic records: the cyclic collector, left on, would rescan
            # all of them again and again while they are made (most of the time here)
            collecting = gc.isenabled()
            gc.disable()
            try:
                records = list(self._records())
                if self._blocks:
                    records += [r for b in self._blocks for r in b.records()]
                # a stable sort: records that tie on all four keep the order they ended in
                records = sorted(records, key=_ORDER)
                self._transfers = list(map(Transfer._make, records))
            finally:
                if collecting:
                    gc.enable()
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
        self._raw.append((src, dst, tag, nbytes, start, end, links, label, meta))

    def transfer_recorder(self):
        """What :meth:`add_transfer` does, as one C call taking the record's tuple
        ``(src, dst, tag, nbytes, start, end, links, label, meta)``: for the engine's
        per-transfer path, which records millions (a Python call each would be a tenth
        of a transfer's cost).

        >>> trace = Trace()
        >>> trace.transfer_recorder()((0, 1, 0, 8, 0.0, 1e-6, ((0, 1),), "", None))
        >>> trace.transfers[0].nbytes
        8
        """
        return self._raw.append

    def add_block(self, block):
        """Record many transfers at once, kept in the form their maker chose (the fast
        path's :class:`~collsim.fast.blocks.TransferBlock`).  A block reads back through
        ``len(block)``, ``block.records()`` (its rows as record tuples), ``block.span()``
        (its first start and last end), ``block.bytes_sent()`` and
        ``type(block).count_into(blocks, n_ranks, sent, received, messages, link_bytes)``."""
        self._blocks.append(block)

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
        raw, blocks = list(self._records()), self._blocks
        if n:
            sent = sum(r[3] for r in raw) + sum(b.bytes_sent() for b in blocks)
            parts.append(f"{format_size(sent)} sent")
        if n or m:
            starts = [r[4] for r in raw] + [c.start for c in self.computes]
            ends = [r[5] for r in raw] + [c.end for c in self.computes]
            starts += [b.span()[0] for b in blocks if len(b)]
            ends += [b.span()[1] for b in blocks if len(b)]
            parts.append(f"{format_time(min(starts))} .. {format_time(max(ends))}")
        if self.memory:  # a run that never allocates prints as it always did
            k = len(self.memory)
            parts.append(f"{k:,} memory event{'' if k == 1 else 's'}")
        return f"Trace({', '.join(parts)})"

    def stats(self, n_ranks):
        """Bytes sent, received and carried per link, and message counts."""
        sent, received, messages = [0] * n_ranks, [0] * n_ranks, [0] * n_ranks
        link_bytes = {}
        # the records counted in C first, one per (sender, receiver, size, path): a run
        # repeats each a thousand times, and a Python loop per record took half a
        # microsecond.  Sums of integer sizes are exact in any order; a float size (none
        # that collsim records) would be added record by record, in order, as before
        counted = Counter()
        for columns in self._packed:
            counted.update(zip(columns[0], columns[1], columns[3], columns[6]))
        counted.update(map(_GROUP, self._raw))
        groups = counted.items()
        if not all(isinstance(key[2], int | np.integer) for key, _ in groups):
            groups = ((key, 1) for key in map(_GROUP, self._records()))
        for (src, dst, nbytes, links), count in groups:
            total = nbytes * count
            # a rank sent what left it on its own link and received what reached it: every
            # point-to-point transfer; of a group a switch combined (in-switch reduction),
            # only the member that carried the shared leg counts there
            if not links or links[0][0] == src:
                sent[src] += total
            if not links or links[-1][1] == dst:
                received[dst] += total
            messages[src] += count
            for link in links:
                link_bytes[link] = link_bytes.get(link, 0) + total
        if self._blocks:
            type(self._blocks[0]).count_into(
                self._blocks, n_ranks, sent, received, messages, link_bytes
            )
        if self.faults is not None and self.faults.reroutes:
            _split_rerouted(link_bytes, self.faults.reroutes)
        busy = [0.0] * n_ranks
        for c in self.computes:
            busy[c.rank] += c.end - c.start
        return Stats(sent, received, messages, link_bytes, busy)

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


_ORDER = itemgetter(5, 4, 0, 1)  # a record's (end, start, src, dst)
_GROUP = itemgetter(0, 1, 3, 6)  # a record's (src, dst, nbytes, links): what stats() adds
# what one Transfer record with its label and move takes, measured (benchmarks/bench_scale.py:
# 738 B at 1,024 ranks); the check above reads it
RECORD_BYTES = 800
PACK_RECORDS = 4096  # transfers recorded one at a time between two Trace.pack() calls


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
