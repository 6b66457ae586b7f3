"""A rank's process and what it waits on while it is blocked.

A process is a generator run for one rank (its main program or a background task).  When
it yields an operation that cannot complete at once, it waits on:

* the engine (a compute span), a :class:`~collsim.runtime.ops.Handle` (a blocking send or
  receive) or a :class:`Barrier` over several handles (``rank.wait(h1, h2)``);
* a :class:`PostGroup`: the sends and receives of one ``rank.exchange``, or of the
  current step of a collective's :class:`~collsim.runtime.ops.Steps`, counted down as
  their transfers arrive, without a handle and a callback per message (an exchange is
  the path every rank program takes, and a count-only collective is little else).

Whatever it waits on, ``proc.blocked_on`` says it the one way the deadlock report and the
guards read: the operation, or a :class:`~collsim.runtime.ops.Wait` on a handle per
message not yet done.
"""

from .ops import ANY, Handle, Incoming, Outgoing, TagPrefix, Wait

__all__ = ["Process", "PostGroup", "Barrier", "after", "attach_rank", "PENDING", "PATTERNS"]

# a receive's source or tag that is a pattern, not a value: matched by a scan, not a key
PATTERNS = (type(ANY), TagPrefix)


class _Pending:
    """The state of a post whose transfer has not arrived yet."""

    __slots__ = ()

    def __repr__(self):
        return "PENDING"


PENDING = _Pending()


class Process:
    """A generator being run for one rank: its main program or a background task."""

    __slots__ = (
        "gen",
        "rank",
        "name",
        "waiting",
        "handle",
        "collective",
        "source",
        "posts",
        "ended",
    )

    def __init__(self, gen, rank, name):
        self.gen = gen
        self.rank = rank
        self.name = name
        # the operation it is blocked in, a Wait, or a PostGroup (see blocked_on)
        self.waiting = None
        self.handle = Handle(f"{name} of rank {rank.id}")
        self.collective = None  # the Enter (group, seq, call) of the collective it is inside
        # blocking rank code (runtime/blocking.py): its thread, whose `where` is the line of
        # the user's call the process is blocked in
        self.source = None
        # its exchanges' PostGroup, made at the first and re-armed for each: a process
        # waits in one exchange at a time, and every post of the last one has arrived
        self.posts = None
        self.ended = None  # the simulated second its generator returned, for the reports

    @property
    def blocked_on(self):
        """What the process is blocked in: the operation, or a :class:`Wait` on the handles
        still pending (an exchange's or a step's: one per message not yet arrived); None
        while it runs or once it ended."""
        waiting = self.waiting
        return waiting.as_wait() if type(waiting) is PostGroup else waiting

    @blocked_on.setter
    def blocked_on(self, op):
        self.waiting = op


class PostGroup:
    """The sends and receives one process posted together and waits on as one: a
    ``rank.exchange``, or (``steps`` given) a collective's steps, one after another.

    Each post's transfer carries the group and the post's index (its ``slot``); when it
    arrives, the mailbox sets ``state[slot]`` (the received value, or None for a send)
    and counts ``left`` down; at zero :meth:`all_done` resumes the process, or posts the
    next step.
    """

    __slots__ = ("execution", "proc", "steps", "sends", "recvs", "state", "left", "mail", "me")

    def __init__(self, execution, proc, steps=None):
        self.execution, self.proc, self.steps = execution, proc, steps
        self.mail, self.me = execution.mail, proc.rank.id  # read at every post
        self.sends, self.recvs = (), ()
        self.state = []  # per post, sends first: PENDING, then its value (None for a send)
        self.left = 0

    def post(self, sends, recvs, patterns, plain=False):
        """Post ``sends`` (:class:`~collsim.runtime.ops.Outgoing`) then ``recvs``
        (:class:`~collsim.runtime.ops.Incoming`) in order; returns how many are pending.
        ``patterns``: a receive may name ANY or a TagPrefix (an exchange's may; a
        schedule's never does).  ``plain``: an exchange's own checked entries, ``(dst,
        payload, tag)`` and ``(src, tag)`` as the program wrote them, with nothing else to
        post."""
        n = len(sends) + len(recvs)
        self.sends, self.recvs = sends, recvs
        self.state = [PENDING] * n
        self.left = n
        mail, me = self.mail, self.me
        send, recv = mail.send, mail.recv
        slot = 0
        if plain:
            for dst, payload, tag in sends:
                send(me, dst, tag, payload, "", None, self, slot)
                slot += 1
            for src, tag in recvs:
                recv(src, me, tag, None, None, self, slot)
                slot += 1
            return n
        for message in sends:
            send(
                me,
                message.dst,
                message.tag,
                message.payload,
                message.label,
                message.meta,
                self,
                slot,
            )
            slot += 1
        for message in recvs:
            src, tag = message.src, message.tag
            if patterns and (src is ANY or type(tag) in PATTERNS):
                mail.wild_recv(me, src, tag, message.out, message.reduce, self, slot)
            else:
                recv(src, me, tag, message.out, message.reduce, self, slot)
            slot += 1
        return n

    def post_steps(self):
        """Post the next step that leaves something pending; True once no step is left."""
        execution, proc = self.execution, self.proc
        steps = self.steps
        while True:
            try:
                step = next(steps, None)
            except Exception as exc:  # raised by the program's own step builder
                attach_rank(exc, proc, execution.engine.now)
                raise
            if step is None:
                return True
            sends = step.sends
            execution.charge(proc, len(sends))
            if self.post(sends, step.recvs, False):
                return False

    def all_done(self):
        """Every post arrived: resume the exchange's process with the received values, or
        post the next step straight from here, the way resuming the rank program would,
        but without the round trip through its generator (a sixth of a count-only
        collective's time); resume it once every step is done."""
        execution = self.execution
        if self.steps is None:
            received = self.state[len(self.sends) :]
            # hold no array between exchanges: the program has what it received
            self.sends = self.recvs = self.state = ()
            execution._advance(self.proc, received)
            return
        if execution._crashed and self.proc.rank.id in execution._crashed:
            return  # a crashed rank posts no further step
        execution.last_progress = execution.engine.now
        if self.post_steps():
            execution._advance(self.proc, None)

    def as_wait(self):
        """A :class:`Wait` on a handle per post still pending, as the deadlock report reads
        it (made only for a report)."""
        # a plain exchange's entries are the program's own (dst, payload, tag) and (src,
        # tag): read as the typed messages they stand for
        sends = [Outgoing(*post) for post in self.sends]
        recvs = [Incoming(*post) for post in self.recvs]
        whats = [("send to", m.dst, m.tag) for m in sends]
        whats += [("recv from", "any" if m.src is ANY else m.src, m.tag) for m in recvs]
        return Wait(
            tuple(Handle(what) for what, state in zip(whats, self.state) if state is PENDING)
        )


class Barrier:
    """Counts down the pending handles of one wait and resumes its process at zero, with
    the values of ``results``: a list of them, or the one value if ``single``."""

    __slots__ = ("execution", "proc", "left", "results", "single")

    def __init__(self, execution, proc, left, results, single):
        self.execution, self.proc, self.left = execution, proc, left
        self.results, self.single = results, single

    def one_done(self):
        self.left -= 1
        if self.left == 0:
            self.execution._advance(self.proc, values(self.results, self.single))


def values(handles, single):
    """What a wait resumes with: the one handle's value, or a list of values."""
    return handles[0].value if single else [h.value for h in handles]


def attach_rank(exc, proc, now):
    """Name the rank (and process, and time) an error was raised in, once."""
    if getattr(exc, "rank", None) is None:
        exc.rank = proc.rank.id
        exc.add_note(f"raised in rank {proc.rank.id} ({proc.name}) at t={now:.6g} s")


def after(previous, program):
    """Start ``program`` once ``previous`` is done (tasks on one stream run in order)."""
    if not previous.done:
        yield Wait((previous,))
    return (yield from program)
