"""MPI's reduction operations: ``MPI.SUM``, ``MPI.PROD``, ``MPI.MAX``, ``MPI.MIN``, the logical
(``LAND``, ``LOR``, ``LXOR``) and bitwise (``BAND``, ``BOR``, ``BXOR``) ones, ``MAXLOC`` and
``MINLOC`` (on ``(value, index)`` pairs), ``REPLACE``, ``NO_OP`` and ``Op.Create``.

``op(x, y)`` combines two contributions, the lower rank's first, as MPI orders them:
``REPLACE`` keeps the later one, ``NO_OP`` the earlier.  On numpy arrays it works element
by element (:meth:`Op.reduce_arrays`); the uppercase calls run collsim's own collectives
for ``SUM``, ``PROD``, ``MAX`` and ``MIN`` on the dtypes those move, and the other ops and
dtypes on a binomial tree over point-to-point (:mod:`collsim.mpi.vectors`).

Examples
--------
>>> SUM(2, 3), MAX("a", "b"), SUM([1], [2]), MAXLOC((1, 0), (3, 1)), REPLACE(1, 2)
(5, 'b', [1, 2], (3, 1), 2)
>>> import numpy as np
>>> y = np.array([3, 4]); SUM.Reduce_local(np.array([1, 2]), y); y.tolist()
[4, 6]
>>> BXOR.reduce_arrays(np.array([6], np.uint8), np.array([3], np.uint8)).tolist()
[5]
"""

import operator
from typing import NamedTuple

import numpy as np

from ..runtime import blocking
from .exceptions import ERR_INTERN, ERR_OP, mpi_error, value_error
from .handletable import Handle, predefine
from .settings import run_state

__all__ = ["Op", "SUM", "PROD", "MAX", "MIN", "LAND", "LOR", "LXOR", "BAND", "BOR", "BXOR"]
__all__ += ["MAXLOC", "MINLOC", "REPLACE", "NO_OP", "OP_NULL", "OPS", "object_op"]


def _max(x, y):
    return y if y > x else x


def _min(x, y):
    return y if y < x else x


def _maxloc(x, y):  # (value, index) pairs; a tie keeps the smaller index, as MPI defines
    return y if y[0] > x[0] or (y[0] == x[0] and y[1] < x[1]) else x


def _minloc(x, y):
    return y if y[0] < x[0] or (y[0] == x[0] and y[1] < x[1]) else x


class Op(Handle):
    """A reduction: ``op(x, y)`` combines two contributions (``x`` the lower rank's)."""

    def _construct(
        self, op=None, name=None, function=None, ufunc=None, collsim=None, commute=True, user=None
    ):
        if isinstance(op, Op):  # MPI.Op(MPI.SUM): another handle of the same op
            self.__dict__.update(op.__dict__)
            return
        if op is not None:
            raise TypeError(f"MPI.Op({op!r}): give an MPI.Op to copy, or nothing")
        self._handle = name if user is None else object()  # what equal handles share
        self.name = name  # "MPI_SUM"; None for OP_NULL
        self.function = function  # on Python objects
        self.ufunc = ufunc  # on numpy arrays (None: the function element by element)
        self.collsim = collsim  # the op collsim's collectives run, None where none
        self.commute = commute
        self.user = user  # Op.Create's function(inbuf, inoutbuf, datatype)

    @classmethod
    def Create(cls, function, commute=False):
        """A user's op: ``function(inbuf, inoutbuf, datatype)`` sets ``inoutbuf`` to
        ``inbuf op inoutbuf`` (on objects: ``function(x, y)`` returns the result)."""
        if not callable(function):
            raise mpi_error(ERR_OP, f"Op.Create({function!r}): give a function")
        owner = _rank_ops()
        if owner is not None and owner.count() >= MAX_USER_OPS:
            raise mpi_error(
                ERR_INTERN,
                f"Op.Create: {MAX_USER_OPS} user-defined ops are live on this rank "
                "(mpi4py's limit): Free() one before creating another",
            )
        made = cls._made(
            name="user-defined", function=function, commute=bool(commute), user=function
        )
        made._owner = owner
        if owner is not None:
            owner.add(1)
        return made

    def Free(self):
        if self.user is None:
            raise mpi_error(ERR_OP, f"Free() of {self!r}: a predefined op cannot be freed")
        owner = self.__dict__.pop("_owner", None)
        if owner is not None:
            owner.add(-1)
        self.name = self.function = self.user = None

    def Is_commutative(self):
        return self.commute

    is_commutative = property(Is_commutative)
    is_predefined = property(lambda self: self.user is None)

    def __call__(self, x, y):
        if self.function is None:
            raise mpi_error(ERR_OP, "MPI.OP_NULL cannot reduce")
        if self.user is not None:  # mpi4py calls it with no datatype on objects
            return self.user(x, y, None)
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            return self.reduce_arrays(np.asarray(x), np.asarray(y))
        return self.function(x, y)

    def reduce_arrays(self, x, y, datatype=None):
        """``x op y`` element by element (``x`` from the lower rank); a new array."""
        if self.user is not None:
            out = np.array(y, copy=True)
            self.user(x, out, datatype)
            return out
        if self.ufunc is not None:
            result = self.ufunc(x, y)
            return result.astype(x.dtype, copy=False) if result.dtype != x.dtype else result
        return np.array([self.function(a, b) for a, b in zip(x, y, strict=True)], dtype=x.dtype)

    def Reduce_local(self, inbuf, inoutbuf):
        from .specs import buffer_of

        source = buffer_of(inbuf, "Reduce_local(inbuf=...)")
        target = buffer_of(inoutbuf, "Reduce_local(inoutbuf=...)", writable=True)
        if source.datatype != target.datatype:
            raise value_error(
                f"Reduce_local: mismatch in inbuf and inoutbuf MPI datatypes "
                f"({source.datatype!r} and {target.datatype!r})"
            )
        if source.count != target.count:
            raise value_error(
                f"Reduce_local: mismatch in inbuf count {source.count} and inoutbuf count "
                f"{target.count}"
            )
        target.data[:] = self.reduce_arrays(source.data, target.data, target.datatype)

    def __eq__(self, other):
        if not isinstance(other, Op):
            return NotImplemented
        return self._handle is other._handle or (self.user is None and self.name == other.name)

    def _handle_key(self):
        return None if not self else (self.name, id(self._handle))

    def _nullify(self):
        self.name = self.function = self.user = None

    def __bool__(self):
        return self.function is not None

    def __reduce__(self):
        # a predefined op unpickles as itself, a copy of one (MPI.Op(op)) as a copy, a
        # user's op as a new op of the same function, as mpi4py pickles them
        if self.user is not None and not self.__dict__.get("_from_number"):
            return (Op.Create, (self.user, self.commute))
        return super().__reduce__()

    @classmethod
    def fromhandle(cls, handle):
        # as in mpi4py, an op made from a bare number has no Python function to pickle
        made = super().fromhandle(handle)
        made._from_number = True
        return made

    fromint = f2py = fromhandle

    def __repr__(self):
        return f"MPI.{(self.name or 'MPI_OP_NULL').removeprefix('MPI_')}"


def _logical(function):
    return lambda x, y: np.asarray(function(x, y)).astype(np.result_type(x, y))


SUM = Op(name="MPI_SUM", function=operator.add, ufunc=np.add, collsim="sum")
PROD = Op(name="MPI_PROD", function=operator.mul, ufunc=np.multiply, collsim="prod")
MAX = Op(name="MPI_MAX", function=_max, ufunc=np.maximum, collsim="max")
MIN = Op(name="MPI_MIN", function=_min, ufunc=np.minimum, collsim="min")
LAND = Op(name="MPI_LAND", function=lambda x, y: bool(x and y), ufunc=_logical(np.logical_and))
LOR = Op(name="MPI_LOR", function=lambda x, y: bool(x or y), ufunc=_logical(np.logical_or))
LXOR = Op(name="MPI_LXOR", function=lambda x, y: bool(x) != bool(y), ufunc=_logical(np.logical_xor))
BAND = Op(name="MPI_BAND", function=operator.and_, ufunc=np.bitwise_and)
BOR = Op(name="MPI_BOR", function=operator.or_, ufunc=np.bitwise_or)
BXOR = Op(name="MPI_BXOR", function=operator.xor, ufunc=np.bitwise_xor)
MAXLOC = Op(name="MPI_MAXLOC", function=_maxloc)
MINLOC = Op(name="MPI_MINLOC", function=_minloc)
REPLACE = Op(
    name="MPI_REPLACE", function=lambda x, y: y, ufunc=lambda x, y: y.copy(), commute=False
)
NO_OP = Op(name="MPI_NO_OP", function=lambda x, y: x, ufunc=lambda x, y: x.copy(), commute=False)
OP_NULL = Op()
OPS = (SUM, PROD, MAX, MIN, LAND, LOR, LXOR, BAND, BOR, BXOR, MAXLOC, MINLOC, REPLACE, NO_OP)
predefine(OP_NULL=OP_NULL, **{op.name.removeprefix("MPI_"): op for op in OPS})


def object_op(op, call):
    """``op`` as a two-argument function for the lowercase ``call`` (an Op or a callable)."""
    if (isinstance(op, Op) and op) or (not isinstance(op, Op) and callable(op)):
        return op
    raise mpi_error(
        ERR_OP,
        f"{call}(op={op!r}): an op is MPI.SUM, MPI.PROD, MPI.MAX, MPI.MIN "
        "(or another MPI.Op), or a function of two arguments",
    )


MAX_USER_OPS = 32  # mpi4py keeps user ops' callbacks in a table of 32 per process


class _RankOps(NamedTuple):
    """The live user ops of one rank, counted in its run's state (so the count dies
    with the run)."""

    live: dict  # rank id -> user ops created and not freed
    rank: int

    def count(self):
        return self.live.get(self.rank, 0)

    def add(self, n):
        self.live[self.rank] = self.count() + n


def _rank_ops():
    """The calling rank's live user ops, or None outside a run (no limit there)."""
    rank = blocking.calling_rank()
    if rank is None:
        return None
    return _RankOps(run_state(rank).user_ops, rank.id)
