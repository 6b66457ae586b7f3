"""The batched path: a collective run alone on an idle network, one step at a time.

``cluster.all_reduce(...)`` and its siblings run one collective on a cluster with nothing
else moving.  There, a schedule step's transfers can be timed, moved and recorded as one
batch instead of one engine event, one handle and one trace record at a time:

* **timing** -- a transfer starts when both its sender and its receiver have finished
  their previous step (``max`` of two ready times, as rendezvous matching gives), pays its
  route's α (plus the protocol's latency) and moves its bytes at the route's narrowest
  rate β.  That is the engine's own arithmetic for a flow alone on its links, done on
  arrays, so every start and end time is the same float (the routes, α and β, worked out
  once per group, are :mod:`collsim.fast.routing`'s);
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
from dataclasses import dataclass
from functools import partial

import numpy as np

from ..collectives import executor  # step_labels read through the module: one wording
from ..collectives.executor import DTYPE_BYTES, REDUCE_OPS
from ..collectives.nccl_choice import opening as nccl_opening
from ..collectives.records import CollectiveStep
from ..collectives.schedule import chunk_bounds
from ..network.trace import Trace
from ..runtime.cluster import RunResult
from .blocks import TransferBlock
from .columns import schedule_columns
from .moves import step_moves
from .numerics import move_data
from .packed import PackedTransfers
from .routing import Routing

__all__ = ["run_batched", "Unbatched"]

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
    gc.disable()  # as engine_run: millions of acyclic arrays and records
    try:
        timing = _Timing(cluster, np.asarray(group.ranks, dtype=np.int64), protocol)
        opening = protocol and nccl_opening(
            cluster.topology, schedule.collective, schedule.algorithm, protocol
        )
        opening = None if opening is protocol else opening  # step 1's, where it pays a launch
        sizes = (last - first) * itemsize  # bytes of each chunk
        equal = int(sizes[0]) if len(sizes) and sizes.min() == sizes.max() else None
        steps = []
        for step in columns:
            if step.single_chunks:  # one chunk a move: its size, or the one size of all
                nbytes = equal if equal is not None else _compact(sizes[step.lo])
            else:
                nbytes = _compact((last[step.hi - 1] - first[step.lo]) * itemsize)
            timed = timing.step(step, nbytes, None if steps else opening)
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
        trace = _record(schedule, group, columns, steps, timing, protocol, opening)
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
        self.routing = Routing.of(cluster, ranks, protocol)
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

    def step(self, step, nbytes, protocol=None):
        """``(start, end, layout)`` of one step's transfers, or None under contention;
        ``protocol`` carries them instead of the run's (the first step's, with the
        call's base latency)."""
        layout = self.routing.layout(self.cluster, step)
        alpha = layout.alpha if protocol is None else layout.alpha_with(protocol)
        if isinstance(nbytes, int) or _constant(nbytes):
            if self.level is not None and layout.alpha0 is not None and protocol is None:
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
        begin = start + alpha
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


def _constant(values):
    """Whether ``values`` holds one value (a broadcast does, without a look)."""
    return len(values) > 0 and (values.strides[0] == 0 or values.min() == values.max())


def _compact(values):
    """``values``, or one value broadcast to their length where all are equal (a step
    on a uniform ring starts and ends at one instant): 8 bytes instead of 8 per row."""
    if len(values) > _SMALL_BLOCK and values.min() == values.max():
        return np.broadcast_to(values[:1].copy(), values.shape)  # not a view: frees values
    return values


def _record(schedule, group, columns, steps, timing, protocol, opening=None):
    """The run's trace: one block of columns per step, with the tags the per-transfer
    path gives (group id 0 and call 0: the run's first and only collective; the first
    step's protocol ``opening`` where the call pays a base latency)."""
    store = PackedTransfers()
    routes, ranks = tuple(timing.routes), timing.ranks
    identity = bool(np.array_equal(ranks, np.arange(len(ranks))))
    for s, (step, (nbytes, start, end, layout)) in enumerate(zip(columns, steps)):
        carried = opening if s == 0 and opening is not None else protocol
        tag = CollectiveStep(schedule.collective, schedule.algorithm, 0, 0, s, group.dim, carried)
        src, dst = (step.src, step.dst) if identity else (ranks[step.src], ranks[step.dst])
        moves = partial(_moves, schedule, s)
        labels = partial(_labels, schedule, s)
        store.add_block(
            TransferBlock(src, dst, nbytes, start, end, layout.route, routes, tag, labels, moves)
        )
    return Trace(store)


def _moves(schedule, s):
    return step_moves(schedule.steps[s])


def _labels(schedule, s):
    return executor.step_labels(schedule.collective, s + 1, schedule.steps[s])
