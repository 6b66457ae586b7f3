"""Collectives from rank programs (``yield from rank.all_reduce(x)``) and from plain
code on a whole cluster (``cluster.all_reduce(buffers)``).  What the latter returns, a
:class:`CollectiveResult` and its step-through, is :mod:`collsim.collectives.results`'s
(re-exported here).

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
from .hardware_forms import HARDWARE_ALGORITHMS
from .registry import AUTO, PIPELINED, canonical_algorithm, canonical_collective
from .results import CollectiveResult, CollectiveStats, StepTransfer, StepView

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
            plan = plan_call(cluster, name, algorithm, protocol, group.ranks, root, size)
        schedule, protocol = plan.schedule, plan.protocol
    else:  # the plain path, as on every generic topology: no hashing of the group
        schedule = shared_schedule(name, algorithm, group.size, root)
    if (count if x is None else getattr(x, "size", None)) == 0:
        schedule = schedule.without_steps()  # NCCL returns at once from a zero-byte call
    seq = context_of(rank._execution).next_seq(rank.id, group.ranks)
    return run_schedule(rank, schedule, x, op, group, seq, count, dtype, protocol)


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
    if schedule.spec.reduces:
        check_op(op, dtype)  # a bitwise op of floats means nothing
    if algorithm == AUTO or protocol is not None or (name, algorithm) in PIPELINED:
        # the size is known now: choose (auto), cut the pipeline, pick the protocol
        itemsize = DTYPE_BYTES[dtype]
        size = schedule.buffer_elements(count) * itemsize
        with naming_the_algorithm(given):
            plan = plan_call(cluster, name, algorithm, protocol, group.ranks, root, size)
        schedule, choice, protocol = plan.schedule, plan.choice, plan.protocol
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
