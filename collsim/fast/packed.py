"""The fast path's trace storage: a run's transfers packed into columns as they arrive.

A :class:`~collsim.network.trace.Trace` keeps its transfers in a store; the reference path's
is a :class:`~collsim.network.trace.TransferLog`, one
:class:`~collsim.network.trace.Transfer` record each.  :class:`PackedTransfers` has the same
methods and keeps the same transfers in less memory and less of the collector's time:

* the engine's transfers, recorded one at a time, as plain tuples (one C append each),
  and every :data:`PACK_RECORDS` of them packed into nine column tuples while the tuples are
  still warm.  Left as tuples, a run's millions of records would each be visited by the
  cyclic collector when it next runs (most of a second at four million), at twice the
  memory; packed, a transfer keeps about 73 B instead of 121 (``bench_engine``'s last line);
* the batched path's steps as :class:`~collsim.fast.blocks.TransferBlock` columns, a few
  bytes a transfer, whose records are built only when read.

The records it reads back, their order and the counts are those of a ``TransferLog`` given
the same transfers (``tests/test_fast_equivalence.py``).

Examples
--------
>>> from collsim.network.trace import Trace, TransferLog
>>> packed, log = PackedTransfers(), TransferLog()
>>> for store in (packed, log):
...     store.add(1, 0, 0, 8, 0.0, 2e-6, ((1, 0),), "late")
...     store.add(0, 1, 0, 8, 0.0, 1e-6, ((0, 1),), "early")
>>> packed.pack(); packed.in_order() == log.in_order()
True
>>> Trace(packed).stats(2) == Trace(log).stats(2)
True
"""

import gc
from collections import Counter
from operator import itemgetter

import numpy as np

from ..network.trace import Transfer, count_transfers
from .blocks import block_stats

__all__ = ["PackedTransfers", "PACK_RECORDS"]

PACK_RECORDS = 4096  # transfers recorded one at a time between two packs

_GROUP = itemgetter(0, 1, 3, 6)  # a row's (src, dst, nbytes, links): what stats add
_ORDER = itemgetter(5, 4, 0, 1)  # a row's (end, start, src, dst): the trace's order


class PackedTransfers:
    """A trace's transfers in the fast path's forms: recent tuples, packed columns and
    blocks (see the module's docstring).  Read back in the order recorded: the engine's
    transfers first, then the blocks."""

    def __init__(self):
        self.recent = []  # (src, dst, tag, nbytes, start, end, links, label, meta) tuples
        self.packed = []  # every PACK_RECORDS of them as nine column tuples
        self.blocks = []  # the batched path's steps (TransferBlock)

    def add(self, src, dst, tag, nbytes, start, end, links, label, meta=None):
        """Record one transfer, as :meth:`TransferLog.add
        <collsim.network.trace.TransferLog.add>` does."""
        recent = self.recent
        recent.append((src, dst, tag, nbytes, start, end, links, label, meta))
        if len(recent) == PACK_RECORDS:
            self.pack()

    def pack(self):
        """Pack the recent tuples into columns and free them (``add`` calls it every
        :data:`PACK_RECORDS` transfers, while they are warm)."""
        if self.recent:
            self.packed.append(tuple(zip(*self.recent)))
            self.recent = []

    def add_block(self, block):
        """Record a batched step's transfers at once, as the columns they came in."""
        self.blocks.append(block)

    def __len__(self):
        packed = sum(len(columns[0]) for columns in self.packed)
        return packed + len(self.recent) + sum(len(b) for b in self.blocks)

    def _engine_rows(self):
        """The transfers recorded one at a time, as their tuples, in the order recorded."""
        for columns in self.packed:
            yield from zip(*columns)
        yield from self.recent

    def _rows(self):
        """Every transfer as its tuple, in the order recorded."""
        yield from self._engine_rows()
        for block in self.blocks:
            yield from block.records()

    def __iter__(self):
        return map(Transfer._make, self._rows())

    def in_order(self):
        """The records in the trace's order (``network.trace.transfer_order``: a stable
        sort of the rows, by end, start, sender, receiver), built with the cyclic collector
        off: millions of acyclic records, which it would otherwise rescan again and again
        while they are made (most of the time here)."""
        collecting = gc.isenabled()
        gc.disable()
        try:
            return list(map(Transfer._make, sorted(self._rows(), key=_ORDER)))
        finally:
            if collecting:
                gc.enable()

    def count_into(self, stats):
        """Add every transfer to ``stats`` (a :class:`~collsim.network.trace.Stats`), with
        the figures a ``TransferLog`` gives.  The engine's transfers are counted in C first,
        one group per (sender, receiver, size, path): a run repeats each a thousand times,
        and a Python loop per record took half a microsecond.  Sums of integer sizes are
        exact in any order; a fractional size (none that collsim records) is added record
        by record, in order."""
        counted = Counter()
        for columns in self.packed:
            counted.update(zip(columns[0], columns[1], columns[3], columns[6]))
        counted.update(map(_GROUP, self.recent))
        groups = counted.items()
        if not all(isinstance(key[2], int | np.integer) for key, _ in groups):
            groups = ((key, 1) for key in map(_GROUP, self._engine_rows()))
        for (src, dst, nbytes, links), times in groups:
            count_transfers(stats, src, dst, nbytes, links, times)
        if self.blocks:
            block_stats(self.blocks, stats)

    def bytes_sent(self):
        engine = sum(sum(columns[3]) for columns in self.packed) + sum(r[3] for r in self.recent)
        return engine + sum(b.bytes_sent() for b in self.blocks)

    def span(self):
        """``(first start, last end)`` of every transfer, in seconds."""
        spans = [(min(columns[4]), max(columns[5])) for columns in self.packed]
        if self.recent:
            spans.append((min(r[4] for r in self.recent), max(r[5] for r in self.recent)))
        spans += [b.span() for b in self.blocks if len(b)]
        return min(s for s, _ in spans), max(e for _, e in spans)
