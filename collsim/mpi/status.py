"""``MPI.Status``: where a received message came from, its tag and how much arrived.

Examples
--------
>>> from .datatypes import DATATYPES
>>> status = Status()
>>> status._fill(3, 7, 24)
>>> status.Get_source(), status.tag, status.Get_count(DATATYPES["DOUBLE"])
(3, 7, 3)
>>> status.Get_count(DATATYPES["LONG_DOUBLE"]) == UNDEFINED   # 24 B is not whole ones
True
"""

import numpy as np

from .datatypes import BYTE, Datatype
from .exceptions import ERR_TYPE, SUCCESS, mpi_error
from .handletable import MadeInNew

__all__ = ["Status", "ANY_SOURCE", "ANY_TAG", "PROC_NULL", "UNDEFINED"]
__all__ += ["F_SOURCE", "F_TAG", "F_ERROR", "F_STATUS_SIZE"]

# mpi4py's values (MPICH's); a program compares against the names only
ANY_SOURCE = -2
ANY_TAG = -1
PROC_NULL = -1
UNDEFINED = -32766
# a status as Fortran's integer array (Open MPI's layout: source, tag, error, cancelled,
# then the count in bytes as two 32-bit halves)
F_SOURCE, F_TAG, F_ERROR, F_STATUS_SIZE = 0, 1, 2, 6
_F_CANCELLED, _F_COUNT_LOW, _F_COUNT_HIGH = 3, 4, 5


class Status(MadeInNew):
    """Where a message came from: ``source``, ``tag``, ``error`` and its size in bytes
    (``Get_count(datatype)`` in elements).  ``Status(other)`` copies one."""

    def _construct(self, status=None):
        if status is not None and not isinstance(status, Status):
            raise TypeError(f"MPI.Status({status!r}): give an MPI.Status to copy")
        # the fields live in one int64 array, as MPI_Status is one C struct: tomemory()
        # hands out a writable view of it, as mpi4py's does
        self._memory = np.array([ANY_SOURCE, ANY_TAG, SUCCESS, 0, 0], dtype=np.int64)
        if status is not None:
            self._memory[:] = status._memory

    source = property(lambda self: int(self._memory[0]), lambda self, v: self._set(0, v))
    tag = property(lambda self: int(self._memory[1]), lambda self, v: self._set(1, v))
    error = property(lambda self: int(self._memory[2]), lambda self, v: self._set(2, v))
    count = property(lambda self: int(self._memory[3]), lambda self, v: self._set(3, v))
    cancelled = property(lambda self: bool(self._memory[4]), lambda self, v: self._set(4, v))

    def _set(self, field, value):
        self._memory[field] = value

    def tomemory(self):
        """A writable view of the status's fields (source, tag, error, count in bytes,
        cancelled)."""
        return memoryview(self._memory)

    def _fill(self, source, tag, nbytes):
        self._memory[:4] = (source, tag, SUCCESS, nbytes)

    def Get_source(self):
        return self.source

    def Get_tag(self):
        return self.tag

    def Get_error(self):
        return self.error

    def Get_count(self, datatype=BYTE):
        """Elements of ``datatype`` that arrived (bytes by default); ``UNDEFINED`` where the
        bytes are not a whole number of them."""
        if not isinstance(datatype, Datatype) or not datatype:
            raise mpi_error(ERR_TYPE, f"Status.Get_count({datatype!r}): give an MPI datatype")
        whole, rest = divmod(self.count, datatype.Get_size())
        return UNDEFINED if rest else whole

    Get_elements = Get_count

    def Set_elements(self, datatype, count):
        self.count = count * datatype.Get_size()

    def Set_source(self, source):
        self.source = source

    def Set_tag(self, tag):
        self.tag = tag

    def Set_error(self, error):
        self.error = error

    def Is_cancelled(self):
        return self.cancelled

    def Set_cancelled(self, flag):
        self.cancelled = bool(flag)

    _struct_bytes = 4 * F_STATUS_SIZE  # MPI._sizeof(MPI.Status): a C struct of ints

    def py2f(self):
        """The status as Fortran's integer array (``MPI.F_SOURCE``, ``F_TAG``, ...)."""
        fields = [0] * F_STATUS_SIZE
        fields[F_SOURCE], fields[F_TAG], fields[F_ERROR] = self.source, self.tag, self.error
        fields[_F_CANCELLED] = int(self.cancelled)
        fields[_F_COUNT_LOW], fields[_F_COUNT_HIGH] = self.count & 0xFFFFFFFF, self.count >> 32
        return fields

    @classmethod
    def f2py(cls, fields):
        """The status a :meth:`py2f` array describes."""
        if len(fields) != F_STATUS_SIZE:
            raise TypeError(
                f"MPI.Status.f2py({fields!r}): give {F_STATUS_SIZE} integers (MPI.F_STATUS_SIZE)"
            )
        status = cls()
        status.source, status.tag, status.error = fields[F_SOURCE], fields[F_TAG], fields[F_ERROR]
        status.cancelled = bool(fields[_F_CANCELLED])
        status.count = fields[_F_COUNT_LOW] | fields[_F_COUNT_HIGH] << 32
        return status

    def __eq__(self, other):
        if not isinstance(other, Status):
            return NotImplemented
        return bool((self._memory == other._memory).all())

    __hash__ = None

    def __repr__(self):
        return f"Status(source={self.source}, tag={self.tag}, count={self.count} B)"
