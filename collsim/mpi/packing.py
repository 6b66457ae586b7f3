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

__all__ = ["byte_positions", "gather", "scatter", "count_of"]


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
    would reach outside the buffer)."""
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
    dtypes = layout.typemap().dtypes
    return dtypes[0] if len(dtypes) == 1 else np.dtype(np.uint8)


def gather(raw, where, layout):
    """The packed message: the bytes of ``raw`` at ``where``, as ``layout``'s elements."""
    return raw[where].view(element_type(layout))


def scatter(raw, where, packed):
    """Write the ``packed`` message's bytes back to their positions ``where`` in ``raw``."""
    raw[where] = packed.reshape(-1).view(np.uint8)
