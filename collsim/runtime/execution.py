"""One run of rank programs: the processes, the operations they yield, the guards, the
faults, and the checks at the end (a deadlock report, unmatched messages).

Matching sends with receives and moving their data is :mod:`collsim.runtime.matching`'s;
what a blocked process waits on is :mod:`collsim.runtime.process`'s; the faults a run is
given act through :mod:`collsim.runtime.fault_injection`.
"""

from collections import Counter

from ..errors import CollectiveMismatchError, CollsimError, SimulationLimitError
from ..network import FINISH, Engine, Network
from ..network.trace import Trace
from . import unyielded
from .diagnosis import deadlock_report, watchdog_report
from .guards import (
    DEFAULT_MAX_EVENTS,
    DEFAULT_MAX_TIME,
    SAMPLE_OPS,
    OpSample,
    default_max_ops,
    runaway_error,
)
from .matching import Mailboxes
from .ops import ANY, Compute, Enter, Exchange, Handle, Recv, Send, Start, Steps, Wait
from .process import PATTERNS, Barrier, PostGroup, Process, after, attach_rank, values
from .waiting import Pending, unmatched_error

__all__ = ["Execution", "Process"]


class Execution:
    """State of one :meth:`Cluster.run`: engine, network, trace, processes, mailboxes."""

    def __init__(self, cluster, trace=None):
        self.cluster = cluster
        self.engine = Engine(cluster.max_time, cluster.max_events)
        self.network = Network(self.engine, cluster.topology, cluster.model)
        self.trace = Trace() if trace is None else trace  # the fast setting brings its own
        # what each rank holds, by category: rank.alloc makes it (runtime/memory.py) when used
        self.memory = None
        self.processes = []
        # the max_ops guard counts down here (see guards.py); past zero, the next
        # SAMPLE_OPS operations are recorded in _sample for the report
        self.ops_left = cluster.max_ops
        self._sample = None
        self.mail = Mailboxes(self.engine, self.network, self.trace)
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
        # the flight recorder: rank id -> the Enter operation (group, seq, call) of the
        # last collective it entered and the last it completed
        self.entered, self.completed = {}, {}
        # faults (runtime/faults.py): slow ranks' factors, crashed ranks' times, and the
        # last simulated time a process moved on, which the watchdog counts from
        self.faults = getattr(cluster, "faults", None)
        self._slow = {}
        self._crashed = {}
        self.last_progress = 0.0
        if self.faults:  # applied by runtime/fault_injection.py, loaded only for them
            from .fault_injection import install_faults

            install_faults(self, self.faults)
        # the collectives' per-run state (sequence numbers, tags, plans): a
        # collectives.context.CollectiveContext, made by the run's first collective (the
        # runtime does not import the collectives, which sit above it)
        self.collectives = None
        # the front ends' per-run state (collsim.mpi's settings and contexts,
        # collsim.distributed's process groups), each under its package's name: it hangs
        # off the run it serves and dies with it (no module-level table keyed by runs)
        self.front_ends = {}
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
        made = proc.rank._unyielded  # what its methods built and it has not yielded yet
        proc.waiting = None
        while True:
            try:
                op = gen.send(value)
            except StopIteration as stop:
                proc.ended = self.engine.now
                if made:  # raises if it forgot some, and no other process can yield them
                    unyielded.check_ended(proc, made, stop.value, self.processes, self.engine.now)
                proc.handle.complete(stop.value)
                return
            except Exception as exc:
                attach_rank(exc, proc, self.engine.now)
                raise
            if made:  # almost always just the operation yielded now
                if made[-1] is op:
                    made.pop()
                else:
                    unyielded.settle(made, op)
            # every operation counts, those that complete at once too: a loop of them
            # (compute(seconds=0), a wait on a done handle) never reaches the engine
            left = self.ops_left - 1
            self.ops_left = left
            if left < 0:
                self._over_budget()
            handler = dispatch.get(type(op))
            if handler is None:
                exc = unyielded.not_an_operation(proc.rank.id, op, made)
                attach_rank(exc, proc, self.engine.now)
                raise exc
            ready, value = handler(proc, op)
            if not ready:
                # what it waits on, when the handler says (a Wait on the pending handles, a
                # PostGroup) says best what a blocked rank waits for; else the operation
                proc.waiting = op if value is None else value
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
        sends = op.send_posts
        n = len(sends)
        if self._sample is None and self.ops_left >= n:
            self.ops_left -= n  # charge()'s rule when no guard is near and none samples
        else:
            self.charge(proc, n)
        group = proc.posts
        if group is None:
            group = proc.posts = PostGroup(self, proc)
        if group.post(sends, op.recv_posts, op.patterns, op.plain):
            return False, group
        return True, []  # nothing to post

    def _op_steps(self, proc, op):
        group = PostGroup(self, proc, iter(op.steps))
        if group.post_steps():
            return True, None
        return False, group

    def _when_all(self, proc, handles, results, single):
        """Resume ``proc`` once every handle is done, with the values of ``results``: a
        list of them, or the one value if ``single``."""
        pending = [h for h in handles if not h.done]
        if not pending:
            return True, values(results, single)
        barrier = Barrier(self, proc, len(pending), results, single)
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
        unyielded.forget_program(proc.rank._unyielded, op.program)  # it runs, if after others
        previous = self._comm_tail.get(me)
        gen = after(previous, op.program) if previous is not None else op.program
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
        self.entered[proc.rank.id] = op
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
        proc.collective = op  # the collective it is inside, as the deadlock report names it
        return True, None

    # -- posting sends and receives (matched in runtime/matching.py) ----------------------

    def post_send(self, me, op):
        """Post a :class:`Send` of rank ``me``; returns its handle."""
        return self._post_send(me, op.dst, op.payload, op.tag, op.label, op.meta)

    def post_recv(self, me, op):
        """Post a :class:`Recv` of rank ``me``; returns its handle."""
        src, tag = op.src, op.tag
        if src is ANY or type(tag) in PATTERNS or op.status:
            handle = Handle(("recv from", "any" if src is ANY else src, tag), op.status)
            self.mail.wild_recv(me, src, tag, op.out, op.reduce, handle, -1)
            return handle
        return self._post_recv(me, src, tag, op.out, op.reduce)

    def _post_send(self, me, dst, payload, tag, label, meta):
        handle = Handle(("send to", dst, tag))
        self.mail.send(me, dst, tag, payload, label, meta, handle, -1)
        return handle

    def _post_recv(self, me, src, tag, out, reduce):
        handle = Handle(("recv from", src, tag))
        self.mail.recv(src, me, tag, out, reduce, handle, -1)
        return handle

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
        return runaway_error(
            "max_ops",
            self.cluster.max_ops,
            self.engine.now,
            self._sample,
            ended=ended,
            default=default_max_ops(self.cluster.size),
            flags=self.cluster.guard_flags,
        )

    def run(self):
        """Run the engine until no event is left, then :meth:`finish`; a tripped guard
        raises a :class:`SimulationLimitError` naming the ranks still running."""
        try:
            self.engine.run()
        except SimulationLimitError as exc:
            if exc.guard not in ("max_time", "max_events"):
                raise  # max_ops: its report is complete
            default = {"max_time": DEFAULT_MAX_TIME, "max_events": DEFAULT_MAX_EVENTS}
            raise runaway_error(
                exc.guard,
                exc.limit,
                exc.time,
                processes=self.processes,
                default=default[exc.guard],
                flags=self.cluster.guard_flags,
            ) from None
        self.finish()

    def release(self):
        """Drop the processes, mailboxes and handlers once the run is over (see
        ``Cluster.run``); the trace and the engine's clock stay.  A run stopped midway leaves
        events, flows and waiting handles that refer back to it: dropped too (no cycle)."""
        events = self.engine.clear()
        stopped = bool(events) or any(not proc.handle.done for proc in self.processes)
        for proc in self.processes:
            proc.posts = proc.waiting = None  # cycles: a group names its process
            proc.handle.callbacks = []  # a stopped run's waits on a process
        self.processes = []
        self.mail.release(events, self.network.release(stopped))  # posts still in flight
        self._dispatch, self._comm_tail, self.collective_calls = {}, {}, {}
        self.collectives = self.running = None  # running: a cycle back through its rank

    # -- the end of a run -----------------------------------------------------------------

    def finish(self):
        """Check that every rank ended and every message was received."""
        blocked = [p for p in self.processes if not p.handle.done]
        daemons = all(getattr(p.source, "daemon", False) for p in blocked)  # Python ends them
        if blocked and not daemons and self.faults:  # NCCL's watchdog: stop after its timeout
            self.engine.now = self.last_progress + self.faults.watchdog_timeout
            raise watchdog_report(self, blocked)
        made = {}  # operations made and never yielded: looked for only when a rank holds any
        if any(p.rank._unyielded for p in self.processes):
            made = unyielded.forgotten_by_rank(self.processes)
        if blocked and not daemons:
            notes = unyielded.forgotten_lines(made)
            raise deadlock_report(
                blocked, self.engine.now, self.collective_calls, notes, self.processes, self.mail
            )
        if made:  # a rank whose background task outlived its program left them
            raise unyielded.first_unyielded_error(made, self.processes, self.engine.now)
        if self._sample is not None:  # it ended within the sample: still past the guard
            raise self._runaway(ended=True)
        unmatched = self.mail.unmatched()
        if unmatched:
            raise unmatched_error(Pending(unmatched))


def _recording(sample, handler):
    """``handler``, recording each operation in ``sample`` first."""

    def record(proc, op):
        sample.record(proc, op)
        return handler(proc, op)

    return record
