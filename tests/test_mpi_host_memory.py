"""Memory that says it is on a device is read as the host's only where the host can read it:
a real GPU's pointer would end the process with a segmentation fault, so it is refused."""

import ctypes
import mmap

import numpy as np
import pytest

import collsim
from collsim.mpi.array_interface import cuda_array_view
from collsim.mpi.host_memory import readable


class _CudaLike:
    """An object that describes memory by __cuda_array_interface__ (as CuPy does)."""

    def __init__(self, address, count):
        self.__cuda_array_interface__ = {
            "version": 3,
            "data": (address, False),
            "typestr": "<f8",
            "shape": (count,),
            "strides": None,
        }


@pytest.fixture
def device_like_page():
    """The address of a page reserved with no access (PROT_NONE), as a GPU driver reserves
    device addresses in a process: in its range, not readable by the host."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int]
    libc.mmap.argtypes += [ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
    address = libc.mmap(None, mmap.PAGESIZE, 0, flags, -1, 0)  # prot 0: PROT_NONE
    assert address not in (None, ctypes.c_void_p(-1).value)
    yield address
    libc.munmap(address, mmap.PAGESIZE)


def test_host_memory_behind_a_device_interface_is_read():
    x = np.arange(6.0)
    view = cuda_array_view(_CudaLike(x.ctypes.data, 6))
    assert view.view(np.float64).tolist() == x.tolist()


def test_an_address_the_host_cannot_read_is_refused_naming_it(device_like_page):
    address = device_like_page
    assert not readable(address, 8)
    with pytest.raises(BufferError, match=f"{address:#x}.*not memory this process can read"):
        cuda_array_view(_CudaLike(address, 4))


def test_a_buffer_that_runs_past_its_mapping_is_refused():
    x = np.zeros(4)
    assert readable(x.ctypes.data, x.nbytes)
    assert not readable(x.ctypes.data, 1 << 60)


def test_a_send_of_device_memory_the_host_cannot_read_fails_with_a_collsim_error(
    device_like_page,
):
    address = device_like_page

    def main():
        comm = collsim.mpi.COMM_WORLD
        if comm.rank == 0:
            comm.Send(_CudaLike(address, 4), dest=1)
        else:
            comm.Recv(np.zeros(4), source=0)

    with pytest.raises(BufferError, match="simulates GPUs on host memory"):
        collsim.runtime.blocking.run(collsim.Cluster(collsim.topology.ring(2)), main)
