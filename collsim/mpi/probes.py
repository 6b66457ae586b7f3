"""``Probe``, ``Iprobe``, ``Mprobe``, ``Improbe`` and ``MPI.Message``: look at a message that
has arrived (or is on its way) before receiving it.

``Iprobe`` asks the run's mailboxes whether a send to this rank that a receive from
``source`` with ``tag`` would take is waiting (:meth:`collsim.runtime.rank.Rank.probe`), and
costs no simulated time when it finds one; one that finds nothing lets a poll's time pass,
as ``Request.Test`` does, so a loop of them lets the message arrive.  ``Probe`` polls until
one comes, and raises :class:`~collsim.errors.DeadlockError` once every rank that could send
it has ended (an MPI program hangs there).  ``Mprobe`` (and mpi4py's classmethod
``MPI.Message.Probe(comm, ...)``) returns the message as an ``MPI.Message``, whose ``Recv``
takes exactly that message (messages between two ranks with one tag arrive in order, so the
receive of that source and tag is it); its ``Irecv`` is a request pending until the data has
arrived.  ``Improbe`` (``MPI.Message.Iprobe``) returns one, or None.  The predefined
``MESSAGE_NO_PROC`` is one object that every rank of the run shares, so receiving it leaves
it as it is (as in mpi4py).

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
>>> def matched():
...     comm = MPI.COMM_WORLD
...     if comm.rank == 0:
...         return comm.send({"step": 3}, dest=1, tag=2)
...     message = MPI.Message.Probe(comm, source=0, tag=2)
...     return message.irecv().wait(), message == MPI.MESSAGE_NULL
>>> collsim.runtime.blocking.run(collsim.Cluster(collsim.topology.ring(2)), matched).returns[1]
({'step': 3}, True)
"""

from typing import NamedTuple

from ..errors import DeadlockError
from ..runtime import blocking
from ..runtime.ops import ANY, TagPrefix
from ..runtime.waiting import programs_running
from .exceptions import ERR_REQUEST, mpi_error
from .handletable import Handle, predefine
from .messages import MessageTag, land, unpickle
from .p2p import done_request
from .request import FIRST_POLL, LAST_POLL, Compound, Request
from .specs import buffer_of
from .status import ANY_SOURCE, ANY_TAG, PROC_NULL, Status

__all__ = ["Probes", "Message", "MESSAGE_NULL", "MESSAGE_NO_PROC"]


class Probed(NamedTuple):
    """What an ``MPI.Message`` refers to: the receive posted for the probed message (None
    for the message of ``MPI.PROC_NULL``, ``MPI.MESSAGE_NO_PROC``)."""

    request: Request | None


NO_PROCESS = Probed(None)  # the one handle of MESSAGE_NO_PROC and its copies


class Message(Handle):
    """A probed message (``Mprobe``), taken out of matching at once as MPI's matched probe
    takes it (a receive is posted for exactly it): ``Recv``/``Irecv``/``recv``/``irecv``
    complete that one, and the Message becomes ``MPI.MESSAGE_NULL``.  ``MPI.Message(m)`` is
    another handle of the message ``m`` refers to (equal to it)."""

    def _construct(self, message=None):
        if message is not None and not isinstance(message, Message):
            # mpi4py's typed argument refuses it with a TypeError too
            raise TypeError(f"MPI.Message({message!r}): give an MPI.Message to copy, or nothing")
        self._handle = None if message is None else message._handle

    @classmethod
    def _of(cls, handle):
        message = cls()
        message._handle = handle
        return message

    # -- matched probes as classmethods, as mpi4py has them --------------------------------

    @classmethod
    def Probe(cls, comm, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        """``comm.Mprobe(source, tag, status)``: block until a message comes; it."""
        return cls._as_mine(_probes_of(comm, "Probe").Mprobe(source, tag, status))

    @classmethod
    def Iprobe(cls, comm, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        """``comm.Improbe(source, tag, status)``: the message if one waits, else None."""
        return cls._as_mine(_probes_of(comm, "Iprobe").Improbe(source, tag, status))

    probe, iprobe = Probe, Iprobe

    @classmethod
    def _as_mine(cls, message):
        """``message`` as a ``cls`` (``MyMessage.Probe(comm)`` gives a MyMessage, as in
        mpi4py); None stays None."""
        return message if message is None or type(message) is cls else cls._of(message._handle)

    # -- state ----------------------------------------------------------------------------

    def __bool__(self):
        return self._handle is not None

    def __eq__(self, other):
        if not isinstance(other, Message):
            return NotImplemented
        return self._handle is other._handle

    def _handle_key(self):  # the probed receive it names (unhashable: by identity)
        return None if self._handle is None else id(self._handle)

    def _nullify(self):
        self._handle = None

    def free(self):
        """mpi4py's safe ``free()``: a copy of ``MESSAGE_NO_PROC`` becomes null; a probed
        message stays (MPI has no call that frees one: receive it)."""
        if self._handle is NO_PROCESS and self is not _NO_PROC:
            self._nullify()

    def __reduce__(self):
        # the predefined handles unpickle as themselves, copies of them as copies; a probed
        # message is a receive posted in this run, which means nothing elsewhere (mpi4py
        # refuses it too)
        for name, predefined in (("MESSAGE_NULL", MESSAGE_NULL), ("MESSAGE_NO_PROC", _NO_PROC)):
            if self is predefined:
                return (_predefined, (name,))
            if self == predefined:
                return (type(self), (predefined,))  # of its own class, as mpi4py
        raise ValueError("cannot pickle a probed MPI.Message: receive it first")

    def __repr__(self):
        if self._handle is None:
            return "MPI.MESSAGE_NULL"
        return "MPI.MESSAGE_NO_PROC" if self._handle is NO_PROCESS else "<MPI.Message probed>"

    def _take(self, call):
        """The message's handle; the Message becomes MESSAGE_NULL (the predefined
        MESSAGE_NO_PROC stays itself, as in mpi4py, so that it can be received again)."""
        handle = self._handle
        if handle is None:
            raise mpi_error(
                ERR_REQUEST,
                f"Message.{call} on MPI.MESSAGE_NULL: a message is received once; receive "
                "the Message that Mprobe or Improbe returned",
            )
        if self is not _NO_PROC:
            self._handle = None
        return handle

    # -- receiving it ---------------------------------------------------------------------

    def _receive(self, call, finish):
        """A Request for the probed message, pending until it has arrived;
        ``finish(value, status)`` gives its result once it has."""
        handle = self._take(call)
        if handle is NO_PROCESS:  # nothing, at once, from PROC_NULL with ANY_TAG
            return done_request(finish(None, None), (PROC_NULL, ANY_TAG, 0))
        posted = handle.request

        def conclude(_):
            status = Status()
            value = posted.wait(status)
            return finish(value, status), (status.source, status.tag, status.count)

        return Request(Compound((posted,), f"MPI {call} of a probed message"), conclude)

    def Irecv(self, buf):
        if self._handle is NO_PROCESS:  # buf may be None: nothing lands
            return self._receive("Irecv", lambda value, status: None)
        target = buffer_of(buf, "Message.Irecv(buf=...)", writable=True, stores=True)

        def finish(value, status):
            origin = f"rank {status.source} (tag {status.tag})"
            land(target, value, "Message.Irecv", origin)

        return self._receive("Irecv", finish)

    def Recv(self, buf, status=None):
        self.Irecv(buf).Wait(status)

    def irecv(self):
        def finish(value, status):
            return None if value is None else unpickle(value, "Message.irecv")

        return self._receive("irecv", finish)

    def recv(self, status=None):
        return self.irecv().wait(status)


def _raw(value, fields):
    """A probed message's receive keeps the bytes until Recv or recv says what they are."""
    return value


def _probes_of(comm, call):
    """``comm`` if it is a communicator (mpi4py's typed argument refuses the rest)."""
    if not isinstance(comm, Probes):
        raise TypeError(f"MPI.Message.{call}({comm!r}): give a communicator (MPI.COMM_WORLD)")
    return comm


def _predefined(name):
    return {"MESSAGE_NULL": MESSAGE_NULL, "MESSAGE_NO_PROC": _NO_PROC}[name]


MESSAGE_NULL = Message()
MESSAGE_NO_PROC = _NO_PROC = Message._of(NO_PROCESS)
predefine(MESSAGE_NULL=MESSAGE_NULL, MESSAGE_NO_PROC=MESSAGE_NO_PROC)


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
        """Poll until a matching message waits (simulated time passes between looks); refuse
        to wait once every rank that could send it has ended, since none ever will."""
        poll = FIRST_POLL
        while True:
            found, fields = self._peek(call, source, tag)
            if found:
                return fields
            self._refuse_if_nobody_can_send(call, source, tag)
            blocking.call(blocking.current_rank().compute(seconds=poll, label=f"MPI {call}"))
            poll = min(2 * poll, LAST_POLL)

    def _refuse_if_nobody_can_send(self, call, source, tag):
        """A DeadlockError when the senders ``source`` names have all ended: the probe would
        poll until the run's --max-ops guard where an MPI program hangs."""
        rank, me, size = self._me(call)
        peers = self.Get_remote_size() if self.Is_inter() else size  # whom a source names
        for r in range(peers) if source == ANY_SOURCE else (source,):
            sender = self._global(rank, r)
            running = programs_running(rank._execution.processes, sender)
            # the caller is one running program of its rank: another (a thread) may send
            if running is None or running > (sender == rank.id):
                return
        asked = (
            f"{call}(source={'MPI.ANY_SOURCE' if source == ANY_SOURCE else source}, "
            f"tag={'MPI.ANY_TAG' if tag == ANY_TAG else tag})"
        )
        ended = "has ended without sending a message it matches"
        if source == ANY_SOURCE:
            why = f"every other rank of the communicator {ended}"
        elif self._global(rank, source) == rank.id:
            why = "it is the caller's own, which has sent none it matches and runs nothing else"
        else:
            why = f"rank {source} of the communicator {ended}"
        raise DeadlockError(
            f"{asked} on rank {me}: {why}, so the probe would wait for ever (an MPI program "
            "hangs here): probe for a source and tag that a rank sends before it returns",
            waiting={rank.id: [asked]},
            time=rank.now,
        )

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
            return Message._of(NO_PROCESS)
        # the first message of that source and tag is the probed one (they arrive in order)
        return Message._of(Probed(self._receive("Mprobe", fields[0], fields[1], _raw)))

    mprobe = Mprobe

    def Improbe(self, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        if not self.Iprobe(source, tag, status):
            return None
        return self.Mprobe(source, tag, status)

    improbe = Improbe
