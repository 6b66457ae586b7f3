"""``Probe``, ``Iprobe``, ``Mprobe``, ``Improbe`` and ``MPI.Message``: look at a message that
has arrived (or is on its way) before receiving it.

``Iprobe`` asks the run's mailboxes whether a send to this rank that a receive from
``source`` with ``tag`` would take is waiting (:meth:`collsim.runtime.rank.Rank.probe`),
and costs no simulated time when it finds one; one that finds nothing lets a poll's time
pass, as ``Request.Test`` does, so a loop of them lets the message arrive.  ``Probe``
polls until one comes.  ``Mprobe`` returns the message as an ``MPI.Message``, whose
``Recv`` takes exactly that message (messages between two ranks with one tag arrive in
order, so the receive of that source and tag is it).

Examples
--------
>>> import numpy as np, collsim
>>> from collsim import mpi as MPI
>>> def main():
...     comm = MPI.COMM_WORLD
...     if comm.rank == 0:
...         comm.Send(np.arange(5.0), dest=1, tag=4)
...         return None
...     status = MPI.Status()
...     comm.Probe(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=status)
...     got = np.empty(status.Get_count(MPI.DOUBLE))
...     comm.Recv(got, source=status.source, tag=status.tag)
...     return status.tag, got.tolist()
>>> collsim.runtime.blocking.run(collsim.Cluster(collsim.topology.ring(2)), main).returns[1]
(4, [0.0, 1.0, 2.0, 3.0, 4.0])
"""

from ..runtime import blocking
from ..runtime.ops import ANY, TagPrefix
from .messages import MessageTag, land, unpickle
from .p2p import done_request
from .request import FIRST_POLL, LAST_POLL
from .specs import buffer_of
from .status import ANY_SOURCE, ANY_TAG, PROC_NULL

__all__ = ["Probes", "Message", "MESSAGE_NULL", "MESSAGE_NO_PROC"]


class Message:
    """A probed message (``Mprobe``), taken out of matching at once as MPI's matched probe
    takes it (a receive is posted for exactly it): ``Recv``/``recv`` complete that one."""

    def __init__(self, request=None, source=None):
        self._request, self._source = request, source  # source: PROC_NULL for no process

    def __bool__(self):
        return self._request is not None or self._source == PROC_NULL

    def __eq__(self, other):
        if not isinstance(other, Message):
            return NotImplemented
        if self is other or (not self and not other):
            return True
        return self._request is None and (self._source, other._request) == (other._source, None)

    __hash__ = object.__hash__

    def _take(self):
        """The posted receive (the message is used up: it becomes MESSAGE_NULL)."""
        request, self._request, self._source = self._request, None, None
        return request

    def Recv(self, buf, status=None):
        request = self._take()
        value = None if request is None else request.wait(status)
        if request is None:
            status_null(status)
        if value is not None:
            land(
                buffer_of(buf, "Message.Recv(buf=...)", writable=True, stores=True),
                value,
                "Message.Recv",
                "the probed message",
            )

    def Irecv(self, buf):
        self.Recv(buf)
        return done_request(None, None)

    def recv(self, status=None):
        request = self._take()
        if request is None:
            status_null(status)
            return None
        return unpickle(request.wait(status), "Message.recv")

    def irecv(self):
        return done_request(self.recv(), None)


def _raw(value, fields):
    """A probed message's receive keeps the bytes until Recv or recv says what they are."""
    return value


def status_null(status):
    """A receive from PROC_NULL: nothing, from PROC_NULL with ANY_TAG."""
    if status is not None:
        status._fill(PROC_NULL, ANY_TAG, 0)


MESSAGE_NULL = Message()
MESSAGE_NO_PROC = Message(None, PROC_NULL)


class Probes:
    """The probe calls of :class:`~collsim.mpi.comm.Comm` (a mixin)."""

    def _peek(self, call, source, tag):
        """``(found, (source, tag, nbytes))``: the first matching message waiting."""
        rank, _, size = self._me(call)
        source = self._peer(source, size, call, "source", receive=True)
        tag = self._tag(tag, call, "tag", receive=True)
        if source == PROC_NULL:
            return True, (PROC_NULL, ANY_TAG, 0)
        src = ANY if source == ANY_SOURCE else self._global(rank, source)
        want = TagPrefix((self._context,)) if tag == ANY_TAG else MessageTag(self._context, tag)
        found = rank.probe(src, want)
        if found is None:
            return False, None
        return True, (self._local(rank, found.src), found.tag[1], found.nbytes)

    def _wait_for(self, call, source, tag):
        """Poll until a matching message waits (simulated time passes between looks)."""
        poll = FIRST_POLL
        while True:
            found, fields = self._peek(call, source, tag)
            if found:
                return fields
            blocking.call(blocking.current_rank().compute(seconds=poll, label=f"MPI {call}"))
            poll = min(2 * poll, LAST_POLL)

    def Iprobe(self, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        found, fields = self._peek("Iprobe", source, tag)
        if not found:  # a poll's time, so that a loop of Iprobe lets the message come
            rank = blocking.current_rank()
            blocking.call(rank.compute(seconds=FIRST_POLL, label="MPI Iprobe (nothing)"))
            found, fields = self._peek("Iprobe", source, tag)
        if found and status is not None:
            status._fill(*fields)
        return found

    iprobe = Iprobe

    def Probe(self, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        fields = self._wait_for("Probe", source, tag)
        if status is not None:
            status._fill(*fields)
        return True

    probe = Probe

    def Mprobe(self, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        fields = self._wait_for("Mprobe", source, tag)
        if status is not None:
            status._fill(*fields)
        if fields[0] == PROC_NULL:
            return Message(None, PROC_NULL)
        # the first message of that source and tag is the probed one (they arrive in order)
        return Message(self._receive("Mprobe", fields[0], fields[1], _raw), fields[0])

    mprobe = Mprobe

    def Improbe(self, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        if not self.Iprobe(source, tag, status):
            return None
        return self.Mprobe(source, tag, status)

    improbe = Improbe
