"""The uppercase collectives' path for what collsim's collectives do not move: any
predefined datatype, any op (``LAND``, ``BXOR``, ``MAXLOC``, ``REPLACE``, ``Op.Create``).

The arrays travel as they are (their bytes are the message's bytes) along the schedules
collsim's collectives use (:mod:`collsim.collectives`: the binomial tree of a broadcast,
the ring of an all-gather, the direct all-to-all), run move by move over point-to-point
by :meth:`~collsim.mpi.objects.ObjectCollectives._run_moves`.  A reduction runs on a
binomial tree to rank 0 in rank order (rank r + 2^i hands its subtree's value to rank r,
which computes ``mine op theirs``), so an op that is not commutative sees the ranks' values
in MPI's order, ``((x0 op x1) op (x2 op x3))`` on four ranks.

Examples
--------
>>> import numpy as np, collsim
>>> from collsim import mpi as MPI
>>> def main():
...     comm = MPI.COMM_WORLD
...     flags = np.array([comm.rank > 0, True])
...     comm.Allreduce(MPI.IN_PLACE, flags, op=MPI.LAND)
...     bits = np.full(1, 1 << comm.rank, np.uint8)
...     comm.Allreduce(MPI.IN_PLACE, bits, op=MPI.BOR)
...     return flags.tolist(), int(bits[0])
>>> collsim.runtime.blocking.run(collsim.Cluster(collsim.topology.ring(3)), main).returns[2]
([False, True], 7)
"""

from ..collectives.registry import build

__all__ = ["tree_reduce", "tree_broadcast", "ring_all_gather", "direct_all_to_all"]


def tree_reduce(comm, rank, me, size, tag, data, op, datatype=None, root=0):
    """``op`` over every rank's array ``data`` in rank order: the result at ``root``
    (None elsewhere).  A binomial tree to rank 0, then rank 0 sends to the root."""
    value, mask = data, 1
    while mask < size:
        if me & mask:  # hand what this subtree holds to its parent, and leave
            comm._round(rank, tag, sends=[(me - mask, value)])
            value = None
            break
        if me + mask < size:  # the lower ranks' value first
            theirs = comm._round(rank, tag, recvs=[me + mask])[0]
            value = op.reduce_arrays(value, theirs.view(data.dtype), datatype)
        mask <<= 1
    if root != 0 and me == 0:
        comm._round(rank, tag, sends=[(root, value)])
    elif root != 0 and me == root:
        value = comm._round(rank, tag, recvs=[0])[0].view(data.dtype)
    return value if me == root else None


def tree_broadcast(comm, rank, me, size, tag, data, root=0):
    """The root's array ``data`` on every rank (binomial tree, as collsim's broadcast)."""
    held = {0: data} if me == root else {}
    schedule = build("broadcast", "tree", size, root)
    return comm._run_moves(rank, me, tag, schedule, held)[0]


def ring_all_gather(comm, rank, me, size, tag, block):
    """Every rank's ``block``, in rank order (the ring of collsim's all-gather)."""
    held = {me: block}
    comm._run_moves(rank, me, tag, build("all_gather", "ring", size), held)
    return [held[r].view(block.dtype) for r in range(size)]


def direct_all_to_all(comm, rank, me, size, tag, blocks):
    """Block j of this rank goes to rank j; the blocks that came, from rank 0 up."""
    held = dict(enumerate(blocks))
    comm._run_moves(rank, me, tag, build("all_to_all", "direct", size), held)
    return [held[r].view(blocks[0].dtype) if len(blocks) else held[r] for r in range(size)]
