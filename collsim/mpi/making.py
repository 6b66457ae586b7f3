"""The communicators a program makes from another: ``Split``, ``Dup``, ``Create``,
``Create_group``, ``Split_type`` (a mixin of ``MPI.Intracomm``, :mod:`collsim.mpi.intracomm`).

Each new communicator gets context ids every member agrees on (from the parent's ids, the
call's number on the parent and what it was), so its messages never mix with any other's.
``Create`` and ``Split`` are collective over the parent (an ``allgather`` of the colors, as
MPI implementations do it); ``Create_group`` only over the group's members.

Examples
--------
>>> import collsim
>>> from collsim import mpi as MPI
>>> def main():
...     world = MPI.COMM_WORLD
...     evens = world.Create(world.Get_group().Incl([0, 2]))
...     return None if evens == MPI.COMM_NULL else (evens.rank, evens.allreduce(world.rank))
>>> collsim.runtime.blocking.run(collsim.Cluster(collsim.topology.ring(3)), main).returns
[(0, 2), None, (1, 2)]
"""

from ..collectives.checks import is_int
from .attributes import copy_attributes
from .comm import COMM_NULL, Comm
from .environment import unsupported
from .exceptions import ERR_ARG, ERR_GROUP, mpi_error
from .group import Group
from .handles import Info
from .handletable import constant
from .p2p import done_request
from .status import UNDEFINED

__all__ = ["CommunicatorMaker", "COMM_TYPE_SHARED"]

# Split_type's kinds: every rank of a collsim cluster is on one shared-memory "node" here
COMM_TYPE_SHARED, COMM_TYPE_HW_GUIDED, COMM_TYPE_HW_UNGUIDED = 1, 2, 3
COMM_TYPE_RESOURCE_GUIDED = 4


class CommunicatorMaker(Comm):
    """The calls that make communicators; what they make is ``self._made_class`` (an
    ``MPI.Intracomm``, set where that class is defined)."""

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

    def Split_type(self, split_type, key=0, info=None):
        """``MPI.COMM_TYPE_SHARED`` (and the hardware kinds): the ranks of one node, which
        on a collsim cluster is every rank; ``MPI.UNDEFINED``: ``MPI.COMM_NULL``."""
        return self.Split(UNDEFINED if split_type == UNDEFINED else 0, key)

    def Dup(self, info=None):
        """A communicator of the same ranks whose messages never mix with this one's; the
        attributes' keys say which values it gets (:mod:`collsim.mpi.attributes`)."""
        # named by class: MPI.Comm.Dup runs this on a plain Comm handle (a subclass of Comm)
        comm = CommunicatorMaker._duplicate(self, info, "Dup")
        copy_attributes(self, comm)
        return comm

    def _duplicate(self, info=None, call="Dup"):
        """A Dup without the attributes (what the calls that make a communicator of the
        same ranks start from: MPI copies attributes on Dup only)."""
        rank, _, _ = self._me(call)
        comm = self._derived(rank, "dup", self._members(rank), f"{self._name}.Dup()", type(self))
        comm._topology = getattr(self, "_topology", None)
        comm._info = Info.Create(info or {}) if info is not None else self._info.Dup()
        return comm

    def Dup_with_info(self, info):
        return self.Dup(info)

    def Idup(self, info=None):
        """``(communicator, request)``: made at once; the request is complete."""
        return self.Dup(info), done_request(None, None)

    Idup_with_info = Idup

    def Create(self, group):
        """The communicator of ``group``'s ranks (a subset of this one's), in its order;
        ``MPI.COMM_NULL`` on the others.  Collective over this communicator."""
        rank, _, _ = self._me("Create")
        ranks = self._group_ranks(rank, group, "Create")
        agreed = self.allgather(ranks)  # every rank must give the same group
        if any(r != agreed[0] for r in agreed):
            raise mpi_error(ERR_GROUP, f"Create: the ranks gave different groups {agreed}")
        comm = self._derived(rank, ("create", ranks), ranks, f"{self._name}.Create()")
        return comm if rank.id in ranks else COMM_NULL

    def Create_group(self, group, tag=0):
        """As :meth:`Create`, called only by the group's ranks."""
        rank, _, _ = self._me("Create_group")
        ranks = self._group_ranks(rank, group, "Create_group")
        if rank.id not in ranks:
            raise mpi_error(ERR_GROUP, "Create_group: the calling rank is not in the group")
        counter = ("group", self._context, ranks, tag)
        kind = ("create_group", ranks, tag)
        return self._derived(rank, kind, ranks, f"{self._name}.Create_group()", None, counter)

    @classmethod
    def Create_from_group(cls, group, stringtag="", info=None, errhandler=None):
        """The communicator of ``group``, called by its ranks only (MPI 4's form of
        ``Create_group``, named by a string tag instead of a parent)."""
        world = constant("COMM_WORLD")
        return world.Create_group(group, ("from_group", str(stringtag)))

    def _group_ranks(self, rank, group, call):
        if not isinstance(group, Group) or not group:
            raise mpi_error(ERR_GROUP, f"{call}({group!r}): give an MPI.Group")
        outside = set(group.ranks) - set(self._members(rank))
        if outside:
            raise mpi_error(ERR_GROUP, f"{call}: ranks {sorted(outside)} are not in {self._name}")
        return group.ranks

    # -- process topologies (collsim.mpi.topology) ----------------------------------------

    # -- not simulated --------------------------------------------------------------------

    def Create_intercomm(self, local_leader, peer_comm, remote_leader, tag=0):
        """An intercommunicator of this group and another (:mod:`collsim.mpi.intercomm`)."""
        from .intercomm import create_intercomm

        return create_intercomm(self, local_leader, peer_comm, remote_leader, tag)

    def Spawn(self, *args, **kwargs):
        raise unsupported("Intracomm.Spawn", "dynamic process management (spawn)")

    Spawn_multiple = Accept = Connect = Spawn
