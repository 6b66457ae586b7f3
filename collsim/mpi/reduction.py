"""MPI's reduction operations: ``MPI.SUM``, ``MPI.PROD``, ``MPI.MAX``, ``MPI.MIN`` and the
logical and bitwise ones.

An :class:`Op` reduces two Python objects (the lowercase ``reduce``/``allreduce``, which
also take any two-argument callable) and names the collsim op the uppercase calls run
with (``"sum"``, ``"prod"``, ``"max"``, ``"min"``: the four collsim's collectives reduce
with; the others work on objects only).  Numpy arrays reduce element by element.

Examples
--------
>>> SUM(2, 3), MAX("a", "b"), SUM([1], [2])
(5, 'b', [1, 2])
>>> import numpy as np
>>> MAX(np.array([1, 5]), np.array([4, 2])).tolist()
[4, 5]
"""

import operator
from dataclasses import dataclass

import numpy as np

from .exceptions import ERR_OP, mpi_error

__all__ = [
    "Op",
    "SUM",
    "PROD",
    "MAX",
    "MIN",
    "LAND",
    "LOR",
    "LXOR",
    "BAND",
    "BOR",
    "BXOR",
    "OPS",
    "object_op",
    "collsim_op",
]


def _max(x, y):
    return y if y > x else x


def _min(x, y):
    return y if y < x else x


@dataclass(frozen=True)
class Op:
    """A predefined reduction: ``op(x, y)`` combines two contributions."""

    name: str  # "MPI_SUM"
    function: object  # on Python objects
    ufunc: np.ufunc  # on numpy arrays
    collsim: str = None  # the op collsim's collectives run, None where they have none

    def __call__(self, x, y):
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            return self.ufunc(x, y)
        return self.function(x, y)

    def Is_commutative(self):
        return True

    def __repr__(self):
        return f"MPI.{self.name.removeprefix('MPI_')}"


SUM = Op("MPI_SUM", operator.add, np.add, "sum")
PROD = Op("MPI_PROD", operator.mul, np.multiply, "prod")
MAX = Op("MPI_MAX", _max, np.maximum, "max")
MIN = Op("MPI_MIN", _min, np.minimum, "min")
LAND = Op("MPI_LAND", lambda x, y: bool(x and y), np.logical_and)
LOR = Op("MPI_LOR", lambda x, y: bool(x or y), np.logical_or)
LXOR = Op("MPI_LXOR", lambda x, y: bool(x) != bool(y), np.logical_xor)
BAND = Op("MPI_BAND", operator.and_, np.bitwise_and)
BOR = Op("MPI_BOR", operator.or_, np.bitwise_or)
BXOR = Op("MPI_BXOR", operator.xor, np.bitwise_xor)
OPS = (SUM, PROD, MAX, MIN, LAND, LOR, LXOR, BAND, BOR, BXOR)


def object_op(op, call):
    """``op`` as a two-argument function for the lowercase ``call`` (an Op or a callable)."""
    if isinstance(op, Op) or callable(op):
        return op
    raise mpi_error(
        ERR_OP,
        f"{call}(op={op!r}): an op is MPI.SUM, MPI.PROD, MPI.MAX, MPI.MIN "
        "(or another MPI.Op), or a function of two arguments",
    )


def collsim_op(op, call):
    """The collsim op name of ``op`` for the uppercase ``call``."""
    if isinstance(op, Op) and op.collsim is not None:
        return op.collsim
    raise mpi_error(
        ERR_OP,
        f"{call}(op={op!r}): buffer reductions run collsim's collectives, which reduce with "
        "MPI.SUM, MPI.PROD, MPI.MAX or MPI.MIN; reduce other ops on objects with the "
        "lowercase call",
    )
