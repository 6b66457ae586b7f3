"""Read an array that exports itself by DLPack (``__dlpack__``) as a numpy view, without a copy.

mpi4py takes any DLPack producer as a buffer; so does collsim, for host memory (a
``kDLCPU`` device).  The capsule is read with :mod:`ctypes` from the layout the DLPack
header fixes (``DLTensor``: data, device, ndim, dtype, shape, strides, byte_offset), and
kept alive, unconsumed, as long as the view: the producer's capsule destructor frees the
tensor once nothing refers to it, which is the protocol's rule for a capsule nobody
renamed "used_dltensor".

Examples
--------
>>> import numpy as np
>>> x = np.arange(6, dtype=np.int32)
>>> view = dlpack_view(x)
>>> view.tolist(), np.shares_memory(view, x)
([0, 1, 2, 3, 4, 5], True)
"""

import ctypes

import numpy as np

__all__ = ["dlpack_view"]

_KDL_CPU = 1
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


def dlpack_view(obj):
    """A numpy view of ``obj``'s memory through ``obj.__dlpack__()``; a ValueError for a
    device other than the host."""
    capsule = obj.__dlpack__()
    if _IS_VALID(capsule, b"dltensor_versioned"):
        tensor = _Versioned.from_address(_GET_POINTER(capsule, b"dltensor_versioned")).dl_tensor
    elif _IS_VALID(capsule, b"dltensor"):
        tensor = _Tensor.from_address(_GET_POINTER(capsule, b"dltensor"))
    else:
        raise ValueError(f"{type(obj).__name__}.__dlpack__() gave no DLPack tensor capsule")
    if tensor.device.device_type != _KDL_CPU:
        raise ValueError(f"a DLPack tensor on device {tensor.device.device_type}: not host memory")
    kind, bits, lanes = _KINDS[tensor.dtype.code], tensor.dtype.bits, tensor.dtype.lanes
    if kind == "f" and lanes == 2:  # two float lanes: a complex (256-bit ones overflow bits)
        kind, bits, lanes = "c", 2 * bits, 1
    dtype = np.dtype(f"{kind}{bits * lanes // 8}")
    shape = tuple(tensor.shape[i] for i in range(tensor.ndim))
    strides = None
    if tensor.strides:  # DLPack strides count elements, numpy's bytes
        strides = tuple(tensor.strides[i] * dtype.itemsize for i in range(tensor.ndim))
    interface = {
        "version": 3,
        "data": ((tensor.data or 0) + tensor.byte_offset, False),
        "shape": shape,
        "typestr": dtype.str,
        "strides": strides,
    }
    return np.asarray(_Keeper(interface, capsule))
