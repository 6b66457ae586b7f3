"""Neighbourhood collectives on a communicator with a topology: ``neighbor_allgather``,
``neighbor_alltoall`` (objects), ``Neighbor_allgather``, ``Neighbor_alltoall``, their
``v`` forms and ``Neighbor_alltoallw`` (buffers), non-blocking (``Ineighbor_...``) and
persistent (``..._init``).

Each rank sends to its out-neighbours and receives from its in-neighbours in one exchange
over point-to-point (the messages are the blocks).  Slot i of the result is what in-neighbour
i sent; on a Cartesian grid that is MPI's order, dimension by dimension, the -1 neighbour
then the +1 one, and a block sent to the -1 neighbour lands in that rank's +1 slot (each
message says which slot it fills, so a 2-rank periodic dimension, whose two neighbours are
one rank, still puts each block in its place).  ``MPI.PROC_NULL`` neighbours (the edge of a
grid) send and receive nothing: their slot keeps what it held (None for objects).

Examples
--------
>>> import numpy as np, collsim
>>> from collsim import mpi as MPI
>>> def main():
...     ring = MPI.COMM_WORLD.Create_cart([MPI.COMM_WORLD.size], periods=[True])
...     return ring.neighbor_allgather(ring.rank)
>>> collsim.runtime.blocking.run(collsim.Cluster(collsim.topology.ring(3)), main).returns
[[2, 1], [0, 2], [1, 0]]
"""

from ..runtime import blocking
from .messages import land, pickled, unpickle
from .specs import Buffer
from .status import PROC_NULL
from .vectors import _vector, nonblocking, persistent
from .wcollectives import w_buffer

__all__ = ["NeighborCollectives"]


def _slot(tag, slot):
    """The call's tag, naming the in-slot its message fills where that is fixed."""
    return tag if slot is None else tag._replace(name=f"{tag.name} slot {slot}")


class NeighborCollectives:
    """The neighbourhood collectives of a topology communicator (a mixin)."""

    def _landing_slots(self):
        """For out-slot i, the in-slot it fills at the receiver (Cartesian: the opposite
        direction; other topologies: messages between two ranks fill slots in order)."""
        outs = self.outneighbors
        if self.Get_topology() == 2:  # MPI.CART
            return [i ^ 1 for i in range(len(outs))]
        return [None] * len(outs)

    def _neighbor_round(self, call, blocks):
        """Send ``blocks[i]`` (arrays) to out-neighbour i; the arrays in-neighbours sent,
        by in-slot (None for a PROC_NULL neighbour)."""
        rank, me, _ = self._me(call)
        tag = self._collective_tag(rank, call)
        ins, outs, slots = self.inneighbors, self.outneighbors, self._landing_slots()
        sends = [(dst, blocks[i], slots[i]) for i, dst in enumerate(outs) if dst != PROC_NULL]
        got = [None] * len(ins)
        members = self._members(rank)
        posted = [(members[d], data, _slot(tag, s)) for d, data, s in sends]
        recvs = [
            (members[src], _slot(tag, j if slots[j] is not None else None))
            for j, src in enumerate(ins)
            if src != PROC_NULL
        ]
        values = blocking.call(rank.exchange(sends=posted, recvs=recvs)) if posted or recvs else []
        for j, value in zip([j for j, s in enumerate(ins) if s != PROC_NULL], values, strict=True):
            got[j] = value
        return got

    # -- objects --------------------------------------------------------------------------

    def neighbor_allgather(self, sendobj):
        data = pickled(sendobj, "neighbor_allgather")
        got = self._neighbor_round("neighbor_allgather", [data] * len(self.outneighbors))
        return [None if v is None else unpickle(v, "neighbor_allgather") for v in got]

    def neighbor_alltoall(self, sendobj):
        items = [pickled(x, "neighbor_alltoall") for x in sendobj]
        got = self._neighbor_round("neighbor_alltoall", items)
        return [None if v is None else unpickle(v, "neighbor_alltoall") for v in got]

    # -- buffers --------------------------------------------------------------------------

    def _land_all(self, recv, got, call):
        for j, value in enumerate(got):
            if value is not None:
                land(Buffer(recv.block(j), recv.datatype), value, call, f"in-neighbour {j}")

    def Neighbor_allgather(self, sendbuf, recvbuf):
        self.Neighbor_allgatherv(sendbuf, recvbuf, _call="Neighbor_allgather")

    def Neighbor_allgatherv(self, sendbuf, recvbuf, _call="Neighbor_allgatherv"):
        from .specs import buffer_of

        send = buffer_of(sendbuf, f"{_call}(sendbuf=...)")
        recv = _vector(recvbuf, len(self.inneighbors), _call, "recvbuf", writable=True)
        got = self._neighbor_round(_call, [send.data] * len(self.outneighbors))
        self._land_all(recv, got, _call)

    def Neighbor_alltoall(self, sendbuf, recvbuf):
        self.Neighbor_alltoallv(sendbuf, recvbuf, _call="Neighbor_alltoall")

    def Neighbor_alltoallv(self, sendbuf, recvbuf, _call="Neighbor_alltoallv"):
        send = _vector(sendbuf, len(self.outneighbors), _call, "sendbuf")
        recv = _vector(recvbuf, len(self.inneighbors), _call, "recvbuf", writable=True)
        blocks = [send.block(i) for i in range(len(self.outneighbors))]
        self._land_all(recv, self._neighbor_round(_call, blocks), _call)

    def Neighbor_alltoallw(self, sendbuf, recvbuf):
        """Block i (its own count, byte displacement and datatype) to out-neighbour i."""
        call = "Neighbor_alltoallw"
        outs, ins = len(self.outneighbors), len(self.inneighbors)
        send = w_buffer(sendbuf, outs, call, "sendbuf")
        recv = w_buffer(recvbuf, ins, call, "recvbuf", writable=True)
        blocks = [send.block(i, f"{call}(sendbuf=...)") for i in range(outs)]
        for j, value in enumerate(self._neighbor_round(call, blocks)):
            if value is not None:
                recv.put(j, value, call)


for _name in (
    "Neighbor_allgather",
    "Neighbor_allgatherv",
    "Neighbor_alltoall",
    "Neighbor_alltoallv",
    "Neighbor_alltoallw",
):
    setattr(NeighborCollectives, f"I{_name.lower()}", nonblocking(_name))
    setattr(NeighborCollectives, f"{_name}_init", persistent(_name))
