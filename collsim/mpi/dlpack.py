"""Read an array that exports itself by DLPack (``__dlpack__``) as a numpy view, without a copy.

mpi4py takes any DLPack producer as a buffer; so does collsim, reading every device's
memory as the host's (collsim's "GPU" memory is host memory) once the host can read it
(:mod:`~collsim.mpi.host_memory`: a real GPU's pointer is refused, not read), with
mpi4py's checks: a
``__dlpack_device__`` of two ints, a capsule nobody used, version 1 for a versioned one
(whose read-only flag makes the view read-only), a shape and contiguous strides.  The
capsule is read with :mod:`ctypes` from the layout the DLPack header fixes (``DLTensor``:
data, device, ndim, dtype, shape, strides, byte_offset), and kept alive, unconsumed, as
long as the view: the producer's capsule destructor frees the tensor once nothing refers
to it, which is the protocol's rule for a capsule nobody renamed "used_dltensor".

Examples
--------
>>> import numpy as np
>>> x = np.arange(6, dtype=np.int32)
>>> view = dlpack_view(x)
>>> view.tolist(), np.shares_memory(view, x)
([0, 1, 2, 3, 4, 5], True)
"""

import ctypes
import operator

import numpy as np

from .array_interface import contiguous_order
from .exceptions import buffer_error, type_error, value_error
from .host_memory import check_host_memory

__all__ = ["dlpack_view", "dlpack_device"]

_KDL_CPU = 1
_READ_ONLY = 1  # DLPACK_FLAG_BITMASK_READ_ONLY
_KINDS = {0: "i", 1: "u", 2: "f", 5: "c", 6: "b"}  # DLDataTypeCode -> numpy kind


class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _Tensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _Device),
        ("ndim", ctypes.c_int32),
        ("dtype", _DataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _Versioned(ctypes.Structure):  # DLManagedTensorVersioned: the tensor comes last
    _fields_ = [
        ("version", ctypes.c_uint32 * 2),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", _Tensor),
    ]


_GET_POINTER = ctypes.pythonapi.PyCapsule_GetPointer
_GET_POINTER.restype, _GET_POINTER.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
_IS_VALID = ctypes.pythonapi.PyCapsule_IsValid
_IS_VALID.restype, _IS_VALID.argtypes = ctypes.c_int, [ctypes.py_object, ctypes.c_char_p]


class _Keeper:
    """Hands numpy the tensor's memory and keeps the capsule alive while the view is."""

    def __init__(self, interface, capsule):
        self.__array_interface__, self.capsule = interface, capsule


def dlpack_device(obj):
    """``obj.__dlpack_device__()`` checked as mpi4py checks it: a tuple of two ints."""
    device = obj.__dlpack_device__()
    if not isinstance(device, tuple):
        raise type_error(f"__dlpack_device__() gave {device!r}, not a (type, id) tuple")
    if len(device) != 2:
        raise value_error(f"__dlpack_device__() gave {device!r}: (device type, device id)")
    try:
        return tuple(operator.index(part) for part in device)
    except TypeError:
        raise type_error(f"__dlpack_device__() gave {device!r}: two ints") from None


def _capsule(obj, stream):
    """``obj.__dlpack__``'s capsule, asking for a versioned one where the producer can."""
    try:
        return obj.__dlpack__(stream=stream, max_version=(1, 0))
    except TypeError:  # a producer older than DLPack 1.0 takes no max_version
        return obj.__dlpack__(stream=stream)


def _tensor(capsule, name):
    """``(DLTensor, read_only)`` of a capsule, refused unless it is an unused one."""
    if _IS_VALID(capsule, b"dltensor_versioned"):
        managed = _Versioned.from_address(_GET_POINTER(capsule, b"dltensor_versioned"))
        if managed.version[0] != 1:
            raise buffer_error(f"{name}: a DLPack tensor of version {managed.version[0]}, not 1")
        return managed.dl_tensor, bool(managed.flags & _READ_ONLY)
    if _IS_VALID(capsule, b"dltensor"):
        return _Tensor.from_address(_GET_POINTER(capsule, b"dltensor")), False
    raise buffer_error(f"{name}.__dlpack__() gave no unused DLPack capsule ({capsule!r})")


def dlpack_view(obj):
    """A 1-D numpy view of ``obj``'s memory (in memory order) through ``obj.__dlpack__()``.

    Any device is read as host memory (collsim's "GPU" memory is); a device other than the
    host is asked for its tensor with ``stream=-1`` (no synchronisation), as mpi4py asks."""
    name = type(obj).__name__
    device = dlpack_device(obj) if hasattr(obj, "__dlpack_device__") else (_KDL_CPU, 0)
    capsule = _capsule(obj, None if device[0] == _KDL_CPU else -1)
    tensor, read_only = _tensor(capsule, name)
    if tensor.ndim < 0 or tensor.ndim and not tensor.shape:
        raise buffer_error(f"{name}: a DLPack tensor of {tensor.ndim} dimensions with no shape")
    shape = tuple(tensor.shape[i] for i in range(tensor.ndim))
    strides = tuple(tensor.strides[i] for i in range(tensor.ndim)) if tensor.strides else None
    if any(n < 0 for n in shape):
        raise buffer_error(f"{name}: a DLPack tensor of shape {shape}")
    if contiguous_order(shape, strides, 1) is None:
        raise buffer_error(f"{name}: the DLPack tensor is not contiguous (strides {strides})")
    code, bits, lanes = tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes
    count = int(np.prod(shape))
    if code in _KINDS and lanes == 1 or code == 2 and lanes == 2:
        kind, bits = (_KINDS[code], bits) if lanes == 1 else ("c", 2 * bits)
        dtype = np.dtype(f"{kind}{bits // 8}")
    elif code in _KINDS and bits * lanes % 8 == 0:  # lanes of one kind: one wider element
        dtype = np.dtype(f"{_KINDS[code]}{bits * lanes // 8}")
    elif bits * lanes in (8, 16, 32, 64):  # an opaque handle: an unsigned of its width
        dtype = np.dtype(f"u{bits * lanes // 8}")
    else:  # an opaque handle of another width: its bytes
        dtype, count = np.dtype(np.uint8), count * (bits * lanes // 8)
    address = (tensor.data or 0) + tensor.byte_offset
    if device[0] != _KDL_CPU:  # read as the host's only if the host can (a real GPU's: no)
        check_host_memory(address, count * dtype.itemsize, f"{name} on device {device}")
    interface = {
        "version": 3,
        "data": (address, read_only),
        "shape": (count,),
        "typestr": dtype.str,
    }
    return np.asarray(_Keeper(interface, capsule))
