"""``MPI.Comm``: a communicator's ranks, and what every communicator has (rank, size,
group, name, attributes, error handler, info, ``Compare``, ``Free``).

A communicator is an ordered set of the cluster's ranks; a rank's position in it is its
rank there.  Every message carries the tag ``(context, user_tag)``, with a context id of
its communicator, so messages of two communicators never match each other, and ANY_TAG
matches only its own communicator's (collectives use a second context id of their own,
as MPI keeps collective traffic apart from point-to-point).  ``COMM_WORLD`` and
``COMM_SELF`` are shared objects that read the calling rank from the run; the
communicators ``Split``, ``Dup`` and ``Create`` return (:mod:`collsim.mpi.intracomm`)
belong to the ranks that made them.  The calls themselves are mixins:
point-to-point in :mod:`collsim.mpi.p2p`, collectives in :mod:`collsim.mpi.buffers`,
:mod:`collsim.mpi.vectors` and :mod:`collsim.mpi.objects`.

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

from ..errors import CollsimError
from ..runtime import blocking
from .attributes import Attributes, delete_attributes
from .buffers import BufferCollectives
from .exceptions import ERR_ARG, ERR_COMM, last_used_code, mpi_error
from .group import CONGRUENT, IDENT, SIMILAR, UNEQUAL, Group
from .handles import Errhandler, Info
from .handletable import Handle, predefine
from .lifecycle import errhandler_by_default
from .objects import ObjectCollectives
from .p2p import MAX_TAG, PointToPoint
from .probes import Probes
from .settings import run_state
from .status import UNDEFINED
from .vectors import VectorCollectives
from .wcollectives import WCollectives

__all__ = ["Comm", "COMM_NULL", "TAG_UB", "WORLD", "SELF", "NULL"]

WORLD, SELF, NULL = "world", "self", "null"
TAG_UB = 1681915905  # the attribute's key (MPICH's), for comm.Get_attr(MPI.TAG_UB)
# the other predefined attributes' keys; collsim has no value for them (None, as mpi4py
# gives for an attribute that is not set)
HOST, IO, WTIME_IS_GLOBAL, APPNUM, UNIVERSE_SIZE, LASTUSEDCODE = range(1681915906, 1681915912)


class Comm(
    PointToPoint,
    Probes,
    VectorCollectives,
    WCollectives,
    ObjectCollectives,
    BufferCollectives,
    Attributes,
    Handle,
):
    """An MPI communicator; ``MPI.Comm()`` is ``MPI.COMM_NULL``, ``MPI.Comm(c)`` the same
    communicator as ``c``."""

    _inter = False  # an intercommunicator (collsim.mpi.intercomm) says True

    _kinded = False  # Intracomm and Intercomm say True: a handle of theirs is one of them

    def _construct(self, ranks=NULL, context=None, collective_context=None, name="MPI_COMM_NULL"):
        # (Handle.__new__ calls this, as mpi4py makes the handle in __new__)
        if ranks is None:  # MPI.Comm(None), a subclass's super().__new__(cls, None): null
            ranks = NULL
        if isinstance(ranks, Comm):  # MPI.Intracomm(comm): another handle of it
            if self._kinded and ranks._inter != self._inter and ranks:
                kind = "an intercommunicator" if ranks._inter else "an intracommunicator"
                raise TypeError(f"MPI.{type(self).__name__}({ranks!r}): {kind} is not one")
            self.__dict__.update(ranks.__dict__)
            return
        if context is None and ranks != NULL:  # only collsim makes communicators of ranks
            raise TypeError(f"MPI.Comm({ranks!r}): give a communicator to copy, or nothing")
        self._ranks = ranks  # a tuple of cluster ranks, or WORLD / SELF / NULL
        self._context = context  # the point-to-point tags' first field
        self._collective_context = collective_context  # the collectives' tags' first field
        self._name = name
        self._freed = False
        self._index = {r: i for i, r in enumerate(ranks)} if isinstance(ranks, tuple) else None
        self._errhandler = None  # until Set_errhandler: mpi4py.rc.errors's handler
        self._info = Info.Create()

    def _derived(self, rank, kind, ranks, name, cls=None, counter=None):
        """The communicator a call on this one makes: ids every member agrees on; a
        ``cls`` (``type(self)`` for ``Dup``, as mpi4py) or ``self._made_class``."""
        state = run_state(rank)
        made = state.next_seq(rank.id, counter or ("made", self._context))
        context, collective = state.context((self._context, made, kind))
        return (cls or self._made_class)._made(ranks, context, collective, name)

    def Dup(self, info=None):
        """A handle of ``MPI.Comm`` (or a subclass of it alone) duplicates as the kind
        of communicator it is a handle of does, into its own class (mpi4py's ``Comm.Dup``)."""
        return COMM_KINDS[self._inter].Dup(self, info)

    def Clone(self):
        return self.Dup()

    # -- who is calling -------------------------------------------------------------------

    def _members(self, rank):
        """The cluster ranks of this communicator, in order."""
        if self._ranks == WORLD:
            return tuple(range(rank.size))
        if self._ranks == SELF:
            return (rank.id,)
        return self._ranks

    def _me(self, call):
        """``(rank, my rank here, size)`` of the calling rank; refuses a dead handle."""
        if self._ranks == NULL or self._freed:
            state = "MPI.COMM_NULL" if self._ranks == NULL else f"{self._name}, freed,"
            raise mpi_error(
                ERR_COMM,
                f"{call} on {state}: a communicator cannot be used "
                "after Free (or when Split gave COMM_NULL)",
            )
        rank = blocking.current_rank()
        if self._ranks == WORLD:
            return rank, rank.id, rank.size
        if self._ranks == SELF:
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
        if self._ranks == WORLD:
            return cluster_rank
        if self._ranks == SELF:
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

    def Get_group(self):
        rank, _, _ = self._me("Get_group")
        return Group(self._members(rank))

    group = property(Get_group)

    def Get_name(self):
        return self._name

    def Set_name(self, name):
        self._name = str(name)

    name = property(Get_name, Set_name)

    def Is_inter(self):
        self._me("Is_inter")
        return False

    def Is_intra(self):
        self._me("Is_intra")
        return True

    is_inter = property(Is_inter)
    is_intra = property(Is_intra)

    def Get_topology(self):
        self._me("Get_topology")
        return UNDEFINED

    topology = property(lambda self: self.Get_topology())  # a topology's kind, if it has one
    is_topo = property(lambda self: self.Get_topology() != UNDEFINED)

    def Compare(self, other):
        """``IDENT`` (one communicator), ``CONGRUENT`` (same ranks, same order),
        ``SIMILAR`` (same ranks) or ``UNEQUAL``."""
        rank, _, _ = self._me("Compare")
        if not isinstance(other, Comm) or other._is_null():
            raise mpi_error(ERR_COMM, f"Compare({other!r}): give a communicator")
        if self == other:
            return IDENT
        mine, theirs = self._members(rank), other._members(rank)
        if mine == theirs:
            return CONGRUENT
        return SIMILAR if sorted(mine) == sorted(theirs) else UNEQUAL

    def __eq__(self, other):
        if not isinstance(other, Comm):
            return NotImplemented
        if self._is_null() or other._is_null():
            return self._is_null() and other._is_null()
        return self._context == other._context and self._ranks == other._ranks

    def __bool__(self):
        return not self._is_null()

    def _handle_key(self):
        return None if self._is_null() else (self._context, self._ranks)

    def _nullify(self):
        self._freed = True

    def _is_null(self):
        return self._ranks == NULL or self._freed

    def __repr__(self):
        return f"<MPI.{type(self).__name__} {self._name}>"

    # -- attributes, info, errors ---------------------------------------------------------

    _attr_kind = "Comm"
    _PREDEFINED_KEYS = frozenset(
        (TAG_UB, HOST, IO, WTIME_IS_GLOBAL, APPNUM, UNIVERSE_SIZE, LASTUSEDCODE)
    )

    def _attr_check(self, call):
        self._me(call)

    def _predefined_attr(self, keyval):
        """``MPI.TAG_UB`` (the largest tag), ``MPI.LASTUSEDCODE`` (the last error code
        Add_error_* gave); None for the others (collsim has no value for them)."""
        if keyval == TAG_UB:
            return MAX_TAG
        if keyval == LASTUSEDCODE:
            return last_used_code()
        return None

    def Get_info(self):
        self._me("Get_info")
        return self._info.Dup()

    def Set_info(self, info):
        self._me("Set_info")
        self._info = Info(info).Dup()  # MPI keeps a copy of the hints

    info = property(Get_info, Set_info)

    def Get_errhandler(self):
        """A new handle of the communicator's error handler (``Free`` it when done)."""
        self._me("Get_errhandler")
        return Errhandler(self._errhandler or errhandler_by_default())

    def Set_errhandler(self, errhandler):
        self._me("Set_errhandler")
        if not isinstance(errhandler, Errhandler) or not errhandler:
            raise mpi_error(ERR_ARG, f"Set_errhandler({errhandler!r}): give an MPI.Errhandler")
        self._errhandler = Errhandler(errhandler)  # the program may Free its own handle

    def Call_errhandler(self, errorcode):
        """Call the handler set: a handler ``Create_errhandler`` made is called as
        ``function(comm, errorcode)``; collsim's errors are raised whichever is set."""
        self._me("Call_errhandler")
        (self._errhandler or errhandler_by_default())._call(self, errorcode)

    @classmethod
    def Create_errhandler(cls, errhandler_fn):
        """An error handler that calls ``errhandler_fn(comm, errorcode)``."""
        return Errhandler._create(errhandler_fn, f"{cls.__name__}.Create_errhandler")

    def _buffer_call(self, *args):
        raise NotImplementedError(
            "Comm.Attach_buffer (Detach_buffer, Flush_buffer, Iflush_buffer): a "
            "communicator's own Bsend buffer is MPI 4.1; collsim follows MPI 3.1, where "
            "MPI.Attach_buffer serves the whole process"
        )

    Attach_buffer = Detach_buffer = Flush_buffer = Iflush_buffer = _buffer_call

    @classmethod
    def Get_parent(cls):
        """A null intercommunicator: no collsim rank was spawned by another."""
        return _NULL_PARENT[0]

    # -- the end --------------------------------------------------------------------------

    def Free(self):
        if self._ranks in (WORLD, SELF):
            raise mpi_error(
                ERR_COMM, f"Free() of {self._name}: a predefined communicator cannot be freed"
            )
        self._me("Free")
        try:
            delete_attributes(self)  # MPI runs the keys' delete callbacks first
        finally:
            self._freed = True

    Disconnect = Free

    def Abort(self, errorcode=0):
        rank, me, _ = self._me("Abort")
        raise CollsimError(f"rank {me} of {self._name} called Abort({errorcode!r})")


COMM_NULL = Comm()
# the classes whose Dup a plain MPI.Comm handle uses, by Is_inter (their modules fill it in)
COMM_KINDS = {}
_NULL_PARENT = []  # the null intercommunicator, which intercomm.py makes
predefine(COMM_NULL=COMM_NULL)
