"""The memory behind a buffer object: a numpy view of anything with Python's buffer
protocol (numpy arrays, ``array.array``, ``bytes``/``bytearray``/``memoryview``,
``mmap``), DLPack, or an array interface (``__cuda_array_interface__`` too: collsim's
"GPU" memory is host memory).  Writes to the view land in the object.

Examples
--------
>>> import array
>>> array_of(array.array("i", [1, 2]), "Send(buf=...)").tolist()
[1, 2]
>>> array_of(bytearray(3), "Recv(buf=...)", writable=True).dtype
dtype('uint8')

``Get_address`` gives a buffer's absolute address, as MPI does; the difference of two
(``Aint_diff``) is the byte displacement a struct datatype takes between two fields:

>>> import numpy as np
>>> record = np.zeros(1, "i4,f8")
>>> Aint_diff(Get_address(record["f1"]), Get_address(record))
4
>>> Get_address(BOTTOM), Aint_add(Get_address(None), 8)
(0, 8)
"""

import operator
import weakref

import numpy as np

from ..errors import shorten
from .array_interface import Interface, cuda_array_view
from .constants import BOTTOM, Bottom, BufferAutomatic, InPlace
from .dlpack import dlpack_view
from .exceptions import buffer_error, type_error

__all__ = ["array_of", "Bottom", "BOTTOM", "Get_address", "Aint_add", "Aint_diff", "at_address"]


def _addressed():
    """The run's buffers whose address Get_address gave, by (first byte, nbytes), each a
    weak reference (the entry goes when the buffer does; bytes and bytearrays, which have
    none, are held until the run ends), kept by the run's MPI state so they die with it;
    None outside a run.  MPI.BOTTOM-relative specs (absolute addresses) are read and
    written only inside these, so a wrong address is refused instead of touching memory
    no buffer of the run names."""
    from ..runtime import blocking
    from .settings import run_state

    rank = blocking.calling_rank()
    return None if rank is None else run_state(rank).addressed


def Get_address(location):
    """The absolute address of ``location``'s first byte (``MPI.BOTTOM`` and None: 0)."""
    if location is None:
        return 0
    if isinstance(location, Bottom | InPlace | BufferAutomatic):  # as mpi4py: their C value
        return int(location)
    owner = location
    if not isinstance(location, np.ndarray) or not (
        location.flags.c_contiguous or location.flags.f_contiguous
    ):  # array.array, bytes, DLPack, ...; a strided view is refused as mpi4py does
        location = array_of(location, "MPI.Get_address(location)")
    address = location.__array_interface__["data"][0]  # strided views too: the first byte
    key = (address, location.nbytes)
    kept = _addressed()
    if kept is not None and location.flags.c_contiguous:
        try:
            kept[key] = weakref.ref(owner, lambda _, key=key: kept.pop(key, None))
        except TypeError:  # bytes, bytearray: no weak references, so kept until the run ends
            kept[key] = lambda owner=owner: owner
    return address


def at_address(low, high, what):
    """``(raw, base)``: the bytes (uint8, writable where the buffer is) of the buffer
    ``Get_address`` was given that holds the absolute addresses ``low``..``high``, and its
    first byte's address; refused when no such buffer is alive in this run.

    >>> import collsim
    >>> def main():
    ...     x = np.arange(4, dtype="i")
    ...     raw, base = at_address(Get_address(x) + 4, Get_address(x) + 8, "Send")
    ...     return raw[4:8].view("i").tolist(), base == Get_address(x)
    >>> collsim.exec(main, n=1).returns
    [([1], True)]
    """
    for (base, nbytes), ref in list((_addressed() or {}).items()):
        owner = ref()
        if owner is not None and base <= low and high <= base + nbytes:
            data = owner if isinstance(owner, np.ndarray) else array_of(owner, what)
            if data.__array_interface__["data"][0] == base:  # a bytearray may have moved
                return data.reshape(-1).view(np.uint8), base
    raise NotImplementedError(
        f"{what}: MPI.BOTTOM with absolute addresses {low}..{high}, inside no buffer whose "
        "address MPI.Get_address gave: collsim reads absolute addresses only there (give "
        "the buffer, with displacements from its start)"
    )


def Aint_add(base, disp):
    """``base + disp``: an address ``disp`` bytes past ``base``."""
    return operator.index(base) + operator.index(disp)


def Aint_diff(addr1, addr2):
    """``addr1 - addr2``: the bytes from ``addr2`` to ``addr1``."""
    return operator.index(addr1) - operator.index(addr2)


def array_of(spec, what, writable=False):
    """A numpy view of the memory of ``spec`` (None and ``MPI.BOTTOM``: empty), in memory
    order (a Fortran-ordered array column by column), refused where it is not contiguous
    or, for a buffer that receives, not writable."""
    if spec is None or isinstance(spec, Bottom):
        return np.zeros(0, np.uint8)
    if isinstance(spec, np.ndarray) and type(spec) is not np.ndarray:
        spec = np.asarray(spec)  # MPI.buffer, np.matrix: the memory, as a plain array
    if not isinstance(spec, np.ndarray):
        spec = _exported(spec)
    if not isinstance(spec, np.ndarray):
        try:
            view = memoryview(spec)
        except TypeError:
            raise type_error(
                f"{what}: {shorten(spec)} (a {type(spec).__name__}) is not a buffer: give a "
                "numpy array, array.array or bytes (lowercase calls such as send/bcast take "
                "any Python object)"
            ) from None
        spec = np.frombuffer(view, np.uint8) if view.format in ("B", "c") else np.asarray(view)
    if not spec.flags.c_contiguous and spec.flags.f_contiguous:
        spec = spec.T  # Fortran order: MPI reads its memory as it lies, column by column
    if not spec.flags.c_contiguous:
        raise buffer_error(
            f"{what}: the array of shape {spec.shape} is not contiguous (a strided view): "
            "pass np.ascontiguousarray(x), and copy the result back if it receives"
        )
    if writable and not spec.flags.writeable:
        raise buffer_error(
            f"{what}: the array of shape {spec.shape} is read-only, but it receives data: "
            "pass a writeable array, e.g. x.copy()"
        )
    return spec


def _exported(obj):
    """A numpy view of an array that exports DLPack or an array interface
    (``__cuda_array_interface__`` too: collsim's "GPU" memory is host memory)."""
    if hasattr(obj, "__dlpack__") and not hasattr(obj, "__array_interface__"):
        return dlpack_view(obj)
    interface = getattr(obj, "__array_interface__", None)
    if isinstance(interface, dict):
        return np.asarray(Interface({**interface, "version": 3}, obj))
    if hasattr(obj, "__cuda_array_interface__") and not isinstance(obj, memoryview):
        return cuda_array_view(obj, f"{type(obj).__name__}.__cuda_array_interface__")
    return obj
