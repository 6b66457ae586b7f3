"""Buffer specs as mpi4py takes them: ``buf``, ``[buf, MPI.DOUBLE]``, ``[buf, "d"]``,
``[buf, count]``, ``[buf, (count, displ)]``, ``[buf, count, dtype]``, ``[buf, (count, displ),
dtype]`` and ``[buf, count, displ, dtype]`` (any of them None: inferred, as mpi4py's message
parser infers it); a v-collective's counts and displacements are per rank.

``buf`` is anything with Python's buffer protocol: a numpy array, ``array.array``,
``bytes``/``bytearray``/``memoryview``, ``mmap``.  Its datatype is inferred from its type
code (float64 is ``MPI.DOUBLE``, ``array('i')`` is ``MPI.INT``) unless the spec names one;
a named datatype reads the buffer's bytes as its elements, as MPI does (``[int64 array of
3, MPI.INT]`` is 6 ints).  ``None`` (or ``MPI.BOTTOM``) is an empty buffer.
:func:`buffer_of` gives a :class:`Buffer`: a flat numpy view of the user's memory (writes
land in it) with its datatype, and the counts and displacements of a v-spec.  What mpi4py
refuses is refused with the exception it raises (each a collsim ``ConfigError`` too): a
spec of 1 or 5 items, a negative count or displacement, a count past the buffer
(ValueError); an object with no buffer, a count that is not an integer (TypeError); a
typecode with no datatype (KeyError); read-only memory that receives, a strided view, a
foreign byte order with no datatype named (BufferError).

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
>>> b = buffer_of([np.arange(5.0), (2, 1)], "Send(buf=...)")  # 2 elements from element 1
>>> b.data.tolist()
[1.0, 2.0]
>>> buffer_of([np.zeros(4), ([1, 3], [0, 1]), "d"], "Gatherv(recvbuf=...)", vector=True).counts
(1, 3)
>>> buffer_of([np.zeros(4), 2, "zz"], "Send(buf=...)")
Traceback (most recent call last):
...
collsim.mpi.exceptions._SpecKeyError: Send(buf=...): cannot map 'zz' (the last item of ...) \
to an MPI datatype (e.g. MPI.DOUBLE or 'd') (mpi4py raises KeyError)
"""

import operator
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..collectives.checks import is_int
from ..errors import shorten
from .datatypes import BYTE, DATATYPES, Datatype, datatype_of
from .exceptions import buffer_error, key_error, type_error, value_error
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


def _datatype(value, what, spec=None):
    if isinstance(value, Datatype):
        return value
    if isinstance(value, str) and value.isprintable():  # "\0" would read as numpy's bool
        found = DATATYPES.get(value) or datatype_of(value)
        if found is not None:
            return found
    within = f" (the last item of {shorten(spec)})" if spec is not None else ""
    raise key_error(
        f"{what}: cannot map {value!r}{within} to an MPI datatype (e.g. MPI.DOUBLE or 'd')"
    )


class Spec(NamedTuple):
    """A buffer spec's parts, as mpi4py unpacks them (None: not given)."""

    buf: object
    count: object  # an int, or (v-specs) counts per rank
    displ: object  # an int, or (v-specs) displacements per rank
    datatype: object  # a Datatype, or None: inferred from the buffer


def _split(spec, what):
    """A spec's :class:`Spec`: ``buf``, ``[buf, datatype]``, ``[buf, count]``, ``[buf,
    (count, displ)]``, ``[buf, count or (count, displ), datatype]`` or ``[buf, count, displ,
    datatype]``; a tuple in the count's place is ``(count, displ)``, as in mpi4py."""
    if not isinstance(spec, list | tuple):
        return Spec(spec, None, None, None)
    if len(spec) == 2:
        buf, second = spec
        if isinstance(second, Datatype | str):
            return Spec(buf, None, None, _datatype(second, what))
        return Spec(buf, *_pair(second), None)
    if len(spec) == 3:
        buf, count, datatype = spec
        datatype = None if datatype is None else _datatype(datatype, what, spec)
        return Spec(buf, *_pair(count), datatype)
    if len(spec) == 4:
        buf, count, displ, datatype = spec
        return Spec(
            buf, count, displ, None if datatype is None else _datatype(datatype, what, spec)
        )
    raise value_error(
        f"{what}: {shorten(spec)} has {len(spec)} items: a buffer spec is an array or a list "
        "of 2 to 4 items (e.g. [x, MPI.DOUBLE], [x, count, MPI.DOUBLE])"
    )


def _pair(count):
    """``(count, displ)`` of the count's place: a tuple there is both."""
    if isinstance(count, tuple):
        if len(count) != 2:
            raise value_error(f"{shorten(count)}: a (count, displacement) pair has 2 items")
        return count
    return count, None


def _index(value, what, name):
    """``value`` as an int (numpy integers too), or mpi4py's TypeError."""
    try:
        return operator.index(value)
    except TypeError:
        raise type_error(f"{what}: {name}={shorten(value)} is not an integer") from None


def buffer_of(spec, what, writable=False, blocks=1, stores=False, vector=False):
    """The :class:`Buffer` a buffer spec names; ``what`` names the argument in errors.

    ``writable`` buffers receive data.  ``blocks`` is the number of ranks a "B" spec
    (Gather's receive buffer, Scatter's send buffer) holds a block for: an explicit
    count there is per block, as in mpi4py.  ``stores``: the caller calls
    :meth:`Buffer.store` once it has written (only such calls receive into a derived
    datatype).  ``vector``: a v-collective's spec, whose count and displacement are
    per rank (a list each, or one int for every rank)."""
    buf, count, displ, datatype = _split(spec, what)
    array = array_of(buf, what, writable)
    derived = datatype is not None and datatype and datatype.numpy is None
    if isinstance(buf, Bottom) and derived and count != 0 and datatype.layout.true_ub > 0:
        raise NotImplementedError(
            f"{what}: MPI.BOTTOM with a datatype of absolute addresses (MPI.Get_address) "
            "is not simulated by collsim: build the datatype with displacements relative "
            "to one buffer (MPI.Aint_diff of two addresses) and pass that buffer"
        )
    if derived:  # a displacement with it is not simulated: _typed refuses a tuple count
        count = (count, displ) if displ is not None and (vector or displ) else count
        return _typed(array, count, datatype, what, writable and not stores, blocks)
    if datatype is None:
        datatype = _inferred(array, buf, what)
    if not datatype and count is None and array.nbytes:
        raise value_error(f"{what}: cannot infer count: MPI.DATATYPE_NULL describes no elements")
    if vector and (displ is not None or isinstance(count, list | np.ndarray)):
        return _vector(_elements(array, datatype, what), datatype, (count, displ), what)
    return _simple(array, datatype, count, displ, what, blocks)


def _inferred(array, buf, what):
    """The datatype mpi4py infers from the buffer's format."""
    datatype = datatype_of(array.dtype)
    if datatype is None or array.dtype.kind in "OUSV" and array.size:
        raise key_error(f"{what}: cannot map a {array.dtype} array to an MPI datatype")
    if not array.dtype.isnative:
        raise buffer_error(
            f"{what}: a {array.dtype.str} array has a foreign byte order: name the datatype "
            "([x, MPI.INT]) to move its bytes as they are"
        )
    if array.dtype.char == "B" and not isinstance(buf, np.ndarray):
        return BYTE  # bytes, bytearray: MPI.BYTE, as mpi4py infers
    return datatype


def _elements(array, datatype, what, count_given=False):
    """The buffer's memory as whole elements of ``datatype`` (1-D); a length that is not a
    whole number of them is refused unless a count says how many to use."""
    flat = array.reshape(-1)
    element = datatype.numpy
    if not datatype:  # DATATYPE_NULL describes no elements
        return flat.view(np.uint8)[:0]
    if flat.dtype == element:
        return flat
    raw = flat.view(np.uint8)  # MPI reads the bytes as the datatype's elements
    if raw.size % element.itemsize and not count_given:
        raise value_error(
            f"{what}: cannot infer count: a buffer of {raw.size} bytes is not a whole "
            f"number of {datatype!r} elements ({element.itemsize} bytes each)"
        )
    return raw[: raw.size - raw.size % element.itemsize].view(element)


def _simple(array, datatype, count, displ, what, blocks):
    """A plain spec's buffer: ``count`` elements (per block) from element ``displ``."""
    if count is not None:
        count = _index(count, what, "count")
        if count < 0:
            raise value_error(f"{what}: count={count}: a count is an int >= 0")
    if displ is not None:
        displ = _index(displ, what, "displacement")
        if displ < 0:
            raise value_error(f"{what}: displacement={displ}: a displacement is an int >= 0")
        if displ and not datatype:
            raise value_error(f"{what}: displacement={displ} with MPI.DATATYPE_NULL")
    flat = _elements(array, datatype, what, count_given=count is not None)
    if displ:
        if displ > flat.size:
            raise value_error(
                f"{what}: displacement {displ} is past the buffer's {flat.size} "
                f"{datatype!r} elements"
            )
        flat = flat[displ:]
    if count is not None:
        total = count * blocks
        if total > flat.size:
            each = f" ({count} per rank on {blocks} ranks)" if blocks > 1 else ""
            start = f" from element {displ}" if displ else ""
            raise value_error(
                f"{what}: count {total}{each}{start} is more than the buffer's {flat.size} "
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


def _ints(values, what, name):
    """Per-rank counts or displacements as ints (a tuple), one int for every rank, or
    None; a value that is not an integer is mpi4py's TypeError."""
    if values is None:
        return None
    if isinstance(values, list | tuple) or isinstance(values, np.ndarray) and values.ndim:
        return tuple(_index(value, what, name) for value in values)
    return _index(values, what, name)


def _vector(flat, datatype, counts_displs, what):
    """A v-spec's buffer: counts (one per rank) and displacements (None: packed in order)."""
    counts = _ints(counts_displs[0], what, "counts")
    displs = _ints(counts_displs[1], what, "displacements")
    if is_int(counts):  # [buf, (count, displ), dt]: one count (and stride) for every rank,
        return Buffer(flat, datatype, counts, displs)  # spread when the size is known
    if displs is None and counts is not None:
        displs = tuple(int(d) for d in np.concatenate([[0], np.cumsum(counts)[:-1]]))
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
