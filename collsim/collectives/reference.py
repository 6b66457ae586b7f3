"""What a collective must give each rank, computed without the code under test.

This is the oracle of the tests and of ``collsim run``'s ``#wrong`` column, so it
shares nothing with the executor but numpy itself: integer reductions run in a wider
type (int64 for int32, Python ints for int64) and are wrapped to the dtype afterwards,
as the hardware's modular arithmetic does; the integer average divides Python ints;
float reductions run in float64 and are rounded to the dtype once; chunks are cut with
``numpy.array_split``.  For integer-valued inputs (as :func:`integer_inputs` makes
them) every reduction order gives the same exact answer, so a result that differs in
one element is wrong.

Integer ``avg`` is the sum (wrapped to the dtype) divided by the number of ranks and
truncated toward zero, as NCCL's ``ncclAvg`` (its ``FuncSumPostDiv``) and C integer
division do: ``avg(-3, -4) == -3``.

Examples
--------
>>> import numpy as np
>>> xs = [np.arange(4.0) + r for r in range(2)]
>>> [o.tolist() for o in reference("reduce_scatter", xs)]
[[1.0, 3.0], [5.0, 7.0]]
>>> reference("all_reduce", [np.array([-2**30], np.int32)] * 2, op="avg")[0].tolist()
[-1073741824]
>>> reference("all_gather", [np.zeros((3, 5))] * 4)[0].shape
(12, 5)
"""

import numpy as np

from ..errors import ConfigError

__all__ = ["reference", "REFERENCE_OPS"]

REFERENCE_OPS = ("sum", "avg", "prod", "max", "min", "band", "bor", "bxor")


def _op(op):
    name = str(getattr(op, "name", op)).lower()
    if name not in REFERENCE_OPS:
        raise ConfigError(f"unknown reduce op {op!r}: choose one of {', '.join(REFERENCE_OPS)}")
    return name


def _reduce(arrays, op):
    """The element-wise reduction of ``arrays`` (one dtype), exact and wrapped."""
    dtype = arrays[0].dtype
    integer = np.issubdtype(dtype, np.integer)
    # int32 wraps the same modulo 2**32 whether summed in int32 or int64; int64 has no
    # wider numpy type, so its average divides Python ints (below).  Bools add as ints:
    # any nonzero total is True, as torch's SUM of bools is a logical or
    wide = np.int64 if integer or dtype.kind == "b" else np.float64
    total = arrays[0].astype(wide)
    combine = {
        "sum": np.add,
        "avg": np.add,
        "prod": np.multiply,
        "max": np.maximum,
        "min": np.minimum,
        "band": np.bitwise_and,
        "bor": np.bitwise_or,
        "bxor": np.bitwise_xor,
    }[op]
    for x in arrays[1:]:
        combine(total, x, out=total)  # widens x on the fly, a block at a time
    if op == "avg":
        k = len(arrays)
        if integer:
            # divide |sum| where it cannot overflow: int64 for narrower types, Python
            # ints (object arrays) for int64, whose most negative value has no |.|
            exact = np.int64 if dtype.itemsize < 8 else object
            wrapped = total.astype(dtype).astype(exact)
            total = np.where(wrapped < 0, -((-wrapped) // k), wrapped // k)
        else:
            total = total / k
    return total.astype(dtype)


def _shared(array, k):
    """One read-only array for every rank: K copies of a 64 MiB answer would cost more
    than the collective itself."""
    array.flags.writeable = False
    return [array] * k


def _split_first_axis(array, k):
    """K parts along the first axis (1-D: the first ``n mod K`` one element longer)."""
    if array.ndim <= 1:
        return np.array_split(array.reshape(-1), k)
    return np.split(array, k, axis=0)


def reference(collective, inputs, op="sum", root=0):
    """Each rank's expected output (``None`` where it gets nothing), by plain numpy.

    Ranks that expect the same answer share one read-only array.

    Shapes follow torch: all-gather concatenates along the first axis (a (3, 5) input on
    4 ranks gives (12, 5), a 0-d input gives (K,)), reduce-scatter splits the reduction
    along it, the other collectives keep the input's shape.
    """
    k = len(inputs)
    arrays = [np.asarray(x) for x in inputs]
    if collective == "all_gather":
        whole = np.concatenate([a.reshape((1,) if a.ndim == 0 else a.shape) for a in arrays])
        return _shared(whole, k)
    if collective == "broadcast":
        return _shared(arrays[root].copy(), k)
    if collective == "all_to_all":
        parts = [_split_first_axis(a, k) for a in arrays]  # parts[src][dst]
        return [
            np.concatenate([parts[src][dst] for src in range(k)]).reshape(arrays[0].shape)
            for dst in range(k)
        ]
    total = _reduce(arrays, _op(op))
    if collective == "reduce_scatter":
        return [part.copy() for part in _split_first_axis(total, k)]
    if collective == "reduce":
        return [total if r == root else None for r in range(k)]
    if collective == "all_reduce":
        return _shared(total, k)
    raise ConfigError(f"no reference for collective {collective!r}")
