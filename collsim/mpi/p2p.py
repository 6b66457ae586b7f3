"""Point-to-point calls of ``MPI.Comm``: ``send``/``recv`` on objects, ``Send``/``Recv`` on
buffers, their non-blocking (``I...``), synchronous (``Ssend``), buffered (``Bsend``),
combined (``Sendrecv``, ``Sendrecv_replace``, ``Isendrecv``) and persistent (``Send_init``,
``Recv_init``) forms.

Every message carries the tag ``(context, user_tag)`` of its communicator, so messages of
two communicators never match.  A blocking ``Send`` of at most the eager limit (64 KiB by
default, see :func:`collsim.mpi.configure`) returns at once, as MPI implementations send
small messages eagerly; a larger one, and every ``Ssend``, returns when the data has
arrived.  ``Bsend`` always returns at once (the message is copied, as into an attached
buffer).  Messages to or from ``MPI.PROC_NULL`` complete at once with nothing.

Examples
--------
>>> import numpy as np, collsim
>>> from collsim import mpi as MPI
>>> def main():
...     comm = MPI.COMM_WORLD
...     x = np.full(2, float(comm.rank))
...     comm.Sendrecv_replace(x, dest=(comm.rank + 1) % comm.size, source=MPI.ANY_SOURCE)
...     return float(x[0])
>>> collsim.runtime.blocking.run(collsim.Cluster(collsim.topology.ring(3)), main).returns
[2.0, 0.0, 1.0]
"""

import warnings

from ..collectives.checks import is_int
from ..runtime import blocking
from ..runtime.ops import ANY, TagPrefix
from .exceptions import ERR_RANK, ERR_TAG, mpi_error
from .messages import MessageTag, land, pickled, unpickle
from .request import ANY_SOURCE, ANY_TAG, PROC_NULL, Compound, Prequest, Request, Status
from .settings import run_state
from .specs import buffer_of

__all__ = ["PointToPoint", "MAX_TAG"]

MAX_TAG = 2**29 - 1  # MPICH's largest tag (the standard promises >= 32767)


class PointToPoint:
    """The point-to-point calls of :class:`~collsim.mpi.comm.Comm` (a mixin)."""

    # -- checks ---------------------------------------------------------------------------

    def _peer(self, value, size, call, arg, receive=False):
        if is_int(value) and (0 <= value < size or value == PROC_NULL):
            return int(value)
        if receive and is_int(value) and value == ANY_SOURCE:
            return ANY_SOURCE
        extra = ", MPI.ANY_SOURCE" if receive else ""
        raise mpi_error(
            ERR_RANK,
            f"{call}({arg}={value!r}): the ranks of this {size}-rank "
            f"communicator are 0..{size - 1}{extra} or MPI.PROC_NULL",
        )

    def _tag(self, value, call, arg, receive=False):
        if is_int(value) and (0 <= value <= MAX_TAG or (receive and value == ANY_TAG)):
            return int(value)
        extra = " or MPI.ANY_TAG" if receive else ""
        raise mpi_error(
            ERR_TAG,
            f"{call}({arg}={value!r}): a tag is an int in 0..{MAX_TAG} "
            f"(the attribute MPI.TAG_UB){extra}",
        )

    # -- the shared paths -----------------------------------------------------------------

    def _send(self, call, payload, dest, tag, mode="standard"):
        """Post ``payload`` to ``dest``.  ``mode``: "standard" (eager up to the limit, then
        synchronous), "sync" (returns when the data has arrived), "buffered" (returns at
        once) block and return None; "request" returns a Request."""
        rank, _, size = self._me(call)
        dest = self._peer(dest, size, call, "dest")
        tag = self._tag(tag, call, "tag")
        if dest == PROC_NULL:
            return None if mode != "request" else Request(None, active=True)
        where, mpi_tag = self._global(rank, dest), MessageTag(self._context, tag)
        if mode == "request":
            return Request(blocking.call(rank.isend(where, payload, mpi_tag, label=call)))
        eager = payload.nbytes <= run_state(rank).settings.eager_limit
        if mode == "buffered" or (mode == "standard" and eager):
            # a copy travels, the sender goes on (it may reuse its buffer at once)
            blocking.call(rank.isend(where, payload.copy(), mpi_tag, label=call))
        else:
            blocking.call(rank.send(where, payload, mpi_tag, label=call))
        return None

    def _receive(self, call, source, tag, finish, wait=False):
        """A Request for a receive (done already if ``wait``: a blocking receive, which the
        deadlock report names as one); ``finish(value, status fields)`` gives its result."""
        rank, _, size = self._me(call)
        source = self._peer(source, size, call, "source", receive=True)
        tag = self._tag(tag, call, "tag", receive=True)
        if source == PROC_NULL:  # completes at once with nothing, as MPI's does
            return done_request(finish(None, None), (PROC_NULL, ANY_TAG, 0))
        src = ANY if source == ANY_SOURCE else self._global(rank, source)
        mpi_tag = TagPrefix((self._context,)) if tag == ANY_TAG else MessageTag(self._context, tag)

        def done(received):
            fields = (self._local(rank, received.src), received.tag[1], received.nbytes)
            return finish(received.value, fields), fields

        if wait:
            return done_request(*done(blocking.call(rank.recv(src, mpi_tag, status=True))))
        return Request(blocking.call(rank.irecv(src, mpi_tag, status=True)), done)

    # -- lowercase: picklable objects -----------------------------------------------------

    def send(self, obj, dest, tag=0):
        self._send("send", pickled(obj, "send"), dest, tag)

    def ssend(self, obj, dest, tag=0):
        self._send("ssend", pickled(obj, "ssend"), dest, tag, "sync")

    def bsend(self, obj, dest, tag=0):
        self._send("bsend", pickled(obj, "bsend"), dest, tag, "buffered")

    def isend(self, obj, dest, tag=0):
        return self._send("isend", pickled(obj, "isend"), dest, tag, "request")

    issend = ibsend = isend

    def recv(self, buf=None, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        return self.irecv(buf, source, tag, _call="recv", _wait=True).wait(status)

    def irecv(self, buf=None, source=ANY_SOURCE, tag=ANY_TAG, _call="irecv", _wait=False):
        if buf is not None and not is_int(buf):  # mpi4py warns that it reads no buffer
            warnings.warn(f"{_call}(buf=...): the buffer is not used", UserWarning, stacklevel=3)
        return self._receive(
            _call,
            source,
            tag,
            lambda value, fields: None if value is None else unpickle(value, _call),
            _wait,
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
        sent = self._send("sendrecv", pickled(sendobj, "sendrecv"), dest, sendtag, "request")
        got = self.irecv(recvbuf, source, recvtag, _call="sendrecv")
        return Request.waitall([sent, got], [None, status])[1]

    # -- uppercase: buffers ---------------------------------------------------------------

    def _data(self, buf, call):
        return buffer_of(buf, f"{call}(buf=...)").data

    def Send(self, buf, dest, tag=0):
        self._send("Send", self._data(buf, "Send"), dest, tag)

    def Ssend(self, buf, dest, tag=0):
        self._send("Ssend", self._data(buf, "Ssend"), dest, tag, "sync")

    def Bsend(self, buf, dest, tag=0):
        self._send("Bsend", self._data(buf, "Bsend"), dest, tag, "buffered")

    Rsend = Send  # ready mode: the receive is posted already, so a standard send is exact

    def Isend(self, buf, dest, tag=0):
        return self._send("Isend", self._data(buf, "Isend"), dest, tag, "request")

    def Issend(self, buf, dest, tag=0):
        return self._send("Issend", self._data(buf, "Issend"), dest, tag, "request")

    def Ibsend(self, buf, dest, tag=0):
        return self._send("Ibsend", self._data(buf, "Ibsend").copy(), dest, tag, "request")

    Irsend = Isend

    def Recv(self, buf, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        self.Irecv(buf, source, tag, _call="Recv", _wait=True).Wait(status)

    def Irecv(self, buf, source=ANY_SOURCE, tag=ANY_TAG, _call="Irecv", _wait=False):
        target = buffer_of(buf, f"{_call}(buf=...)", writable=True, stores=True)

        def finish(value, fields):
            if value is not None:
                land(target, value, _call, f"rank {fields[0]} (tag {fields[1]})")

        return self._receive(_call, source, tag, finish, _wait)

    def Isendrecv(
        self,
        sendbuf,
        dest,
        sendtag=0,
        recvbuf=None,
        source=ANY_SOURCE,
        recvtag=ANY_TAG,
        _call="Isendrecv",
    ):
        """Both halves posted at once; one Request that completes when both have."""
        data = buffer_of(sendbuf, f"{_call}(sendbuf=...)").data  # None: nothing, as in mpi4py
        got = self.Irecv(recvbuf, source, recvtag, _call=_call)
        sent = self._send(_call, data, dest, sendtag, "request")
        return _both(sent, got)

    def Sendrecv(
        self,
        sendbuf,
        dest,
        sendtag=0,
        recvbuf=None,
        source=ANY_SOURCE,
        recvtag=ANY_TAG,
        status=None,
    ):
        self.Isendrecv(sendbuf, dest, sendtag, recvbuf, source, recvtag, "Sendrecv").Wait(status)

    def Isendrecv_replace(
        self,
        buf,
        dest,
        sendtag=0,
        source=ANY_SOURCE,
        recvtag=ANY_TAG,
        _call="Isendrecv_replace",
    ):
        """Send ``buf`` and receive into it: the data sent is a copy taken first."""
        target = buffer_of(buf, f"{_call}(buf=...)", writable=True, stores=True)
        got = self.Irecv(buf, source, recvtag, _call=_call)
        sent = self._send(_call, target.data.copy(), dest, sendtag, "request")
        return _both(sent, got)

    def Sendrecv_replace(
        self, buf, dest, sendtag=0, source=ANY_SOURCE, recvtag=ANY_TAG, status=None
    ):
        call = "Sendrecv_replace"
        self.Isendrecv_replace(buf, dest, sendtag, source, recvtag, call).Wait(status)

    def isendrecv(self, sendobj, dest, sendtag=0, recvbuf=None, source=ANY_SOURCE, recvtag=ANY_TAG):
        sent = self._send("isendrecv", pickled(sendobj, "isendrecv"), dest, sendtag, "request")
        return _both(sent, self.irecv(recvbuf, source, recvtag, _call="isendrecv"))

    # -- persistent -----------------------------------------------------------------------

    def Send_init(self, buf, dest, tag=0):
        return Prequest(lambda: self.Isend(buf, dest, tag))

    Bsend_init = Ssend_init = Rsend_init = Send_init

    def Recv_init(self, buf, source=ANY_SOURCE, tag=ANY_TAG):
        return Prequest(lambda: self.Irecv(buf, source, tag, _call="Recv_init"))


def done_request(result, fields):
    """A request that is complete already, with its result and status fields."""
    return Request(None, lambda _: (result, fields), active=True)


def _both(sent, got):
    """One request for a send and a receive: done when both are; the receive's result."""

    def finish(_):
        results = Request.waitall([sent, got], [None, status := Status()])
        return results[1], (status.source, status.tag, status.count)

    return Request(Compound((sent, got), "send and receive"), finish)
