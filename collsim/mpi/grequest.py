"""``MPI.Grequest``, mpi4py's generalized request: not simulated, but there as a class.

A generalized request is one a program completes itself (``Grequest.Start`` with query,
free and cancel functions, then ``Complete``); collsim's requests are the non-blocking
calls' own, so ``Grequest.Start`` raises ``NotImplementedError`` naming the call.  The
class is there for what programs and mpi4py's tests do with it: ``MPI.Grequest(request)``
casts a plain request (a persistent one is refused with ``TypeError``, as mpi4py refuses it).

Examples
--------
>>> from collsim import mpi as MPI
>>> MPI.Grequest(MPI.REQUEST_NULL) == MPI.REQUEST_NULL
True
>>> MPI.Grequest.Start(None, None, None)
Traceback (most recent call last):
...
NotImplementedError: MPI.Grequest.Start: generalized requests are not simulated by collsim; \
use the non-blocking calls' requests
"""

from .request import Prequest, Request

__all__ = ["Grequest"]


class Grequest(Request):
    """``MPI.Grequest``: generalized requests are not simulated (``Grequest.Start``
    raises); the class is there for its casts, as mpi4py's: ``MPI.Grequest(request)``
    of a plain request, never of a persistent one."""

    def _construct(self, request=None):
        if isinstance(request, Prequest):
            raise TypeError(f"MPI.Grequest({request!r}): a persistent request is not one")
        super()._construct(request)

    @classmethod
    def Start(cls, *args, **kwargs):
        raise NotImplementedError(
            "MPI.Grequest.Start: generalized requests are not simulated by collsim; "
            "use the non-blocking calls' requests"
        )
