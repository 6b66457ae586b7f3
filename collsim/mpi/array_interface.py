"""Read memory that an object describes by ``__cuda_array_interface__`` (CuPy, Numba, PyTorch
on a GPU), checked as mpi4py checks it, as a flat numpy view.

collsim's "GPU" memory is host memory, so the pointer is read as the host's, once
:mod:`~collsim.mpi.host_memory` has checked that the host can read it (a real GPU's
cannot). The dict must have ``data`` (``(pointer, read_only)``), ``typestr`` (native or
``|`` byte order), ``shape`` and optionally ``strides`` (contiguous, C or Fortran order),
``descr`` (a list) and ``mask`` (None); a missing key is a KeyError, a value of the wrong
type a TypeError, a wrong length or item size a ValueError, and memory MPI cannot use as
it lies (masked, strided, negative extents, a foreign byte order) a BufferError, each as
mpi4py raises it.

Examples
--------
>>> import array
>>> ints = array.array("i", [1, 2, 3])
>>> class Device:
...     __cuda_array_interface__ = {"version": 3, "data": (ints.buffer_info()[0], False),
...                                 "typestr": "<i4", "shape": (3,), "strides": None}
>>> cuda_array_view(Device()).tolist()
[1, 2, 3]
"""

import sys
import warnings

import numpy as np

from ..errors import shorten
from .exceptions import buffer_error, key_error, type_error, value_error
from .host_memory import check_host_memory

__all__ = ["cuda_array_view", "contiguous_order", "Interface"]

_NATIVE = "<" if sys.byteorder == "little" else ">"


def contiguous_order(shape, strides, itemsize):
    """``"C"`` or ``"F"`` where ``strides`` (None: C order) lay ``shape``'s items out one
    after another, else None; an extent of 1 may have any stride, as it is never stepped.

    >>> contiguous_order((2, 3), (12, 4), 4), contiguous_order((2, 3), (4, 8), 4)
    ('C', 'F')
    >>> contiguous_order((3, 2), (8, 8), 4) is None
    True
    """
    if strides is None:
        return "C"
    if len(strides) != len(shape) or any(s < 0 for s in strides):
        return None
    for order, dims in (("C", reversed(range(len(shape)))), ("F", range(len(shape)))):
        step = itemsize
        for i in dims:
            if shape[i] != 1 and strides[i] != step:
                break
            step *= shape[i]
        else:
            return order
    return None


class Interface:
    """An object numpy reads through ``__array_interface__``; it keeps the owner alive."""

    def __init__(self, interface, owner):
        self.__array_interface__, self.owner = interface, owner


def _entry(interface, key, kind, what):
    if key not in interface:
        raise key_error(f"{what}: __cuda_array_interface__ has no {key!r}")
    value = interface[key]
    if not isinstance(value, kind):
        raise type_error(
            f"{what}: __cuda_array_interface__[{key!r}] = {shorten(value)} is not a {kind.__name__}"
        )
    return value


def cuda_array_view(obj, what="MPI.buffer(obj)"):
    """A 1-D numpy view (bytes in memory order) of ``obj.__cuda_array_interface__``."""
    interface = obj.__cuda_array_interface__
    if not isinstance(interface, dict):
        raise type_error(f"{what}: __cuda_array_interface__ is {shorten(interface)}, not a dict")
    data = _entry(interface, "data", tuple, what)
    if len(data) != 2:
        raise value_error(f"{what}: __cuda_array_interface__['data'] = {data}: (pointer, readonly)")
    if interface.get("mask") is not None:
        raise buffer_error(f"{what}: a masked __cuda_array_interface__ is not MPI memory")
    typestr = _entry(interface, "typestr", str, what)
    shape = _entry(interface, "shape", tuple, what)
    strides = interface.get("strides")
    if strides is not None and not isinstance(strides, tuple):
        raise type_error(f"{what}: __cuda_array_interface__['strides'] = {strides!r}")
    descr = interface.get("descr")
    if descr is not None and not isinstance(descr, list):
        raise type_error(f"{what}: __cuda_array_interface__['descr'] = {descr!r}: not a list")
    if typestr[:1] not in ("|", "=", _NATIVE):
        raise buffer_error(f"{what}: typestr {typestr!r}: not in the host's byte order")
    try:
        itemsize = int(typestr[2:])
    except ValueError:
        raise value_error(f"{what}: typestr {typestr!r} has no item size") from None
    if any(n < 0 for n in shape):
        raise buffer_error(f"{what}: shape {shape} has a negative extent")
    if contiguous_order(shape, strides, itemsize) is None:
        raise buffer_error(f"{what}: the memory is not contiguous (strides {strides})")
    count = int(np.prod(shape))
    if typestr[1] == "V":  # a record: MPI moves its bytes; the fields are not read
        if descr and len(descr) > 1:
            warnings.warn(
                f"{what}: a record typestr ({typestr}) of {len(descr)} fields moves as bytes",
                RuntimeWarning,
                stacklevel=4,
            )
        typestr, count = "|u1", count * itemsize
    check_host_memory(data[0], count * np.dtype(typestr).itemsize, what)  # not a real GPU's
    flat = {"version": 3, "data": (data[0], bool(data[1])), "shape": (count,), "typestr": typestr}
    return np.asarray(Interface(flat, obj))
