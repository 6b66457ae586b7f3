"""Collectives from rank programs (``yield from rank.all_reduce(x)``) and from plain
code on a whole cluster (``cluster.all_reduce(buffers)``).

Examples
--------
>>> import numpy as np, collsim
>>> cluster = collsim.Cluster(collsim.topology.ring(4, "100GB/s", "5us"))
>>> out = cluster.all_reduce([np.full(8, float(r)) for r in range(4)], algorithm="ring")
>>> out.outputs[3].tolist()
[6.0, 6.0, 6.0, 6.0, 6.0, 6.0, 6.0, 6.0]
>>> out.stats.steps, out.stats.bytes_sent          # 2(K-1) steps, 2(K-1)/K·N·b each
(6, [96, 96, 96, 96])
>>> print(next(out.steps()))
reduce-scatter 1/3 (step 1 of 6), 0 s .. 5 us
  r0 -> r1  chunk 3  reduce  16 B
  r1 -> r2  chunk 0  reduce  16 B
  r2 -> r3  chunk 1  reduce  16 B
  r3 -> r0  chunk 2  reduce  16 B
  rank 0: [r0 | r0 | r0+r3 | r0]
  rank 1: [r1 | r1 | r1 | r0+r1]
  rank 2: [r1+r2 | r2 | r2 | r2]
  rank 3: [r3 | r2+r3 | r3 | r3]
"""

from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple

from .. import units
from ..errors import ConfigError
from ..runtime.group import Group
from ..units import available_memory as _available_memory
from .analytical import AnalyticalPlan, analytical_plan
from .call_plan import (
    call_protocol,
    call_size,
    default_algorithm,
    first_schedule,
    naming_the_algorithm,
    plan_call,
    shared_schedule,
)
from .checks import check_buffers, check_count, check_dtype, check_op, check_root, is_int
from .context import context_of
from .executor import DTYPE_BYTES, check_engine_budget, run_schedule
from .formulas import HARDWARE_ALGORITHMS
from .records import is_collective
from .registry import AUTO, PIPELINED, canonical_algorithm, canonical_collective
from .schedule import contributions

__all__ = [
    "collective",
    "run_collective",
    "analytical",
    "analytical_plan",
    "AnalyticalPlan",
    "CollectiveResult",
    "StepView",
    "StepTransfer",
    "CollectiveStats",
    "plan_call",
    "default_algorithm",
]


def collective(
    rank,
    name,
    x,
    group=None,
    algorithm=None,
    op="sum",
    root=0,
    count=None,
    dtype=None,
    protocol=None,
):
    """This rank's part of collective ``name`` (use with ``yield from`` or ``rank.start``).

    ``root`` is a group rank.  Pass ``x=None`` with ``count``/``dtype`` for count-only.
    ``algorithm="auto"`` (the default on a hardware preset) and ``protocol`` (default:
    the cluster's) are resolved per call from the closed forms.  The call itself (not
    the first step of the generator it returns) takes the next position in the group's
    sequence, so collectives keep the order they were *issued* in, as NCCL orders them,
    even when one waits behind others on the comm stream.
    """
    name = canonical_collective(name)
    cluster = rank.cluster
    given = algorithm
    if algorithm is None:
        algorithm = default_algorithm(name, cluster.topology)
    algorithm = canonical_algorithm(name, algorithm)
    op = check_op(op)
    group = Group.of(group, rank.size)
    root = check_root(root, group.size)
    protocol = call_protocol(protocol, cluster)
    if (
        algorithm in HARDWARE_ALGORITHMS.get(name, ())
        or algorithm == AUTO
        or isinstance(protocol, str)
    ):
        size = call_size(name, x, count, dtype, group.size)
        with naming_the_algorithm(given):
            schedule, _, protocol = plan_call(
                cluster, name, algorithm, protocol, group.ranks, root, size
            )
    else:  # the plain path, as on every generic topology: no hashing of the group
        schedule = shared_schedule(name, algorithm, group.size, root)
    if (count if x is None else getattr(x, "size", None)) == 0:
        schedule = schedule.without_steps()  # NCCL returns at once from a zero-byte call
    seq = context_of(rank._execution).next_seq(rank.id, group.ranks)
    return run_schedule(rank, schedule, x, op, group, seq, count, dtype, protocol)


@dataclass
class CollectiveStats:
    """Accounting of one collective: read from its trace and schedule."""

    bytes_sent: list  # per group rank
    bytes_received: list  # per group rank
    messages: list  # per group rank
    link_bytes: dict  # (u, v) -> bytes
    steps: int  # rounds of the schedule
    time: float  # simulated seconds


class StepTransfer(NamedTuple):
    """One transfer of a step, in group ranks, with what the trace recorded of it."""

    src: int
    dst: int
    chunks: range  # the sender's chunk indices
    reduce: bool  # True: the receiver adds; False: it overwrites
    nbytes: int
    start: float  # simulated seconds
    end: float
    switch: str = None  # the switch that reduced or multicast it (NVLS), else None


@dataclass
class StepView:
    """One step of a collective: its transfers and every rank's chunks after it.

    ``number`` is the step as people count it, 1..n_steps (0: the initial state), as
    the CLI's "step 1 of 6" and the trace labels print it; ``index`` is the 0-based
    position in ``schedule.steps`` (-1 for the initial state).
    """

    index: int  # 0-based step; -1 for the state before the first step
    phase: str
    phase_step: int
    phase_steps: int
    n_steps: int
    transfers: list  # StepTransfer per move, group ranks
    holdings: list  # [rank][chunk] -> frozenset of contributing group ranks

    @property
    def number(self):
        """The 1-based step number (0 for the initial state, before any transfer)."""
        return self.index + 1

    def labels(self):
        """``[rank][chunk] -> "r0+r1+r3"`` ("-" where a chunk holds nothing yet)."""
        return [["+".join(f"r{r}" for r in sorted(c)) or "-" for c in row] for row in self.holdings]

    def __str__(self):
        if self.index < 0:
            head = "initial state"
        else:
            times = [t[5] for t in self.transfers] + [t[6] for t in self.transfers]
            when = (
                f", {units.format_time(min(times))} .. {units.format_time(max(times))}"
                if times
                else ""
            )
            head = (
                f"{self.phase} {self.phase_step}/{self.phase_steps} "
                f"(step {self.number} of {self.n_steps}){when}"
            )
        lines = [head]
        for t in self.transfers:
            chunks = t.chunks
            which = (
                f"chunk {chunks.start}"
                if len(chunks) == 1
                else f"chunks {chunks.start}-{chunks.stop - 1}"
            )
            kind = "reduce" if t.reduce else "copy"
            if t.switch is not None:  # the switch sums (reduce) or copies (multicast) it
                kind = f"{kind} in {t.switch}"
            lines.append(f"  r{t.src} -> r{t.dst}  {which}  {kind}  {t.nbytes:,} B")
        for r, row in enumerate(self.labels()):
            lines.append(f"  rank {r}: [{' | '.join(row)}]")
        return "\n".join(lines)


@dataclass
class CollectiveResult:
    """What a cluster-level collective returns."""

    collective: str
    algorithm: str
    group: Group
    schedule: object
    outputs: list  # per group rank (None in count-only mode)
    # the RunResult: its trace, and its counts when first read (``stats``)
    run: object = field(repr=False, compare=False)
    trace: object
    time: float
    count: int
    dtype: str
    op: str
    choice: object = None  # the AutoChoice where algorithm="auto" chose, else None
    protocol: object = None  # the Protocol the steps used, None without a protocol model

    @cached_property
    def stats(self):
        """The :class:`CollectiveStats` of the run, in group ranks (counted when first
        read: a loop of calls that reads only the outputs does not pay for them)."""
        stats, ranks = self.run.stats, self.group.ranks
        return CollectiveStats(
            bytes_sent=[stats.bytes_sent[r] for r in ranks],
            bytes_received=[stats.bytes_received[r] for r in ranks],
            messages=[stats.messages_sent[r] for r in ranks],
            link_bytes=stats.link_bytes,
            steps=self.schedule.n_steps,
            time=self.time,
        )

    @property
    def size_bytes(self):
        """S as nccl-tests defines it (all-gather: the buffer each rank ends with)."""
        return self.schedule.buffer_elements(self.count) * DTYPE_BYTES[self.dtype]

    def step(self, number):
        """The :class:`StepView` of step ``number``: 1..n_steps as "step 1 of 6" counts,
        0 for the initial state before any transfer.

        >>> import numpy as np, collsim
        >>> out = collsim.Cluster(collsim.topology.ring(3)).all_reduce([np.ones(3)] * 3)
        >>> out.step(1).number, out.step(1).index, out.step(0).phase
        (1, 0, 'initial')
        """
        n = self.schedule.n_steps
        if not is_int(number) or not 0 <= number <= n:
            raise ConfigError(
                f"step {number!r} is not in this {self.algorithm} "
                f"{self.collective.replace('_', '-')}: choose 1..{n}, or 0 for the initial state"
            )
        for view in self.steps(include_initial=True):
            if view.number == number:
                return view

    def steps(self, include_initial=False):
        """The step-through: one :class:`StepView` per step of the schedule, in order
        (``view.number`` 1, 2, ...; with ``include_initial`` first the state 0)."""
        # every transfer carries its step (the tag) and its move, in group ranks (meta)
        by_step = {}
        for t in self.trace.transfers:
            if is_collective(t.tag):
                # several moves may join one pair in a step (channels, trees): their
                # chunks tell them apart
                key = (t.meta.src, t.meta.dst, t.meta.chunks.start)
                by_step.setdefault(t.tag.step, {})[key] = t
        schedule = self.schedule
        for i, holdings in enumerate(contributions(schedule)):
            s = i - 1
            if s < 0:
                if include_initial:
                    yield StepView(-1, "initial", 0, 0, schedule.n_steps, [], holdings)
                continue
            phase, at, of = schedule.phase_of(s)
            rows = []
            for m in schedule.steps[s]:
                t = by_step.get(s, {}).get((m.src, m.dst, m.chunks.start))
                via = None if m.combine is None else m.combine.switch
                nbytes, start, end = (t.nbytes, t.start, t.end) if t else (0, 0.0, 0.0)
                rows.append(StepTransfer(m.src, m.dst, m.chunks, m.reduce, nbytes, start, end, via))
            yield StepView(s, phase, at, of, schedule.n_steps, rows, holdings)


def run_collective(
    cluster,
    name,
    buffers=None,
    *,
    count=None,
    dtype="float32",
    algorithm=None,
    op="sum",
    root=0,
    group=None,
    protocol=None,
):
    """Run one collective on ``cluster`` and return a :class:`CollectiveResult`.

    ``buffers`` holds one array per group rank (numeric mode).  For count-only mode pass
    ``buffers=None`` with ``count`` (elements per rank, as nccl-tests counts them) and
    ``dtype``: the same schedule and network, sizes without data.  ``algorithm="auto"``
    (the default on a hardware preset) picks the algorithm and protocol with the least
    closed-form time (the result's ``choice`` says which and why); ``protocol``
    (``"simple"``, ``"ll128"``, ``"ll"``, ``"auto"``; default the cluster's) is NCCL's
    wire protocol.  A cluster made with ``fast=False`` runs every transfer through the
    engine one by one, even where the fast path (:mod:`collsim.fast`) would give the same
    result at once.
    """
    name = canonical_collective(name)
    given = algorithm
    if algorithm is None:
        algorithm = default_algorithm(name, cluster.topology)
    algorithm = canonical_algorithm(name, algorithm)
    op = check_op(op)
    group = Group.of(group, cluster.size)
    root = check_root(root, group.size)
    protocol = call_protocol(protocol, cluster)
    # built (and its K checked) before anything moves; a pipelined or auto algorithm is
    # planned again below, once the size is known
    with naming_the_algorithm(given):
        schedule = first_schedule(cluster, name, algorithm, protocol, group.ranks, root)
    numeric = buffers is not None
    if numeric:
        buffers = check_buffers(name, buffers, group)
        schedule.spec.check_shape(buffers[0].shape, group.size)
        size = buffers[0].size
        if count is not None and not (is_int(count) and count == size):
            raise ConfigError(
                f"count={count!r} but the buffers hold {size} elements each: give buffers "
                "(numeric mode) or count= (count-only mode), not both"
            )
        count, dtype = size, buffers[0].dtype.name
        _check_memory(schedule, buffers[0].nbytes)
    elif count is None:
        raise ConfigError("give buffers (numeric mode) or count= and dtype= (count-only mode)")
    else:
        dtype = check_dtype(dtype)
        count = check_count(count, dtype)
    schedule.spec.check_count(count, group.size)
    if algorithm == AUTO or protocol is not None or (name, algorithm) in PIPELINED:
        # the size is known now: choose (auto), cut the pipeline, pick the protocol
        itemsize = DTYPE_BYTES[dtype]
        size = schedule.buffer_elements(count) * itemsize
        with naming_the_algorithm(given):
            schedule, choice, protocol = plan_call(
                cluster, name, algorithm, protocol, group.ranks, root, size
            )
    else:
        choice = None
    if count == 0:  # nothing to move: NCCL returns at once from a zero-byte call
        schedule = schedule.without_steps()
    members = {r: i for i, r in enumerate(group.ranks)}
    chosen = schedule.algorithm  # every rank runs what was chosen here, with `protocol`

    def program(rank):
        if rank.id not in members:
            return None
        data = buffers[members[rank.id]] if numeric else None
        return (
            yield from collective(rank, name, data, group, chosen, op, root, count, dtype, protocol)
        )

    result = _run_fast(cluster, schedule, group, buffers, count, dtype, op, protocol)
    if isinstance(result, str):  # the reason the reference path runs it
        check_engine_budget(schedule, result)
        result = cluster.run(program)
    return CollectiveResult(
        collective=name,
        algorithm=chosen,
        group=group,
        schedule=schedule,
        outputs=[result.returns[r] for r in group.ranks],
        run=result,
        trace=result.trace,
        time=result.time,
        count=int(count),
        dtype=str(dtype),
        op=op,
        choice=choice,
        protocol=protocol,
    )


def _run_fast(cluster, schedule, group, buffers, count, dtype, op, protocol):
    """The seam: the fast path's run (:mod:`collsim.fast`, the same result sooner), or
    why the reference path must run it.  With ``cluster.fast`` off the fast package is
    not even imported."""
    if not cluster.fast:
        return "the cluster runs the reference path (fast=False)"
    from ..fast import Unbatched, run_alone

    result = run_alone(cluster, schedule, group, buffers, count, dtype, op, protocol)
    return result.reason if isinstance(result, Unbatched) else result


# a numeric call that needs less than this fits beside any Python and numpy: it is not
# refused for memory, and asks the system nothing (a loop of small calls would, every time)
ALWAYS_FITS = 16 * 2**20


def _check_memory(schedule, nbytes):
    name, k = schedule.collective, schedule.ranks
    need = 3 * k * schedule.buffer_elements(nbytes)
    if need < ALWAYS_FITS:
        return
    free = _available_memory()
    if free is not None and need > free:
        raise ConfigError(
            f"a numeric {name} of {units.format_size(nbytes)} on {k} ranks needs about "
            f"{units.format_size(need)} of memory, more than the {units.format_size(free)} "
            "available: use count-only mode (buffers=None with count= and dtype=, or "
            "`collsim run --count-only`)"
        )


def analytical(cluster, name, size, algorithm=None, group=None, protocol=None):
    """The closed form for this cluster: α and β read from the path between the first
    two ranks of the group (see :mod:`collsim.collectives.formulas`); on a hardware
    preset, or for a topology-aware algorithm, the form per node and link class of the
    algorithm ``auto`` (the default there) or ``algorithm`` would run."""
    return analytical_plan(cluster, name, size, algorithm, group, protocol).cost
