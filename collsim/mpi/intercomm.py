"""Intercommunicators: two disjoint groups of ranks that talk across (MPI 4.1, section 7.6).

``local.Create_intercomm(local_leader, peer_comm, remote_leader, tag)`` joins the calling
group (an intracommunicator) with another: the two leaders trade their groups' ranks over
``peer_comm``, each tells its own group, and every rank of both gets the same context ids
(from the two groups and ``tag``, the same on every rank).  On the intercommunicator a
rank's rank and size are its own group's (``Get_rank``, ``Get_size``); the ranks it sends
to and receives from are the other group's (``Get_remote_size``, ``Get_remote_group``).
``Merge(high)`` makes one intracommunicator of both, the group that passed ``high=False``
first; ``Dup`` and ``Split`` make intercommunicators.  Collectives on an
intercommunicator are not simulated: they raise ``NotImplementedError`` naming the call.

Examples
--------
>>> import collsim
>>> from collsim import mpi as MPI
>>> def main():
...     world = MPI.COMM_WORLD
...     color = world.rank % 2                            # evens and odds
...     local = world.Split(color)
...     inter = local.Create_intercomm(0, world, 1 - color)  # leaders: world ranks 0 and 1
...     got = inter.sendrecv(world.rank, dest=inter.rank, source=inter.rank)
...     return inter.Get_remote_size(), got, inter.Merge(high=bool(color)).rank
>>> collsim.exec(main, n=4, echo=False).returns
[(2, 1, 0), (2, 0, 2), (2, 3, 1), (2, 2, 3)]
"""

from ..collectives.checks import is_int
from .attributes import copy_attributes
from .buffers import BufferCollectives
from .comm import _NULL_PARENT, COMM_KINDS, COMM_NULL, NULL, Comm
from .exceptions import ERR_ARG, ERR_COMM, mpi_error
from .group import Group
from .objects import ObjectCollectives
from .settings import run_state
from .status import UNDEFINED
from .vectors import VectorCollectives

__all__ = ["Intercomm", "create_intercomm"]


class Intercomm(Comm):
    """``MPI.Intercomm``: a local group (``_ranks``) and a remote group (``_remote``);
    ``MPI.Intercomm()`` is the null one (what ``Comm.Get_parent`` gives)."""

    _inter = _kinded = True

    def _construct(
        self,
        ranks=NULL,
        context=None,
        collective_context=None,
        name="MPI_COMM_NULL",
        remote=(),
        local_comm=None,
    ):
        super()._construct(ranks, context, collective_context, name)
        if isinstance(ranks, Comm):  # MPI.Intercomm(comm): copied by Comm.__init__
            return
        self._remote = tuple(remote)
        self._remote_index = {r: i for i, r in enumerate(self._remote)}
        self._local_comm = local_comm  # a private copy of the local group's communicator

    # -- the remote group: where point-to-point goes --------------------------------------

    def _global(self, rank, r):
        return self._remote[r]

    def _local(self, rank, cluster_rank):
        return self._remote_index[cluster_rank]

    def _peer(self, value, size, call, arg, receive=False):
        return super()._peer(value, len(self._remote), call, arg, receive)

    def Get_remote_size(self):
        self._me("Get_remote_size")
        return len(self._remote)

    def Get_remote_group(self):
        self._me("Get_remote_group")
        return Group(self._remote)

    remote_size = property(Get_remote_size)
    remote_group = property(Get_remote_group)

    def Is_inter(self):
        self._me("Is_inter")
        return True

    def Is_intra(self):
        self._me("Is_intra")
        return False

    is_inter = property(Is_inter)
    is_intra = property(Is_intra)

    # -- making communicators -------------------------------------------------------------

    def _across(self, value):
        """The other group's ``value`` (given by its leader): the leaders (rank 0 of each
        group) swap theirs on the collective context, and tell their group."""
        rank, me, _ = self._me("Intercomm")
        if me == 0:
            twin = Intercomm(self)  # another handle, whose messages go on
            twin._context = self._collective_context  # never mixes with the program's
            value = twin.sendrecv(value, dest=0, source=0)
        return self._local_comm.bcast(value if me == 0 else None, root=0)

    def _paired(self, rank, kind, local, remote, name, cls=None):
        """The intercommunicator of ``local`` and ``remote`` made by ``kind``: context ids
        from the unordered pair, so that both groups get the same ones."""
        low, high = sorted((tuple(local), tuple(remote)))
        state = run_state(rank)
        made = state.next_seq(rank.id, ("inter", self._context, kind, low, high))
        context, collective = state.context(("inter", self._context, kind, low, high, made))
        local_comm = self._local_comm.Create_group(Group(local), ("inter", context))
        return (cls or Intercomm)._made(local, context, collective, name, remote, local_comm)

    def Merge(self, high=False):
        """One intracommunicator of both groups: the one that passed ``high=False`` first
        (both the same: the group holding the lowest cluster rank first).  Collective."""
        rank, _, _ = self._me("Merge")
        theirs = self._across(bool(high))
        mine, other = self._ranks, self._remote
        first = (not high) if bool(high) != theirs else min(mine) < min(other)
        members = mine + other if first else other + mine
        state = run_state(rank)
        low, top = sorted((mine, other))
        made = state.next_seq(rank.id, ("merge", self._context, low, top))
        context, collective = state.context(("merge", self._context, low, top, made))
        intracomm = self._local_comm._made_class  # MPI.Intracomm, without importing it here
        return intracomm(members, context, collective, f"{self._name}.Merge()")

    def Dup(self, info=None):
        rank, _, _ = self._me("Dup")
        name = f"{self._name}.Dup()"
        comm = self._paired(rank, "dup", self._ranks, self._remote, name, type(self))
        copy_attributes(self, comm)
        return comm

    Clone = Dup

    def Split(self, color=0, key=0):
        """The ranks of one ``color`` in each group form an intercommunicator, each group
        ordered by ``key`` then rank; ``MPI.COMM_NULL`` where either side has none."""
        rank, _, _ = self._me("Split")
        if not is_int(color) or (color < 0 and color != UNDEFINED) or not is_int(key):
            raise mpi_error(ERR_ARG, f"Split({color!r}, {key!r}): ints, color >= 0 or UNDEFINED")
        ours = self._local_comm.allgather((int(color), int(key)))
        theirs = self._across(ours)

        def chosen(members, picks):
            order = sorted((k, r) for r, (c, k) in enumerate(picks) if c == color)
            return tuple(members[r] for _, r in order)

        local, remote = chosen(self._ranks, ours), chosen(self._remote, theirs)
        if color == UNDEFINED or not local or not remote:
            return COMM_NULL
        return self._paired(rank, ("split", color), local, remote, f"{self._name}.Split()")

    def Free(self):
        super().Free()
        self._local_comm.Free()

    @classmethod
    def Create_from_groups(cls, *args, **kwargs):
        raise NotImplementedError(
            "MPI.Intercomm.Create_from_groups: MPI 4.0's call is not simulated by collsim "
            "(it follows MPI 3.1); use Intracomm.Create_intercomm"
        )

    def Split_type(self, *args, **kwargs):
        raise NotImplementedError(
            "MPI.Intercomm.Split_type is not simulated by collsim (MPI 4.0's form on an "
            "intercommunicator); Split_type the local intracommunicator"
        )


def _refuse(name):
    def refused(self, *args, **kwargs):
        raise NotImplementedError(
            f"MPI.Intercomm.{name}: collectives on an intercommunicator are not simulated "
            "by collsim; Merge() it and call the collective on the intracommunicator"
        )

    refused.__name__ = name
    return refused


for _mixin in (BufferCollectives, ObjectCollectives, VectorCollectives):
    for _name in dir(_mixin):
        if not _name.startswith("_") and callable(getattr(_mixin, _name)):
            setattr(Intercomm, _name, _refuse(_name))


_NULL_PARENT.append(Intercomm())
COMM_KINDS[True] = Intercomm


def create_intercomm(local, local_leader, peer_comm, remote_leader, tag=0):
    """``local.Create_intercomm(...)``: see the module's docstring.  Collective over
    ``local``; ``peer_comm`` holds both leaders."""
    rank, me, size = local._me("Create_intercomm")
    if not is_int(local_leader) or not 0 <= local_leader < size:
        raise mpi_error(
            ERR_ARG, f"Create_intercomm(local_leader={local_leader!r}): a rank in 0..{size - 1}"
        )
    mine = local._members(rank)
    theirs = None
    if me == local_leader:
        theirs = peer_comm.sendrecv(
            mine, dest=remote_leader, sendtag=tag, source=remote_leader, recvtag=tag
        )
    theirs = tuple(local.bcast(theirs, root=local_leader))
    if set(mine) & set(theirs):
        raise mpi_error(
            ERR_COMM,
            f"Create_intercomm: the groups overlap (ranks {sorted(set(mine) & set(theirs))}); "
            "an intercommunicator joins two disjoint groups",
        )
    low, high = sorted((mine, theirs))
    state = run_state(rank)
    made = state.next_seq(rank.id, ("intercomm", low, high, tag))
    context, collective = state.context(("intercomm", low, high, tag, made))
    name = f"{local._name}.Create_intercomm()"
    return Intercomm(mine, context, collective, name, theirs, local._duplicate())
