"""Argument checks of the collective entry points, run before anything moves.

Each raises :class:`~collsim.errors.ConfigError` naming the value as it was given, the
rule it broke and the nearest valid choice.  A count is a number of elements (an int,
as torch and nccl-tests count them), never a size string: ``count="64MiB"`` is refused
with the element count it would mean for the dtype.

Examples
--------
>>> check_root(2, 4)
2
>>> check_root(1.5, 4)
Traceback (most recent call last):
...
collsim.errors.ConfigError: root=1.5: a root is a group rank, an int in 0..3
>>> check_count("64MiB", "float32")
Traceback (most recent call last):
...
collsim.errors.ConfigError: count='64MiB': a count is a number of elements (an int >= 0), \
not a size: 64 MiB of float32 is count=16777216
"""

import numbers

import numpy as np

from ..errors import CollsimError, ConfigError

__all__ = [
    "check_root",
    "check_count",
    "check_dtype",
    "check_op",
    "check_buffers",
    "is_int",
    "check_power_of_two",
    "is_power_of_two",
    "DTYPE_BYTES",
    "OPS",
]

# bytes per element; bfloat16 only in count-only mode (numpy has no such type)
DTYPE_BYTES = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4}
DTYPE_BYTES |= {"int16": 2, "int8": 1, "uint8": 1, "bool": 1}  # torch's small types
NUMERIC_DTYPES = tuple(d for d in DTYPE_BYTES if d != "bfloat16")
BITWISE_OPS = ("band", "bor", "bxor")  # of integers and bools only, as torch and MPI define them
OPS = ("sum", "avg", "prod", "max", "min", *BITWISE_OPS)  # torch's ReduceOp names, lower case


def is_int(value):
    """An int or numpy integer, but not a bool (``True`` is not rank 1)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool | np.bool_)


def check_root(root, k):
    """``root`` as an int, if it is a group rank of a group of ``k`` ranks."""
    if not is_int(root):
        raise ConfigError(f"root={root!r}: a root is a group rank, an int in 0..{k - 1}")
    if not 0 <= root < k:
        raise ConfigError(f"root={root!r} is not a rank of this {k}-rank group: choose 0..{k - 1}")
    return int(root)


def is_power_of_two(k):
    """True for 1, 2, 4, 8, ...

    >>> [k for k in range(10) if is_power_of_two(k)]
    [1, 2, 4, 8]
    """
    return k >= 1 and k & (k - 1) == 0


def check_power_of_two(k, what):
    """``k`` if it is a power of two (1 included); else name the two nearest.

    >>> check_power_of_two(6, "halving-doubling reduce-scatter")
    Traceback (most recent call last):
    ...
    collsim.errors.ConfigError: halving-doubling reduce-scatter on 6 ranks: partners are \
r XOR 2^i, so the number of ranks must be a power of two (nearest: 4 or 8); use \
algorithm ring for any number of ranks
    """
    k = int(k)
    if is_power_of_two(k):
        return k
    lower = 1 << (k.bit_length() - 1) if k > 0 else 1
    raise ConfigError(
        f"{what} on {k} ranks: partners are r XOR 2^i, so the number of ranks must be a power "
        f"of two (nearest: {lower} or {2 * lower}); use algorithm ring for any number of ranks"
    )


def check_count(count, dtype="float32"):
    """``count`` (elements per rank) as an int >= 0."""
    if is_int(count):
        if count < 0:
            raise ConfigError(f"count={count!r} is negative: a count is a number of elements >= 0")
        return int(count)
    hint = ""
    if isinstance(count, str) and count.strip().isdigit():
        hint = f": pass the int {int(count)}, not a string"
    elif isinstance(count, str):
        hint = _size_hint(count, dtype)
    elif isinstance(count, float) and count == count and abs(count) != float("inf"):
        hint = f" (nearest: {int(count)} or {int(count) + 1})" if count >= 0 else ""
    raise ConfigError(f"count={count!r}: a count is a number of elements (an int >= 0){hint}")


def _size_hint(text, dtype):
    from .. import units

    try:
        nbytes = units.parse_size(text)
        itemsize = DTYPE_BYTES.get(dtype, 4)
    except (CollsimError, ValueError, TypeError, OverflowError):
        return ""
    name = dtype if dtype in DTYPE_BYTES else "float32"
    return f", not a size: {units.format_size(nbytes)} of {name} is count={int(nbytes) // itemsize}"


def check_op(op, dtype=None):
    """The op's name: ``"sum"``, ``"SUM"`` or anything whose ``.name`` is one
    (``torch.distributed.ReduceOp.SUM``); with ``dtype``, refused where it means nothing:
    a bitwise op of floats (torch refuses it too) or the average of bools."""
    name = str(getattr(op, "name", op)).lower()
    if name not in OPS:
        raise ConfigError(f"unknown reduce op {op!r}: choose one of {', '.join(OPS)}")
    bitwise = name in BITWISE_OPS and not str(dtype).startswith(("int", "uint", "bool"))
    if dtype is not None and (bitwise or (name == "avg" and dtype == "bool")):
        rule = "bitwise ops reduce integers and bools" if bitwise else "no average of bools"
        raise ConfigError(f"op={name!r} with dtype {dtype}: {rule}; use op='max' or an int dtype")
    return name


def check_dtype(dtype):
    """The dtype's name if count-only mode knows its size (``np.float32`` works too)."""
    name = dtype
    if not isinstance(dtype, str):
        try:
            name = np.dtype(dtype).name
        except (TypeError, ValueError):
            name = None
    if name not in DTYPE_BYTES:
        raise ConfigError(f"unknown dtype {dtype!r}: choose one of {', '.join(DTYPE_BYTES)}")
    return name


def check_buffers(name, buffers, group):
    """``buffers`` as a list of arrays, one per group rank, of one shape and dtype."""
    label = name.replace("_", "-")
    if isinstance(buffers, np.ndarray) or not _iterable(buffers):
        what = (
            f"an array of shape {buffers.shape}"
            if isinstance(buffers, np.ndarray)
            else repr(buffers)
        )
        raise ConfigError(
            f"{label}: buffers={what}: give a list with one array per rank ({group.size} of them)"
        )
    arrays = []
    for i, b in enumerate(buffers):
        try:
            arrays.append(np.asarray(b))
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"{label}: buffer {i} ({b!r}) is not an array: {exc}") from None
    if len(arrays) != group.size:
        raise ConfigError(
            f"{label} on {group.size} ranks needs {group.size} buffers, got {len(arrays)}"
        )
    first = arrays[0]
    if first.dtype.name not in NUMERIC_DTYPES:
        raise ConfigError(
            f"{label}: dtype {first.dtype} is not supported: use one of {', '.join(NUMERIC_DTYPES)}"
        )
    for i, b in enumerate(arrays[1:], start=1):
        if b.shape != first.shape or b.dtype != first.dtype:
            raise ConfigError(
                f"{label}: rank {group.ranks[i]} has a {b.dtype} buffer of shape {b.shape} but "
                f"rank {group.ranks[0]} has {first.dtype} {first.shape}: all must match"
            )
    return arrays


def _iterable(value):
    if isinstance(value, str | bytes | dict):
        return False
    try:
        iter(value)
    except TypeError:
        return False
    return True
