"""``mpi4py.util.dtlib`` under ``collsim exec``: numpy dtypes to MPI datatypes and back.

Examples
--------
>>> from .datatypes import DATATYPES
>>> from_numpy_dtype("f8"), to_numpy_dtype(DATATYPES["INT"])
(MPI.DOUBLE, dtype('int32'))
"""

import numpy as np

from .datatypes import Datatype, datatype_of

__all__ = ["from_numpy_dtype", "to_numpy_dtype"]


def from_numpy_dtype(dtype):
    """The predefined datatype of a numpy dtype (a ValueError if there is none: collsim
    has no derived datatypes for structured dtypes)."""
    found = datatype_of(dtype)
    if found is None:
        raise ValueError(f"from_numpy_dtype({dtype!r}): no predefined MPI datatype for it")
    return found


def to_numpy_dtype(datatype):
    """The numpy dtype of one element of a predefined ``datatype``."""
    if not isinstance(datatype, Datatype) or not datatype:
        raise ValueError(f"to_numpy_dtype({datatype!r}): give a predefined MPI datatype")
    return np.dtype(datatype.numpy)
