"""One executor runs any collective schedule on the cluster, with real buffers or
(count-only) with sizes alone.

Each rank walks the schedule's steps; in every step it posts its sends and receives
together (``rank.exchange``) and moves on when its own transfers are done, as real
implementations do, so a rank is never held back by transfers it takes no part in.
Receives land straight in the rank's working buffer (reduced into it or copied over
it); reductions cost no simulated time.

Examples
--------
>>> import numpy as np, collsim
>>> from collsim.collectives.registry import build
>>> cluster = collsim.Cluster(collsim.topology.ring(4))
>>> schedule = build("all_reduce", "ring", 4)
>>> def program(rank):
...     x = np.arange(8.0) * (rank.id + 1)
...     return (yield from run_schedule(rank, schedule, x, op="sum"))
>>> cluster.run(program).returns[2].tolist()
[0.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0]
"""

from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError
from ..runtime.group import Group
from ..runtime.ops import CountOnly, Enter, Exchange, Recv, Send
from .schedule import chunk_bounds

__all__ = [
    "run_schedule",
    "CollectiveCall",
    "REDUCE_OPS",
    "DTYPE_BYTES",
    "reference",
    "integer_inputs",
]

REDUCE_OPS = {"sum": np.add, "avg": np.add, "prod": np.multiply, "max": np.maximum,
              "min": np.minimum}  # fmt: skip
# bytes per element; bfloat16 only in count-only mode (numpy has no such type)
DTYPE_BYTES = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4}


@dataclass(frozen=True)
class CollectiveCall:
    """What one rank asked for: compared across the group before anything moves."""

    name: str
    algorithm: str
    count: int  # elements in the rank's input
    dtype: str
    op: str
    root: int

    def matches(self, other):
        return self == other

    def __str__(self):
        root = f", root={self.root}" if self.name in ("broadcast", "reduce") else ""
        reduces = self.name in ("all_reduce", "reduce_scatter", "reduce")
        op = f", op={self.op}" if reduces else ""
        return f"{self.name}(algorithm={self.algorithm}, count={self.count}, " \
               f"dtype={self.dtype}{op}{root})"  # fmt: skip


def _op_name(op):
    name = str(getattr(op, "name", op)).lower()
    if name not in REDUCE_OPS:
        raise ConfigError(f"unknown reduce op {op!r}: choose one of {', '.join(REDUCE_OPS)}")
    return name


def _per_rank_plan(schedule):
    """Cache: for every group rank, its ``(step, sends, recvs)`` in step order, each move
    paired with its trace label."""
    cached = schedule.notes.get("plan")
    if cached is None:
        per_rank = [[] for _ in range(schedule.ranks)]
        for s, step in enumerate(schedule.steps):
            touched = {}
            for m in step:
                label = _label(schedule, s, m)
                touched.setdefault(m.src, ([], []))[0].append((m, label))
                touched.setdefault(m.dst, ([], []))[1].append(m)
            for r, (sends, recvs) in touched.items():
                per_rank[r].append((s, sends, recvs))
        cached = schedule.notes["plan"] = per_rank
    return cached


def run_schedule(rank, schedule, data, op="sum", group=None, seq=0, count=None,
                 dtype=None):  # fmt: skip
    """Run ``schedule`` as this rank's part of a collective (use with ``yield from``).

    ``data`` is the rank's input array, or ``None`` for a count-only run, where
    ``count`` and ``dtype`` give the size.  Returns the rank's output array (``None``
    where the collective gives this rank nothing, e.g. a non-root after reduce).
    """
    group = Group.of(group, rank.size)
    me = group.index(rank.id)
    if group.size != schedule.ranks:
        raise ConfigError(f"schedule for {schedule.ranks} ranks run on a group of {group.size}")
    op = _op_name(op)
    numeric = data is not None
    if numeric:
        data = np.asarray(data)
        count, dtype = data.size, data.dtype.name
    elif dtype not in DTYPE_BYTES:
        raise ConfigError(f"unknown dtype {dtype!r}: choose one of {', '.join(DTYPE_BYTES)}")
    if schedule.collective == "all_to_all" and count % schedule.ranks:
        k = schedule.ranks
        lower, upper = count - count % k, count - count % k + k
        raise ConfigError(
            f"all-to-all of {count} elements on {k} ranks: each rank sends an equal block to "
            f"every rank, so the count must be a multiple of {k} (nearest: {lower} or {upper})"
        )
    call = CollectiveCall(schedule.collective, schedule.algorithm, int(count), str(dtype), op,
                          schedule.root)  # fmt: skip
    yield Enter(group.ranks, seq, call)
    # the working buffer holds the whole result: all-gather's input is one chunk of it
    n = count * schedule.ranks if schedule.collective == "all_gather" else count
    bounds = chunk_bounds(n, schedule.n_chunks)
    itemsize = np.dtype(dtype).itemsize if numeric else DTYPE_BYTES[dtype]

    def span(chunks):
        return bounds[chunks.start][0], bounds[chunks.stop - 1][1]

    work = _prepare(schedule, data, n, me, bounds) if numeric else None
    source = data.reshape(-1) if numeric else None
    ufunc = REDUCE_OPS[op]
    ranks = group.ranks
    # tags carry a small group id, not the rank tuple: a tuple of 1,024 ranks would be
    # hashed again for every message
    group_ids = rank._execution.__dict__.setdefault("group_ids", {})
    gid = group_ids.setdefault(ranks, len(group_ids))
    sized = {}  # count-only payloads, one per size
    # peers come from the schedule and the checked group, so the operations are built
    # directly rather than through rank.isend/irecv: this loop is the hot path of
    # count-only runs on thousands of ranks
    for s, sends, recvs in _per_rank_plan(schedule)[me]:
        tag = ("collective", gid, seq, s)
        out_sends, out_recvs = [], []
        for m, label in sends:
            lo, hi = span(m.chunks)
            if numeric:
                payload = (source if m.from_input else work)[lo:hi]
            else:
                nbytes = (hi - lo) * itemsize
                payload = sized.get(nbytes) or sized.setdefault(nbytes, CountOnly(nbytes))
            out_sends.append(Send(ranks[m.dst], payload, tag, False, label))
        for m in recvs:
            if numeric:
                lo, hi = span(m.dst_chunks)
                out = work[lo:hi]
                out_recvs.append(Recv(ranks[m.src], tag, out, ufunc if m.reduce else None, False))
            else:
                out_recvs.append(Recv(ranks[m.src], tag, None, None, False))
        yield Exchange(out_sends, out_recvs)
    yield Enter(group.ranks, seq, None)
    if not numeric:
        return None
    return _result(schedule, work, data, op, me, bounds)


def _label(schedule, step, move):
    chunks = move.chunks
    which = (
        f"chunk {chunks.start}" if len(chunks) == 1 else f"chunks {chunks.start}-{chunks.stop - 1}"
    )
    return f"{schedule.collective} step {step} {which}"


def _prepare(schedule, data, n, me, bounds):
    flat = data.reshape(-1)
    if schedule.start == "full" and schedule.collective != "all_to_all":
        return flat.copy()
    work = np.zeros(n, dtype=data.dtype)
    if schedule.collective == "all_gather":
        lo, hi = bounds[me]
        work[lo:hi] = flat
    elif schedule.collective == "all_to_all":
        lo, hi = bounds[me]
        work[lo:hi] = flat[lo:hi]  # a rank's own chunk stays where it is
    elif me == schedule.root:  # broadcast
        work[:] = flat
    return work


def _result(schedule, work, data, op, me, bounds):
    k = schedule.ranks
    if schedule.result == "root" and me != schedule.root:
        return None
    if schedule.result == "own_chunk":
        lo, hi = bounds[me]
        out = work[lo:hi].copy()
    elif schedule.collective in ("all_gather", "all_to_all"):
        out = work
    else:
        out = work.reshape(data.shape)
    if op == "avg" and schedule.collective in ("all_reduce", "reduce_scatter", "reduce"):
        out = _divide(out, k)
    return out


def _divide(values, k):
    if np.issubdtype(values.dtype, np.integer):
        # integer average truncates toward zero, as C integer division does
        return (np.sign(values) * (np.abs(values) // k)).astype(values.dtype)
    return values / values.dtype.type(k)


def reference(collective, inputs, op="sum", root=0):
    """What the collective must give each rank, by plain numpy (the test oracle).

    >>> xs = [np.arange(4.0) + r for r in range(2)]
    >>> [o.tolist() for o in reference("reduce_scatter", xs)]
    [[1.0, 3.0], [5.0, 7.0]]
    """
    k = len(inputs)
    flats = [np.asarray(x).reshape(-1) for x in inputs]
    if collective == "all_gather":
        whole = np.concatenate(flats)
        return [whole.copy() for _ in range(k)]
    if collective == "broadcast":
        return [flats[root].copy() for _ in range(k)]
    if collective == "all_to_all":
        bounds = chunk_bounds(flats[0].size, k)
        out = []
        for r in range(k):
            parts = [flats[src][slice(*bounds[r])] for src in range(k)]
            whole = np.empty_like(flats[0])
            for src, part in enumerate(parts):
                whole[slice(*bounds[src])] = part
            out.append(whole)
        return out
    ufunc = REDUCE_OPS[_op_name(op)]
    total = flats[0].copy()
    for x in flats[1:]:
        total = ufunc(total, x)
    if _op_name(op) == "avg":
        total = _divide(total, k)
    if collective == "reduce_scatter":
        return [total[slice(*b)].copy() for b in chunk_bounds(total.size, k)]
    if collective == "reduce":
        return [total.reshape(np.shape(inputs[0])) if r == root else None for r in range(k)]
    return [total.reshape(np.shape(inputs[0])) for _ in range(k)]


def integer_inputs(k, count, dtype, op="sum", seed=0):
    """One buffer per rank of small integer values, as nccl-tests crafts its inputs, so
    every reduction order gives the exact same result (products stay in {-1, 1}).

    >>> [b.tolist() for b in integer_inputs(2, 3, "float32", seed=1)]
    [[0.0, 0.0, 2.0], [4.0, -4.0, -3.0]]
    """
    rng = np.random.default_rng(seed)
    low, high = (-1, 2) if op == "prod" else (-4, 5)
    out = []
    for _ in range(k):
        values = rng.integers(low, high, size=count)
        if op == "prod":
            values[values == 0] = 1
        out.append(values.astype(dtype))
    return out
