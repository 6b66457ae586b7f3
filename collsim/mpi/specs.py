"""Buffer specs as mpi4py takes them: ``buf``, ``[buf, MPI.DOUBLE]``, ``[buf, count, dtype]``,
``[buf, (counts, displs), dtype]`` and ``[buf, "d"]``.

``buf`` is anything with Python's buffer protocol: a numpy array, ``array.array``,
``bytes``/``bytearray``/``memoryview``, ``mmap``.  Its datatype is inferred from its type
code (float64 is ``MPI.DOUBLE``, ``array('i')`` is ``MPI.INT``) unless the spec names one;
a named datatype reads the buffer's bytes as its elements, as MPI does (``[int64 array of
3, MPI.INT]`` is 6 ints).  ``None`` (or ``MPI.BOTTOM``) is an empty buffer.
:func:`buffer_of` gives a :class:`Buffer`: a flat numpy view of the user's memory (writes
land in it) with its datatype, and the counts and displacements of a v-spec.

Examples
--------
>>> import array
>>> b = buffer_of([np.zeros((2, 3)), 4, DATATYPES["DOUBLE"]], "Send(buf=...)")
>>> b.count, b.datatype, b.data.shape
(4, MPI.DOUBLE, (4,))
>>> buffer_of(array.array("i", [1, 2]), "Bcast(buf=...)").datatype
MPI.INT
>>> buffer_of([np.zeros(3, np.int64), DATATYPES["INT"]], "Bcast(buf=...)").count
6
>>> buffer_of([np.zeros(4), ([1, 3], [0, 1]), "d"], "Gatherv(recvbuf=...)").counts
(1, 3)
"""

from dataclasses import dataclass

import numpy as np

from ..collectives.checks import is_int
from ..errors import shorten
from .datatypes import BYTE, DATATYPES, Datatype, datatype_of
from .exceptions import value_error
from .memory import BOTTOM, Bottom, array_of
from .packing import byte_positions, count_of, gather, scatter

__all__ = ["Buffer", "buffer_of", "BOTTOM", "Bottom"]


@dataclass
class Buffer:
    """A flat view of a user's buffer: ``data`` (``count`` elements of ``datatype``);
    ``counts`` and ``displs`` (per rank, in elements) for a v-spec, else None."""

    data: np.ndarray  # 1-D, a view of the user's memory (writes land in it)
    datatype: Datatype
    counts: tuple = None
    displs: tuple = None
    # a derived datatype's: ``data`` is its packed copy, which store() puts back at the
    # byte positions ``where`` of the user's memory ``raw``
    raw: np.ndarray = None
    where: np.ndarray = None

    def store(self):
        """Put what a receive wrote into a derived datatype's packed copy back into the
        user's memory (a plain buffer is a view: nothing to do)."""
        if self.where is not None:
            scatter(self.raw, self.where, self.data)

    @property
    def count(self):
        return self.data.size

    @property
    def nbytes(self):
        return self.data.nbytes

    def block(self, r):
        """Rank ``r``'s part of a v-spec, a view."""
        start = self.displs[r]
        return self.data[start : start + self.counts[r]]


def _datatype(value, what):
    if isinstance(value, Datatype):
        return value
    if isinstance(value, str):
        found = DATATYPES.get(value) or datatype_of(value)
        if found is not None:
            return found
    raise value_error(f"{what}: {value!r} is not an MPI datatype (e.g. MPI.DOUBLE or 'd')")


def _split(spec, what):
    """``(buf, count or (counts, displs) or None, datatype or None)`` of a spec."""
    if not isinstance(spec, list | tuple):
        return spec, None, None
    if len(spec) == 2:
        buf, second = spec
        if isinstance(second, Datatype | str):
            return buf, None, _datatype(second, what)
        return buf, second, None
    if len(spec) == 3 and isinstance(spec[2], Datatype | str):
        return spec[0], spec[1], _datatype(spec[2], what)
    if len(spec) == 4 and isinstance(spec[3], Datatype | str):  # [buf, counts, displs, dt]
        return spec[0], (spec[1], spec[2]), _datatype(spec[3], what)
    raise value_error(
        f"{what}: {shorten(spec)} is not a buffer spec: give an array, [buf, datatype] "
        "or [buf, count, datatype] (e.g. [x, MPI.DOUBLE])"
    )


def buffer_of(spec, what, writable=False, blocks=1, stores=False):
    """The :class:`Buffer` a buffer spec names; ``what`` names the argument in errors.

    ``writable`` buffers receive data.  ``blocks`` is the number of ranks a "B" spec
    (Gather's receive buffer, Scatter's send buffer) holds a block for: an explicit
    count there is per block, as in mpi4py.  ``stores``: the caller calls
    :meth:`Buffer.store` once it has written (only such calls receive into a derived
    datatype)."""
    buf, count, datatype = _split(spec, what)
    array = array_of(buf, what, writable)
    derived = datatype is not None and datatype and datatype.numpy is None
    if isinstance(buf, Bottom) and derived and count != 0 and datatype.layout.true_ub > 0:
        raise NotImplementedError(
            f"{what}: MPI.BOTTOM with a datatype of absolute addresses (MPI.Get_address) "
            "is not simulated by collsim: build the datatype with displacements relative "
            "to one buffer (MPI.Aint_diff of two addresses) and pass that buffer"
        )
    if derived:
        return _typed(array, count, datatype, what, writable and not stores, blocks)
    if datatype is None:
        datatype = datatype_of(array.dtype)
        if datatype is None or array.dtype.kind in "OUSV" and array.size:
            raise value_error(f"{what}: no MPI datatype for a {array.dtype} array")
        if array.dtype.char == "B" and not isinstance(buf, np.ndarray):
            datatype = BYTE  # bytes, bytearray: MPI.BYTE, as mpi4py infers
    flat = array.reshape(-1)
    if not datatype:
        if flat.size:
            raise value_error(f"{what}: MPI.DATATYPE_NULL describes no elements")
        return Buffer(flat.view(np.uint8)[:0], datatype)
    element = datatype.numpy
    if flat.dtype != element:  # MPI reads the bytes as the datatype's elements
        raw = flat.view(np.uint8)
        if raw.size % element.itemsize:
            raise value_error(
                f"{what}: a buffer of {raw.size} bytes is not a whole number of "
                f"{datatype!r} elements ({element.itemsize} bytes each)"
            )
        flat = raw.view(element)
    if isinstance(count, tuple) and len(count) == 2:  # (counts, displs)
        return _vector(flat, datatype, count, what)
    if isinstance(count, list | tuple):  # counts, packed in rank order
        return _vector(flat, datatype, (count, None), what)
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


def _typed(array, count, datatype, what, unsupported, blocks):
    """A buffer of a derived datatype: its typemap's bytes, packed (:mod:`.packing`)."""
    if unsupported or isinstance(count, list | tuple):
        call = what.split("(")[0]
        raise NotImplementedError(
            f"{call} with a derived datatype ({datatype!r}): collsim packs derived datatypes "
            "for point-to-point, Bcast, Reduce, Allreduce, Gather, Scatter, Allgather, "
            "Alltoall and Reduce_scatter_block; give this call a predefined datatype"
        )
    if count is not None and (not is_int(count) or count < 0):
        raise value_error(f"{what}: count={count!r}: a count is an int >= 0")
    raw = array.reshape(-1).view(np.uint8)
    count = count_of(datatype.layout, raw.size, count, what) * blocks
    where = byte_positions(datatype.layout, count, raw.size, what)
    return Buffer(gather(raw, where, datatype.layout), datatype, raw=raw, where=where)


def _vector(flat, datatype, counts_displs, what):
    """A v-spec's buffer: counts (one per rank) and displacements (None: packed in order)."""
    counts, displs = counts_displs
    if is_int(counts):  # [buf, (count, displ), dt]: one count (and stride) for every rank,
        return Buffer(flat, datatype, int(counts), displs)  # spread when the size is known
    counts = tuple(int(c) for c in counts) if counts is not None else None
    if displs is None and counts is not None:
        displs = tuple(int(d) for d in np.concatenate([[0], np.cumsum(counts)[:-1]]))
    elif displs is not None and not is_int(displs):
        displs = tuple(int(d) for d in displs)
    if counts is not None and any(c < 0 for c in counts):
        raise value_error(f"{what}: counts {list(counts)}: every count is an int >= 0")
    if counts is not None and is_int(displs):
        displs = tuple(int(displs) + sum(counts[:i]) for i in range(len(counts)))
    if counts is not None and displs is not None:
        end = max((d + c for c, d in zip(counts, displs, strict=False)), default=0)
        if end > flat.size:
            raise value_error(
                f"{what}: counts {list(counts)} at displacements {list(displs)} reach element "
                f"{end}, past the buffer's {flat.size}"
            )
    return Buffer(flat, datatype, counts, displs)
