"""``mpi4py.util.pkl5`` under ``collsim exec``: the lowercase calls with pickle protocol 5.

``pkl5.Intracomm(comm)`` (and ``Intercomm``) is another handle of ``comm`` whose lowercase
calls send an object as its pickle stream and its large buffers as messages of their own
(:mod:`collsim.mpi.oob_messages`), so a numpy array moves as its bytes, uncopied into any
pickle, and the trace counts exactly them.  Which buffers go out of band is
``pkl5.pickle.THRESHOLD`` (256 KiB by default); the rest of the communicator is
``MPI.Comm``'s.  The collectives run over point-to-point messages on a context of their
own (as mpi4py's run on a duplicate of the communicator), the root sending to or
receiving from each rank in turn; an intracommunicator's ``bcast`` runs ``Bcast`` on the
header's length, the header, the stream and each buffer.  Intercommunicators get all of
them, which ``MPI.Intercomm`` lacks (its collectives are not simulated).

``irecv`` raises ``RuntimeError``, as mpi4py's does (the size of what comes is not known
before it comes): use ``mprobe(...).irecv()``.  See mpi4py's documentation,
"mpi4py.util.pkl5", and PEP 574 for protocol 5's out-of-band buffers.

Examples
--------
>>> import numpy as np, collsim
>>> from collsim import mpi as MPI
>>> from collsim.mpi import pkl5
>>> def main():
...     comm = pkl5.Intracomm(MPI.COMM_WORLD)
...     weights = np.full(100_000, float(comm.rank)) if comm.rank == 0 else None
...     return float(comm.bcast(weights, root=0).sum())
>>> run = collsim.exec(main, n=2, echo=False)
>>> run.returns
[0.0, 0.0]
"""

import sys
import types
from typing import NamedTuple

from ..collectives.checks import is_int
from .comm import COMM_NULL
from .comm import Comm as MPIComm
from .datatypes import BYTE
from .exceptions import ERR_ROOT, mpi_error
from .intercomm import Intercomm as MPIIntercomm
from .intracomm import Intracomm as MPIIntracomm
from .oob_messages import Message, Request, bcast_parts, matched, recv_parts, send_parts
from .pickling import Pickle
from .request import Request as MPIRequest
from .settings import rank_table, run_state
from .status import ANY_SOURCE, ANY_TAG, PROC_NULL, Status

__all__ = ["Comm", "Intracomm", "Intercomm", "Request", "Message", "Pickle", "pickle"]  # noqa: F822 (pickle: a property of _Pkl5Module)
__all__ += ["ANY_SOURCE", "ANY_TAG", "PROC_NULL", "ROOT", "Status"]

ROOT = -3  # MPI.ROOT: the root of an intercommunicator collective (collsim.mpi's value)
_OUTSIDE_A_RUN = [Pickle()]  # how pkl5 pickles outside a run (collsim.exec's own code)


def _pickle_slot():
    """The calling rank's one-item list holding its ``pkl5.pickle``: each rank is its own
    process to mpi4py, so a rank that sets ``pkl5.pickle.THRESHOLD`` sets only its own."""
    return rank_table("pkl5 pickle", lambda: [Pickle()]) or _OUTSIDE_A_RUN


class _Pkl5Module(types.ModuleType):
    """This module, whose ``pickle`` is the calling rank's (read, set, or replaced): one
    module for every rank, as a copy per rank would leave its classes in reference cycles
    for the collector after each run."""

    @property
    def pickle(self):
        return _pickle_slot()[0]

    @pickle.setter
    def pickle(self, value):
        _pickle_slot()[0] = value


sys.modules[__name__].__class__ = _Pkl5Module


class Roles(NamedTuple):
    """A rank's part in a rooted collective: ``size`` ranks hear from (or talk to) the root
    (the remote group's on an intercommunicator); ``member``: this rank is one of them;
    ``root``: this rank is the root (an intracommunicator's root is both)."""

    size: int
    member: bool
    root: bool


class _BigMPI:
    """mpi4py splits buffers of 2**31 bytes or more into blocks of a derived datatype,
    past MPI-3's count limit; collsim's counts have no limit, so a buffer travels whole
    as bytes.  ``blocksize`` and ``cache`` are kept for programs (and tests) that set them."""

    def __init__(self):
        self.blocksize, self.cache = 1 << 30, {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.cache.clear()

    def __call__(self, buf):
        view = memoryview(buf).cast("B")
        return buf, view.nbytes, BYTE


_bigmpi = _BigMPI()


def _dumps(obj):
    return _pickle_slot()[0].dumps_oob(obj)


def _loads(parts):
    return _pickle_slot()[0].loads_oob(*parts)


class Comm(MPIComm):
    """``pkl5.Comm(comm)``: ``comm``'s communicator, its lowercase calls protocol 5's."""

    def _construct(self, comm=None, *made):
        # pkl5.Comm(comm) copies a handle; Dup and Split make one of ranks and contexts
        super()._construct(COMM_NULL if comm is None else comm, *made)

    # -- point-to-point -------------------------------------------------------------------

    def _post(self, call, obj, dest, tag):
        """The requests of ``obj``'s messages to ``dest`` posted with ``call``."""
        if dest == PROC_NULL:  # checked by the MPI call; nothing to pickle
            return [getattr(MPIComm, call)(self, b"", dest, tag)]
        return send_parts(self, call, _dumps(obj), dest, tag)

    def send(self, obj, dest, tag=0):
        # standard mode part by part: small parts go eagerly, as Send's do
        self._post("Send", obj, dest, tag)

    def bsend(self, obj, dest, tag=0):
        self._post("Bsend", obj, dest, tag)

    def ssend(self, obj, dest, tag=0):
        MPIRequest.Waitall(self._post("Issend", obj, dest, tag))

    def isend(self, obj, dest, tag=0):
        return Request(self._post("Isend", obj, dest, tag))

    def ibsend(self, obj, dest, tag=0):
        return Request(self._post("Ibsend", obj, dest, tag))

    def issend(self, obj, dest, tag=0):
        return Request(self._post("Issend", obj, dest, tag))

    def recv(self, buf=None, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        """The next object from ``source`` with ``tag``; ``buf`` is not needed (the
        header says how many bytes come) and is not used."""
        if source == PROC_NULL:
            MPIComm.Recv(self, bytearray(0), source, tag, status)
            return None
        return _loads(recv_parts(self, source, tag, Status() if status is None else status))

    def irecv(self, buf=None, source=ANY_SOURCE, tag=ANY_TAG):
        raise RuntimeError(
            f"pkl5 irecv(source={source!r}, tag={tag!r}) is unsupported, as in mpi4py: "
            "its size is not known before it comes; use comm.mprobe(source, tag).irecv()"
        )

    def sendrecv(
        self,
        sendobj,
        dest,
        sendtag=0,
        recvbuf=None,
        source=ANY_SOURCE,
        recvtag=ANY_TAG,
        status=None,
    ):
        sent = self._post("Isend", sendobj, dest, sendtag)
        got = self.recv(recvbuf, source, recvtag, status)
        MPIRequest.Waitall(sent)
        return got

    def mprobe(self, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        """The :class:`Message` of the next object from ``source`` with ``tag``."""
        status = Status() if status is None else status
        return matched(self, MPIComm.Mprobe(self, source, tag, status), status)

    def improbe(self, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        """:meth:`mprobe`'s message if its header has come, else None."""
        status = Status() if status is None else status
        first = MPIComm.Improbe(self, source, tag, status)
        return None if first is None else matched(self, first, status)

    # -- collectives over point-to-point --------------------------------------------------

    def _private(self):
        """This communicator on a context of its own, the same on every rank (as mpi4py's
        duplicate): pkl5's collectives never match a user's messages."""
        private = type(self)(self)
        rank = self._me("pkl5 collective")[0]
        private._context = run_state(rank).context(("pkl5", self._context))[0]
        return private

    def _roles(self, root, call):
        """This rank's :class:`Roles` in a rooted collective (the root checked first)."""
        if self.Is_inter():
            size = self.Get_remote_size()
            if root == ROOT or root == PROC_NULL:  # the root's group: only the root talks
                return Roles(size, member=False, root=root == ROOT)
            if is_int(root) and 0 <= root < size:
                return Roles(size, member=True, root=False)
            raise mpi_error(
                ERR_ROOT,
                f"pkl5 {call}(root={root!r}): on an intercommunicator the root is MPI.ROOT, "
                f"MPI.PROC_NULL or a rank of the remote group, 0..{size - 1}",
            )
        size = self.Get_size()
        root = self._root(root, size, f"pkl5 {call}")
        return Roles(size, member=True, root=root == self.Get_rank())

    def _exchange(self, outgoing, sources):
        """Send ``outgoing`` ``(dest, obj)`` and receive one object from each of
        ``sources``, on the private context: the received objects."""
        private = self._private()
        sent = [
            r for dest, obj in outgoing for r in send_parts(private, "Isend", _dumps(obj), dest, 0)
        ]
        got = [_loads(recv_parts(private, source, 0, Status())) for source in sources]
        MPIRequest.Waitall(sent)
        return got

    def gather(self, sendobj, root=0):
        roles = self._roles(root, "gather")
        outgoing = [(root, sendobj)] if roles.member else []
        got = self._exchange(outgoing, range(roles.size) if roles.root else [])
        return got if roles.root else None

    def scatter(self, sendobj, root=0):
        roles = self._roles(root, "scatter")
        items = self._items(sendobj, roles.size, "pkl5 scatter") if roles.root else []
        got = self._exchange(list(enumerate(items)), [root] if roles.member else [])
        return got[0] if roles.member else None

    def allgather(self, sendobj):
        size = self.Get_remote_size() if self.Is_inter() else self.Get_size()
        return self._exchange([(r, sendobj) for r in range(size)], range(size))

    def alltoall(self, sendobj):
        size = self.Get_remote_size() if self.Is_inter() else self.Get_size()
        return self._exchange(
            list(enumerate(self._items(sendobj, size, "pkl5 alltoall"))), range(size)
        )

    def bcast(self, obj, root=0):
        if self.Is_inter():  # the root sends to each rank of the other group
            roles = self._roles(root, "bcast")
            outgoing = [(r, obj) for r in range(roles.size)] if roles.root else []
            got = self._exchange(outgoing, [root] if roles.member else [])
            return got[0] if roles.member else None
        root = self._root(root, self.Get_size(), "pkl5 bcast")
        mine = _dumps(obj) if root == self.Get_rank() else None
        return _loads(bcast_parts(self, mine, root))


class Intracomm(Comm, MPIIntracomm):
    """``pkl5.Intracomm(comm)``: an intracommunicator whose lowercase calls use pkl5."""


class Intercomm(Comm, MPIIntercomm):
    """``pkl5.Intercomm(comm)``: an intercommunicator whose lowercase calls use pkl5."""
