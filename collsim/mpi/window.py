"""``MPI.Win`` and ``MPI.WIN_NULL``: one-sided communication, which collsim does not simulate.

Making a window (``Win.Create``, ``Win.Allocate``, ...) raises ``NotImplementedError`` naming
the call, so a program that needs one stops there; so does every call on ``MPI.WIN_NULL``
(a null window handle, falsy and equal only to itself, as mpi4py's).  ``Put``, ``Get`` and
``Accumulate`` read their origin buffer spec and their target spec first, as mpi4py does
before MPI sees the window, so a bad spec is the ValueError it is there.

Examples
--------
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

__all__ = ["Win", "WIN_NULL"]

_WHAT = "one-sided communication (Win)"


def _refusal(call):
    def refuse(*args, **kwargs):
        raise unsupported(call, _WHAT)

    return refuse


class _RefusingClass(type):
    def __getattr__(cls, name):  # Win.Create, Win.Allocate, ...
        if name.startswith("_"):
            raise AttributeError(name)
        return _refusal(f"MPI.Win.{name}")


class Win(metaclass=_RefusingClass):
    """``MPI.Win``: a window cannot be made; ``MPI.WIN_NULL`` is the one instance."""

    def __new__(cls, *args, **kwargs):
        if args or kwargs or WIN_NULL is not None:
            raise unsupported("MPI.Win()", _WHAT)
        return super().__new__(cls)

    def __class_getitem__(cls, item):
        return cls

    def __getattr__(self, name):  # win.Fence, win.Free, win.Lock, ...
        if name.startswith("_"):
            raise AttributeError(name)
        return _refusal(f"MPI.Win.{name}")

    def __bool__(self):
        return False

    def __repr__(self):
        return "MPI.WIN_NULL"

    def __reduce__(self):
        return "WIN_NULL"

    def _transfer(self, call, origin, target, writable):
        from .specs import buffer_of

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


WIN_NULL = None
WIN_NULL = Win()
