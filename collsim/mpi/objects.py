"""The lowercase collectives on picklable objects, over point-to-point messages.

Each object travels as its pickle (a uint8 array), so the bytes are the pickle's.  Every
rank gets copies (unpickled), the root too, as with mpi4py.  Every call runs a schedule of
chunk moves from :mod:`collsim.collectives` (for bcast, allgather and alltoall the one the
uppercase call on buffers runs), with one pickle for each chunk: each
:class:`~collsim.collectives.schedule.ChunkMove` of a step sends the sender's pickle of that
chunk, and the receiver keeps it, or, for a move that reduces, combines the two in rank
order (:meth:`ObjectCollectives._run_moves`). The algorithms:

* ``bcast``: the binomial tree of ``collectives.tree.tree_broadcast`` (one chunk, the
  root's pickle): ceil(log2 K) steps.
* ``allgather``: the ring of ``collectives.ring.ring_all_gather`` (chunk r is rank r's
  pickle): K-1 steps, each passing on the pickle received in the step before.
* ``gather``, ``scatter``: ``collectives.linear``'s linear gather and scatter (chunk r is
  rank r's pickle): the root receives from (sends to) every other rank in one step.
* ``reduce``: ``collectives.tree.rank_order_reduce``, a binomial tree to rank 0 over the
  ranks in order (rank r + 2^i hands its subtree's value to rank r, which computes
  ``op(mine, theirs)``), then rank 0 sends the result to the root: a function that is not
  commutative gives what mpi4py gives, ``((x0+x1)+(x2+x3))`` on four ranks;
  ``allreduce``: the same to rank 0, then ``bcast``.
* ``scan``, ``exscan``: ``collectives.chain.chain_scan``, the prefix passed along the
  ranks (rank r combines rank r-1's prefix, first, with its own): K-1 messages in K-1
  steps; the chain module says why not recursive doubling.
* ``alltoall``: the direct all-to-all of ``collectives.all_to_all.direct_all_to_all``
  (pairwise): in step i, send to rank + i and receive from rank - i.
* ``barrier``: ``collectives.dissemination.dissemination_barrier`` (as MPICH's): in round
  i, an empty message to rank + 2^i and one from rank - 2^i, ceil(log2 K) rounds.

Their messages carry the tag ``(collective context, call number, name)``: a rank that
calls a different collective than the others waits for a message with another name,
which the deadlock report shows.

Examples
--------
>>> import collsim
>>> from collsim import mpi as MPI
>>> def main():
...     comm = MPI.COMM_WORLD
...     total = comm.allreduce(comm.rank + 1)
...     return total, comm.gather(f"r{comm.rank}", root=1), comm.bcast({"k": 3} if
...         comm.rank == 0 else None)
>>> collsim.runtime.blocking.run(collsim.Cluster(collsim.topology.ring(3)), main).returns[1]
(6, ['r0', 'r1', 'r2'], {'k': 3})
"""

import threading

import numpy as np

from ..collectives.chain import chain_scan
from ..collectives.checks import is_int
from ..collectives.dissemination import dissemination_barrier
from ..collectives.linear import linear_gather, linear_scatter
from ..collectives.registry import build
from ..collectives.tree import rank_order_reduce
from ..runtime import blocking
from .exceptions import ERR_ROOT, mpi_error, value_error
from .messages import CollectiveTag, pickled, unpickle
from .reduction import SUM, object_op
from .settings import run_state

__all__ = ["ObjectCollectives"]

_EMPTY = np.zeros(0, dtype=np.uint8)


def _one(chunks):
    """The one chunk of a move's ``chunks``: the schedules run here move one pickle a move."""
    (chunk,) = chunks
    return chunk


class ObjectCollectives:
    """The lowercase collectives of :class:`~collsim.mpi.comm.Comm` (a mixin)."""

    def _collective_tag(self, rank, name):
        seq = run_state(rank).next_seq(rank.id, self._collective_context)
        return CollectiveTag(self._collective_context, seq, name)

    def _round(self, rank, tag, sends=(), recvs=()):
        """Post ``sends`` ``(rank here, payload)`` and receives from ``recvs`` (ranks here)
        together; the received payloads once all are done."""
        if not sends and not recvs:
            return []
        members = self._members(rank)
        return blocking.call(
            rank.exchange(
                sends=[(members[dst], payload, tag) for dst, payload in sends],
                recvs=[(members[src], tag) for src in recvs],
            )
        )

    def _root(self, root, size, call):
        if is_int(root) and 0 <= root < size:
            return int(root)
        raise mpi_error(
            ERR_ROOT,
            f"{call}(root={root!r}): the root is a rank of this "
            f"{size}-rank communicator, 0..{size - 1}",
        )

    def _run_moves(self, rank, me, tag, schedule, held, combine=None):
        """Run ``schedule``'s chunk moves on pickles: ``held[c]`` is this rank's pickle of
        chunk ``c`` (filled in as moves arrive). Each step is one round: this rank sends the
        chunks its moves name and receives the chunks moved to it. The receiver of a copy
        keeps the sender's pickle; the receiver of a move that reduces keeps
        ``combine(lower, higher)``, the two pickles in the order of their ranks (MPI's
        order for an operation that does not commute). A move ``from_input`` sends the
        chunk as it was before the first step (all-to-all)."""
        inputs = dict(held)
        for step in schedule.steps:
            sends = [
                (move.dst, (inputs if move.from_input else held)[_one(move.chunks)])
                for move in step
                if move.src == me
            ]
            arriving = [move for move in step if move.dst == me]
            got = self._round(rank, tag, sends, [move.src for move in arriving])
            for move, data in zip(arriving, got, strict=True):
                chunk = _one(move.dst_chunks)
                if not move.reduce:
                    held[chunk] = data
                elif move.src < me:
                    held[chunk] = combine(data, held[chunk])
                else:
                    held[chunk] = combine(held[chunk], data)
        return held

    def _spread(self, rank, me, size, root, tag, data):
        """Broadcast of the pickle ``data`` (given at the root) on the binomial tree."""
        held = {0: data} if me == root else {}
        return self._run_moves(rank, me, tag, build("broadcast", "tree", size, root), held)[0]

    def _items(self, sendobj, size, call):
        if sendobj is None:  # mpi4py sends None to every rank
            return [None] * size
        try:
            items = list(sendobj)
        except TypeError:
            raise value_error(
                f"{call}: {sendobj!r} is not a sequence: give {size} items, one per rank"
            ) from None
        if len(items) != size:
            raise value_error(f"{call}: expecting {size} items, got {len(items)}: one per rank")
        return items

    # -- the calls ------------------------------------------------------------------------

    def bcast(self, obj, root=0):
        rank, me, size = self._me("bcast")
        root = self._root(root, size, "bcast")
        tag = self._collective_tag(rank, "bcast")
        data = pickled(obj, "bcast") if me == root else None
        with comm_lock(self, "bcast", rank):  # as mpi4py: threads of a rank take turns
            return unpickle(self._spread(rank, me, size, root, tag, data), "bcast")

    def gather(self, sendobj, root=0):
        rank, me, size = self._me("gather")
        root = self._root(root, size, "gather")
        tag = self._collective_tag(rank, "gather")
        held = {me: pickled(sendobj, "gather")}  # chunk r is rank r's pickle
        self._run_moves(rank, me, tag, linear_gather(size, root), held)
        return [unpickle(held[r], "gather") for r in range(size)] if me == root else None

    def scatter(self, sendobj, root=0):
        rank, me, size = self._me("scatter")
        root = self._root(root, size, "scatter")
        tag = self._collective_tag(rank, "scatter")
        held = {}  # chunk r is the root's pickle for rank r
        if me == root:
            items = self._items(sendobj, size, "scatter")
            held = {r: pickled(x, "scatter") for r, x in enumerate(items)}
        self._run_moves(rank, me, tag, linear_scatter(size, root), held)
        return unpickle(held[me], "scatter")

    def allgather(self, sendobj):
        rank, me, size = self._me("allgather")
        tag = self._collective_tag(rank, "allgather")
        held = {me: pickled(sendobj, "allgather")}  # chunk r is rank r's pickle
        self._run_moves(rank, me, tag, build("all_gather", "ring", size), held)
        return [unpickle(held[r], "allgather") for r in range(size)]

    def alltoall(self, sendobj):
        rank, me, size = self._me("alltoall")
        items = [pickled(x, "alltoall") for x in self._items(sendobj, size, "alltoall")]
        tag = self._collective_tag(rank, "alltoall")
        held = dict(enumerate(items))  # chunk j: the item for rank j, then the one from rank j
        self._run_moves(rank, me, tag, build("all_to_all", "direct", size), held)
        return [unpickle(held[r], "alltoall") for r in range(size)]

    def _fold(self, rank, me, size, root, tag, sendobj, op, call):
        """Reduction to rank 0 on :func:`~collsim.collectives.tree.rank_order_reduce`'s
        schedule (each receiver puts the sender's ranks after its own: MPI's order), then
        (if the root is another rank) rank 0 sends the result to the root: the root's
        result, None elsewhere."""
        function = object_op(op, call)

        def combine(lower, higher):  # the lower ranks' values first: op(x0..., x(src)...)
            return pickled(function(unpickle(lower, call), unpickle(higher, call)), call)

        held = {0: pickled(sendobj, call)}  # the one chunk: what this rank's subtree holds
        self._run_moves(rank, me, tag, rank_order_reduce(size), held, combine)
        result = held[0]  # on rank 0: every rank's value, combined in rank order
        if root != 0 and me == 0:
            self._round(rank, tag, sends=[(root, result)])
        elif root != 0 and me == root:
            result = self._round(rank, tag, recvs=[0])[0]
        return unpickle(result, call) if me == root else None  # never the input itself

    def reduce(self, sendobj, op=SUM, root=0):
        rank, me, size = self._me("reduce")
        root = self._root(root, size, "reduce")
        tag = self._collective_tag(rank, "reduce")
        return self._fold(rank, me, size, root, tag, sendobj, op, "reduce")

    def allreduce(self, sendobj, op=SUM):
        rank, me, size = self._me("allreduce")
        tag = self._collective_tag(rank, "allreduce")
        result = self._fold(rank, me, size, 0, tag, sendobj, op, "allreduce")
        data = pickled(result, "allreduce") if me == 0 else None
        return unpickle(self._spread(rank, me, size, 0, tag, data), "allreduce")

    def _scan(self, sendobj, op, call, exclusive):
        """The running prefix passed along the ranks (``collectives.chain.chain_scan``):
        ``x0 op ... op xr`` on rank r (``x0 op ... op x(r-1)``, what arrived,
        if ``exclusive``; None on rank 0 then)."""
        rank, me, size = self._me(call)
        function = object_op(op, call)
        tag = self._collective_tag(rank, call)
        arrived = []  # the lower ranks' prefix, once it arrives

        def combine(lower, mine):  # the lower ranks' prefix first, then this rank's value
            arrived.append(unpickle(lower, call))
            return pickled(function(arrived[0], sendobj), call)  # `mine` is sendobj's pickle

        held = {0: pickled(sendobj, call)}  # the one chunk: this rank's prefix so far
        self._run_moves(rank, me, tag, chain_scan(size), held, combine)
        if exclusive:
            return arrived[0] if arrived else None
        return unpickle(held[0], call)

    def scan(self, sendobj, op=SUM):
        return self._scan(sendobj, op, "scan", exclusive=False)

    def exscan(self, sendobj, op=SUM):
        return self._scan(sendobj, op, "exscan", exclusive=True)

    def barrier(self):
        rank, me, size = self._me("barrier")
        tag = self._collective_tag(rank, "barrier")
        # the one chunk is empty: each message only says that its sender has arrived
        self._run_moves(
            rank, me, tag, dissemination_barrier(size), {0: _EMPTY}, lambda lower, higher: _EMPTY
        )

    def Barrier(self):
        """The barrier (``Barrier`` and ``barrier`` are one: no buffer to move)."""
        self.barrier()


def comm_lock_table(comm, rank=None):
    """mpi4py's ``MPI._comm_lock_table(comm)``: the calling rank's locks on ``comm``, by
    key (mpi4py holds ``"bcast"`` around a bcast's messages)."""
    rank = blocking.current_rank() if rank is None else rank
    return run_state(rank).lock_table(rank.id, comm._context)


def comm_lock(comm, key=None, rank=None):
    """mpi4py's ``MPI._comm_lock(comm, key)``: the lock ``key`` of ``comm``'s table."""
    table = comm_lock_table(comm, rank)
    return table.setdefault(key, threading.Lock())
