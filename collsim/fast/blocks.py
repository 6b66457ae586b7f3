"""A fast-path step's transfers in the trace, as columns: a few numbers a transfer.

The fast path (:mod:`collsim.fast.batched`) records a whole step at once; its trace store
(:class:`~collsim.fast.packed.PackedTransfers`) keeps it as one :class:`TransferBlock` and
builds its :class:`~collsim.network.trace.Transfer` records only when someone reads them, so
a run of 33 million transfers keeps 8 bytes a step where the steps are uniform.
"""

from dataclasses import dataclass

import numpy as np

__all__ = ["TransferBlock", "block_stats"]


@dataclass(frozen=True, eq=False)
class TransferBlock:
    """Transfers recorded together, as columns: one row per transfer (a batched step of a
    collective, :mod:`collsim.fast.batched`).  A row reads as the
    :class:`~collsim.network.trace.Transfer` ``(src[i], dst[i], tag, nbytes[i], start[i], end[i],
    routes[route[i]], labels()[i], metas()[i])``; ``labels`` and ``metas`` are called
    only when someone reads the rows as records, so a run of millions of transfers keeps
    a few numbers per transfer and no strings or objects.

    >>> from collsim.network.trace import Transfer
    >>> block = TransferBlock(np.array([0, 1]), np.array([1, 0]), np.array([8, 8]),
    ...                       np.zeros(2), np.array([1e-6, 2e-6]), np.array([0, 1]),
    ...                       (((0, 1),), ((1, 0),)), "step", lambda: ["a", "b"])
    >>> [(t.src, t.dst, t.links, t.label) for t in map(Transfer._make, block.records())]
    [(0, 1, ((0, 1),), 'a'), (1, 0, ((1, 0),), 'b')]
    """

    src: np.ndarray  # int ranks
    dst: np.ndarray
    nbytes: np.ndarray  # int64, or one int for every row
    start: np.ndarray  # float64 seconds, or one float for every row
    end: np.ndarray
    route: np.ndarray  # index into routes
    routes: tuple  # the directed links of each route
    tag: object  # every row's tag
    labels: object  # () -> one display label per row
    metas: object = None  # () -> one record per row (None: no records)

    def __len__(self):
        return len(self.src)

    def column(self, name):
        """Column ``name`` as an array of one value per row (a number given for every row
        is repeated, for the one who asks)."""
        values = getattr(self, name)
        return values if isinstance(values, np.ndarray) else np.full(len(self), values)

    def bytes_sent(self):
        """Bytes of every row together."""
        return int(self.column("nbytes").sum())

    def span(self):
        """``(first start, last end)`` of the rows, in seconds."""
        return float(np.min(self.start)), float(np.max(self.end))

    def records(self):
        """The rows as plain tuples, in row order."""
        metas = self.metas() if self.metas is not None else [None] * len(self)
        routes, tag = self.routes, self.tag
        return [
            (s, d, tag, n, a, b, routes[r], label, meta)
            for s, d, n, a, b, r, label, meta in zip(
                self.src.tolist(),
                self.dst.tolist(),
                self.column("nbytes").tolist(),
                self.column("start").tolist(),
                self.column("end").tolist(),
                self.route.tolist(),
                self.labels(),
                metas,
            )
        ]


def block_stats(blocks, stats):
    """Add the blocks' transfers to ``stats`` (a :class:`~collsim.network.trace.Stats`:
    per-rank and per-link counts), exactly (int64): every row of a block travels its own
    path from its sender to its receiver.  Blocks are counted together, a million rows at
    a time, in a few numpy calls."""
    sent, received, messages = stats.bytes_sent, stats.bytes_received, stats.messages_sent
    link_bytes = stats.link_bytes
    totals = [np.zeros(len(sent), dtype=np.int64) for _ in range(3)]
    by_routes = {}  # id(routes) -> (routes, bytes per route, used): steps share routes
    batch, rows = [], 0
    for b in blocks:
        batch.append(b)
        rows += len(b)
        if rows >= 1 << 20:
            _count(batch, totals, by_routes)
            batch, rows = [], 0
    _count(batch, totals, by_routes)
    for counts, added in zip((sent, received, messages), totals):
        for rank in np.flatnonzero(added).tolist():
            counts[rank] += int(added[rank])
    for routes, carried, used in by_routes.values():
        for r in np.flatnonzero(used).tolist():
            nbytes = int(carried[r])
            for link in routes[r]:
                link_bytes[link] = link_bytes.get(link, 0) + nbytes


def _count(blocks, totals, by_routes):
    if not blocks:
        return
    src = np.concatenate([b.src for b in blocks])
    dst = np.concatenate([b.dst for b in blocks])
    nbytes = np.concatenate([b.column("nbytes") for b in blocks]).astype(np.int64)
    np.add.at(totals[0], src, nbytes)
    np.add.at(totals[1], dst, nbytes)
    np.add.at(totals[2], src, 1)
    starts = np.cumsum([0] + [len(b) for b in blocks])
    groups = {}  # id(routes) -> indices of its blocks: a run's steps share one table
    for i, b in enumerate(blocks):
        groups.setdefault(id(b.routes), []).append(i)
    for members in groups.values():
        table = blocks[members[0]].routes
        _, carried, used = by_routes.setdefault(
            id(table), (table, np.zeros(len(table), dtype=np.int64), np.zeros(len(table), bool))
        )
        route = np.concatenate([blocks[i].route for i in members])
        moved = np.concatenate([nbytes[starts[i] : starts[i + 1]] for i in members])
        np.add.at(carried, route, moved)
        used[route] = True  # a link that carried only empty messages is counted, at 0 B
