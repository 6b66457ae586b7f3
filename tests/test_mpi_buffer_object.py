"""``MPI.buffer`` (mpi4py 4's raw-memory object) and ``MPI.Alloc_mem``/``Free_mem``.

The oracle is mpi4py's documented behaviour of ``MPI.buffer``: bytes of an object's
memory without a copy (writes land in the object), ``allocate``/``frombuffer``/
``fromaddress``, the properties ``address``, ``nbytes``, ``readonly``, ``obj``, contiguous
slicing only, and an empty buffer after ``release()``; and Python's own ``memoryview`` of
the same memory.
"""

import array

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import collsim
from collsim import mpi as MPI


def test_a_buffer_is_the_objects_memory_without_a_copy():
    ints = array.array("i", [1, 2, 3])
    buf = MPI.buffer(ints)
    assert buf.obj is ints and buf.nbytes == 12 and len(buf) == 12 and not buf.readonly
    assert buf.address == ints.buffer_info()[0] == MPI.Get_address(buf)
    assert buf.format == "B" and buf.itemsize == 1
    buf[4:8] = array.array("i", [20])  # writes land in the object
    buf.cast("i")[2] = 30
    assert ints.tolist() == [1, 20, 30]
    assert buf.tobytes() == ints.tobytes() == memoryview(buf).tobytes()
    assert buf.cast("i", (1, 3)).tolist() == [[1, 20, 30]]


def test_read_only_memory_stays_read_only():
    buf = MPI.buffer(b"abc")
    assert buf.readonly and buf.obj == b"abc" and buf[1] == ord("b")
    with pytest.raises(TypeError):
        buf[:] = 0
    with pytest.raises(BufferError):
        MPI.buffer.frombuffer(b"abc", readonly=False)
    view = MPI.buffer.frombuffer(bytearray(b"abc")).toreadonly()
    assert view.readonly and view.obj == bytearray(b"abc")
    with pytest.raises(BufferError, match="read-only"):
        MPI.Attach_buffer(MPI.buffer(b"abc"))


@pytest.mark.parametrize("bad", [None, 0, 0.0, [], (), "abc"])
def test_what_has_no_memory_is_a_type_error(bad):
    with pytest.raises(TypeError):
        MPI.buffer(bad)
    with pytest.raises(TypeError):
        MPI.buffer.frombuffer(bad)


def test_indexing_is_by_byte_and_slices_are_contiguous():
    buf = MPI.buffer(bytearray(8))
    with pytest.raises(IndexError):
        buf[8]
    with pytest.raises(IndexError):
        buf[::2]
    with pytest.raises(IndexError):
        buf[::2] = 0
    with pytest.raises(TypeError):
        buf[None]
    with pytest.raises(ValueError):
        buf[0:1] = buf[1:3]
    with pytest.raises(NotImplementedError):
        del buf[0]
    buf[-1] = 255
    buf[1:4] = b"xyz"
    assert buf.obj == bytearray(b"\0xyz\0\0\0\xff")
    assert buf[1:4].tobytes() == b"xyz" and type(buf[1:4]) is MPI.buffer


@given(st.integers(0, 64), st.booleans())
def test_allocate_gives_fresh_zeroed_memory_with_an_address(nbytes, clear):
    buf = MPI.buffer.allocate(nbytes, clear)
    assert buf.nbytes == nbytes == memoryview(buf.obj).nbytes
    assert buf.address != 0 and buf.tobytes() == bytes(nbytes)


def test_allocate_and_fromaddress_refuse_bad_sizes():
    with pytest.raises(TypeError):
        MPI.buffer.allocate(None)
    with pytest.raises(ValueError):
        MPI.buffer.allocate(-1)
    memory = bytearray(b"abc")
    address = MPI.Get_address(memory)
    assert MPI.buffer.fromaddress(address, 3).tobytes() == b"abc"
    with pytest.raises(ValueError):
        MPI.buffer.fromaddress(address, -1)
    with pytest.raises(ValueError):
        MPI.buffer.fromaddress(0, 1)


def test_a_released_buffer_is_empty_and_an_empty_one_has_address_zero():
    empty = MPI.buffer()
    assert (empty.address, empty.nbytes, empty.obj, empty.readonly, bool(empty)) == (
        0,
        0,
        None,
        False,
        False,
    )
    buf = MPI.buffer(b"abc")
    buf.release()
    assert (buf.address, buf.nbytes, buf.readonly, len(buf)) == (0, 0, False, 0)


def test_alloc_mem_memory_moves_in_messages_and_free_mem_releases_it():
    def main():
        comm = MPI.COMM_WORLD
        mem = MPI.Alloc_mem(4 * 3)
        if comm.rank == 0:
            mem.cast("i")[:] = array.array("i", [7, 8, 9])
            comm.Send([mem, MPI.INT], dest=1)
        else:
            comm.Recv([mem, MPI.INT], source=0)
        got = (type(mem) is MPI.buffer, mem.cast("i").tolist())
        MPI.Free_mem(mem)
        return got, mem.address, mem.nbytes

    returns = collsim.exec(main, n=2).returns
    assert returns[1] == ((True, [7, 8, 9]), 0, 0)


def test_a_buffer_is_ordinary_memory_to_numpy():
    buf = MPI.buffer(np.arange(4, dtype=np.uint8))
    assert np.frombuffer(buf, np.uint8).tolist() == [0, 1, 2, 3]
    assert buf == buf and buf != MPI.buffer(buf.obj)  # a handle: equal to itself only


def test_mpi_4_1_buffer_flush_is_refused_as_mpi4py_refuses_a_call_its_mpi_lacks():
    assert MPI.Get_version() < (4, 1)
    for call in (MPI.Flush_buffer, MPI.Iflush_buffer):
        with pytest.raises(NotImplementedError, match=rf"MPI\.{call.__name__}: MPI 4\.1"):
            call()
