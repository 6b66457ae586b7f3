"""``MPI.buffer``: mpi4py 4's object for raw memory, bytes that MPI reads and writes.

``MPI.buffer(obj)`` and ``MPI.buffer.frombuffer(obj, readonly=False)`` wrap any object with
Python's buffer protocol (or DLPack, or an array interface) without a copy;
``MPI.buffer.allocate(nbytes, clear=False)`` gives fresh memory (what ``MPI.Alloc_mem``
returns); ``MPI.buffer.fromaddress(address, nbytes)`` wraps memory at an address.  It
reads as bytes: ``.address``, ``.nbytes``, ``.readonly``, ``.obj`` (the object it wraps),
``.format`` (``"B"``), ``len()``, indexing and contiguous slicing, ``.cast(format,
shape)`` (a memoryview), ``.tobytes()``, ``.toreadonly()`` and ``.release()``.  Memory
that an object marks as GPU memory (a DLPack device other than the host, a
``__cuda_array_interface__``) moves in messages, as collsim's "GPU" memory is host
memory, but refuses host access (``cast``, ``tobytes``, items) with ``BufferError``, as
mpi4py does.

It is a numpy array of bytes underneath (Python 3.11 lets no pure-Python class export the
buffer protocol itself), so every collsim call and ``memoryview`` take it as memory.

Examples
--------
>>> import array
>>> ints = array.array("i", [1, 2])
>>> buf = buffer(ints)
>>> buf.nbytes, buf.readonly, buf.obj is ints, buf.cast("i").tolist()
(8, False, True, [1, 2])
>>> buf[0] = 7
>>> ints[0], buf[:4].tobytes()
(7, b'\\x07\\x00\\x00\\x00')
>>> mem = buffer.allocate(4, clear=True)
>>> len(mem), mem[3], mem.address != 0
(4, 0, True)
>>> mem.release()
>>> mem.address, mem.nbytes
(0, 0)
"""

import operator

import numpy as np

from ..units import available_memory, format_size
from .exceptions import buffer_error, memory_error, type_error, value_error

__all__ = ["buffer"]

_NOTHING = object()  # buffer() with no argument: an empty buffer (buffer(None) is refused)
_KDL_CPU = 1


def _on_device(obj):
    """Whether ``obj`` says its memory is on a device other than the host."""
    if hasattr(obj, "__dlpack_device__"):
        device = obj.__dlpack_device__()
        return isinstance(device, tuple) and device[:1] != (_KDL_CPU,)
    return hasattr(obj, "__cuda_array_interface__") and not hasattr(obj, "__array_interface__")


def _integer(value, call, name):
    try:
        return operator.index(value)
    except TypeError:
        raise type_error(f"{call}({name}={value!r}): {name} is an int") from None


class buffer(np.ndarray):  # lowercase: mpi4py's name
    """mpi4py's ``MPI.buffer``: a writable or read-only run of bytes (see the module)."""

    def __new__(cls, obj=_NOTHING):
        if obj is _NOTHING:
            return cls._wrap(np.zeros(0, np.uint8), None, empty=True)
        return cls.frombuffer(obj, readonly=None)

    @classmethod
    def _wrap(cls, data, obj, empty=False, device=False):
        made = data.reshape(-1).view(np.uint8).view(cls)
        made._obj, made._released, made._empty, made._device = obj, False, empty, device
        return made

    def __array_finalize__(self, parent):
        self._obj = getattr(parent, "_obj", None)
        self._released = self._empty = False
        self._device = getattr(parent, "_device", False)

    # -- making one ---------------------------------------------------------------------

    @staticmethod
    def frombuffer(obj, readonly=False):
        """A buffer of ``obj``'s memory; ``readonly=True`` a read-only view of it
        (``None``: as ``obj`` is)."""
        from .memory import array_of

        if obj is None or isinstance(obj, int | float | list | tuple | str):
            raise type_error(f"MPI.buffer({obj!r}): a bytes-like object is required")
        data = array_of(obj, "MPI.buffer(obj)")
        if readonly is False and not data.flags.writeable:
            raise buffer_error(
                f"MPI.buffer.frombuffer({type(obj).__name__}, readonly=False): the object "
                "is read-only; pass readonly=True"
            )
        made = buffer._wrap(data, obj, device=_on_device(obj))
        if readonly:
            made.flags.writeable = False
        return made

    @staticmethod
    def allocate(nbytes, clear=False):
        """``nbytes`` bytes of fresh memory (always zeroed here, whatever ``clear``)."""
        nbytes = _integer(nbytes, "MPI.buffer.allocate", "nbytes")
        if nbytes < 0:
            raise value_error(f"MPI.buffer.allocate({nbytes}): a size is >= 0 bytes")
        free = available_memory()
        if free is not None and nbytes > free:  # refused before the system has to kill us
            raise memory_error(
                f"MPI.buffer.allocate({nbytes}): {format_size(nbytes)} is more than the "
                f"{format_size(free)} of memory available"
            )
        memory = np.zeros(nbytes, np.uint8)  # numpy gives even 0 bytes an address
        return buffer._wrap(memory, memory)

    @staticmethod
    def fromaddress(address, nbytes, readonly=False):
        """A buffer of the ``nbytes`` bytes at ``address`` (they must stay alive)."""
        address = _integer(address, "MPI.buffer.fromaddress", "address")
        nbytes = _integer(nbytes, "MPI.buffer.fromaddress", "nbytes")
        if nbytes < 0:
            raise value_error(f"MPI.buffer.fromaddress(nbytes={nbytes}): a size is >= 0")
        if address == 0 and nbytes > 0:
            raise value_error(f"MPI.buffer.fromaddress(0, {nbytes}): address 0 holds no bytes")

        class _At:  # numpy reads the memory through its array interface
            __array_interface__ = {
                "version": 3,
                "data": (address, bool(readonly)),
                "shape": (nbytes,),
                "typestr": "|u1",
            }

        return buffer._wrap(np.asarray(_At()), None)

    def toreadonly(self):
        """A read-only buffer of the same memory."""
        made = buffer._wrap(np.asarray(self), self._obj, device=self._device)
        made.flags.writeable = False
        return made

    def release(self):
        """Let the memory go: the buffer is empty from now on."""
        self._released, self._obj = True, None

    # -- what it is -----------------------------------------------------------------------

    @property
    def address(self):
        if self._released or self._empty:
            return 0
        return self.__array_interface__["data"][0]

    @property
    def obj(self):
        return self._obj

    @property
    def nbytes(self):
        return 0 if self._released else np.asarray(self).nbytes

    @property
    def readonly(self):
        return not self._released and not self.flags.writeable

    @property
    def format(self):
        return "B"

    @property
    def itemsize(self):
        return 1

    def __len__(self):
        return self.nbytes

    def __bool__(self):
        return self.nbytes > 0

    __eq__ = object.__eq__  # a handle on memory: equal to itself only, as mpi4py's
    __ne__ = object.__ne__
    __hash__ = object.__hash__

    def __repr__(self):
        return f"<MPI.buffer of {self.nbytes} bytes at {self.address:#x}>"

    __str__ = __repr__

    # -- host access ----------------------------------------------------------------------

    def _host(self, what):
        if self._device:
            raise buffer_error(f"MPI.buffer.{what}: the memory is on a device, not the host")
        return np.asarray(self)

    def cast(self, format, shape=None):
        """A memoryview of the bytes as ``format`` items, in ``shape``."""
        view = memoryview(self._host("cast"))
        return view.cast(format) if shape is None else view.cast(format, shape)

    def tobytes(self, order=None):
        """The bytes, copied."""
        return self._host("tobytes").tobytes()

    def _span(self, key, what):
        """``key`` as a position or a contiguous slice of the bytes."""
        if isinstance(key, slice):
            if key.step not in (None, 1):
                raise IndexError(f"MPI.buffer{what}: a slice of a buffer is contiguous (step 1)")
            return key
        try:
            index = operator.index(key)
        except TypeError:
            raise TypeError(f"MPI.buffer{what}: an index is an integer or a slice") from None
        if not -len(self) <= index < len(self):
            raise IndexError(f"MPI.buffer{what}: index {index} out of range 0..{len(self) - 1}")
        return index

    def __getitem__(self, key):
        span = self._span(key, f"[{key!r}]")
        data = self._host("__getitem__")
        if isinstance(span, slice):
            return buffer._wrap(data[span], self._obj, device=self._device)
        return int(data[span])

    def __setitem__(self, key, value):
        if self.readonly:
            raise TypeError(f"MPI.buffer[{key!r}] = ...: the buffer is read-only")
        span = self._span(key, f"[{key!r}] = ...")
        data = self._host("__setitem__")
        if isinstance(span, int) or isinstance(value, int):
            data[span] = operator.index(value)
            return
        source = np.frombuffer(memoryview(value).cast("B"), np.uint8)
        if source.size != data[span].size:
            raise value_error(
                f"MPI.buffer[{key!r}] = ...: {source.size} bytes into a slice of "
                f"{data[span].size}: a slice's length does not change"
            )
        data[span] = source

    def __delitem__(self, key):
        raise NotImplementedError("MPI.buffer: bytes cannot be deleted from a buffer")
