"""What ``MPI.Win`` checks before it refuses: one-sided communication is not simulated.

Making a window (``Win.Create``, ``Win.Allocate``, ...) raises ``NotImplementedError``
naming the call, so a program that needs one stops there; so does every call on
``MPI.WIN_NULL`` (:class:`~collsim.mpi.environment.Win`'s null handle, falsy and equal only
to a null window, as mpi4py's).  ``Put``, ``Get`` and ``Accumulate`` read their origin
buffer spec and their target spec first, as mpi4py does before MPI sees the window, so a
bad spec is the ValueError it is there.

Examples
--------
>>> from collsim.mpi import WIN_NULL
>>> WIN_NULL.Fence()
Traceback (most recent call last):
...
NotImplementedError: MPI.Win.Fence: one-sided communication (Win) is not simulated by \
collsim; use point-to-point or collective calls
>>> WIN_NULL.Put([None, 0, "B"], 0, {1: 2})
Traceback (most recent call last):
...
collsim.errors.ConfigError: Win.Put(target={1: 2}): a target is a displacement or a list \
[displacement, count, datatype] (mpi4py raises ValueError)
"""

import operator

from ..errors import shorten
from .exceptions import unsupported, value_error
from .specs import buffer_of

__all__ = ["WindowCalls"]

_WHAT = "one-sided communication (Win)"


class WindowCalls:
    """``Put``, ``Get`` and ``Accumulate`` of ``MPI.Win``: their specs checked, then refused."""

    def _transfer(self, call, origin, target, writable):
        buffer_of(origin, f"Win.{call}(origin=...)", writable=writable)
        _check_target(target, call)
        raise unsupported(f"MPI.Win.{call}", _WHAT)

    def Put(self, origin, target_rank, target=None):
        self._transfer("Put", origin, target, writable=False)

    def Get(self, origin, target_rank, target=None):
        self._transfer("Get", origin, target, writable=True)

    def Accumulate(self, origin, target_rank, target=None, op=None):
        self._transfer("Accumulate", origin, target, writable=False)


def _check_target(target, call):
    """mpi4py's target spec: None, a displacement, or ``[disp[, count[, datatype]]]``."""
    if target is None:
        return
    if isinstance(target, list | tuple) and len(target) <= 3:
        return
    try:
        operator.index(target)
    except TypeError:
        raise value_error(
            f"Win.{call}(target={shorten(target)}): a target is a displacement or a list "
            "[displacement, count, datatype]"
        ) from None
