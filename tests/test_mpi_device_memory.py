"""Memory exported by DLPack and by ``__cuda_array_interface__``, checked as mpi4py checks it.

Oracle: the DLPack protocol (``__dlpack_device__`` is a ``(device type, device id)``
tuple; a device other than the host is asked with ``stream=-1``; a versioned tensor's
read-only flag; contiguous strides) and the CUDA Array Interface (v3: ``data``,
``typestr``, ``shape`` required; ``strides``, ``descr``, ``mask`` optional), with the
exception mpi4py raises for each bad field.  collsim's "GPU" memory is host memory, so a
tensor labelled as on a GPU moves in messages; ``MPI.buffer`` of it refuses host access.
"""

import array
import ctypes
import sys
import warnings

import numpy as np
import pytest

import collsim
from collsim import mpi as MPI
from collsim.errors import ConfigError

_CAPSULE_POINTER = ctypes.pythonapi.PyCapsule_GetPointer
_CAPSULE_POINTER.restype = ctypes.c_void_p
_CAPSULE_POINTER.argtypes = [ctypes.py_object, ctypes.c_char_p]
KDL_CUDA = 2
# DLManagedTensorVersioned: version (2 x uint32), manager_ctx, deleter, flags (uint64),
# then the DLTensor: data pointer, then the device's type (int32)
VERSIONED_FLAGS, VERSIONED_DEVICE = 24, 40


class Tensor:
    """A DLPack producer over a numpy array, whose device and flags a test can set."""

    def __init__(self, values, device=(1, 0), read_only=False):
        self.array = np.array(values, dtype="i")
        self.device, self.read_only, self.streams = device, read_only, []

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, stream=None, max_version=None):
        self.streams.append(stream)
        capsule = self.array.__dlpack__(max_version=(1, 0))
        managed = _CAPSULE_POINTER(capsule, b"dltensor_versioned")
        if self.read_only:
            ctypes.c_uint64.from_address(managed + VERSIONED_FLAGS).value |= 1
        if isinstance(self.device[0], int):
            ctypes.c_int32.from_address(managed + VERSIONED_DEVICE).value = self.device[0]
        return capsule


def sendrecv(send, recv):
    MPI.COMM_SELF.Sendrecv(send, 0, 0, recv, 0, 0)


def on_one_rank(main):
    return collsim.exec(main, n=1).returns[0]


@pytest.mark.parametrize(
    "device, error",
    [(None, TypeError), ((None, 0), TypeError), ((1, None), TypeError), ((1,), ValueError)],
)
def test_a_bad_dlpack_device_is_refused_as_mpi4py_refuses_it(device, error):
    with pytest.raises(error, match="__dlpack_device__"):
        MPI.Get_address(Tensor([1, 2], device=device))


def test_a_gpu_tensor_moves_as_host_memory_asked_with_stream_minus_one():
    def main():
        send, recv = Tensor([1, 2, 3], device=(KDL_CUDA, 0)), Tensor([0, 0, 0])
        sendrecv(send, recv)
        try:
            MPI.buffer(send).cast("i")
        except BufferError as refused:
            return recv.array.tolist(), send.streams, recv.streams, str(refused)

    received, gpu_streams, host_streams, refused = on_one_rank(main)
    assert received == [1, 2, 3]
    assert set(gpu_streams) == {-1} and set(host_streams) == {None}
    assert "on a device" in refused


def test_a_read_only_dlpack_tensor_cannot_receive():
    def main():
        source, target = Tensor([1, 2]), Tensor([0, 0], read_only=True)
        address = MPI.Get_address(target)  # reading its address is fine
        try:
            sendrecv(source, target)
        except BufferError as refused:
            return address == target.array.ctypes.data, str(refused)

    same, message = on_one_rank(main)
    assert same and "read-only" in message


def test_a_strided_dlpack_tensor_is_a_buffer_error():
    class Strided:
        def __dlpack__(self, stream=None, max_version=None):
            return np.arange(8, dtype="i")[::2].__dlpack__()

    with pytest.raises(BufferError, match="not contiguous"):
        MPI.Get_address(Strided())


def cuda_buffer(values, code="i", **changes):
    memory = array.array(code, values)
    interface = {
        "version": 3,
        "data": (memory.buffer_info()[0], False),
        "typestr": ("<" if sys.byteorder == "little" else ">") + f"{code}{memory.itemsize}",
        "shape": (len(memory),),
        "strides": None,
    }
    interface.update(changes)
    device = type("Device", (), {"__cuda_array_interface__": interface})()
    device.memory = memory
    return device


FOREIGN = ">" if sys.byteorder == "little" else "<"
BAD_INTERFACES = {
    "not a dict": ({"__cuda_array_interface__": None}, TypeError),
    "no data": ({"data": KeyError}, KeyError),
    "data of 1 item": ({"data": (0,)}, ValueError),
    "data not a tuple": ({"data": 0}, TypeError),
    "a mask": ({"mask": True}, BufferError),
    "no typestr": ({"typestr": KeyError}, KeyError),
    "typestr not a str": ({"typestr": 42}, TypeError),
    "foreign byte order": ({"typestr": FOREIGN + "i4"}, BufferError),
    "no item size": ({"typestr": "<iX"}, ValueError),
    "no shape": ({"shape": KeyError}, KeyError),
    "shape not a tuple": ({"shape": 3}, TypeError),
    "negative extent": ({"shape": (3, -1)}, BufferError),
    "strided": ({"shape": (3, 2), "strides": (16, 4)}, BufferError),
    "strides not a tuple": ({"strides": 42}, TypeError),
    "descr not a list": ({"descr": 42}, TypeError),
}


@pytest.mark.parametrize("name", list(BAD_INTERFACES))
def test_a_bad_cuda_array_interface_raises_what_mpi4py_raises(name):
    changes, error = BAD_INTERFACES[name]
    target = cuda_buffer([0, 0, 0])
    interface = target.__cuda_array_interface__
    for key, value in changes.items():
        if key == "__cuda_array_interface__":
            type(target).__cuda_array_interface__ = value
        elif value is KeyError:
            del interface[key]
        else:
            interface[key] = value

    def main():
        try:
            sendrecv(np.zeros(3, "i"), target)
        except error as refused:  # a collsim error too, which names the field
            return isinstance(refused, ConfigError)
        return "accepted"

    assert on_one_rank(main) is True


def test_a_cuda_array_moves_and_a_record_typestr_moves_its_bytes_with_a_warning():
    def main():
        target = cuda_buffer([0, 0, 0])
        sendrecv(np.array([4, 5, 6], "i"), target)
        record = cuda_buffer([0] * 6, "d", shape=(2,), typestr="|V24", descr=[("", "<f8")] * 3)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            sendrecv(np.arange(6.0).view(np.uint8), record)
        return target.memory.tolist(), record.memory.tolist(), [str(w.message) for w in caught]

    moved, record, warned = on_one_rank(main)
    assert moved == [4, 5, 6] and record == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert len(warned) == 1 and "moves as bytes" in warned[0]
