"""One measurement of ``collsim run``: a collective run once (or its closed form), checked
against numpy, as the row ``--json`` prints (:data:`~collsim.cli.run.JSON_FIELDS`).

Examples
--------
>>> check_size("all_gather", 4, 64, "float32")  # each rank contributes 16 B: 4 floats
4
"""

import numpy as np

from ..errors import ConfigError

__all__ = ["measure", "check_size", "choice_of", "REDUCING"]

REDUCING = ("all_reduce", "reduce_scatter", "reduce")  # the collectives that take --op


def check_size(name, k, size, dtype):
    """Refuse, in every mode alike, a size that is not whole elements for this collective."""
    from ..collectives.executor import DTYPE_BYTES

    itemsize = DTYPE_BYTES[dtype]
    if name == "all_gather":  # each rank contributes S/K
        unit, whose = k * itemsize, f"each rank's share S/K = {size}/{k} B"
    elif name == "all_to_all":  # each rank sends S/K to every rank
        unit, whose = k * itemsize, f"the block S/K = {size}/{k} B each rank sends to each"
    else:
        unit, whose = itemsize, f"{size} B"
    if size % unit:
        lower = size - size % unit
        raise ConfigError(
            f"size {size} B: {whose} is not a whole number of {dtype} elements "
            f"({itemsize} B each); nearest valid sizes {lower} B or "
            f"{lower + unit} B"
        )
    return (size // k if name == "all_gather" else size) // itemsize


def measure(
    cluster,
    collective,
    size,
    algorithm=None,
    dtype="float32",
    op="sum",
    root=0,
    seed=0,
    count_only=False,
    analytical=False,
):
    """Run once and return (row dict, CollectiveResult), as ``--json`` prints it.

    With ``analytical=True`` nothing is simulated: the row holds the closed form and the
    result is ``None``."""
    from ..collectives import reference
    from ..collectives.executor import integer_inputs
    from ..collectives.registry import canonical_collective

    name = canonical_collective(collective)
    k = cluster.size
    count = check_size(name, k, size, dtype)
    if analytical:
        return _analytical_row(cluster, name, size, count, algorithm, dtype, op), None
    if dtype == "bfloat16" and not count_only:
        raise ConfigError("numpy has no bfloat16: use --count-only (only its 2-byte size matters)")
    if count_only:
        out = cluster.collective(
            name, count=count, dtype=dtype, algorithm=algorithm, op=op, root=root
        )
        wrong = None
    else:
        buffers = integer_inputs(k, count, dtype, op, seed)
        out = cluster.collective(name, buffers, algorithm=algorithm, op=op, root=root)
        expected = reference(name, buffers, op, root)
        wrong = sum(
            0 if (a is None and b is None) else int(np.count_nonzero(a != b))
            for a, b in zip(out.outputs, expected)
        )
    t = out.time
    return _row(
        cluster,
        name,
        out.algorithm,
        size,
        count,
        dtype,
        op,
        out.stats.bytes_sent,
        out.stats.bytes_received,
        out.stats.steps,
        t,
        wrong,
        out.protocol,
    ), out


def _row(
    cluster, name, algorithm, size, count, dtype, op, sent, received, steps, t, wrong, protocol=None
):
    from ..collectives import bus_factor

    algbw = size / t / 1e9 if t > 0 else None
    return {
        "collective": name,
        "algorithm": algorithm,
        "protocol": None if protocol is None else protocol.name,
        "topology": cluster.topology.graph.get("name"),
        "ranks": cluster.size,
        "size_bytes": size,
        "count": count,
        "dtype": dtype,
        "op": op if name in REDUCING else None,
        "bytes_sent": list(sent),
        "bytes_received": list(received),
        "steps": steps,
        "time_s": t,
        "algbw_GBps": algbw,
        "busbw_GBps": None if algbw is None else algbw * bus_factor(name, cluster.size),
        "wrong": wrong,
        "correct": None if wrong is None else wrong == 0,
    }


def _analytical_row(cluster, name, size, count, algorithm, dtype, op):
    from ..collectives.api import analytical_plan

    plan = analytical_plan(cluster, name, size, algorithm)
    cost = plan.cost
    busiest = [int(cost.bytes_per_rank)] * cluster.size
    return _row(
        cluster,
        name,
        plan.algorithm,
        size,
        count,
        dtype,
        op,
        busiest,
        busiest,
        cost.steps,
        cost.time_s,
        None,
        plan.protocol,
    )


def choice_of(cluster, collective, size, algorithm, result):
    """The :class:`~collsim.collectives.auto.AutoChoice` behind one size's row (None
    where no algorithm was chosen): the run's, or the closed form's for --analytical."""
    if result is not None:
        return result.choice
    from ..collectives.api import analytical_plan

    return analytical_plan(cluster, collective, size, algorithm).choice
