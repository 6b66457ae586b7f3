"""The fast path's numerics: a whole step's reductions and copies on one ``(K, n)`` block.

Row r of the block is rank r's working buffer, laid out as the reference executor lays it
out (:func:`~collsim.collectives.executor._prepare`), and every rank's answer is read from
its row as the executor reads it (``_result``), so the values are the same bit for bit:
the same additions of the same chunks in the same step order.
"""

import numpy as np

from ..collectives.executor import _prepare, _result

__all__ = ["move_data", "SMALL_CHUNK_BYTES"]

# Chunks up to this size move as one fancy-indexed operation per step (numpy's per-call
# cost dominates there); larger ones move as in-place views, which touch memory once.
SMALL_CHUNK_BYTES = 16 << 10


def move_data(schedule, columns, buffers, work, bounds, ufunc, op):
    """Every rank's answer: the steps' reductions and copies applied in step order, in
    ``work``, a ``(K, n)`` block whose rows become the ranks' working buffers."""
    k, n = work.shape
    chunks = [(int(a), int(b)) for a, b in bounds]
    sources = [b.reshape(-1) for b in buffers]
    # one (K, n) block holds every rank's working buffer, so that a step of small chunks
    # is one indexed operation; row r is exactly what _prepare gives rank r
    for r in range(k):
        _prepare(schedule, buffers[r], n, r, chunks, out=work[r])
    even = n % schedule.n_chunks == 0
    size = n // schedule.n_chunks if schedule.n_chunks else 0
    small = even and 0 < size * work.itemsize <= SMALL_CHUNK_BYTES
    inputs = np.stack(sources) if small and any(s.from_input.any() for s in columns) else None
    for step in columns:
        if small and step.single_chunks:
            _move_indexed(step, work, inputs, size, ufunc)
        else:
            _move_views(step, work, sources, bounds, ufunc)
    return [_result(schedule, work[r], buffers[r], op, r, chunks) for r in range(k)]


def _move_indexed(step, work, inputs, size, ufunc):
    """The step as fancy indexing on (rank, chunk, element): gather, reduce, scatter."""
    cells = work.reshape(work.shape[0], -1, size)
    for reduce, src, lo, dst, to, from_input in step.by_kind:
        payload = cells[src, lo]
        if inputs is not None and from_input.any():
            payload[from_input] = inputs.reshape(inputs.shape[0], -1, size)[
                src[from_input], lo[from_input]
            ]
        cells[dst, to] = ufunc(cells[dst, to], payload) if reduce else payload


def _move_views(step, work, sources, bounds, ufunc):
    """The step move by move, on views: no temporary copies of large chunks."""
    first, last = bounds[:, 0].tolist(), bounds[:, 1].tolist()
    rows = zip(
        step.src.tolist(),
        step.dst.tolist(),
        step.lo.tolist(),
        step.hi.tolist(),
        step.to_lo.tolist(),
        step.to_hi.tolist(),
        step.reduce.tolist(),
        step.from_input.tolist(),
    )
    for src, dst, lo, hi, to_lo, to_hi, reduce, from_input in rows:
        payload = (sources[src] if from_input else work[src])[first[lo] : last[hi - 1]]
        out = work[dst, first[to_lo] : last[to_hi - 1]]
        if reduce:
            ufunc(out, payload, out=out)
        else:
            out[...] = payload
