"""``mpi4py.typing``: the names type hints of MPI programs use for buffers and their
specs, as mpi4py's documentation defines them ("Buffer specification" in its
``mpi4py.typing`` page).  A buffer is anything with Python's buffer protocol, DLPack or a
CUDA array interface; a spec adds a count and a datatype (``[buf, count, MPI.INT]``), a
v-spec counts and displacements a rank, a w-spec a datatype a rank too.  They are hints
only: the calls check their arguments themselves (:mod:`collsim.mpi.specs`).

Examples
--------
>>> import numpy as np
>>> isinstance(np.zeros(2), SupportsDLPack), isinstance(b"", SupportsDLPack)
(True, False)
>>> from collsim import mpi as MPI
>>> TypeSpec == MPI.Datatype | str
True
"""

from collections.abc import Sequence
from typing import Any, Protocol, SupportsIndex, runtime_checkable

from .constants import Bottom as _Bottom
from .constants import InPlace as _InPlace
from .datatypes import Datatype

__all__ = ["SupportsBuffer", "SupportsDLPack", "SupportsCAI", "Buffer", "Bottom", "InPlace"]
__all__ += ["Aint", "Count", "Displ", "Offset", "TypeSpec", "BufSpec", "BufSpecB"]
__all__ += ["BufSpecV", "BufSpecW", "TargetSpec"]


@runtime_checkable
class SupportsBuffer(Protocol):
    """An object with Python's buffer protocol (PEP 688's ``__buffer__``)."""

    def __buffer__(self, flags: int) -> memoryview: ...


@runtime_checkable
class SupportsDLPack(Protocol):
    """An array that exports DLPack (``__dlpack__`` and ``__dlpack_device__``)."""

    def __dlpack__(self, *, stream: Any = None) -> Any: ...

    def __dlpack_device__(self) -> tuple[int, int]: ...


@runtime_checkable
class SupportsCAI(Protocol):
    """An array with a CUDA array interface (``__cuda_array_interface__``)."""

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]: ...


Buffer = SupportsBuffer | SupportsDLPack | SupportsCAI
Bottom = _Bottom | None  # MPI.BOTTOM, or None, which mpi4py reads as it
InPlace = _InPlace | None  # MPI.IN_PLACE, or None
Aint = Count = Displ = Offset = SupportsIndex  # addresses, counts, displacements: ints
TypeSpec = Datatype | str  # MPI.INT or a typecode such as "i"

# [buf], [buf, count], [buf, datatype], [buf, count, datatype] (or (buf, count), ...)
_Spec = (
    tuple[Buffer]
    | tuple[Buffer, Count]
    | tuple[Buffer, TypeSpec]
    | tuple[Buffer, Count, TypeSpec]
    | tuple[Bottom, Count, Datatype]
    | list[Any]
)
BufSpec = Buffer | _Spec
# a rooted collective's: [buf, count, datatype] where count is one block's
BufSpecB = Buffer | tuple[Buffer, Count] | tuple[Buffer, TypeSpec] | _Spec
# a v-collective's: [buf, counts, displs, datatype]
BufSpecV = (
    Buffer
    | tuple[Buffer, Sequence[Count]]
    | tuple[Buffer, tuple[Sequence[Count], Sequence[Displ]]]
    | tuple[Buffer, TypeSpec]
    | tuple[Buffer, Sequence[Count], TypeSpec]
    | tuple[Buffer, tuple[Sequence[Count], Sequence[Displ]], TypeSpec]
    | tuple[Buffer, Sequence[Count], Sequence[Displ], TypeSpec]
    | tuple[Bottom, tuple[Sequence[Count], Sequence[Displ]], Datatype]
    | tuple[Bottom, Sequence[Count], Sequence[Displ], Datatype]
    | list[Any]
)
# Alltoallw's: [buf, counts, displs, datatypes] (a datatype a rank)
BufSpecW = (
    tuple[Buffer, Sequence[Datatype]]
    | tuple[Buffer, tuple[Sequence[Count], Sequence[Displ]], Sequence[Datatype]]
    | tuple[Buffer, Sequence[Count], Sequence[Displ], Sequence[Datatype]]
    | tuple[Bottom, tuple[Sequence[Count], Sequence[Displ]], Sequence[Datatype]]
    | tuple[Bottom, Sequence[Count], Sequence[Displ], Sequence[Datatype]]
    | list[Any]
)
# one-sided calls' target: disp, (), (disp,), (disp, count), (disp, count, datatype)
TargetSpec = (
    Displ
    | tuple[()]
    | tuple[Displ]
    | tuple[Displ, Count]
    | tuple[Displ, Count, TypeSpec]
    | list[Any]
)
