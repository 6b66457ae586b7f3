"""The v-collectives (``Gatherv``, ``Scatterv``, ``Allgatherv``, ``Alltoallv``), the prefix
reductions (``Scan``, ``Exscan``), ``Reduce_scatter`` with counts, and the non-blocking
(``Ibcast``, ``Iallreduce``, ...) and persistent (``Bcast_init``, ...) collectives.

A v-spec gives each rank its own count and displacement: ``[buf, (counts, displs),
MPI.DOUBLE]`` (displacements in elements; None packs the blocks in rank order).  The
v-collectives are linear over point-to-point, as MPI implementations run them for
irregular blocks: ``Gatherv`` and ``Scatterv`` run :mod:`collsim.collectives.linear`'s
linear gather and scatter (the root receives from, or sends to, every rank at once), as
``Gather`` and ``Scatter`` do; ``Allgatherv`` and ``Alltoallv`` are one direct exchange.
``Scan`` passes the running prefix along the ranks (rank r combines rank r-1's prefix with
its own: ``x0 op x1 op ... op xr`` in rank order).

The non-blocking collectives run when called and return a completed request (the data is
in place at once; ``Wait`` returns at once), so a program that overlaps work with them is
correct but shows no overlap in the trace.  A persistent collective runs at each ``Start``.

Examples
--------
>>> import numpy as np, collsim
>>> from collsim import mpi as MPI
>>> def main():
...     comm = MPI.COMM_WORLD
...     counts = [1, 2, 3]
...     mine = np.full(counts[comm.rank], float(comm.rank))
...     everything = np.zeros(6) if comm.rank == 0 else None
...     comm.Gatherv(mine, [everything, counts, MPI.DOUBLE], root=0)
...     prefix = np.zeros(1)
...     comm.Scan(np.ones(1), prefix)
...     return None if everything is None else everything.tolist(), float(prefix[0])
>>> collsim.runtime.blocking.run(collsim.Cluster(collsim.topology.ring(3)), main).returns
[([0.0, 1.0, 1.0, 2.0, 2.0, 2.0], 1.0), (None, 2.0), (None, 3.0)]
"""

from ..collectives.checks import is_int
from .buffers import IN_PLACE, check_op, in_place
from .exceptions import value_error
from .messages import land
from .p2p import done_request
from .reduction import SUM
from .request import Prequest
from .specs import Buffer, buffer_of

__all__ = ["VectorCollectives"]


def _vector(spec, size, call, arg, writable=False):
    """A v-spec's buffer, with one count and displacement per rank."""
    buffer = buffer_of(spec, f"{call}({arg}=...)", writable=writable, blocks=max(size, 1))
    if size == 0:  # no neighbours: no blocks
        return Buffer(buffer.data, buffer.datatype, (), ())
    if buffer.counts is None:  # a plain buffer: equal blocks
        if buffer.count % size:
            raise value_error(
                f"{call}({arg}=...): {buffer.count} elements are not {size} equal blocks: "
                "give [buf, (counts, displs), datatype]"
            )
        n = buffer.count // size
        return Buffer(buffer.data, buffer.datatype, (n,) * size, tuple(n * r for r in range(size)))
    if is_int(buffer.counts):  # one count for every rank; a scalar displacement is a stride
        count, stride = buffer.counts, buffer.displs
        stride = count if stride is None else stride
        displs = tuple(stride * r for r in range(size)) if is_int(stride) else tuple(stride)
        buffer = Buffer(buffer.data, buffer.datatype, (count,) * size, displs)
        if size and max(displs) + count > buffer.count:
            raise value_error(
                f"{call}({arg}=...): {size} blocks of {count} at {list(displs)} reach past "
                f"the buffer's {buffer.count} elements"
            )
    if len(buffer.counts) != size or len(buffer.displs) != size:
        raise value_error(
            f"{call}({arg}=...): {len(buffer.counts)} counts for a {size}-rank communicator: "
            "give one count (and displacement) per rank"
        )
    return buffer


def _piece(buffer, r):
    """Block ``r`` of a v-buffer, as a Buffer (it receives)."""
    return Buffer(buffer.block(r), buffer.datatype)


class VectorCollectives:
    """The v-collectives, prefix reductions and non-blocking forms (a mixin of Comm)."""

    def Gatherv(self, sendbuf, recvbuf, root=0):
        rank, me, size = self._me("Gatherv")
        root = self._root(root, size, "Gatherv")
        tag = self._collective_tag(rank, "Gatherv")
        if me != root:
            mine = buffer_of(sendbuf, "Gatherv(sendbuf=...)").data
            self._gathered(rank, me, size, root, tag, mine)
            return
        recv = _vector(recvbuf, size, "Gatherv", "recvbuf", writable=True)
        if not in_place(sendbuf):
            land(
                _piece(recv, root),
                buffer_of(sendbuf, "Gatherv(sendbuf=...)").data,
                "Gatherv",
                "the root",
            )
        for r, value in sorted(self._gathered(rank, me, size, root, tag).items()):
            land(_piece(recv, r), value, "Gatherv", f"rank {r}")

    def Scatterv(self, sendbuf, recvbuf, root=0):
        rank, me, size = self._me("Scatterv")
        root = self._root(root, size, "Scatterv")
        tag = self._collective_tag(rank, "Scatterv")
        if me != root:
            recv = buffer_of(recvbuf, "Scatterv(recvbuf=...)", writable=True)
            land(recv, self._scattered(rank, me, size, root, tag), "Scatterv", f"the root ({root})")
            return
        send = _vector(sendbuf, size, "Scatterv", "sendbuf")
        if recvbuf is not IN_PLACE:
            recv = buffer_of(recvbuf, "Scatterv(recvbuf=...)", writable=True)
            land(recv, send.block(root), "Scatterv", "the root")
        self._scattered(rank, me, size, root, tag, {r: send.block(r) for r in range(size)})

    def Allgatherv(self, sendbuf, recvbuf):
        rank, me, size = self._me("Allgatherv")
        recv = _vector(recvbuf, size, "Allgatherv", "recvbuf", writable=True)
        if in_place(sendbuf):
            mine = recv.block(me).copy()
        else:
            mine = buffer_of(sendbuf, "Allgatherv(sendbuf=...)").data
            land(_piece(recv, me), mine, "Allgatherv", "this rank")
        tag = self._collective_tag(rank, "Allgatherv")
        others = [r for r in range(size) if r != me]
        got = self._round(rank, tag, sends=[(r, mine) for r in others], recvs=others)
        for r, value in zip(others, got, strict=True):
            land(_piece(recv, r), value, "Allgatherv", f"rank {r}")

    def Alltoallv(self, sendbuf, recvbuf):
        rank, me, size = self._me("Alltoallv")
        recv = _vector(recvbuf, size, "Alltoallv", "recvbuf", writable=True)
        if in_place(sendbuf):
            send = Buffer(recv.data.copy(), recv.datatype, recv.counts, recv.displs)
        else:
            send = _vector(sendbuf, size, "Alltoallv", "sendbuf")
        land(_piece(recv, me), send.block(me), "Alltoallv", "this rank")
        tag = self._collective_tag(rank, "Alltoallv")
        others = [r for r in range(size) if r != me]
        got = self._round(rank, tag, sends=[(r, send.block(r)) for r in others], recvs=others)
        for r, value in zip(others, got, strict=True):
            land(_piece(recv, r), value, "Alltoallv", f"rank {r}")

    def Reduce_scatter(self, sendbuf, recvbuf, recvcounts=None, op=SUM):
        """Reduce, then rank r keeps ``recvcounts[r]`` elements (blocks in rank order)."""
        rank, me, size = self._me("Reduce_scatter")
        op = check_op(op, "Reduce_scatter")
        recv = buffer_of(recvbuf, "Reduce_scatter(recvbuf=...)", writable=True)
        if recvcounts is None:  # each rank's receive count, gathered as mpi4py does
            recvcounts = self.allgather(recv.count)
        counts = [int(c) for c in recvcounts]
        if len(counts) != size:
            raise value_error(f"Reduce_scatter(recvcounts={counts}): give {size} counts")
        x = (
            recv.data.copy()
            if in_place(sendbuf)
            else buffer_of(sendbuf, "Reduce_scatter(sendbuf=...)").data
        )
        total = self._reduced(
            rank, me, size, x[: sum(counts)], op, recv.datatype, None, "Reduce_scatter"
        )
        start = sum(counts[:me])
        recv.data[: counts[me]] = total[start : start + counts[me]]

    def _prefix(self, sendbuf, recvbuf, op, call, exclusive):
        rank, me, size = self._me(call)
        op = check_op(op, call)
        recv = buffer_of(recvbuf, f"{call}(recvbuf=...)", writable=True)
        x = (
            recv.data.copy()
            if in_place(sendbuf)
            else buffer_of(sendbuf, f"{call}(sendbuf=...)").data
        )
        tag = self._collective_tag(rank, call)
        before = self._round(rank, tag, recvs=[me - 1])[0].view(x.dtype) if me else None
        mine = x if before is None else op.reduce_arrays(before, x, recv.datatype)
        if me + 1 < size:
            self._round(rank, tag, sends=[(me + 1, mine)])
        result = before if exclusive else mine
        if result is not None:  # Exscan leaves rank 0's buffer as it was (MPI: undefined)
            recv.data[: result.size] = result

    def Scan(self, sendbuf, recvbuf, op=SUM):
        self._prefix(sendbuf, recvbuf, op, "Scan", exclusive=False)

    def Exscan(self, sendbuf, recvbuf, op=SUM):
        self._prefix(sendbuf, recvbuf, op, "Exscan", exclusive=True)

    def Barrier(self):
        """The barrier (``Barrier`` and ``barrier`` are one: no buffer to move)."""
        self.barrier()

    def ibarrier(self):
        self.barrier()
        return done_request(None, None)


def nonblocking(name):
    """The I-form of the collective ``name``: it runs now; its request is complete."""

    def call(self, *args, **kwargs):
        getattr(self, name)(*args, **kwargs)
        return done_request(None, None)

    call.__name__ = call.__qualname__ = f"I{name[0].lower()}{name[1:]}"
    call.__doc__ = f"``{name}``, run now; a completed request (see the module's note)."
    return call


def persistent(name):
    """The _init form of the collective ``name``: each Start runs it."""

    def call(self, *args, **kwargs):
        self._me(f"{name}_init")
        return Prequest(lambda: nonblocking(name)(self, *args, **kwargs))

    call.__name__ = f"{name}_init"
    return call


_COLLECTIVES = (
    "Barrier",
    "Bcast",
    "Gather",
    "Gatherv",
    "Scatter",
    "Scatterv",
    "Allgather",
    "Allgatherv",
    "Alltoall",
    "Alltoallv",
    "Reduce",
    "Allreduce",
    "Reduce_scatter_block",
    "Reduce_scatter",
    "Scan",
    "Exscan",
)
for _name in _COLLECTIVES:
    setattr(VectorCollectives, f"I{_name.lower()}", nonblocking(_name))
    setattr(VectorCollectives, f"{_name}_init", persistent(_name))
