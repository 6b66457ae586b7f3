"""The uppercase collectives on buffers: collsim's own collectives where there is one.

``Bcast``, ``Reduce``, ``Allreduce``, ``Allgather``, ``Reduce_scatter_block`` and
``Alltoall`` run collsim's broadcast, reduce, all-reduce, all-gather, reduce-scatter and
all-to-all over the communicator's ranks, with the algorithm :func:`collsim.mpi.configure`
chose (by default the cluster's: ring for all-reduce, reduce-scatter and all-gather, as
MPICH chooses for large messages; a binomial tree for broadcast and reduce; direct
all-to-all; NCCL's choice on a hardware preset), so their bytes, steps and time are the
simulator's.  That is for the datatypes and ops collsim's collectives have (DOUBLE,
FLOAT, FLOAT16_T, INT, LONG; SUM, PROD, MAX, MIN); every other predefined datatype and op
runs the same schedules over point-to-point (:mod:`collsim.mpi.trees`).  ``Gather`` and
``Scatter`` (and ``Gatherv``, ``Scatterv``) run :mod:`collsim.collectives.linear`'s linear
gather and scatter over point-to-point, the schedules the lowercase ``gather`` and
``scatter`` run on pickles: the root exchanges with every rank at once.
``MPI.IN_PLACE`` works where MPI allows it.

Examples
--------
>>> import numpy as np, collsim
>>> from collsim import mpi as MPI
>>> def main():
...     comm = MPI.COMM_WORLD
...     total = np.zeros(3)
...     comm.Allreduce(np.full(3, comm.rank + 1.0), total, op=MPI.SUM)
...     comm.Allreduce(MPI.IN_PLACE, total, op=MPI.MAX)
...     return total.tolist()
>>> collsim.runtime.blocking.run(collsim.Cluster(collsim.topology.ring(4)), main).returns[0]
[10.0, 10.0, 10.0]
"""

from ..collectives.checks import NUMERIC_DTYPES
from ..collectives.linear import linear_gather, linear_scatter
from ..runtime import blocking
from .constants import IN_PLACE, InPlace
from .exceptions import ERR_ARG, ERR_OP, mpi_error, value_error
from .messages import land
from .reduction import SUM, Op
from .settings import run_state
from .specs import buffer_of
from .trees import direct_all_to_all, ring_all_gather, tree_broadcast, tree_reduce

__all__ = ["BufferCollectives", "IN_PLACE", "InPlace"]


def in_place(buf):
    """Whether a send buffer is ``MPI.IN_PLACE`` (or None, which mpi4py reads as it)."""
    return buf is IN_PLACE or buf is None


def native(data, op=None):
    """Whether collsim's own collective moves ``data`` (and reduces with ``op``)."""
    if data.dtype.name not in NUMERIC_DTYPES or data.size == 0:
        return False
    return op is None or (op.user is None and op.collsim is not None)


def check_op(op, call):
    if isinstance(op, Op) and op:
        return op
    raise mpi_error(ERR_OP, f"{call}(op={op!r}): give an MPI.Op (MPI.SUM, MPI.MAX, ...)")


def check_same(send, recv, call, send_count=None, recv_count=None, reduction=False):
    """mpi4py's own checks: matching datatypes and counts.  A reduction needs one datatype;
    a copy, one element size (``MPI.BYTE`` and ``MPI.SIGNED_CHAR``: the bytes move)."""
    mismatch = send.data.dtype != recv.data.dtype
    if mismatch if reduction else send.data.dtype.itemsize != recv.data.dtype.itemsize:
        raise value_error(
            f"{call}: mismatch in send and receive MPI datatypes "
            f"({send.datatype!r} and {recv.datatype!r})"
        )
    send_count = send.count if send_count is None else send_count
    recv_count = recv.count if recv_count is None else recv_count
    if send_count != recv_count:
        raise value_error(
            f"{call}: mismatch in send count {send_count} and receive count {recv_count}"
        )


def _block(buffer, size, call):
    if buffer.count % size:
        raise value_error(
            f"{call}: a buffer of {buffer.count} elements holds one block per "
            f"rank, so its count must be a multiple of {size} (nearest: "
            f"{buffer.count - buffer.count % size} or "
            f"{buffer.count - buffer.count % size + size})"
        )
    return buffer.count // size


class BufferCollectives:
    """The uppercase collectives of :class:`~collsim.mpi.comm.Comm` (a mixin)."""

    def _run(self, rank, name, x, **kwargs):
        """Block while collsim's collective ``name`` runs on this communicator's ranks."""
        algorithm = run_state(rank).settings.algorithm_for(name)
        collective = getattr(rank, name)
        return blocking.call(
            collective(x, group=self._members(rank), algorithm=algorithm, **kwargs)
        )

    def _recv_buffer(self, spec, call, arg="recvbuf", blocks=1, stores=False):
        """The receive buffer; ``blocks``: ranks it holds a block for (a count in the spec
        is per block then, as in mpi4py); ``stores``: the call stores a derived type's."""
        if spec is None or spec is IN_PLACE:
            raise mpi_error(ERR_ARG, f"{call}({arg}={spec!r}): give the buffer that receives")
        return buffer_of(spec, f"{call}({arg}=...)", writable=True, blocks=blocks, stores=stores)

    def Bcast(self, buf, root=0):
        rank, me, size = self._me("Bcast")
        root = self._root(root, size, "Bcast")
        target = buffer_of(buf, "Bcast(buf=...)", writable=me != root, stores=True)
        if size == 1:
            return
        if native(target.data):
            result = self._run(rank, "broadcast", target.data, root=root)
        else:
            tag = self._collective_tag(rank, "Bcast")
            result = tree_broadcast(self, rank, me, size, tag, target.data, root)
        if me != root:
            target.data[:] = result.view(target.data.dtype)
            target.store()

    def _reduced(self, rank, me, size, x, op, datatype, root, call):
        """``op`` over the ranks' ``x``: on every rank (root None) or at ``root``."""
        if native(x, op):
            if root is None:
                return self._run(rank, "all_reduce", x, op=op.collsim)
            return self._run(rank, "reduce", x, op=op.collsim, root=root)
        tag = self._collective_tag(rank, call)
        result = tree_reduce(self, rank, me, size, tag, x, op, datatype, root or 0)
        if root is None:
            result = tree_broadcast(self, rank, me, size, tag, result).view(x.dtype)
        return result

    def Allreduce(self, sendbuf, recvbuf, op=SUM):
        rank, me, size = self._me("Allreduce")
        op = check_op(op, "Allreduce")
        recv = self._recv_buffer(recvbuf, "Allreduce", stores=True)
        x = self._input(sendbuf, recv, "Allreduce")
        recv.data[:] = self._reduced(rank, me, size, x, op, recv.datatype, None, "Allreduce")
        recv.store()

    def Reduce(self, sendbuf, recvbuf, op=SUM, root=0):
        rank, me, size = self._me("Reduce")
        root = self._root(root, size, "Reduce")
        op = check_op(op, "Reduce")
        recv = None
        if me == root:
            recv = self._recv_buffer(recvbuf, "Reduce", stores=True)
            x = self._input(sendbuf, recv, "Reduce")
        else:
            if in_place(sendbuf):
                raise mpi_error(
                    ERR_ARG,
                    f"Reduce(sendbuf=MPI.IN_PLACE) on rank {me}: only the "
                    f"root ({root}) may reduce in place",
                )
            x = buffer_of(sendbuf, "Reduce(sendbuf=...)").data
        datatype = None if recv is None else recv.datatype
        result = self._reduced(rank, me, size, x, op, datatype, root, "Reduce")
        if me == root:
            recv.data[:] = result
            recv.store()

    def Allgather(self, sendbuf, recvbuf):
        rank, me, size = self._me("Allgather")
        recv = self._recv_buffer(recvbuf, "Allgather", blocks=size, stores=True)
        n = _block(recv, size, "Allgather")
        if in_place(sendbuf):
            x = recv.data[me * n : (me + 1) * n].copy()
        else:
            send = buffer_of(sendbuf, "Allgather(sendbuf=...)")
            check_same(send, recv, "Allgather", send.count * size, recv.count)
            x = send.data.view(recv.data.dtype)
        if native(x):
            recv.data[:] = self._run(rank, "all_gather", x)
        else:
            tag = self._collective_tag(rank, "Allgather")
            for r, block in enumerate(ring_all_gather(self, rank, me, size, tag, x)):
                recv.data[r * n : (r + 1) * n] = block
        recv.store()

    def Reduce_scatter_block(self, sendbuf, recvbuf, op=SUM):
        rank, me, size = self._me("Reduce_scatter_block")
        op = check_op(op, "Reduce_scatter_block")
        recv = self._recv_buffer(recvbuf, "Reduce_scatter_block", stores=True)
        if in_place(sendbuf):  # the receive buffer holds all K blocks; block 0 is kept
            n = _block(recv, size, "Reduce_scatter_block")
            x = recv.data.copy()
        else:
            send = buffer_of(sendbuf, "Reduce_scatter_block(sendbuf=...)")
            check_same(send, recv, "Reduce_scatter_block", send.count, recv.count * size, True)
            n, x = recv.count, send.data
        if native(x, op) and size > 1:
            recv.data[:n] = self._run(rank, "reduce_scatter", x, op=op.collsim)
        else:
            total = self._reduced(rank, me, size, x, op, recv.datatype, None, "Reduce_scatter")
            recv.data[:n] = total[me * n : (me + 1) * n]
        recv.store()

    def Alltoall(self, sendbuf, recvbuf):
        rank, me, size = self._me("Alltoall")
        recv = self._recv_buffer(recvbuf, "Alltoall", blocks=size, stores=True)
        n = _block(recv, size, "Alltoall")
        if in_place(sendbuf):
            x = recv.data.copy()
        else:
            send = buffer_of(sendbuf, "Alltoall(sendbuf=...)", blocks=size)
            check_same(send, recv, "Alltoall")
            x = send.data.view(recv.data.dtype)
        if native(x):
            recv.data[:] = self._run(rank, "all_to_all", x)
        else:
            tag = self._collective_tag(rank, "Alltoall")
            blocks = [x[r * n : (r + 1) * n] for r in range(size)]
            for r, block in enumerate(direct_all_to_all(self, rank, me, size, tag, blocks)):
                recv.data[r * n : (r + 1) * n] = block
        recv.store()

    def _input(self, sendbuf, recv, call):
        """This rank's input: ``sendbuf``'s data, or (IN_PLACE) a copy of ``recv``'s."""
        if in_place(sendbuf):
            return recv.data.copy()
        send = buffer_of(sendbuf, f"{call}(sendbuf=...)")
        check_same(send, recv, call, reduction=True)
        return send.data

    # -- over point-to-point --------------------------------------------------------------

    def _gathered(self, rank, me, size, root, tag, mine=None):
        """:func:`~collsim.collectives.linear.linear_gather`'s moves, block ``r`` being rank
        ``r``'s array (``mine`` here, off the root): ``{rank: block}`` at the root."""
        held = {} if me == root else {me: mine}
        return self._run_moves(rank, me, tag, linear_gather(size, root), held)

    def _scattered(self, rank, me, size, root, tag, blocks=None):
        """:func:`~collsim.collectives.linear.linear_scatter`'s moves of the root's
        ``blocks`` (``{rank: array}``): the block this rank ends with."""
        held = dict(blocks) if me == root else {}
        return self._run_moves(rank, me, tag, linear_scatter(size, root), held)[me]

    def Gather(self, sendbuf, recvbuf, root=0):
        rank, me, size = self._me("Gather")
        root = self._root(root, size, "Gather")
        tag = self._collective_tag(rank, "Gather")
        if me != root:
            send = buffer_of(sendbuf, "Gather(sendbuf=...)")
            self._gathered(rank, me, size, root, tag, send.data)
            return
        recv = buffer_of(recvbuf, "Gather(recvbuf=...)", writable=True, blocks=size, stores=True)
        n = _block(recv, size, "Gather")
        if sendbuf is not IN_PLACE and sendbuf is not None:  # None at the root: in place
            send = buffer_of(sendbuf, "Gather(sendbuf=...)")
            check_same(send, recv, "Gather", send.count * size, recv.count)
            recv.data[root * n : (root + 1) * n] = send.data.view(recv.data.dtype)
        for r, value in sorted(self._gathered(rank, me, size, root, tag).items()):
            _exactly(value, n, f"Gather: rank {r}")
            land(_part(recv, r, n), value, "Gather", f"rank {r}")
        recv.store()

    def Scatter(self, sendbuf, recvbuf, root=0):
        rank, me, size = self._me("Scatter")
        root = self._root(root, size, "Scatter")
        tag = self._collective_tag(rank, "Scatter")
        if me != root:
            recv = buffer_of(recvbuf, "Scatter(recvbuf=...)", writable=True, stores=True)
            value = self._scattered(rank, me, size, root, tag)
            _exactly(value, recv.count, f"Scatter: the root ({root})")
            land(recv, value, "Scatter", f"the root ({root})")
            return
        send = buffer_of(sendbuf, "Scatter(sendbuf=...)", blocks=size)
        n = _block(send, size, "Scatter")
        if recvbuf is not IN_PLACE and recvbuf is not None:  # None at the root: in place
            recv = buffer_of(recvbuf, "Scatter(recvbuf=...)", writable=True, stores=True)
            check_same(send, recv, "Scatter", n, recv.count)
            recv.data[:] = send.data[root * n : (root + 1) * n].view(recv.data.dtype)
            recv.store()
        blocks = {r: send.data[r * n : (r + 1) * n] for r in range(size)}
        self._scattered(rank, me, size, root, tag, blocks)


def _part(buffer, r, n):
    """Block ``r`` (of ``n`` elements) of ``buffer``, as a buffer of the same datatype."""
    return type(buffer)(buffer.data[r * n : (r + 1) * n], buffer.datatype)


def _exactly(value, n, who):
    if value.size != n:
        raise value_error(
            f"{who} sent {value.size} elements where {n} were expected: every "
            "rank of a Gather or Scatter moves the same count"
        )
