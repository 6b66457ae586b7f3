"""One run of rank programs: processes, rendezvous matching, and the deadlock report.

Point-to-point is rendezvous, as NCCL's is: a transfer starts when both the send and the
matching receive are posted, and a blocking send completes when the data has arrived.
Messages match on (source, tag) in posting order.  The receiver gets a copy of the
array, never a shared reference; a receive with ``out=`` writes (or, with ``reduce=``,
reduces) straight into that array when the data arrives, which is how collectives avoid
a second copy.  As with MPI and NCCL, a sender must not change an array while its send
is in flight.
"""

from collections import Counter, deque

import numpy as np

from ..errors import CollectiveMismatchError, CollsimError, ConfigError, SimulationLimitError
from ..hardware.protocols import slowest_class
from ..network import FINISH, START, Engine, Network
from ..network.trace import Trace
from .diagnosis import deadlock_report, watchdog_report
from .guards import (
    DEFAULT_MAX_EVENTS,
    DEFAULT_MAX_TIME,
    SAMPLE_OPS,
    OpSample,
    default_max_ops,
    runaway_error,
)
from .memory import MemoryBlock, MemoryTracker
from .ops import (
    ANY,
    Compute,
    CountOnly,
    Enter,
    Exchange,
    Handle,
    Received,
    Recv,
    Send,
    Start,
    Steps,
    TagPrefix,
    Wait,
)

__all__ = ["Execution", "Process"]


class Process:
    """A generator being run for one rank: its main program or a background task."""

    __slots__ = ("gen", "rank", "name", "blocked_on", "handle", "collective", "source")

    def __init__(self, gen, rank, name):
        self.gen = gen
        self.rank = rank
        self.name = name
        self.blocked_on = None
        self.handle = Handle(f"{name} of rank {rank.id}")
        self.collective = None  # (group ranks, seq, description) while inside one
        # blocking rank code (runtime/blocking.py): its thread, whose `where` is the line of
        # the user's call the process is blocked in
        self.source = None


class Execution:
    """State of one :meth:`Cluster.run`: engine, network, trace, processes, mailboxes."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.engine = Engine(cluster.max_time, cluster.max_events)
        self.network = Network(self.engine, cluster.topology, cluster.model)
        self.trace = Trace()
        # what every rank holds now, by category; rank.alloc and rank.free record into
        # the trace's memory events (runtime/memory.py)
        self.memory = MemoryTracker(self.trace)
        self.processes = []
        # the max_ops guard counts down here (see guards.py); past zero, the next
        # SAMPLE_OPS operations are recorded in _sample for the report
        self.ops_left = cluster.max_ops
        self._sample = None
        self._sends = {}  # (src, dst, tag) -> deque of (payload, handle, label, meta)
        self._recvs = {}  # (src, dst, tag) -> deque of (handle, out, reduce)
        self._wild = {}  # dst -> [(src or ANY, tag or pattern, handle, out, reduce)]
        self._combining = {}  # (tag, Combine) -> the matched transfers of a combined group
        self._protocol_latency = {}  # (links, Protocol) -> seconds the protocol adds
        self._compute_free = {}  # rank id -> when its compute stream is next free
        self._comm_tail = {}  # rank id -> handle of its last background task
        self._dispatch = {
            Send: self._op_send,
            Recv: self._op_recv,
            Wait: self._op_wait,
            Compute: self._op_compute,
            Exchange: self._op_exchange,
            Start: self._op_start,
            Enter: self._op_enter,
            Steps: self._op_steps,
        }
        self.collective_calls = {}  # (group ranks, seq) -> {rank: CollectiveCall}
        # the flight recorder: rank id -> (group, seq, CollectiveCall) of the last
        # collective it entered and the last it completed
        self.entered, self.completed = {}, {}
        # faults (runtime/faults.py): slow ranks' factors, crashed ranks' times, and the
        # last simulated time a process moved on, which the watchdog counts from
        self.faults = getattr(cluster, "faults", None)
        self._slow = {}
        self._crashed = {}
        self.last_progress = 0.0
        if self.faults:
            self._install_faults(self.faults)
        # the collectives' per-run state (sequence numbers, tags, plans): a
        # collectives.context.CollectiveContext, made by the run's first collective (the
        # runtime does not import the collectives, which sit above it)
        self.collectives = None
        self.running = None  # the process _advance runs now

    # -- processes ------------------------------------------------------------------------

    def spawn(self, rank, gen, name):
        proc = Process(gen, rank, name)
        self.processes.append(proc)
        self._advance(proc, None)
        return proc

    def note_where(self, rank_id, source):
        """The process running now is a blocking rank's proxy: keep its thread, whose
        ``where`` the deadlock report prints (``rank_id`` names it for a check)."""
        proc = self.running
        if proc is None or proc.rank.id != rank_id:
            raise CollsimError(f"note_where({rank_id}) outside rank {rank_id}'s program")
        proc.source = source

    def _advance(self, proc, value):
        """Run ``proc`` until it blocks or ends."""
        self.running = proc
        if self._crashed and proc.rank.id in self._crashed:
            return  # a crashed rank never advances again
        self.last_progress = self.engine.now
        gen, dispatch = proc.gen, self._dispatch
        proc.blocked_on = None
        while True:
            try:
                op = gen.send(value)
            except StopIteration as stop:
                proc.handle.complete(stop.value)
                return
            except Exception as exc:
                _attach_rank(exc, proc, self.engine.now)
                raise
            # every operation counts, those that complete at once too: a loop of them
            # (compute(seconds=0), a wait on a done handle) never reaches the engine
            left = self.ops_left - 1
            self.ops_left = left
            if left < 0:
                self._over_budget()
            handler = dispatch.get(type(op))
            if handler is None:
                hint = ""
                if isinstance(op, MemoryBlock):  # rank.alloc is called, never yielded
                    hint = ("; rank.alloc, rank.free and rank.allocated take no simulated "
                            "time: call them without yield")  # fmt: skip
                exc = CollsimError(
                    f"rank {proc.rank.id} yielded {op!r}, which is not an operation: "
                    "yield rank.send(...), rank.recv(...), rank.wait(...), rank.compute(...) "
                    f"or use `yield from` for a collective{hint}"
                )
                _attach_rank(exc, proc, self.engine.now)
                raise exc
            ready, value = handler(proc, op)
            if not ready:
                # a Wait on the pending handles says best what a blocked rank waits for
                proc.blocked_on = value if isinstance(value, Wait) else op
                return

    def _resume_on(self, proc, handle):
        def resume():
            self._advance(proc, handle.value)

        handle.callbacks.append(resume)

    # -- operations -----------------------------------------------------------------------

    def _op_send(self, proc, op):
        handle = self.post_send(proc.rank.id, op)
        if not op.blocking:
            return True, handle
        if handle.done:
            return True, None
        self._resume_on(proc, handle)
        return False, None

    def _op_recv(self, proc, op):
        handle = self.post_recv(proc.rank.id, op)
        if not op.blocking:
            return True, handle
        if handle.done:
            return True, handle.value
        self._resume_on(proc, handle)
        return False, None

    def _op_wait(self, proc, op):
        handles = op.handles
        return self._when_all(proc, handles, handles, len(handles) == 1)

    def _op_exchange(self, proc, op):
        me = proc.rank.id
        self.charge(proc, len(op.sends))
        sends = [self.post_send(me, send) for send in op.sends]
        recvs = [self.post_recv(me, recv) for recv in op.recvs]
        return self._when_all(proc, sends + recvs, recvs, False)

    def _op_steps(self, proc, op):
        return _StepRunner(self, proc, op.steps).post_next()

    def _when_all(self, proc, handles, results, single):
        """Resume ``proc`` once every handle is done, with the values of ``results``: a
        list of them, or the one value if ``single``."""
        pending = [h for h in handles if not h.done]
        if not pending:
            return True, _values(results, single)
        barrier = _Barrier(self, proc, len(pending), results, single)
        for h in pending:
            h.callbacks.append(barrier.one_done)
        return False, Wait(tuple(pending))

    def _op_compute(self, proc, op):
        me, now = proc.rank.id, self.engine.now
        start = max(now, self._compute_free.get(me, 0.0))
        # a straggler (SlowRank) takes its factor times as long for every span
        end = start + (op.seconds * self._slow[me] if me in self._slow else op.seconds)
        self._compute_free[me] = end
        # zero-length spans are recorded too: a schedule's op that costs nothing still ran
        self.trace.add_compute(me, start, end, op.label, op.meta)
        if end == now:
            return True, None
        self.engine.at(end, FINISH, lambda _: self._advance(proc, None))
        return False, None

    def _op_start(self, proc, op):
        me = proc.rank.id
        previous = self._comm_tail.get(me)
        gen = _after(previous, op.program) if previous is not None else op.program
        task = Process(gen, proc.rank, op.name)
        self.processes.append(task)
        self._comm_tail[me] = task.handle
        self._advance(task, None)
        return True, task.handle

    def _op_enter(self, proc, op):
        if op.call is None:
            if proc.collective is not None:
                self.completed[proc.rank.id] = proc.collective
            proc.collective = None
            return True, None
        self.entered[proc.rank.id] = (op.group, op.seq, op.call)
        calls = self.collective_calls.setdefault((op.group, op.seq), {})
        calls[proc.rank.id] = op.call
        first = next(iter(calls.values()))  # all match the first, or someone differs
        if not op.call.matches(first):
            lines = [f"  rank {r}: {c}" for r, c in sorted(calls.items())]
            raise CollectiveMismatchError(
                f"ranks of group {list(op.group)} entered different collectives at position "
                f"#{op.seq} of their sequence (like TORCH_DISTRIBUTED_DEBUG=DETAIL reports):\n"
                + "\n".join(lines)
            )
        proc.collective = (op.group, op.seq, op.call)
        return True, None

    # -- matching and transfers -----------------------------------------------------------

    def post_send(self, me, op):
        return self._post_send(me, op.dst, op.payload, op.tag, op.label, op.meta)

    def post_recv(self, me, op):
        if op.src is ANY or type(op.tag) in _PATTERNS or op.status:
            return self._post_wild_recv(me, op.src, op.tag, op.out, op.reduce, op.status)
        return self._post_recv(me, op.src, op.tag, op.out, op.reduce)

    def _post_send(self, me, dst, payload, tag, label, meta):
        key = (me, dst, tag)
        handle = Handle(("send to", dst, tag))
        waiting = self._recvs.get(key)
        if waiting:
            recv_handle, out, reduce = waiting.popleft()
            if not waiting:
                del self._recvs[key]  # tags are often unique: keep the mailbox small
            self._start_transfer(key, payload, handle, label, meta, recv_handle, out, reduce)
        elif self._wild and self._match_wild(key, payload, handle, label, meta):
            pass
        else:
            _enqueue(self._sends, key, (payload, handle, label, meta))
        return handle

    def _post_wild_recv(self, me, src, tag, out, reduce, status):
        """A receive from any source or of any tag (MPI's ANY_SOURCE, ANY_TAG), or one that
        wants its status: the first queued send to ``me`` that matches (per source in
        posting order; sources in the order their queues opened), else it waits."""
        handle = Handle(("recv from", "any" if src is ANY else src, tag), status)
        for key in list(self._sends):
            s, d, t = key
            if d == me and (src is ANY or s == src) and _tag_matches(tag, t):
                queue = self._sends[key]
                payload, send_handle, label, meta = queue.popleft()
                if not queue:
                    del self._sends[key]
                self._start_transfer(key, payload, send_handle, label, meta, handle, out, reduce)
                return handle
        self._wild.setdefault(me, []).append((src, tag, handle, out, reduce))
        return handle

    def _match_wild(self, key, payload, handle, label, meta):
        """Hand a send to the first waiting wildcard receive it matches; True if one did."""
        src, dst, tag = key
        waiting = self._wild.get(dst)
        for i, (want_src, want_tag, recv_handle, out, reduce) in enumerate(waiting or ()):
            if (want_src is ANY or want_src == src) and _tag_matches(want_tag, tag):
                del waiting[i]
                if not waiting:
                    del self._wild[dst]
                self._start_transfer(key, payload, handle, label, meta, recv_handle, out, reduce)
                return True
        return False

    def _post_recv(self, me, src, tag, out, reduce):
        key = (src, me, tag)
        handle = Handle(("recv from", src, tag))
        waiting = self._sends.get(key)
        if waiting:
            payload, send_handle, label, meta = waiting.popleft()
            if not waiting:
                del self._sends[key]
            self._start_transfer(key, payload, send_handle, label, meta, handle, out, reduce)
        else:
            _enqueue(self._recvs, key, (handle, out, reduce))
        return handle

    def _start_transfer(self, key, payload, send_handle, label, meta, recv_handle, out, reduce):
        # one tuple rather than a closure: a closure costs a cell per variable, and a
        # neighbour exchange on 1,024 ranks keeps thousands of these alive at once.  The
        # route is looked up here, once, for both the network and the trace record
        route = self.network.route(key[0], key[1])
        transfer = (key, payload, send_handle, label, meta, recv_handle, out, reduce,
                    self.engine.now, route[0])  # fmt: skip
        # a collective's step tag may name NCCL's wire protocol; its move may be one of a
        # group the switch combines (in-switch reduction): both are typed records the
        # layers above set, read here without importing them
        protocol = getattr(key[2], "protocol", None)
        combine = getattr(meta, "combine", None)
        if combine is not None:
            self._join_combined(transfer, route, combine, protocol)
            return
        nbytes = payload.nbytes
        if protocol is not None:
            route, nbytes = self._on_wire(route, nbytes, protocol)
        self.network.transfer_on(route, nbytes, self._delivered, transfer)

    def _on_wire(self, route, nbytes, protocol, efficiency=1.0):
        """``(route, wire bytes)`` of a message sent with ``protocol``: its latency for the
        slowest link class on the path joins the route's α, and the wire carries
        ``nbytes / efficiency`` (a link without a class adds no protocol latency)."""
        links, alpha, beta = route
        extra = self._protocol_latency.get((links, protocol))
        if extra is None:
            classes = [self.network.graph.edges[link].get("link_class") for link in links]
            extra = self._protocol_latency[(links, protocol)] = protocol.latency_for(
                slowest_class(classes)
            )
        return (links, alpha + extra, beta), nbytes / (protocol.efficiency * efficiency)

    def _join_combined(self, transfer, route, combine, protocol):
        """One move of a combined group (a switch reducing or multicasting): once all
        ``combine.members`` are matched, the group travels as ONE flow over the union of
        their routes, so the switch's shared leg carries the bytes once."""
        key = (transfer[0][2], combine)
        group = self._combining.setdefault(key, [])
        group.append(transfer)
        if len(group) < combine.members:
            return
        del self._combining[key]
        links = tuple(dict.fromkeys(link for t in group for link in t[9]))
        alpha = max(self.network.route(t[0][0], t[0][1])[1] for t in group)
        capacity = self.network.capacity
        beta = min((capacity[link] for link in links), default=float("inf"))
        nbytes = max(t[1].nbytes for t in group)
        union = (links, alpha, beta)
        if protocol is not None:
            union, nbytes = self._on_wire(union, nbytes, protocol, combine.efficiency)
        else:
            nbytes = nbytes / combine.efficiency
        self.network.transfer_on(union, nbytes, self._delivered_combined, group)

    def _delivered_combined(self, group):
        """A combined flow arrived: deliver every move, each recorded with the links only
        it used (the first with its whole route), so the trace's link bytes are the
        switch's, not K-1 copies of them."""
        claimed = set()
        for transfer in group:
            own = tuple(link for link in transfer[9] if link not in claimed)
            claimed.update(own)
            self._delivered(transfer[:9] + (own,))

    def _delivered(self, transfer):
        """The last byte arrived: hand the receiver its copy, record, complete both sides."""
        key, payload, send_handle, label, meta, recv_handle, out, reduce, start, links = transfer
        src, dst, tag = key
        if out is None:
            # a size-only payload is its own copy: skip the method call on the hot path
            value = payload if type(payload) is CountOnly else payload.copy()
        elif isinstance(payload, CountOnly):
            value = out
        else:
            _check_fits(out, payload, src, dst, tag)
            if reduce is None:
                np.copyto(out, payload)
            else:
                reduce(out, payload, out=out)
            value = out
        self.trace.add_transfer(src, dst, tag, payload.nbytes, start, self.engine.now, links, label,
                                meta)  # fmt: skip
        send_handle.complete(None)
        if recv_handle.status:  # the receive asked where it came from (MPI's Status)
            value = Received(value, src, tag, payload.nbytes)
        recv_handle.complete(value)

    # -- the guards -----------------------------------------------------------------------

    def charge(self, proc, messages):
        """Count ``messages`` an exchange or a schedule step posts against ``max_ops``."""
        left = self.ops_left = self.ops_left - messages
        if self._sample is not None:
            self._sample.counts.setdefault((proc.rank.id, proc.name), Counter())[
                "message sent in an exchange or a collective's step"
            ] += messages
        if left < 0:
            self._over_budget()

    def _over_budget(self):
        """``max_ops`` ran out: record the next SAMPLE_OPS operations, then stop."""
        if self._sample is not None:
            raise self._runaway(ended=False)
        self._sample = sample = OpSample(self.engine.now)
        self.ops_left += SAMPLE_OPS
        dispatch = self._dispatch  # changed in place: a running _advance holds it
        for kind, handler in list(dispatch.items()):
            dispatch[kind] = _recording(sample, handler)

    def _runaway(self, ended):
        return runaway_error("max_ops", self.cluster.max_ops, self.engine.now, self._sample,
                             ended=ended, default=default_max_ops(self.cluster.size))  # fmt: skip

    # -- faults ---------------------------------------------------------------------------

    def _install_faults(self, faults):
        """Degrade links and ranks now; take links down and crash ranks at their times
        (at t=0: before any program starts)."""
        network = self.network
        self._slow = {r.rank: r.factor for r in faults.slow_ranks}
        for record in faults.slow_links:
            network.scale_link(record.u, record.v, record.factor)
        if faults.fail_links or faults.crash_ranks:
            network.tracking = True
            network.relink = _relink
        timed = [(r.at, self._fail, r) for r in faults.fail_links]
        timed += [(r.at, self._crash, r) for r in faults.crash_ranks]
        for at, apply, record in timed:
            if at == 0:
                apply(record)
            else:  # START: flows that end at that instant still arrive, new ones see it
                self.engine.at(at, START, self._when_running, (apply, record))

    def _when_running(self, fault):
        """Apply a timed fault, unless every process has ended: then it changes nothing
        and must not move the clock, since the run ended at its last progress."""
        if all(p.handle.done for p in self.processes):
            self.engine.now = self.last_progress
            return
        apply, record = fault
        apply(record)

    def _fail(self, record):
        self.network.fail_link(record.u, record.v)

    def _crash(self, record):
        now, rank = self.engine.now, record.rank
        self._crashed[rank] = now
        self.network.crash_rank(rank)
        # its compute stream stops too: a span it was running ends now, queued ones never ran
        computes = self.trace.computes
        if any(c.rank == rank and c.end > now for c in computes):
            computes[:] = [c._replace(end=now) if c.rank == rank and c.end > now else c
                           for c in computes if not (c.rank == rank and c.start > now)]  # fmt: skip

    def run(self):
        """Run the engine until no event is left, then :meth:`finish`; a tripped guard
        raises a :class:`SimulationLimitError` naming the ranks still running."""
        try:
            self.engine.run()
        except SimulationLimitError as exc:
            if exc.guard not in ("max_time", "max_events"):
                raise  # max_ops: its report is complete
            default = {"max_time": DEFAULT_MAX_TIME, "max_events": DEFAULT_MAX_EVENTS}
            raise runaway_error(exc.guard, exc.limit, exc.time, processes=self.processes,
                                default=default[exc.guard]) from None  # fmt: skip
        self.finish()

    def release(self):
        """Drop the processes, mailboxes and handlers once the run is over (see
        ``Cluster.run``); the trace and the engine's clock stay."""
        self.processes = []
        self._sends, self._recvs, self._wild = {}, {}, {}
        self._combining = {}
        self._dispatch = {}
        self.network.relink = None
        self._comm_tail = {}
        self.collective_calls = {}
        self.collectives = None

    # -- the end of a run -----------------------------------------------------------------

    def finish(self):
        """Check that every rank ended and every message was received."""
        blocked = [p for p in self.processes if not p.handle.done]
        if blocked and self.faults:
            # as NCCL's watchdog: the run is stopped a timeout after its last progress
            self.engine.now = self.last_progress + self.faults.watchdog_timeout
            raise watchdog_report(self, blocked)
        if blocked:
            raise deadlock_report(blocked, self.engine.now, self.collective_calls)
        if self._sample is not None:  # it ended within the sample: still past the guard
            raise self._runaway(ended=True)
        unmatched = [(k, "send") for k, q in self._sends.items() if q]
        unmatched += [(k, "recv") for k, q in self._recvs.items() if q]
        unmatched += [((src, dst, tag), "recv") for dst, waiting in self._wild.items()
                      for src, tag, *_ in waiting]  # fmt: skip
        if unmatched:
            lines = []
            for (src, dst, tag), kind in unmatched:
                if kind == "send":
                    lines.append(f"rank {src} sent to rank {dst} with tag {tag!r}, "
                                 f"but rank {dst} never posted a matching recv")  # fmt: skip
                else:
                    lines.append(f"rank {dst} posted a recv from rank {src} with tag {tag!r}, "
                                 f"but rank {src} never sent it")  # fmt: skip
            raise CollsimError(
                "messages left unmatched when the run ended:\n  " + "\n  ".join(lines)
            )


class _StepRunner:
    """Runs a :class:`Steps` operation: posts one step's sends and receives, and when the
    last of them is done posts the next step straight from that completion, the way
    resuming the rank program would, but without the round trip through its generator
    and a fresh :class:`Exchange` per step (a sixth of a count-only collective's time).
    Resumes the process once every step is done."""

    __slots__ = ("execution", "proc", "steps", "left")

    def __init__(self, execution, proc, steps):
        self.execution, self.proc, self.steps, self.left = execution, proc, iter(steps), 0

    def post_next(self):
        """Post the next step that leaves something pending: ``(ready, value)`` as an
        operation handler returns it, ready once no step is left."""
        execution, proc = self.execution, self.proc
        me = proc.rank.id
        while True:
            try:
                step = next(self.steps, None)
            except Exception as exc:  # raised by the program's own step builder
                _attach_rank(exc, proc, execution.engine.now)
                raise
            if step is None:
                return True, None
            sends, recvs = step
            execution.charge(proc, len(sends))
            pending = []
            for dst, payload, tag, label, meta in sends:
                handle = execution._post_send(me, dst, payload, tag, label, meta)
                if not handle.done:
                    pending.append(handle)
            for src, tag, out, reduce in recvs:
                handle = execution._post_recv(me, src, tag, out, reduce)
                if not handle.done:
                    pending.append(handle)
            if pending:
                self.left = len(pending)
                one_done = self.one_done
                for handle in pending:
                    handle.callbacks.append(one_done)
                # what the deadlock report reads, as for a process blocked in an exchange
                proc.blocked_on = Wait(tuple(pending))
                return False, proc.blocked_on

    def one_done(self):
        self.left -= 1
        if self.left == 0:
            execution = self.execution
            if execution._crashed and self.proc.rank.id in execution._crashed:
                return  # a crashed rank posts no further step
            execution.last_progress = execution.engine.now
            ready, _ = self.post_next()
            if ready:
                self.execution._advance(self.proc, None)


class _Barrier:
    """Counts down the pending handles of one wait and resumes its process at zero."""

    __slots__ = ("execution", "proc", "left", "results", "single")

    def __init__(self, execution, proc, left, results, single):
        self.execution, self.proc, self.left = execution, proc, left
        self.results, self.single = results, single

    def one_done(self):
        self.left -= 1
        if self.left == 0:
            self.execution._advance(self.proc, _values(self.results, self.single))


def _recording(sample, handler):
    """``handler``, recording each operation in ``sample`` first."""

    def record(proc, op):
        sample.record(proc, op)
        return handler(proc, op)

    return record


def _relink(transfer, old, new):
    """A rerouted transfer's record: the path it ends on, ``new``, where it had ``old``, so
    the trace shows the detour's links carrying it (the bytes each path carried are the
    network's Reroute records, ``trace.faults.reroutes``)."""
    if not isinstance(transfer, tuple):
        return transfer  # a combined group: its flow is not rerouted (it stalls)
    return tuple(new if isinstance(x, tuple) and x == old else x for x in transfer)


def _enqueue(mailbox, key, entry):
    """Append ``entry`` to the queue of ``key``, creating the queue only when needed."""
    queue = mailbox.get(key)
    if queue is None:
        mailbox[key] = deque((entry,))
    else:
        queue.append(entry)


def _values(handles, single):
    """What a wait resumes with: the one handle's value, or a list of values."""
    return handles[0].value if single else [h.value for h in handles]


def _after(previous, program):
    """Start ``program`` once ``previous`` is done (tasks on one stream run in order)."""
    if not previous.done:
        yield Wait((previous,))
    return (yield from program)


def _check_fits(out, payload, src, dst, tag):
    if out.shape != payload.shape:
        raise ConfigError(
            f"rank {dst} received an array of shape {payload.shape} from rank {src} "
            f"(tag {tag!r}) into a buffer of shape {out.shape}"
        )
    # a collective's buffers share one dtype: skip numpy's cast table on that hot path
    if payload.dtype is not out.dtype and not np.can_cast(payload.dtype, out.dtype, "same_kind"):
        raise ConfigError(
            f"rank {dst} received a {payload.dtype} array from rank {src} (tag {tag!r}) "
            f"into a {out.dtype} buffer: numpy does not cast {payload.dtype} to "
            f"{out.dtype} in place; give recv(out=...) a {payload.dtype} array"
        )


def _attach_rank(exc, proc, now):
    if getattr(exc, "rank", None) is None:
        exc.rank = proc.rank.id
        exc.add_note(f"raised in rank {proc.rank.id} ({proc.name}) at t={now:.6g} s")


_PATTERNS = (type(ANY), TagPrefix)


def _tag_matches(want, tag):
    """Whether a receive's tag (a tag, ANY or a TagPrefix) takes a send's ``tag``."""
    return want.matches(tag) if type(want) in _PATTERNS else want == tag
