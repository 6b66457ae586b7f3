"""MPI datatypes and buffer specs: ``buf``, ``[buf, MPI.DOUBLE]``, ``[buf, count, MPI.DOUBLE]``.

An uppercase call (``Send``, ``Allreduce``, ...) takes a buffer as mpi4py does: a numpy
array (its datatype inferred from its dtype), ``bytes``/``bytearray`` (``MPI.BYTE``), or a
list ``[buf, datatype]`` or ``[buf, count, datatype]``.  :func:`buffer_of` turns one into a
:class:`Buffer`, a flat view of the user's memory with its datatype and count, refusing
a non-contiguous array, a read-only receive buffer, a count the buffer cannot hold, or a
datatype that does not describe the array (``[int32 array, MPI.DOUBLE]``: real MPI would
reinterpret the bytes, which is rarely meant; ``MPI.BYTE`` views any array as bytes).

Examples
--------
>>> import numpy as np
>>> b = buffer_of([np.zeros((2, 3)), 4, DOUBLE], "Send(buf=...)")
>>> b.count, b.datatype, b.data.shape
(4, MPI.DOUBLE, (4,))
>>> buffer_of(np.arange(3, dtype=np.int32), "Bcast(buf=...)").datatype
MPI.INT
>>> buffer_of([np.zeros(3, np.int32), DOUBLE], "Bcast(buf=...)")
Traceback (most recent call last):
...
collsim.errors.ConfigError: Bcast(buf=...): [buf, MPI.DOUBLE] describes an array of int32: \
give its own datatype (MPI.INT), MPI.BYTE, or a float64 array (mpi4py raises ValueError)
"""

from dataclasses import dataclass

import numpy as np

from ..collectives.checks import is_int
from ..errors import shorten
from .exceptions import value_error

__all__ = ["Datatype", "Buffer", "buffer_of", "datatype_of", "DATATYPES"]


@dataclass(frozen=True)
class Datatype:
    """An MPI datatype: its MPI name and the numpy dtype of one element."""

    name: str  # "MPI_DOUBLE"
    numpy: str  # "float64"

    @property
    def size(self):
        """Bytes of one element (``MPI.DOUBLE.size == 8``)."""
        return np.dtype(self.numpy).itemsize

    extent = size

    def Get_size(self):
        return self.size

    def Get_name(self):
        return self.name

    def __repr__(self):
        return f"MPI.{self.name.removeprefix('MPI_')}"


# the first name of each numpy dtype is the one inferred from an array of it, as mpi4py
# infers MPI.DOUBLE from float64 and MPI.INT from int32
_TABLE = [
    ("DOUBLE", "float64"),
    ("FLOAT", "float32"),
    ("INT", "int32"),
    ("LONG", "int64"),
    ("SHORT", "int16"),
    ("SIGNED_CHAR", "int8"),
    ("UNSIGNED_CHAR", "uint8"),
    ("UNSIGNED_SHORT", "uint16"),
    ("UNSIGNED", "uint32"),
    ("UNSIGNED_LONG", "uint64"),
    ("C_BOOL", "bool"),
    ("FLOAT16_T", "float16"),
    ("C_FLOAT_COMPLEX", "complex64"),
    ("C_DOUBLE_COMPLEX", "complex128"),
    ("BYTE", "uint8"),
    ("CHAR", "int8"),
    ("LONG_LONG", "int64"),
    ("UNSIGNED_LONG_LONG", "uint64"),
    ("UNSIGNED_INT", "uint32"),
    ("INT8_T", "int8"),
    ("INT16_T", "int16"),
    ("INT32_T", "int32"),
    ("INT64_T", "int64"),
    ("UINT8_T", "uint8"),
    ("UINT16_T", "uint16"),
    ("UINT32_T", "uint32"),
    ("UINT64_T", "uint64"),
    ("FLOAT32_T", "float32"),
    ("FLOAT64_T", "float64"),
    ("BOOL", "bool"),
    ("DOUBLE_COMPLEX", "complex128"),
    ("COMPLEX", "complex64"),
]
DATATYPES = {name: Datatype(f"MPI_{name}", dtype) for name, dtype in _TABLE}
_BY_DTYPE = {}
for _dt in DATATYPES.values():
    _BY_DTYPE.setdefault(_dt.numpy, _dt)
BYTE = DATATYPES["BYTE"]
DOUBLE = DATATYPES["DOUBLE"]


def datatype_of(dtype):
    """The datatype mpi4py infers for a numpy dtype, or None."""
    return _BY_DTYPE.get(np.dtype(dtype).name)


@dataclass
class Buffer:
    """A flat view of a user's buffer: ``data`` (``count`` elements of ``datatype``)."""

    data: np.ndarray  # 1-D, a view of the user's memory (writes land in it)
    datatype: Datatype

    @property
    def count(self):
        return self.data.size

    @property
    def nbytes(self):
        return self.data.nbytes


def buffer_of(spec, what, writable=False, blocks=1):
    """The :class:`Buffer` a buffer spec names; ``what`` names the argument in errors.

    ``writable`` buffers receive data.  ``blocks`` is the number of ranks a "B" spec
    (Gather's receive buffer, Scatter's send buffer) holds a block for: an explicit
    count there is per block, as in mpi4py."""
    given = spec
    datatype = count = None
    if isinstance(spec, list | tuple):
        if len(spec) == 2 and isinstance(spec[1], Datatype):
            spec, datatype = spec
        elif len(spec) == 3 and isinstance(spec[2], Datatype):
            spec, count, datatype = spec
        else:
            raise value_error(
                f"{what}: {shorten(given)} is not a buffer spec: give an array, [buf, datatype] "
                "or [buf, count, datatype] (e.g. [x, MPI.DOUBLE])"
            )
    array = _array_of(spec, what, writable)
    if datatype is None:
        datatype = datatype_of(array.dtype)
        if datatype is None:
            raise value_error(
                f"{what}: no MPI datatype for a {array.dtype} array: use "
                f"one of {', '.join(sorted(_BY_DTYPE))}"
            )
    flat = array.reshape(-1)
    if datatype is BYTE or datatype.numpy == "uint8":
        flat = flat.view(np.uint8)
    elif array.dtype.name != datatype.numpy:
        own = datatype_of(array.dtype)
        own = "" if own is None else f"its own datatype ({own!r}), "
        raise value_error(
            f"{what}: [buf, {datatype!r}] describes an array of {array.dtype}: give {own}"
            f"MPI.BYTE, or a {datatype.numpy} array"
        )
    if count is not None:
        if not is_int(count) or count < 0:
            raise value_error(f"{what}: count={count!r}: a count is an int >= 0")
        total = int(count) * blocks
        if total > flat.size:
            each = f" ({count} per rank on {blocks} ranks)" if blocks > 1 else ""
            raise value_error(
                f"{what}: count {total}{each} is more than the buffer's {flat.size} "
                f"{datatype!r} elements"
            )
        flat = flat[:total]
    return Buffer(flat, datatype)


def _array_of(spec, what, writable):
    if isinstance(spec, bytes | bytearray | memoryview):
        spec = np.frombuffer(spec, dtype=np.uint8)
    if not isinstance(spec, np.ndarray):
        raise value_error(
            f"{what}: {shorten(spec)} (a {type(spec).__name__}) is not a buffer: give a numpy "
            "array (lowercase calls such as send/bcast take any Python object)"
        )
    if not spec.flags.c_contiguous:
        raise value_error(
            f"{what}: the array of shape {spec.shape} is not contiguous (a strided view): "
            "pass np.ascontiguousarray(x), and copy the result back if it receives"
        )
    if writable and not spec.flags.writeable:
        raise value_error(
            f"{what}: the array of shape {spec.shape} is read-only, but it receives data: "
            "pass a writeable array, e.g. x.copy()"
        )
    return spec
