"""``MPI.Comm``: a communicator's ranks, point-to-point calls, and Split / Dup / Free.

A communicator is an ordered set of the cluster's ranks; a rank's position in it is its
rank there.  Every message carries the tag ``(context, user_tag)``, with a context id of
its communicator, so messages of two communicators never match each other, and ANY_TAG
matches only its own communicator's (collectives use a second context id of their own,
as MPI keeps collective traffic apart from point-to-point).  ``COMM_WORLD`` and
``COMM_SELF`` are shared objects that read the calling rank from the run; the
communicators Split and Dup return belong to the rank that made them.

A blocking ``Send`` of at most the eager limit (64 KiB by default, see
:func:`collsim.mpi.configure`) returns at once, as MPI implementations send small
messages eagerly; a larger one returns when the data has arrived (the receive must be
posted: a program whose two ranks ``Send`` large messages to each other first
deadlocks, as on a real cluster).

Examples
--------
>>> import numpy as np, collsim
>>> from collsim import mpi as MPI
>>> def main():
...     comm = MPI.COMM_WORLD
...     right, left = (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size
...     got = np.empty(2)
...     comm.Sendrecv(np.full(2, float(comm.rank)), dest=right, recvbuf=got, source=left)
...     return float(got[0])
>>> collsim.runtime.blocking.run(collsim.Cluster(collsim.topology.ring(3)), main).returns
[2.0, 0.0, 1.0]
"""

from ..collectives.checks import is_int
from ..errors import CollsimError
from ..runtime import blocking
from ..runtime.ops import ANY, TagPrefix
from .buffers import BufferCollectives
from .datatypes import buffer_of
from .exceptions import ERR_ARG, ERR_COMM, ERR_RANK, ERR_TAG, mpi_error
from .messages import MessageTag, land, pickled, unpickle
from .objects import ObjectCollectives
from .request import ANY_SOURCE, ANY_TAG, PROC_NULL, UNDEFINED, Request
from .settings import run_state

__all__ = ["Comm", "Intracomm", "COMM_WORLD", "COMM_SELF", "COMM_NULL", "TAG_UB"]

_WORLD, _SELF, _NULL = "world", "self", "null"
TAG_UB = 1681915905  # the attribute's key (MPICH's), for comm.Get_attr(MPI.TAG_UB)
MAX_TAG = 2**29 - 1  # its value: MPICH's largest tag (the standard promises >= 32767)


class Comm(ObjectCollectives, BufferCollectives):
    """An MPI communicator (mpi4py's ``Intracomm``)."""

    def __init__(self, ranks, context, collective_context, name):
        self._ranks = ranks  # a tuple of cluster ranks, or _WORLD / _SELF / _NULL
        self._context = context  # the point-to-point tags' first field
        self._collective_context = collective_context  # the collectives' tags' first field
        self._name = name
        self._freed = False
        self._index = {r: i for i, r in enumerate(ranks)} if isinstance(ranks, tuple) else None

    # -- who is calling -------------------------------------------------------------------

    def _members(self, rank):
        """The cluster ranks of this communicator, in order."""
        if self._ranks == _WORLD:
            return tuple(range(rank.size))
        if self._ranks == _SELF:
            return (rank.id,)
        return self._ranks

    def _me(self, call):
        """``(rank, my rank here, size)`` of the calling rank; refuses a dead handle."""
        if self._ranks == _NULL or self._freed:
            state = "MPI.COMM_NULL" if self._ranks == _NULL else f"{self._name}, freed,"
            raise mpi_error(
                ERR_COMM,
                f"{call} on {state}: a communicator cannot be used "
                "after Free (or when Split gave COMM_NULL)",
            )
        rank = blocking.current_rank()
        if self._ranks == _WORLD:
            return rank, rank.id, rank.size
        if self._ranks == _SELF:
            return rank, 0, 1
        me = self._index.get(rank.id)
        if me is None:
            raise mpi_error(
                ERR_COMM,
                f"{call}: cluster rank {rank.id} is not in {self._name} "
                f"(ranks {list(self._ranks)}): use the communicator its own "
                "Split returned",
            )
        return rank, me, len(self._ranks)

    def _global(self, rank, r):
        return self._members(rank)[r]

    def _local(self, rank, cluster_rank):
        if self._ranks == _WORLD:
            return cluster_rank
        if self._ranks == _SELF:
            return 0
        return self._index[cluster_rank]

    # -- identity -------------------------------------------------------------------------

    def Get_rank(self):
        return self._me("Get_rank")[1]

    def Get_size(self):
        return self._me("Get_size")[2]

    @property
    def rank(self):
        return self.Get_rank()

    @property
    def size(self):
        return self.Get_size()

    def Get_name(self):
        return self._name

    def Set_name(self, name):
        self._name = str(name)

    def __eq__(self, other):
        if not isinstance(other, Comm):
            return NotImplemented
        return self is other or (self._is_null() and other._is_null())

    def __hash__(self):
        return id(self)

    def _is_null(self):
        return self._ranks == _NULL or self._freed

    def __repr__(self):
        return f"<MPI.Intracomm {self._name}>"

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

    def Get_attr(self, keyval):
        """The communicator's attribute ``keyval``: ``MPI.TAG_UB`` (the largest tag)."""
        if keyval == TAG_UB:
            return MAX_TAG
        raise mpi_error(ERR_ARG, f"Get_attr({keyval!r}): the attribute collsim has is MPI.TAG_UB")

    # -- point to point: the shared paths -------------------------------------------------

    def _send(self, call, payload, dest, tag, wait):
        """Post ``payload`` to ``dest``; a Request, or None once a blocking send is done."""
        rank, _, size = self._me(call)
        dest = self._peer(dest, size, call, "dest")
        tag = self._tag(tag, call, "tag")
        if dest == PROC_NULL:
            return None if wait else Request(None)
        where, mpi_tag = self._global(rank, dest), MessageTag(self._context, tag)
        if not wait:
            return Request(blocking.call(rank.isend(where, payload, mpi_tag, label=call)))
        if payload.nbytes <= run_state(rank).settings.eager_limit:
            # eager: a copy travels, the sender goes on (it may reuse its buffer at once)
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
            return _done_request(finish(None, None), (PROC_NULL, ANY_TAG, 0))
        src = ANY if source == ANY_SOURCE else self._global(rank, source)
        mpi_tag = TagPrefix((self._context,)) if tag == ANY_TAG else MessageTag(self._context, tag)

        def done(received):
            fields = (self._local(rank, received.src), received.tag[1], received.nbytes)
            return finish(received.value, fields), fields

        if wait:
            return _done_request(*done(blocking.call(rank.recv(src, mpi_tag, status=True))))
        return Request(blocking.call(rank.irecv(src, mpi_tag, status=True)), done)

    # -- lowercase: picklable objects -----------------------------------------------------

    def send(self, obj, dest, tag=0):
        self._send("send", pickled(obj, "send"), dest, tag, wait=True)

    def isend(self, obj, dest, tag=0):
        return self._send("isend", pickled(obj, "isend"), dest, tag, wait=False)

    def recv(self, buf=None, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        return self.irecv(buf, source, tag, _call="recv", _wait=True).wait(status)

    def irecv(self, buf=None, source=ANY_SOURCE, tag=ANY_TAG, _call="irecv", _wait=False):
        # buf (mpi4py's preallocated pickle buffer) changes nothing here
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
        sent = self._send("sendrecv", pickled(sendobj, "sendrecv"), dest, sendtag, wait=False)
        got = self.irecv(recvbuf, source, recvtag, _call="sendrecv")
        Request.waitall([sent, got])
        return got.wait(status)

    # -- uppercase: buffers ---------------------------------------------------------------

    def Send(self, buf, dest, tag=0):
        self._send("Send", buffer_of(buf, "Send(buf=...)").data, dest, tag, wait=True)

    def Isend(self, buf, dest, tag=0):
        return self._send("Isend", buffer_of(buf, "Isend(buf=...)").data, dest, tag, wait=False)

    def Recv(self, buf, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        self.Irecv(buf, source, tag, _call="Recv", _wait=True).Wait(status)

    def Irecv(self, buf, source=ANY_SOURCE, tag=ANY_TAG, _call="Irecv", _wait=False):
        target = buffer_of(buf, f"{_call}(buf=...)", writable=True)

        def finish(value, fields):
            if value is not None:
                land(target, value, _call, f"rank {fields[0]} (tag {fields[1]})")

        return self._receive(_call, source, tag, finish, _wait)

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
        if recvbuf is None:
            raise mpi_error(ERR_ARG, "Sendrecv(recvbuf=None): give the buffer to receive into")
        data = buffer_of(sendbuf, "Sendrecv(sendbuf=...)").data
        got = self.Irecv(recvbuf, source, recvtag, _call="Sendrecv")
        sent = self._send("Sendrecv", data, dest, sendtag, wait=False)
        Request.Waitall([sent, got])
        got.Wait(status)

    # -- communicators --------------------------------------------------------------------

    def _derived(self, rank, kind, ranks, name):
        """The communicator a Split or Dup of this one makes: ids every member agrees on."""
        state = run_state(rank)
        made = state.next_seq(rank.id, ("made", self._context))
        context, collective = state.context((self._context, made, kind))
        return Comm(ranks, context, collective, name)

    def Split(self, color=0, key=0):
        """Ranks of one ``color`` form a communicator, ordered by ``key`` then rank here;
        ``color=MPI.UNDEFINED`` gives ``MPI.COMM_NULL``.  Collective (an allgather)."""
        rank, me, _ = self._me("Split")
        if not is_int(color) or (color < 0 and color != UNDEFINED):
            raise mpi_error(
                ERR_ARG, f"Split(color={color!r}): a color is an int >= 0 or MPI.UNDEFINED"
            )
        if not is_int(key):
            raise mpi_error(ERR_ARG, f"Split(key={key!r}): a key is an int")
        everyone = self.allgather((int(color), int(key)))
        chosen = sorted((k, r) for r, (c, k) in enumerate(everyone) if c == color)
        members = self._members(rank)
        comm = self._derived(
            rank,
            ("split", int(color)),
            tuple(members[r] for _, r in chosen),
            f"{self._name}.Split({color})",
        )
        return COMM_NULL if color == UNDEFINED else comm

    def Dup(self, info=None):
        """A communicator of the same ranks whose messages never mix with this one's."""
        rank, _, _ = self._me("Dup")
        return self._derived(rank, "dup", self._members(rank), f"{self._name}.Dup()")

    Clone = Dup

    def Free(self):
        if self._ranks in (_WORLD, _SELF):
            raise mpi_error(
                ERR_COMM, f"Free() of {self._name}: a predefined communicator cannot be freed"
            )
        self._me("Free")
        self._freed = True

    def Abort(self, errorcode=0):
        rank, me, _ = self._me("Abort")
        raise CollsimError(f"rank {me} of {self._name} called Abort({errorcode!r})")


def _done_request(result, fields):
    """A request that is complete already, with its result and status fields."""
    request = Request(None)
    request._result, request._status = result, fields
    return request


Intracomm = Comm
COMM_WORLD = Comm(_WORLD, 0, 1, "MPI_COMM_WORLD")
COMM_SELF = Comm(_SELF, 2, 3, "MPI_COMM_SELF")
COMM_NULL = Comm(_NULL, None, None, "MPI_COMM_NULL")
