"""One executor runs any collective schedule on the cluster, with real buffers or
(count-only) with sizes alone.

Each rank walks the schedule's steps; in every step it posts its sends and receives
together (as ``rank.exchange`` does) and moves on when its own transfers are done, as
real implementations do, so a rank is never held back by transfers it takes no part in.
The steps run back to back inside the execution (a :class:`~collsim.runtime.ops.Steps`
operation), as a NCCL kernel runs a collective without returning to the host.
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

from array import array
from dataclasses import dataclass
from itertools import accumulate

import numpy as np

from ..errors import ConfigError
from ..runtime.group import Group
from ..runtime.ops import CountOnly, Enter, Incoming, Outgoing, Step, Steps
from .checks import DTYPE_BYTES, NUMERIC_DTYPES, check_count, check_dtype, check_op, check_root
from .context import KeptPlan, StepPlan, context_of
from .nccl_choice import opening
from .records import CollectiveStep
from .reference import reference
from .schedule import chunk_bounds

__all__ = [
    "run_schedule",
    "CollectiveCall",
    "REDUCE_OPS",
    "DTYPE_BYTES",
    "reference",
    "integer_inputs",
    "step_labels",
    "check_engine_budget",
    "MAX_ENGINE_TRANSFERS",
    "MAX_ENGINE_RANKS",
]

REDUCE_OPS = {
    "sum": np.add,
    "avg": np.add,
    "prod": np.multiply,
    "max": np.maximum,
    "min": np.minimum,
    "band": np.bitwise_and,
    "bor": np.bitwise_or,
    "bxor": np.bitwise_xor,
}


@dataclass(frozen=True)
class CollectiveCall:
    """What one rank asked for: compared across the group before anything moves."""

    name: str
    algorithm: str
    count: int  # elements in the rank's input
    dtype: str
    op: str
    root: int
    reduces: bool = False  # from the schedule's spec: print the op
    rooted: bool = False  # print the root

    def matches(self, other):
        return self == other

    def __str__(self):
        root = f", root={self.root}" if self.rooted else ""
        op = f", op={self.op}" if self.reduces else ""
        return (
            f"{self.name}(algorithm={self.algorithm}, count={self.count}, "
            f"dtype={self.dtype}{op}{root})"
        )


# The engine spends about 10 us and a few hundred bytes on every transfer: a ring
# all-reduce on 2,048 ranks (8.4 million transfers) is its limit for one collective
MAX_ENGINE_TRANSFERS = 2 * 2048 * 2047
# and max-min sharing among thousands of long flows (a tree on a 4,096-rank one-way ring)
# takes minutes for few transfers: 2,048 ranks is that path's limit too
MAX_ENGINE_RANKS = 2048


def check_engine_budget(schedule, why):
    """Refuse, before it starts, a run through the engine of more than
    :data:`MAX_ENGINE_TRANSFERS` moves (``why``: the reason it goes through the engine)."""
    moves = sum(len(step) for step in schedule.steps)
    if moves > MAX_ENGINE_TRANSFERS or schedule.ranks > MAX_ENGINE_RANKS:
        name = schedule.collective.replace("_", "-")
        raise ConfigError(
            f"{name} ({schedule.algorithm}) on {schedule.ranks:,} ranks: {moves:,} transfers "
            f"would go through the engine one at a time, because {why}; that path takes at "
            f"most {MAX_ENGINE_RANKS:,} ranks and {MAX_ENGINE_TRANSFERS:,} transfers (a ring "
            "all-reduce on 2,048 ranks, about a minute); use fewer ranks, an algorithm whose "
            "steps share no link (ring on a ring or a switch), or the closed form "
            "(collsim run --analytical)"
        )


def _plan(context, schedule):
    """Every step's moves indexed by rank, a
    :class:`~collsim.collectives.context.StepPlan` per step, built once per run and
    schedule and kept in the run's context.  The moves are the schedule's own
    :class:`~collsim.collectives.schedule.ChunkMove` objects: each transfer carries its
    move as its ``meta`` record, with nothing made per transfer.
    """
    entry = context.plans.get(id(schedule))
    if entry is not None:
        return entry.steps
    # a ring all-reduce on 1,024 ranks has two million moves: a few flat containers per
    # step, rather than small lists and tuples per rank and step, keep building cheap
    # and give the garbage collector (which scans every container once after the run)
    # little to do
    k, plan = schedule.ranks, []
    one_each = (list(range(k)), array("l", range(k + 1)))  # ranks, ptr: one move each
    for s, step in enumerate(schedule.steps):
        step = tuple(step)  # a RankRule step makes its moves once here, not per message
        send_ptr, sends = _by_rank(step, [m.src for m in step], k, one_each)
        labels = step_labels(schedule.collective, s + 1, sends)
        recv_ptr, recvs = _by_rank(step, [m.dst for m in step], k, one_each)
        plan.append(StepPlan(send_ptr, sends, labels, recv_ptr, recvs))
    context.plans[id(schedule)] = KeptPlan(schedule, plan)
    return plan


def step_labels(collective, number, moves):
    """The display labels of the transfers of ``moves``, the moves of step ``number``
    (1-based, as the CLI's "step 1 of 6" counts): for people only; nothing reads meaning
    from them (the tag and the move are the transfer's records).

    >>> from collsim.collectives.schedule import ChunkMove
    >>> step_labels("all_reduce", 2, [ChunkMove(0, 1, range(5, 6), True),
    ...                               ChunkMove(1, 0, range(0, 2), False)])
    ['all_reduce step 2 chunk 5', 'all_reduce step 2 chunks 0-1']
    """
    prefix = f"{collective} step {number} "
    return [
        f"{prefix}chunk {m.chunks.start}"
        if len(m.chunks) == 1
        else f"{prefix}chunks {m.chunks.start}-{m.chunks.stop - 1}"
        for m in moves
    ]


def _by_rank(step, keys, k, one_each):
    """``(ptr, moves)``: the step's moves stably sorted by ``keys`` (ranks), and where
    each rank's run of them starts (``ptr[r]``) and stops (``ptr[r + 1]``)."""
    ordered = sorted(keys)
    if ordered == keys:
        moves = step  # already in rank order, as a ring's sends are: share the tuple
    else:
        order = sorted(range(len(keys)), key=keys.__getitem__)
        moves = tuple(step[i] for i in order)
    ranks, ptr = one_each
    if ordered == ranks:  # every rank has exactly one (a ring step): share the pointers
        return ptr, moves
    counts = [0] * (k + 1)
    for r in keys:
        counts[r + 1] += 1
    return array("l", accumulate(counts)), moves


def run_schedule(
    rank, schedule, data, op="sum", group=None, seq=0, count=None, dtype=None, protocol=None
):
    """Run ``schedule`` as this rank's part of a collective (use with ``yield from``).

    ``data`` is the rank's input array, or ``None`` for a count-only run, where
    ``count`` and ``dtype`` give the size.  ``protocol`` (a
    :class:`~collsim.hardware.protocols.Protocol` or None) rides in every step's tag, so
    the runtime charges its latency and wire bytes.  Returns the rank's output array
    (``None`` where the collective gives this rank nothing, e.g. a non-root after reduce).
    """
    group = Group.of(group, rank.size)
    me = group.index(rank.id)
    if group.size != schedule.ranks:
        raise ConfigError(f"schedule for {schedule.ranks} ranks run on a group of {group.size}")
    op = check_op(op)
    check_root(schedule.root, schedule.ranks)
    numeric = data is not None
    if numeric:
        try:
            data = np.asarray(data)
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"{schedule.collective} of {data!r}: not an array: {exc}") from None
        if data.dtype.name not in NUMERIC_DTYPES:
            raise ConfigError(
                f"dtype {data.dtype} is not supported: use one of {', '.join(NUMERIC_DTYPES)}"
            )
        schedule.spec.check_shape(data.shape, schedule.ranks)
        count, dtype = data.size, data.dtype.name
    else:
        dtype = check_dtype(dtype)
        count = check_count(count, dtype)
    schedule.spec.check_count(count, schedule.ranks)
    if schedule.spec.reduces:
        check_op(op, str(dtype))  # a bitwise op of floats means nothing
    call = CollectiveCall(
        schedule.collective,
        schedule.algorithm,
        int(count),
        str(dtype),
        op,
        schedule.root,
        schedule.spec.reduces,
        schedule.spec.rooted,
    )
    yield Enter(group.ranks, seq, call)
    # the working buffer holds the whole result (all-gather's input is one chunk of it)
    n = schedule.buffer_elements(count)
    context = context_of(rank._execution)
    bounds = _chunk_bounds(context, n, schedule.n_chunks)
    ranks = group.ranks
    tags = _step_tags(context, schedule, ranks, group.dim, seq, protocol, rank.cluster.topology)
    plan = _plan(context, schedule)
    if numeric:
        work = _prepare(schedule, data, n, me, bounds)
        steps = _numeric_steps(
            plan, me, tags, ranks, bounds, work, data.reshape(-1), REDUCE_OPS[op]
        )
    else:
        steps = _count_only_steps(plan, me, tags, ranks, bounds, DTYPE_BYTES[dtype])
    yield Steps(steps)
    yield Enter(ranks, seq, None)
    if not numeric:
        return None
    return _result(schedule, work, data, op, me, bounds)


# The two step builders below turn the schedule's moves into this rank's messages.  Peers
# come from the schedule and the checked group, so sends and receives are built
# directly rather than through rank.isend/irecv, whose checks they already passed.


def _count_only_steps(plan, me, tags, ranks, bounds, itemsize):
    """Rank ``me``'s :class:`Step` (its :class:`Outgoing` and :class:`Incoming`
    messages) in every step it takes part in, sizes only."""
    sized = {}  # payloads, one per size
    for s, step in enumerate(plan):
        send_ptr, recv_ptr = step.send_ptr, step.recv_ptr
        first, stop = send_ptr[me], send_ptr[me + 1]
        first_recv, stop_recv = recv_ptr[me], recv_ptr[me + 1]
        if first == stop and first_recv == stop_recv:
            continue  # this rank takes no part in step s
        tag, sends, labels, recvs = tags[s], step.sends, step.labels, step.recvs
        out_sends = []
        for i in range(first, stop):
            m = sends[i]
            chunks = m.chunks
            nbytes = (bounds[chunks.stop - 1][1] - bounds[chunks.start][0]) * itemsize
            payload = sized.get(nbytes) or sized.setdefault(nbytes, CountOnly(nbytes))
            out_sends.append(Outgoing(ranks[m.dst], payload, tag, labels[i], m))
        out_recvs = []
        for i in range(first_recv, stop_recv):
            out_recvs.append(Incoming(ranks[recvs[i].src], tag))
        yield Step(out_sends, out_recvs)


def _numeric_steps(plan, me, tags, ranks, bounds, work, source, ufunc):
    """Rank ``me``'s :class:`Step` in every step it takes part in: sends read views
    of its working buffer (or input), receives land in (or reduce into) views of it."""

    def span(chunks):
        return bounds[chunks.start][0], bounds[chunks.stop - 1][1]

    for s, step in enumerate(plan):
        send_ptr, recv_ptr = step.send_ptr, step.recv_ptr
        first, stop = send_ptr[me], send_ptr[me + 1]
        first_recv, stop_recv = recv_ptr[me], recv_ptr[me + 1]
        if first == stop and first_recv == stop_recv:
            continue
        tag, sends, labels, recvs = tags[s], step.sends, step.labels, step.recvs
        out_sends, out_recvs = [], []
        for i in range(first, stop):
            m = sends[i]
            lo, hi = span(m.chunks)
            payload = (source if m.from_input else work)[lo:hi]
            out_sends.append(Outgoing(ranks[m.dst], payload, tag, labels[i], m))
        for m in recvs[first_recv:stop_recv]:
            lo, hi = span(m.dst_chunks)
            out_recvs.append(Incoming(ranks[m.src], tag, work[lo:hi], ufunc if m.reduce else None))
        yield Step(out_sends, out_recvs)


def _chunk_bounds(context, n, n_chunks):
    """``chunk_bounds(n, n_chunks)``, computed once per run rather than once per rank."""
    bounds = context.chunk_bounds.get((n, n_chunks))
    if bounds is None:
        bounds = context.chunk_bounds[(n, n_chunks)] = chunk_bounds(n, n_chunks)
    return bounds


def _step_tags(context, schedule, ranks, dim, seq, protocol=None, topology=None):
    """The message tag (a :class:`CollectiveStep`) of every step of collective call
    ``seq`` on group ``ranks``: one per step, shared by all ranks of the group (the trace
    keeps a tag per transfer, and two million equal tags would cost memory and time)."""
    # tags carry a small group id, not the rank tuple: a tuple of 1,024 ranks would be
    # hashed again for every message
    group_ids = context.group_ids
    gid = group_ids.setdefault(ranks, len(group_ids))
    tags = context.step_tags.setdefault((gid, seq), [])
    # ranks that disagree on the collective at this position (reported when the last
    # one enters) may run schedules of different lengths until then
    collective, algorithm = schedule.collective, schedule.algorithm
    first = protocol and opening(topology, collective, algorithm, protocol)  # + base latency
    tags.extend(
        CollectiveStep(collective, algorithm, gid, seq, s, dim, first if s == 0 else protocol)
        for s in range(len(tags), schedule.n_steps)
    )
    return tags


def _prepare(schedule, data, n, me, bounds, out=None):
    """Rank ``me``'s working buffer before step 1, laid out as ``schedule.start`` says
    (written into ``out``, an array of ``n`` elements, when given)."""
    flat = data.reshape(-1)
    if schedule.start == "full":
        if out is None:
            return flat.copy()
        out[...] = flat
        return out
    work = np.zeros(n, dtype=data.dtype) if out is None else out
    if out is not None:
        work[...] = 0
    if schedule.start == "own_chunk":  # the input is this rank's chunk of the buffer
        lo, hi = bounds[me]
        work[lo:hi] = flat
    elif me == schedule.root:  # "root": only the root's buffer holds its input
        work[:] = flat
    return work


def _result(schedule, work, data, op, me, bounds):
    """Rank ``me``'s answer: the part of its buffer ``schedule.result`` names, shaped
    and (for ``avg``) divided as the schedule's spec says."""
    spec, k = schedule.spec, schedule.ranks
    if schedule.result == "root" and me != schedule.root:
        return None
    if schedule.result == "own_chunk":
        lo, hi = bounds[me]
        out = work[lo:hi].copy()
    else:
        out = work
    shape = spec.output_shape(data.shape, k)
    if shape is not None:
        out = out.reshape(shape)
    if op == "avg" and spec.reduces:
        out = _divide(out, k)
    return out


def _divide(values, k):
    """The average from the sum.  Integers truncate toward zero, as NCCL's ``ncclAvg``
    and C division do; floor division and a correction cannot overflow where ``|x|``
    can (the most negative integer has no positive twin)."""
    if np.issubdtype(values.dtype, np.integer):
        divisor = values.dtype.type(k)
        inexact_negative = (values < 0) & (values % divisor != 0)
        return (values // divisor + inexact_negative).astype(values.dtype)
    return values / values.dtype.type(k)


def integer_inputs(k, count, dtype, op="sum", seed=0):
    """One buffer per rank of small integer values, as nccl-tests crafts its inputs, so
    every reduction order gives the exact same result (values in -4..3; for ``prod``
    -1 or 1).  Every rank draws its own values, so a chunk sent to the wrong rank or
    from the wrong place shows.  The values are random bytes shifted right (the top 3
    bits of each, or the sign bit for ``prod``): several times faster than drawing
    bounded int64s and converting them, which took most of a 64 MiB ``collsim run``.

    >>> [b.tolist() for b in integer_inputs(2, 3, "float32", seed=1)]
    [[-1.0, -1.0, 1.0], [-1.0, -3.0, 0.0]]
    """
    rng = np.random.default_rng(seed)
    shift = 7 if op == "prod" else 5
    out = []
    for _ in range(k):
        values = np.frombuffer(rng.bytes(count), dtype=np.int8) >> shift  # (count,)
        if op == "prod":  # -1 or 0 -> -1 or 1
            values = 2 * values + 1
        out.append(values.astype(dtype))
    return out
