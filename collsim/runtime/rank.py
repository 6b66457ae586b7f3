"""What a rank program sees: its id, the world size, and the operations it can yield (the
checks of their arguments are :mod:`collsim.runtime.rank_checks`'s).

Examples
--------
>>> import numpy as np, collsim
>>> def program(rank):
...     right, left = (rank.id + 1) % rank.size, (rank.id - 1) % rank.size
...     h = yield rank.isend(right, np.full(2, float(rank.id)))   # returns a handle at once
...     got = yield rank.recv(left)
...     yield rank.wait(h)
...     return float(got[0])
>>> collsim.Cluster(collsim.topology.ring(3)).run(program).returns
[2.0, 0.0, 1.0]
"""

import inspect
import math
import numbers

from ..errors import ConfigError
from ..units import parse_time
from .matching import Transfer
from .matching import _tag_matches as tag_matches
from .memory import MemoryTracker
from .ops import (
    ANY,
    Compute,
    Exchange,
    Handle,
    Incoming,
    Outgoing,
    Received,
    Recv,
    Send,
    Start,
    Wait,
)
from .rank_checks import (
    PAYLOADS,
    RankChecks,
    check_label,
    exchange_entry,
    plain_recv,
    plain_send,
)
from .unyielded import Made

__all__ = ["Rank"]


class Rank(RankChecks):
    """One virtual GPU inside a run.  Its methods build operations to ``yield``."""

    # a rank program reads id and size at every step; the layers above key weak tables by rank
    __slots__ = ("id", "_execution", "size", "_unyielded", "__weakref__")

    def __init__(self, rank_id, execution):
        self.id = rank_id
        self._execution = execution
        self.size = execution.cluster.size
        # the operations (and collectives) its methods built and its program has not
        # yielded yet; the engine takes each off as it is yielded, and what is left when
        # the program ends was forgotten (see runtime/unyielded.py)
        self._unyielded = []

    @property
    def now(self):
        """Simulated seconds since the run started."""
        return self._execution.engine.now

    @property
    def cluster(self):
        return self._execution.cluster

    def __repr__(self):
        return f"Rank({self.id} of {self.size})"

    # -- point to point -------------------------------------------------------------------

    def send(self, dst, array, tag=0, label="", meta=None):
        """Send ``array`` to rank ``dst``; completes when the data has arrived.

        ``tag`` matches the send with its receive; ``label`` is for display; ``meta``, a
        typed record of what the transfer belongs to, is kept on the trace's transfer
        (``trace.transfers[i].meta``) and in its Chrome export ``args``."""
        return self._made(
            Send(
                self._peer(dst, "send to"),
                self._payload(array, dst),
                self._tag(tag),
                True,
                check_label(label),
                meta,
            )
        )

    def isend(self, dst, array, tag=0, label="", meta=None):
        """Like :meth:`send` but resumes at once with a handle to :meth:`wait` on."""
        return self._made(self._isend(dst, array, tag, label, meta))

    def _isend(self, dst, array, tag=0, label="", meta=None):
        return Send(
            self._peer(dst, "send to"),
            self._payload(array, dst),
            self._tag(tag),
            False,
            check_label(label),
            meta,
        )

    def recv(self, src, tag=0, out=None, reduce=None, status=False):
        """Receive from rank ``src``; resumes with a copy of the array that was sent.

        With ``out=`` the data lands in that array (reduced into it with ``reduce=``, a
        numpy ufunc such as ``np.add``) and the program resumes with ``out``.  ``src`` may
        be :data:`~collsim.runtime.ops.ANY` (any rank) and ``tag`` ``ANY`` or a
        :class:`~collsim.runtime.ops.TagPrefix`; ``status=True`` resumes with a
        :class:`~collsim.runtime.ops.Received` (value, source, tag, bytes).
        """
        return self._made(
            Recv(
                self._source(src),
                self._recv_tag(tag),
                self._out(out, reduce),
                reduce,
                True,
                bool(status),
            )
        )

    def irecv(self, src, tag=0, out=None, reduce=None, status=False):
        """Like :meth:`recv` but resumes at once with a handle to :meth:`wait` on."""
        return self._made(self._irecv(src, tag, out, reduce, status))

    def _irecv(self, src, tag=0, out=None, reduce=None, status=False):
        return Recv(
            self._source(src),
            self._recv_tag(tag),
            self._out(out, reduce),
            reduce,
            False,
            bool(status),
        )

    def wait(self, *handles):
        """Resume when every handle is done: with its value, or a list of values."""
        if not handles:
            raise ConfigError("wait() needs at least one handle")
        for h in handles:
            if not isinstance(h, Handle):
                raise ConfigError(
                    f"rank {self.id} cannot wait on {h!r} ({type(h).__name__}): wait() takes "
                    "the handles that isend, irecv and start return"
                )
        return self._made(Wait(tuple(handles)))

    def probe(self, src, tag=0):
        """The first message sent to this rank that ``recv(src, tag)`` would take, still
        not received (MPI's Iprobe): a :class:`~collsim.runtime.ops.Received` whose value
        is None, or None.  Called, not yielded: looking costs no simulated time."""
        src, tag = self._source(src), self._recv_tag(tag)
        for (sender, dst, sent_tag), waiting in self._execution.mail.sends.items():
            if dst == self.id and (src is ANY or sender == src) and tag_matches(tag, sent_tag):
                message = waiting if type(waiting) is Transfer else waiting[0]
                return Received(None, sender, sent_tag, message.payload.nbytes)
        return None

    def exchange(self, sends=(), recvs=()):
        """Post sends ``(dst, array[, tag])`` and receives ``(src[, tag[, out[, reduce]]])``
        together and resume with the received values once all are done."""
        # the common entries (an int peer in range, an array or a size, an int tag) pass a
        # few exact type tests, and when every one does the lists are posted as given,
        # with no copy of an entry; any other goes through isend/irecv, which check it
        # field by field and name what is wrong, exactly as they would on their own
        if type(sends) is not list and type(sends) is not tuple:
            sends = list(sends)  # read twice below, and kept
        if type(recvs) is not list and type(recvs) is not tuple:
            recvs = list(recvs)
        size = self.size
        # the rules of plain_send and plain_recv, written out for every entry
        for entry in sends:
            if not (
                type(entry) is tuple
                and len(entry) == 3
                and type(entry[0]) is int
                and 0 <= entry[0] < size
                and type(entry[2]) is int
                and type(entry[1]) in PAYLOADS
            ):
                break
        else:
            for entry in recvs:
                if not (
                    type(entry) is tuple
                    and len(entry) == 2
                    and type(entry[0]) is int
                    and 0 <= entry[0] < size
                    and type(entry[1]) is int
                ):
                    break
            else:
                op = Exchange(sends, recvs, patterns=False, plain=True)
                self._unyielded.append(op)  # as _made does: warned about if never yielded
                return op
        send_posts, recv_posts = [], []
        patterns = False  # whether a receive may name ANY or a TagPrefix (matched by a scan)
        for entry in sends:
            if plain_send(entry, size):
                send_posts.append(Outgoing(*entry))
                continue
            op = self._isend(*exchange_entry(entry, "sends", "(dst, array[, tag])", 2, 3))
            send_posts.append(Outgoing(op.dst, op.payload, op.tag, op.label, op.meta))
        for entry in recvs:
            if plain_recv(entry, size):
                recv_posts.append(Incoming(*entry))
                continue
            op = self._irecv(*exchange_entry(entry, "recvs", "(src[, tag[, out[, reduce]]])", 1, 4))
            recv_posts.append(Incoming(op.src, op.tag, op.out, op.reduce))
            patterns = True
        return self._made(Exchange(send_posts, recv_posts, patterns))

    def compute(self, seconds=None, flops=None, label="compute", meta=None):
        """Occupy this rank's compute stream for ``seconds`` (a number or a time string
        such as ``"1ms"``), or for ``flops`` at the cluster's ``compute_rate``;
        communication already posted keeps flowing.  ``label`` is for display; ``meta``,
        a typed record of what the span belongs to (a pipeline pass is a
        :class:`~collsim.parallel.pipeline.schedules.PipelinePass`), is kept on the trace's
        compute span (``trace.computes[i].meta``) and in its Chrome export ``args``."""
        if (seconds is None) == (flops is None):
            raise ConfigError(
                f"compute(seconds={seconds!r}, flops={flops!r}) takes exactly one of "
                "seconds= or flops="
            )
        if flops is not None:
            if (
                isinstance(flops, bool)
                or not isinstance(flops, numbers.Real)
                or not (math.isfinite(flops) and flops >= 0)
            ):
                raise ConfigError(
                    f"compute(flops={flops!r}): give a finite number of FLOP >= 0 (a number)"
                )
            seconds = flops / self.cluster.compute_rate
        else:
            try:
                seconds = parse_time(seconds)
            except ConfigError as exc:
                raise ConfigError(f"compute(seconds={seconds!r}): {exc}") from None
        return self._made(Compute(float(seconds), check_label(label), meta))

    def start(self, program, name="background"):
        """Run a generator (e.g. ``rank.all_reduce(...)``) in the background on this rank's
        communication stream; resumes at once with a handle whose value is the result.
        Background tasks of one rank run one after another, like kernels on one stream."""
        if not inspect.isgenerator(program):
            raise ConfigError(
                f"rank.start({program!r}): give a generator, such as rank.all_reduce(x) or "
                "my_task(rank) where my_task yields operations"
            )
        return self._made(Start(program, check_label(name)))

    # -- memory (called, not yielded: registering an array takes no simulated time) --------

    def alloc(self, category, name, elements, bytes_per_element=None):
        """Register an array of ``elements`` elements that this rank now holds, at
        ``rank.now``; returns a :class:`~collsim.runtime.memory.MemoryBlock` for
        :meth:`free`.

        ``category`` is one of :data:`~collsim.runtime.memory.CATEGORIES` (``"params"``,
        ``"grads"``, ``"optimizer"``, ``"activations"``, ``"gathered_params"``,
        ``"comm_buffers"``); it is charged ``bytes_per_element`` bytes an element, by
        default its declared training precision (:data:`~collsim.runtime.memory.PRECISION`:
        2 for bf16, 4 for the fp32 optimizer state).  ``name`` is for display."""
        return self._memory().alloc(self.id, self.now, category, name, elements, bytes_per_element)

    def free(self, block):
        """Release a block :meth:`alloc` returned, at ``rank.now`` (once: a second free
        raises a ConfigError naming the block)."""
        self._memory().free(self.id, self.now, block)

    def allocated(self, category=None):
        """Bytes this rank holds now (registered with :meth:`alloc`, not yet freed): in
        ``category``, or in every category."""
        return self._memory().allocated(self.id, category)

    def _memory(self):
        """The run's :class:`~collsim.runtime.memory.MemoryTracker`, made on its first use
        (a run that registers no array never needs one)."""
        execution = self._execution
        if execution.memory is None:
            execution.memory = MemoryTracker(execution.trace)
        return execution.memory

    # -- collectives (``yield from`` them, or hand them to ``start``) ----------------------
    # collsim.collectives sits above the runtime; importing it here, when a collective is
    # called, keeps the import graph pointing downward at load time.

    def all_reduce(self, x, group=None, algorithm=None, op="sum", protocol=None):
        """Every rank ends with the reduction of all ranks' ``x``."""
        return self._collective("all_reduce", x, group, algorithm, op, protocol=protocol)

    def reduce_scatter(self, x, group=None, algorithm=None, op="sum", protocol=None):
        """Group rank r ends with chunk r of the reduction; ``x`` is cut along its first
        axis, as torch's ``reduce_scatter_tensor`` does."""
        return self._collective("reduce_scatter", x, group, algorithm, op, protocol=protocol)

    def all_gather(self, x, group=None, algorithm=None, protocol=None):
        """Every rank ends with all ranks' ``x`` concatenated along the first axis in group
        order, as torch's ``all_gather_into_tensor``: (3, 5) on 4 ranks gives (12, 5)."""
        return self._collective("all_gather", x, group, algorithm, protocol=protocol)

    def broadcast(self, x, root=0, group=None, algorithm=None, protocol=None):
        """Every rank ends with group rank ``root``'s ``x``."""
        return self._collective("broadcast", x, group, algorithm, root=root, protocol=protocol)

    def reduce(self, x, root=0, group=None, algorithm=None, op="sum", protocol=None):
        """Group rank ``root`` ends with the reduction; the others get ``None``."""
        return self._collective("reduce", x, group, algorithm, op, root, protocol=protocol)

    def all_to_all(self, x, group=None, algorithm=None, protocol=None):
        """Chunk j of rank r's ``x`` (cut along the first axis) ends as chunk r of rank
        j's result."""
        return self._collective("all_to_all", x, group, algorithm, protocol=protocol)

    def _collective(self, name, x, group, algorithm, op="sum", root=0, protocol=None):
        # algorithm=None is the cluster's default: NCCL's choice (auto) on a hardware
        # preset, else the collective's first (ring; tree for broadcast and reduce)
        from ..collectives.api import collective

        program = collective(self, name, x, group, algorithm, op, root, protocol=protocol)
        self._unyielded.append(Made(name, program))
        return program

    def _made(self, op):
        """``op``, noted as made and not yet yielded (runtime/unyielded.py)."""
        self._unyielded.append(op)
        return op
