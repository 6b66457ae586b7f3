"""The batched path: a collective run alone on an idle network, one step at a time.

``cluster.all_reduce(...)`` and its siblings run one collective on a cluster with nothing
else moving.  There, a schedule step's transfers can be timed, moved and recorded as one
batch instead of one engine event, one handle and one trace record at a time:

* **timing** -- a transfer starts when both its sender and its receiver have finished
  their previous step (``max`` of two ready times, as rendezvous matching gives), pays its
  route's α (plus the protocol's latency) and moves its bytes at the route's narrowest
  rate β.  That is the engine's own arithmetic for a flow alone on its links, done on
  arrays, so every start and end time is the same float;
* **contention** -- the arithmetic above is exact only while no two flows share a link at
  the same time.  Each step checks that no link carries two of its flows and that no flow
  begins on a link before the previous step's flow there has ended; where one would, the
  run is handed to the per-transfer path (:func:`run_batched` returns an
  :class:`Unbatched` reason before any buffer is touched), which shares bandwidth max-min;
* **numerics** -- the step's reductions and copies run on views of the ranks' buffers, or,
  where chunks are small, as one fancy-indexed numpy operation over all of them.  A step
  in which a rank would write a chunk twice, or write a chunk it also sends, depends on
  the order deliveries happen to arrive in, so it too goes to the per-transfer path;
* **trace** -- each step is one :class:`~collsim.fast.blocks.TransferBlock` of columns.

Faults, switch-combined moves (NVLS) and runs that would trip a guard (``max_ops``,
``max_events``, ``max_time``) take the per-transfer path, which reports them.  The results
are the same either way, trace included; ``tests/test_batched.py`` proves it on every
algorithm and topology (``Cluster(fast=False)`` runs the per-transfer path alone).

Examples
--------
>>> import collsim
>>> from collsim.collectives.registry import build
>>> from collsim.runtime.group import Group
>>> cluster = collsim.Cluster(collsim.topology.ring(4, "100GB/s", "5us"))
>>> run = run_batched(cluster, build("all_reduce", "ring", 4), Group.of(None, 4),
...                   None, 1024, "float32", "sum", None)
>>> run.time, run.trace.transfer_count, run.events
(3.0061440000000006e-05, 24, 48)
"""

import gc
import sys
from dataclasses import dataclass
from functools import partial

import numpy as np

from ..collectives import executor  # step_labels read through the module: one wording
from ..collectives.executor import DTYPE_BYTES, REDUCE_OPS
from ..collectives.records import CollectiveStep
from ..collectives.schedule import chunk_bounds
from ..hardware.protocols import slowest_class
from ..network.trace import Trace
from ..runtime.cluster import RunResult
from .blocks import TransferBlock
from .columns import schedule_columns
from .moves import step_moves
from .numerics import move_data

__all__ = ["run_batched", "Unbatched"]

# the largest working block a group keeps for its next call (see _Routing.work)
SPARE_WORK_BYTES = 512 << 20
# Steps of up to this many transfers keep their columns as they are (compacting them
# would cost more than it saves)
_SMALL_BLOCK = 64


def run_batched(cluster, schedule, group, buffers, count, dtype, op, protocol):
    """Run ``schedule`` on ``group`` of ``cluster`` as batched steps and return the
    :class:`~collsim.runtime.cluster.RunResult` the per-transfer path would, or an
    :class:`Unbatched` saying why that path must run instead (before touching a buffer).

    ``buffers`` is one array per group rank, or None (count-only, ``count`` elements of
    ``dtype`` per rank); ``protocol`` a Protocol or None."""
    if cluster.faults:
        return Unbatched("the cluster has faults, which act on flows in flight")
    columns = _columns(cluster, schedule)
    combined = next((s for s, step in enumerate(columns) if step.combined), None)
    if combined is not None:
        return Unbatched(f"step {combined + 1} is reduced in the switch (NVLS)")
    k, moves = schedule.ranks, sum(len(step) for step in columns)
    if 3 * k + moves > cluster.max_ops or 2 * moves > cluster.max_events:
        return Unbatched("the run would pass the max_ops or max_events guard")
    n = schedule.buffer_elements(count)
    bounds = np.array(chunk_bounds(n, schedule.n_chunks), dtype=np.int64).reshape(-1, 2)
    first, last = bounds[:, 0], bounds[:, 1]
    itemsize = DTYPE_BYTES[dtype]
    racing = (
        None
        if buffers is None
        else next((s for s, step in enumerate(columns) if not step.race_free), None)
    )
    if racing is not None:
        return Unbatched(
            f"step {racing + 1} writes a chunk twice, or a chunk it also sends, "
            "so its result depends on the order deliveries arrive in"
        )
    collecting = gc.isenabled()
    gc.disable()  # as Cluster.run: millions of acyclic arrays and records
    try:
        timing = _Timing(cluster, np.asarray(group.ranks, dtype=np.int64), protocol)
        sizes = (last - first) * itemsize  # bytes of each chunk
        equal = int(sizes[0]) if len(sizes) and sizes.min() == sizes.max() else None
        steps = []
        for step in columns:
            if step.single_chunks:  # one chunk a move: its size, or the one size of all
                nbytes = equal if equal is not None else _compact(sizes[step.lo])
            else:
                nbytes = _compact((last[step.hi - 1] - first[step.lo]) * itemsize)
            timed = timing.step(step, nbytes)
            if timed is None:  # contention: max-min sharing decides these times
                return Unbatched(
                    f"flows of step {len(steps) + 1} would share a link, which "
                    "max-min sharing decides"
                )
            steps.append((nbytes, *timed))
        if timing.time > cluster.max_time:
            return Unbatched("the run would pass the max_time guard")
        outputs = None
        if buffers is not None:
            work = timing.routing.work(schedule.ranks, n, buffers[0].dtype)
            outputs = move_data(schedule, columns, buffers, work, bounds, REDUCE_OPS[op], op)
            del work  # the answers hold it (views), or the next call may have it
        trace = _record(schedule, group, columns, steps, timing, protocol)
    finally:
        if collecting:
            gc.enable()
    returns = [None] * cluster.size
    for i, r in enumerate(group.ranks):
        returns[r] = outputs[i] if outputs is not None else None
    return RunResult(returns, timing.time, trace, timing.events, cluster.size)


@dataclass(frozen=True)
class Unbatched:
    """Why a collective takes the per-transfer path: ``reason``, in words."""

    reason: str


class _Routing:
    """What the runs of one group with one protocol on one cluster share: every route's
    links, α and β, and the :class:`_Layout` of each set of senders and receivers, kept
    for the cluster's life (a training loop calls the same collective thousands of
    times).  The cluster holds it (``cluster.caches.fast["routings"]``); it does not hold the
    cluster, which each call passes in, so that a dropped cluster is freed at once by
    reference counting, with its working block."""

    def __init__(self, ranks, protocol):
        self.ranks, self.protocol = ranks, protocol
        self.routes, self.route_ids = [], {}  # links of each route; (src, dst) -> id
        self.links = {}  # directed link -> id
        # (id(src), id(dst)) -> (src, dst, layout): the arrays are held, so their ids stay
        # theirs; and by value, (src bytes, dst bytes) -> layout
        self.by_identity, self.by_value = {}, {}
        self.spare = None  # the last numeric call's working block (see work)

    def work(self, k, n, dtype):
        """A ``(k, n)`` block for a numeric call's working buffers: the last call's when
        nothing else holds it any more (its answers, which are views of its rows, were
        all dropped), else a new one.  A training loop calls the same all-reduce again
        and again; fresh memory for each call costs a page fault per 4 KiB written, which
        made a 32 MiB call three times the additions and copies it does (PyTorch's caching
        allocator keeps its blocks for the same reason).  Only blocks up to
        SPARE_WORK_BYTES are kept, one per group, for the cluster's life."""
        spare = self.spare
        # held by self.spare, by `spare` and by getrefcount's argument: by no answer
        if (
            spare is not None
            and spare.shape == (k, n)
            and spare.dtype == dtype
            and sys.getrefcount(spare) == 3
        ):
            return spare
        self.spare = None  # a block of another shape, or one still in use, is not kept
        work = np.empty((k, n), dtype=dtype)
        if work.nbytes <= SPARE_WORK_BYTES:
            self.spare = work
        return work

    @classmethod
    def of(cls, cluster, ranks, protocol):
        kept = cluster.caches.fast.setdefault("routings", {})  # (ranks, protocol) -> _Routing
        key = (ranks.tobytes(), protocol)
        routing = kept.get(key)
        if routing is None:
            if len(kept) >= _KEEP_ROUTINGS:
                kept.pop(next(iter(kept)))  # the oldest
            routing = kept[key] = cls(ranks, protocol)
        return routing

    def layout(self, cluster, step):
        # by identity first (a ring's steps share their arrays), by value when that misses
        found = self.by_identity.get((id(step.src), id(step.dst)))
        if found is not None and found[0] is step.src and found[1] is step.dst:
            return found[2]
        key = (step.src.tobytes(), step.dst.tobytes())
        layout = self.by_value.get(key)
        if layout is None:
            layout = self.by_value[key] = _Layout(self, cluster, step)
        self.by_identity[(id(step.src), id(step.dst))] = (step.src, step.dst, layout)
        return layout

    def route(self, cluster, src, dst):
        """``(id, α, β, link ids)`` of the route between ranks ``src``, ``dst`` of ``cluster``."""
        found = self.route_ids.get((src, dst))
        if found is None:
            links, alpha, beta = cluster.route(src, dst)
            if self.protocol is not None:  # its latency on the path's slowest link class
                edges = cluster.topology.edges
                alpha = alpha + self.protocol.latency_for(
                    slowest_class([edges[link].get("link_class") for link in links])
                )
            ids = [self.links.setdefault(link, len(self.links)) for link in links]
            found = self.route_ids[(src, dst)] = (len(self.routes), alpha, beta, ids)
            self.routes.append(links)
        return found


# the routings a cluster keeps (one per group and protocol), the oldest dropped first
_KEEP_ROUTINGS = 64
# the schedules whose columns a cluster keeps, the oldest dropped first
_KEEP_COLUMNS = 16


def _columns(cluster, schedule):
    """``schedule``'s steps as columns, kept on the cluster for its next calls (a training
    loop runs the same schedule thousands of times).  Kept by the schedule's id with the
    schedule itself, so the id cannot be reused while the entry lives."""
    kept = cluster.caches.fast.setdefault("columns", {})  # id -> (schedule, columns)
    found = kept.get(id(schedule))
    if found is None:
        if len(kept) >= _KEEP_COLUMNS:
            kept.pop(next(iter(kept)))  # the oldest
        found = kept[id(schedule)] = (schedule, schedule_columns(schedule))
    return found[1]


class _Timing:
    """Start and end times of every step's transfers, from per-rank ready times."""

    def __init__(self, cluster, ranks, protocol):
        self.cluster = cluster  # for the routes of steps not seen before
        self.routing = _Routing.of(cluster, ranks, protocol)
        self.maxmin = cluster.model == "maxmin"
        self.ranks, self.protocol = ranks, protocol
        self.ready = np.zeros(len(ranks))  # when each group rank posts its next step
        self.level = 0.0  # while every rank posts at one instant: that instant (else None)
        self.free_at = None  # per link id: when its last flow ends (made when first read)
        self.time, self.events = 0.0, 0

    @property
    def routes(self):
        return self.routing.routes

    def _free_at(self):
        """Per link id, when its last flow ends: every link known to the routing."""
        n = len(self.routing.links)
        if self.free_at is None:
            self.free_at = np.zeros(n)
        elif len(self.free_at) < n:
            self.free_at = np.concatenate([self.free_at, np.zeros(n - len(self.free_at))])
        return self.free_at

    def step(self, step, nbytes):
        """``(start, end, layout)`` of one step's transfers, or None under contention."""
        layout = self.routing.layout(self.cluster, step)
        if isinstance(nbytes, int) or _constant(nbytes):
            if self.level is not None and layout.alpha0 is not None:
                return self._uniform_step(
                    step, int(nbytes) if isinstance(nbytes, int) else int(nbytes[0]), layout
                )
            if isinstance(nbytes, int):
                nbytes = np.full(len(step), nbytes, dtype=np.int64)
        ready = self.ready
        if self.level is not None:  # leaving the uniform steps: every rank at one time
            ready[:] = self.level
            self._free_at()[:] = self.level  # no flow so far ends after it
            self.level = None
        start = np.maximum(ready[step.src], ready[step.dst])
        begin = start + layout.alpha
        wire = nbytes.astype(np.float64)
        if self.protocol is not None:
            wire = wire / (self.protocol.efficiency * 1.0)
        moving = (wire > 0) & layout.has_links
        # the engine's own arithmetic: end = (start + α) + bytes / β, 0 s for no bytes
        end = begin + np.divide(wire, layout.beta, out=np.zeros_like(wire), where=moving)
        if self.maxmin and moving.any():
            owner, links = layout.owner, layout.flat
            if not moving.all():
                keep = moving[owner]
                owner, links = owner[keep], links[keep]
            free_at = self._free_at()
            if not layout.unique or np.any(begin[owner] < free_at[links]):
                return None
            free_at[links] = end[owner]
        # a rank posts its next step once all its transfers of this one are done
        if layout.unique_ends:
            ready[step.src] = np.maximum(ready[step.src], end)
            ready[step.dst] = np.maximum(ready[step.dst], end)
        else:
            np.maximum.at(ready, step.src, end)
            np.maximum.at(ready, step.dst, end)
        if len(end):
            self.time = max(self.time, float(end.max()))
        self.events += len(end) + int(np.count_nonzero(moving))  # START, and FINISH
        return _compact(start), _compact(end), layout

    def _uniform_step(self, step, nbytes, layout):
        """A step whose ranks all post at one instant (``level``) and whose transfers all
        have the same α, β and size: one start and one end, in plain floats (the same
        IEEE arithmetic as the arrays).  Every earlier flow ended by ``level``, so only a
        link shared within the step could make flows meet."""
        start = self.level
        begin = start + layout.alpha0
        wire = float(nbytes) if self.protocol is None else nbytes / (self.protocol.efficiency * 1.0)
        moving = wire > 0
        end = begin + wire / layout.beta0 if moving else begin
        if self.maxmin and moving and not layout.unique:
            return None
        k = len(step)
        if layout.covers:  # every rank took part: all ready at `end` together
            self.level = end
        else:
            self.ready[:] = start
            self.ready[step.src] = end
            self.ready[step.dst] = end
            free_at = self._free_at()
            free_at[:] = start  # every earlier flow ended by then
            if moving:
                free_at[layout.flat] = end
            self.level = None
        self.time = max(self.time, end) if k else self.time
        self.events += k * (2 if moving else 1)  # START, and FINISH when bytes move
        return start, end, layout  # one start and one end for every row of the block


class _Layout:
    """What every step with the same senders and receivers shares: routes, α, β, and the
    links each move crosses (``flat``, with ``owner`` the move of each entry)."""

    def __init__(self, routing, cluster, step):
        ranks = routing.ranks
        found = [
            routing.route(cluster, s, d)
            for s, d in zip(ranks[step.src].tolist(), ranks[step.dst].tolist())
        ]
        self.route = np.array([f[0] for f in found], dtype=np.int64)
        self.alpha = np.array([f[1] for f in found], dtype=np.float64)
        self.beta = np.array([f[2] for f in found], dtype=np.float64)
        self.has_links = np.array([bool(f[3]) for f in found], dtype=bool)
        self.flat = np.array([i for f in found for i in f[3]], dtype=np.int64)
        self.owner = np.repeat(np.arange(len(found)), [len(f[3]) for f in found])
        self.unique = len(np.unique(self.flat)) == len(self.flat)
        self.unique_ends = _distinct(step.src) and _distinct(step.dst)
        # one α and one β for every move, each crossing links: the uniform steps' scalars
        alphas, betas = set(self.alpha.tolist()), set(self.beta.tolist())
        same = len(alphas) == 1 and len(betas) == 1 and bool(self.has_links.all())
        self.alpha0 = alphas.pop() if same else None
        self.beta0 = betas.pop() if same else None
        # the step's ranks are all the group's, each once: readiness stays one instant
        k = len(ranks)
        self.covers = self.unique_ends and len(np.union1d(step.src, step.dst)) == k


def _constant(values):
    """Whether ``values`` holds one value (a broadcast does, without a look)."""
    return len(values) > 0 and (values.strides[0] == 0 or values.min() == values.max())


def _compact(values):
    """``values``, or one value broadcast to their length where all are equal (a step
    on a uniform ring starts and ends at one instant): 8 bytes instead of 8 per row."""
    if len(values) > _SMALL_BLOCK and values.min() == values.max():
        return np.broadcast_to(values[:1].copy(), values.shape)  # not a view: frees values
    return values


def _distinct(values):
    return len(np.unique(values)) == len(values)


def _record(schedule, group, columns, steps, timing, protocol):
    """The run's trace: one block of columns per step, with the tags the per-transfer
    path gives (group id 0 and call 0: the run's first and only collective)."""
    trace = Trace()
    routes, ranks = tuple(timing.routes), timing.ranks
    identity = bool(np.array_equal(ranks, np.arange(len(ranks))))
    for s, (step, (nbytes, start, end, layout)) in enumerate(zip(columns, steps)):
        tag = CollectiveStep(schedule.collective, schedule.algorithm, 0, 0, s, group.dim, protocol)
        src, dst = (step.src, step.dst) if identity else (ranks[step.src], ranks[step.dst])
        moves = partial(_moves, schedule, s)
        labels = partial(_labels, schedule, s)
        trace.add_block(
            TransferBlock(src, dst, nbytes, start, end, layout.route, routes, tag, labels, moves)
        )
    return trace


def _moves(schedule, s):
    return step_moves(schedule.steps[s])


def _labels(schedule, s):
    return executor.step_labels(schedule.collective, s + 1, schedule.steps[s])
