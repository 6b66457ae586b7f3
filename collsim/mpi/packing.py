"""Moving a derived datatype's bytes: packing them out of a buffer, unpacking them back.

A message of ``count`` elements of a derived datatype carries, in typemap order, the
bytes of every entry of its typemap, the k-th element's shifted by k extents (MPI-4.1
§5.1: the data at ``buf + k * extent + disp`` for each (type, disp) of the typemap).
:func:`byte_positions` lists those bytes' positions in the user's buffer, checked against
its size before anything is gathered; sending gathers them (a copy: the message), and a
receive scatters the arrived bytes back to the same positions.  A typemap of one basic
type packs as an array of that type (so ``Send`` of a vector of INT matches ``Recv`` of
plain INTs, as the type signatures match in MPI); a mixed one packs as raw bytes.

Examples
--------
>>> import numpy as np
>>> from collsim import mpi as MPI
>>> column = MPI.DOUBLE.Create_vector(3, 1, 4)     # a column of a 3 x 4 matrix
>>> a = np.arange(12.0).reshape(3, 4)
>>> where = byte_positions(column.layout, 1, a.nbytes, "Send(buf=...)")
>>> gather(a.reshape(-1).view(np.uint8), where, column.layout).tolist()
[0.0, 4.0, 8.0]
"""

import numpy as np

from .exceptions import value_error
from .memory import array_of

__all__ = ["byte_positions", "gather", "scatter", "count_of", "PackCalls"]


def count_of(layout, nbytes, count, what):
    """The number of elements a spec names (``count``), or the buffer holds whole."""
    if count is not None:
        return count
    if layout.extent <= 0:
        raise value_error(f"{what}: a datatype of extent {layout.extent} needs an explicit count")
    if nbytes % layout.extent:
        raise value_error(
            f"{what}: cannot infer count, the buffer of {nbytes} bytes is not a multiple "
            f"of the datatype's extent ({layout.extent} bytes): give [buf, count, datatype]"
        )
    return nbytes // layout.extent


def byte_positions(layout, count, nbytes, what):
    """The positions, in a buffer of ``nbytes``, of the bytes ``count`` elements of
    ``layout`` carry, in the order they travel (refused before any is listed when they
    would reach outside the buffer): an index array, or a slice where they are one run."""
    if count == 0 or layout.size == 0:
        return np.zeros(0, np.int64)
    span = (count - 1) * layout.extent
    low, high = layout.true_lb + min(span, 0), layout.true_ub + max(span, 0)
    if low < 0 or high > nbytes:
        raise value_error(
            f"{what}: {count} element(s) of a datatype spanning bytes {layout.true_lb}.."
            f"{layout.true_ub} (extent {layout.extent}) reach bytes {low}..{high}, outside "
            f"the buffer of {nbytes} bytes: give a larger buffer or a smaller count"
        )
    if layout.dense and (count == 1 or layout.extent == layout.size):
        return slice(low, high)  # one run of bytes: a view, whatever its length
    typemap = layout.typemap()
    sizes = typemap.sizes
    starts = (np.arange(count, dtype=np.int64)[:, None] * layout.extent + typemap.offsets).reshape(
        -1
    )
    sizes = np.tile(sizes, count)
    # byte j of entry i sits at starts[i] + j: each entry's start repeated over its bytes
    first = np.repeat(np.cumsum(sizes) - sizes, sizes)
    return np.repeat(starts, sizes) + (np.arange(first.size, dtype=np.int64) - first)


def element_type(layout):
    """The numpy dtype a packed message of ``layout`` has: its one basic type, else bytes."""
    dtypes = layout.dtypes
    return dtypes[0] if len(dtypes) == 1 else np.dtype(np.uint8)


def gather(raw, where, layout):
    """The packed message: the bytes of ``raw`` at ``where``, as ``layout``'s elements."""
    return raw[where].view(element_type(layout))


def scatter(raw, where, packed):
    """Write the ``packed`` message's bytes back to their positions ``where`` in ``raw``."""
    raw[where] = packed.reshape(-1).view(np.uint8)


class PackCalls:
    """``Pack``, ``Unpack`` and their sizes, plain and in ``"external32"`` (big-endian, as
    the MPI standard's portable representation): a mixin of
    :class:`~collsim.mpi.datatypes.Datatype`.  Packed data has no header, so
    ``Pack_size(n)`` is exactly ``n`` elements' bytes.

    >>> import numpy as np
    >>> from collsim import mpi as MPI
    >>> out = bytearray(8)
    >>> MPI.INT.Pack(np.array([1, 2], "i"), out, 0, MPI.COMM_SELF), MPI.INT.Pack_size(2, None)
    (8, 8)
    >>> got = np.zeros(2, "i")
    >>> MPI.INT.Unpack(out, 0, got, MPI.COMM_SELF), got.tolist()
    (8, [1, 2])
    """

    def Pack_size(self, count, comm):
        """Bytes ``count`` elements take packed."""
        return _position(count, "Pack_size", "count") * self.Get_size()

    def Pack(self, inbuf, outbuf, position, comm):
        """Pack ``inbuf``'s elements of this type into the bytes of ``outbuf`` from
        ``position``; gives the position after them."""
        return _pack(self, inbuf, outbuf, position, "Pack")

    def Unpack(self, inbuf, position, outbuf, comm):
        """Unpack elements of this type from ``inbuf`` at ``position`` into ``outbuf``
        (as many as it holds); gives the position after them."""
        return _unpack(self, inbuf, position, outbuf, "Unpack")

    def Pack_external_size(self, datarep, count):
        _external(datarep, "Pack_external_size")
        return self.Pack_size(count, None)

    def Pack_external(self, datarep, inbuf, outbuf, position):
        return _pack(self, inbuf, outbuf, position, _external(datarep, "Pack_external"))

    def Unpack_external(self, datarep, inbuf, position, outbuf):
        return _unpack(self, inbuf, position, outbuf, _external(datarep, "Unpack_external"))


def _external(datarep, call):
    if datarep != "external32":
        raise value_error(
            f"{call}(datarep={datarep!r}): the one data representation is 'external32'"
        )
    return call


def _position(value, call, arg):
    if not isinstance(value, int | np.integer) or value < 0:
        raise value_error(f"{call}({arg}={value!r}): give an int >= 0")
    return int(value)


def _big_endian(dtype, call):
    """External32's form of ``dtype``: big-endian (a mixed struct's bytes have no one form)."""
    if dtype.itemsize == 1 or dtype.kind == "S":  # bytes have no order
        return dtype
    if dtype.kind == "V" and dtype.fields is None:
        raise NotImplementedError(f"MPI.Datatype.{call} of a mixed struct: not simulated")
    return dtype.newbyteorder(">")


def _pack(datatype, inbuf, outbuf, position, call):
    data = _elements(datatype, _raw(inbuf, call, "inbuf"), call, "inbuf")
    if "external" in call:
        data = data.astype(_big_endian(data.dtype, call))
    raw = _raw(outbuf, call, "outbuf", writable=True)
    start = _position(position, call, "position")
    end = _fits(start, data.nbytes, raw.size, call)
    raw[start:end] = data.reshape(-1).view(np.uint8)
    return end


def _unpack(datatype, inbuf, position, outbuf, call):
    target = _raw(outbuf, call, "outbuf", writable=True)
    where = _positions(datatype, target, call, "outbuf")
    dtype = element_type(datatype.layout)
    raw = _raw(inbuf, call, "inbuf")
    start = _position(position, call, "position")
    end = _fits(start, target[where].size, raw.size, call)
    form = _big_endian(dtype, call) if "external" in call else dtype
    scatter(target, where, raw[start:end].view(form).astype(dtype))
    return end


def _positions(datatype, raw, call, arg):
    """The byte positions of as many elements of ``datatype`` as ``raw`` holds."""
    if not datatype:
        raise value_error(f"{call} of MPI.DATATYPE_NULL: give a datatype")
    what = f"{call}({arg}=...)"
    count = count_of(datatype.layout, raw.size, None, what)
    return byte_positions(datatype.layout, count, raw.size, what)


def _elements(datatype, raw, call, arg):
    """The packed elements of ``datatype`` that the bytes ``raw`` hold."""
    return gather(raw, _positions(datatype, raw, call, arg), datatype.layout)


def _raw(buffer, call, arg, writable=False):
    """The bytes of a buffer object, as a flat uint8 view."""
    return array_of(buffer, f"{call}({arg}=...)", writable).reshape(-1).view(np.uint8)


def _fits(start, nbytes, size, call):
    if start + nbytes > size:
        raise value_error(
            f"{call}: {nbytes} bytes from position {start} pass the buffer's end ({size} "
            f"bytes): give a buffer of at least {start + nbytes} (Pack_size says how much)"
        )
    return start + nbytes
