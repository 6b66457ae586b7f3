"""An object as several messages: what ``mpi4py.util.pkl5`` sends, and its requests and
matched messages.

An object pickled with out-of-band buffers (:meth:`~collsim.mpi.pickling.Pickle.dumps_oob`)
travels as ``1 + 1 + n`` messages with one source, destination and tag: a header of int64
lengths (the stream's, then each buffer's), the pickle stream, then each buffer as its own
bytes.  MPI keeps messages of one source and tag in order, so the receiver of the header
receives the rest from that source with that tag.  Every byte in the trace is a byte that
moved: a 1 MB array is a 1 MB message, not part of a pickle.

:class:`Request` and :class:`Message` are mpi4py's tuples of ``MPI.Request`` and
``MPI.Message``, one for each message of an object.

Examples
--------
>>> import numpy as np, collsim
>>> from collsim import mpi as MPI
>>> from collsim.mpi.pickling import Pickle
>>> def main():
...     comm, p = MPI.COMM_WORLD, Pickle()
...     p.THRESHOLD = 0
...     if comm.rank == 0:
...         return len(send_parts(comm, "Isend", p.dumps_oob(np.arange(4.0)), 1, 7))
...     return p.loads_oob(*recv_parts(comm, 0, 7, MPI.Status())).tolist()
>>> collsim.runtime.blocking.run(collsim.Cluster(collsim.topology.ring(2)), main).returns
[3, [0.0, 1.0, 2.0, 3.0]]
"""

import numpy as np

from .datatypes import BYTE
from .pickling import Pickle
from .probes import MESSAGE_NO_PROC, MESSAGE_NULL
from .probes import Message as MPIMessage
from .request import REQUEST_NULL
from .request import Request as MPIRequest
from .status import ANY_SOURCE, ANY_TAG, PROC_NULL, Status

__all__ = ["send_parts", "recv_parts", "bcast_parts", "matched", "Request", "Message"]

_LENGTH = np.dtype(np.int64)  # the header's element: one length in bytes


def _as_bytes(view):
    return np.frombuffer(view, dtype=np.uint8)


def send_parts(comm, call, pickled, dest, tag):
    """Send ``pickled`` (``(stream, buffers)``) to ``dest`` with ``comm``'s buffer call
    ``call`` (``"Send"``, ``"Isend"``, ``"Issend"``, ...): the requests it returned."""
    stream, buffers = pickled
    header = np.array([len(stream)] + [b.nbytes for b in buffers], dtype=_LENGTH)
    send = getattr(comm, call)
    return [send(part, dest, tag) for part in (header, _as_bytes(stream), *map(_as_bytes, buffers))]


def recv_parts(comm, source, tag, status):
    """Receive one object's messages: ``(stream, buffers)``, ``status`` the header's source
    and tag with the stream's and buffers' bytes as its count."""
    comm.Probe(source, tag, status)
    source, tag = status.Get_source(), status.Get_tag()
    header = np.empty(status.Get_count(BYTE) // _LENGTH.itemsize, dtype=_LENGTH)
    comm.Recv(header, source, tag)
    parts = [np.empty(int(n), dtype=np.uint8) for n in header]
    for part in parts:
        comm.Recv(part, source, tag)
    status.Set_elements(BYTE, int(header.sum()))
    return parts[0], parts[1:]


def bcast_parts(comm, pickled, root):
    """Broadcast ``pickled`` (``(stream, buffers)``, given at ``root``) with ``Bcast``: the
    header's length, the header, then the stream and each buffer; every rank's copy."""
    count = np.zeros(1, dtype=_LENGTH)
    if pickled is not None:
        stream, buffers = pickled
        header = np.array([len(stream)] + [b.nbytes for b in buffers], dtype=_LENGTH)
        count[0] = header.size
        parts = [_as_bytes(stream), *map(_as_bytes, buffers)]
    comm.Bcast(count, root)
    if pickled is None:
        header = np.empty(int(count[0]), dtype=_LENGTH)
    comm.Bcast(header, root)
    if pickled is None:
        parts = [np.empty(int(n), dtype=np.uint8) for n in header]
    for part in parts:
        comm.Bcast(part, root)
    return parts[0], parts[1:]


class _Handles(tuple):
    """A tuple of MPI handles that is null when every one is (mpi4py's pkl5 semantics)."""

    _NULL = None  # the MPI null handle of the kind
    _KIND = object

    def __new__(cls, handles=None):
        if handles is None:
            handles = (cls._NULL,)
        elif isinstance(handles, cls._KIND):
            handles = (handles,)
        return super().__new__(cls, handles)

    def __eq__(self, other):
        if isinstance(other, type(self)):
            return tuple(self) == tuple(other)
        if isinstance(other, self._KIND):
            return all(h == other for h in self)
        return NotImplemented

    def __ne__(self, other):
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = tuple.__hash__

    def __bool__(self):
        return any(bool(h) for h in self)


def _statuses(status, count):
    """The status list for ``count`` requests: ``status`` gets the first one's."""
    return None if status is None else [status] + [Status() for _ in range(count - 1)]


class Request(_Handles):
    """``pkl5.Request``: the requests of one object's messages (not an ``MPI.Request``).
    A receive's is one request whose result is the object."""

    _NULL, _KIND = REQUEST_NULL, MPIRequest

    def Free(self):
        for request in self:
            request.Free()

    def free(self):
        self.Free()

    def cancel(self):
        for request in self:
            request.Cancel()

    def get_status(self, status=None):
        """Whether all its parts are done (the first pending one lets a poll's time pass)."""
        statuses = _statuses(status, len(self)) or [None] * len(self)
        return all(request.Get_status(s) for request, s in zip(self, statuses))

    def test(self, status=None):
        done, results = MPIRequest.testall(list(self), _statuses(status, len(self)))
        return (True, results[0]) if done else (False, None)

    def wait(self, status=None):
        return MPIRequest.waitall(list(self), _statuses(status, len(self)))[0]

    @classmethod
    def get_status_all(cls, requests, statuses=None):
        statuses = _fill_to(statuses, len(requests))
        return all(r.get_status(s) for r, s in zip(requests, statuses or [None] * len(requests)))

    @classmethod
    def testall(cls, requests, statuses=None):
        statuses = _fill_to(statuses, len(requests))
        pending = [r for request in requests for r in request if not r.Get_status()]
        if pending and not all(r.Get_status() for r in pending):  # after a poll's time
            return False, None
        return True, cls.waitall(requests, statuses)

    @classmethod
    def waitall(cls, requests, statuses=None):
        statuses = _fill_to(statuses, len(requests)) or [None] * len(requests)
        return [request.wait(status) for request, status in zip(requests, statuses)]


def _fill_to(statuses, count):
    """mpi4py's rule: a statuses list shorter than the requests grows to their number."""
    if isinstance(statuses, list):
        statuses.extend(Status() for _ in range(count - len(statuses)))
    return statuses


class Message(_Handles):
    """``pkl5.Message``: the matched messages of one object (``Comm.mprobe``)."""

    _NULL, _KIND = MESSAGE_NULL, MPIMessage

    def free(self):
        """Nothing to free (mpi4py's does nothing either)."""

    def recv(self, status=None):
        """The object, received from exactly these messages."""
        first, *rest = self
        if first == MESSAGE_NO_PROC or not rest:  # from PROC_NULL: None
            return first.recv(status)
        header = np.empty(len(rest), dtype=_LENGTH)
        first.Recv(header, status)
        parts = [np.empty(int(n), dtype=np.uint8) for n in header]
        for message, part in zip(rest, parts, strict=True):
            message.Recv(part)
        if status is not None:
            status.Set_elements(BYTE, int(header.sum()))
        return Pickle.loads_oob(parts[0], parts[1:])

    def irecv(self):
        """A request that is done, with the object (collsim's ``Message.Irecv`` receives
        at once too)."""
        from .p2p import done_request

        status = Status()
        obj = self.recv(status)
        fields = (status.Get_source(), status.Get_tag(), status.Get_count(BYTE))
        return Request(done_request(obj, fields))

    @classmethod
    def probe(cls, comm, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        return comm.mprobe(source, tag, status)

    @classmethod
    def iprobe(cls, comm, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        return comm.improbe(source, tag, status)


def matched(comm, first, status):
    """The :class:`Message` of an object whose header ``first`` was matched (its source
    and tag in ``status``): the rest of its messages, matched in their order."""
    if status.Get_source() == PROC_NULL:
        return Message(first)
    source, tag = status.Get_source(), status.Get_tag()
    messages, nbytes = [first], 0
    for _ in range(status.Get_count(BYTE) // _LENGTH.itemsize):
        messages.append(comm.Mprobe(source, tag, status))
        nbytes += status.Get_count(BYTE)
    status.Set_elements(BYTE, nbytes)
    return Message(messages)
