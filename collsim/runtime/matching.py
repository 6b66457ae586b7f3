"""Rendezvous matching: the mailboxes where posted sends and receives wait for their match,
and the transfer that moves the data once both sides are posted.

Point-to-point is rendezvous, as NCCL's is: a transfer starts when both the send and the
matching receive are posted, and a blocking send completes when the data has arrived.
Messages match on (source, tag) in posting order.  The receiver gets a copy of the
array, never a shared reference; a receive with ``out=`` writes (or, with ``reduce=``,
reduces) straight into that array when the data arrives, which is how collectives avoid
a second copy.  As with MPI and NCCL, a sender must not change an array while its send
is in flight.

A message is one :class:`Transfer` from the moment its first side is posted: a send
waiting here is a Transfer with its send's fields set (``payload``, ``label``, ``meta``,
``sender``, ``send_slot``), a receive waiting here one with its receive's (``out``,
``reduce``, ``receiver``, ``recv_slot``).  ``sender`` and ``receiver`` are the
:class:`~collsim.runtime.ops.Handle` of a send or receive operation, or the
:class:`~collsim.runtime.process.PostGroup` of an exchange or a collective's step, whose
post number the slot is.  When the other side is posted it fills in its half and the
same object starts on the network as the message's flow.

A mailbox holds, per key, the one message waiting there, or a deque of them when more than
one waits (rare: tags are mostly unique), so a key costs no deque in the common case.
"""

from collections import deque
from typing import NamedTuple

import numpy as np

from ..errors import ConfigError
from ..hardware.protocols import slowest_class
from ..network.flow import Flow, Rescheduled
from .ops import ANY, CountOnly, Handle, Received
from .process import PATTERNS, PostGroup

__all__ = ["Mailboxes", "Transfer"]


class Mailboxes:
    """Posted sends and receives of one run, matched into transfers on ``network``, and
    recorded on ``trace`` when they arrive."""

    def __init__(self, engine, network, trace):
        self.engine, self.network, self.trace = engine, network, trace
        self.sends = {}  # (src, dst, tag) -> a posted send, or a deque of them
        self.recvs = {}  # (src, dst, tag) -> a posted receive, or a deque of them
        self.wild = {}  # dst -> [(src or ANY, tag or pattern, posted receive)]
        self.combining = {}  # (tag, Combine) -> the matched transfers of a combined group
        self.protocol_latency = {}  # (links, Protocol) -> seconds the protocol adds
        self.record = trace.store.add  # records one arrived transfer (Trace.add_transfer)

    def release(self, events=(), flows=()):
        """Drop what waits here once the run is over (their arrays, the groups).

        A run stopped midway (a deadlock, an error, a guard) leaves handles waiting on
        posts here and on the transfers still in flight (in the engine's ``events`` not
        run, and the network's ``flows``), whose callbacks (a process's resume, a
        barrier) refer back to the handle and the run: a cycle that only the collector
        would free, and the cluster with it.  Their callbacks are dropped."""
        for waiter in self._waiters(events, flows):
            if type(waiter) is Handle:
                waiter.callbacks = []
        self.sends, self.recvs, self.wild, self.combining = {}, {}, {}, {}
        self.record = None

    def _waiters(self, events, flows):
        """The handle or group of every post left here or in a transfer in flight."""
        for mailbox, side in ((self.sends, "sender"), (self.recvs, "receiver")):
            for waiting in mailbox.values():
                for message in (waiting,) if type(waiting) is Transfer else waiting:
                    yield getattr(message, side)
        for waiting in self.wild.values():
            for wild in waiting:
                yield wild.message.receiver
        # an event's argument is a flow, or a Rescheduled record naming it
        in_flight = [
            event.arg.flow if type(event.arg) is Rescheduled else event.arg for event in events
        ]
        in_flight += [t for group in self.combining.values() for t in group] + list(flows)
        for transfer in in_flight:
            if isinstance(transfer, Transfer):
                yield transfer.sender
                yield transfer.receiver

    # -- matching -------------------------------------------------------------------------

    def send(self, me, dst, tag, payload, label, meta, sender, slot):
        """Post a send from ``me``: start its transfer if its receive waits, else queue it."""
        key = (me, dst, tag)
        recvs = self.recvs
        message = recvs.get(key)
        if type(message) is Transfer:  # the one receive waiting there (tags are mostly unique)
            del recvs[key]
        elif message is not None:
            message = _first_queued(recvs, key, message)
        elif self.wild:
            message = self._match_wild(key)
        if message is None:
            message = Transfer(self)
        message.payload, message.label, message.meta = payload, label, meta
        message.sender, message.send_slot = sender, slot
        if message.receiver is not None:
            self._start_transfer(key, message)
        elif self.sends.setdefault(key, message) is not message:
            _queue_behind(self.sends, key, message)

    def recv(self, src, me, tag, out, reduce, receiver, slot):
        """Post a receive by ``me`` from ``src``: start the transfer if its send waits."""
        key = (src, me, tag)
        sends = self.sends
        message = sends.get(key)
        if message is None:
            message = Transfer(self)
        elif type(message) is Transfer:  # the one send waiting there
            del sends[key]
        else:
            message = _first_queued(sends, key, message)
        message.out, message.reduce = out, reduce
        message.receiver, message.recv_slot = receiver, slot
        if message.sender is not None:
            self._start_transfer(key, message)
        elif self.recvs.setdefault(key, message) is not message:
            _queue_behind(self.recvs, key, message)

    def wild_recv(self, me, src, tag, out, reduce, receiver, slot):
        """A receive from any source or of any tag (MPI's ANY_SOURCE, ANY_TAG), or one that
        wants its status: the first queued send to ``me`` that matches (per source in
        posting order; sources in the order their queues opened), else it waits."""
        for s, d, t in list(self.sends):
            if d == me and (src is ANY or s == src) and _tag_matches(tag, t):
                self.recv(s, me, t, out, reduce, receiver, slot)  # the first waiting there
                return
        message = Transfer(self)
        message.out, message.reduce = out, reduce
        message.receiver, message.recv_slot = receiver, slot
        self.wild.setdefault(me, []).append(WildReceive(src, tag, message))

    def _match_wild(self, key):
        """The first waiting wildcard receive a send with ``key`` matches, or None."""
        src, dst, tag = key
        waiting = self.wild.get(dst)
        for i, wild in enumerate(waiting or ()):
            if (wild.src is ANY or wild.src == src) and _tag_matches(wild.tag, tag):
                del waiting[i]
                if not waiting:
                    del self.wild[dst]
                return wild.message
        return None

    def unmatched(self):
        """``((src, dst, tag), "send" or "recv")`` of every post left waiting, in the order
        their mailboxes opened (sends, receives, then wildcard receives)."""
        left = [(key, "send") for key in self.sends]
        left += [(key, "recv") for key in self.recvs]
        left += [
            ((wild.src, dst, wild.tag), "recv")
            for dst, waiting in self.wild.items()
            for wild in waiting
        ]
        return left

    # -- transfers ------------------------------------------------------------------------

    def _start_transfer(self, key, transfer):
        """Both sides of ``transfer`` are posted: it becomes a flow on its route."""
        # the route is looked up here, once, for both the network and the trace record
        src, dst, tag = key
        network = self.network
        table = network.routes_from.get(src)
        route = table.get(dst) if table is not None else None
        if route is None:
            route = network.route(src, dst)
        transfer.depart(key, route, self.engine.now)
        # a collective's step tag may name NCCL's wire protocol; its move may be one of a
        # group the switch combines (in-switch reduction): both are typed records the
        # layers above set, read here without importing them (a plain int tag has neither)
        protocol = None if type(tag) is int else getattr(tag, "protocol", None)
        meta = transfer.meta
        if meta is not None:
            combine = getattr(meta, "combine", None)
            if combine is not None:
                self._join_combined(transfer, combine, protocol)
                return
        if protocol is not None:  # the wire carries more bytes, after more latency
            route, wire = self._on_wire(route, transfer.nbytes, protocol)
            transfer.nbytes, transfer.remaining = wire, float(wire)
        network.start(transfer, route.alpha)

    def _on_wire(self, route, nbytes, protocol, efficiency=1.0):
        """``(route, wire bytes)`` of a message sent with ``protocol``: its latency for the
        slowest link class on the path joins the route's α, and the wire carries
        ``nbytes / efficiency`` (a link without a class adds no protocol latency)."""
        links = route.links
        extra = self.protocol_latency.get((links, protocol))
        if extra is None:
            classes = [self.network.graph.edges[link].get("link_class") for link in links]
            extra = self.protocol_latency[(links, protocol)] = protocol.latency_for(
                slowest_class(classes)
            )
        wire = nbytes / (protocol.efficiency * efficiency)
        return route._replace(alpha=route.alpha + extra), wire

    def _join_combined(self, transfer, combine, protocol):
        """One move of a combined group (a switch reducing or multicasting): once all
        ``combine.members`` are matched, the group travels as ONE flow over the union of
        their routes, so the switch's shared leg carries the bytes once (the members'
        own flows never start)."""
        key = (transfer.tag, combine)
        group = self.combining.setdefault(key, [])
        group.append(transfer)
        if len(group) < combine.members:
            return
        del self.combining[key]
        network = self.network
        links = tuple(dict.fromkeys(link for t in group for link in t.links))
        alpha = max(network.route(t.src, t.dst).alpha for t in group)
        capacity = network.capacity
        beta = min((capacity[link] for link in links), default=float("inf"))
        nbytes = max(t.payload.nbytes for t in group)
        union = network.path(links, alpha, beta)
        if protocol is not None:
            union, nbytes = self._on_wire(union, nbytes, protocol, combine.efficiency)
        else:
            nbytes = nbytes / combine.efficiency
        network.transfer_on(union, nbytes, _delivered_combined, group)


class WildReceive(NamedTuple):
    """A receive waiting for any source or any tag of a pattern (matched by a scan)."""

    src: object  # a rank, or ANY
    tag: object  # a tag, ANY or a TagPrefix
    message: "Transfer"  # the message its receive half waits in


class Transfer(Flow):
    """A message, from the moment its first side is posted: the send's fields and the
    receive's, each set by its own post, and once both are set the flow that carries it
    (:class:`~collsim.network.flows.Flow`'s fields).  Its arrival hands the receiver its
    copy, records it, and counts both posts down, reading this one object.  A move of a
    switch-combined group is one too, delivered when the group's one flow arrives, with
    the links only it used."""

    __slots__ = (
        "mail",
        "src",
        "dst",
        "tag",
        "start",
        "payload",
        "label",
        "meta",
        "sender",
        "send_slot",
        "out",
        "reduce",
        "receiver",
        "recv_slot",
    )

    def __init__(self, mail):
        self.mail = mail
        self.sender = self.receiver = None  # each set when its side is posted

    def depart(self, key, route, now):
        """Both sides are posted: become the flow of ``route`` from ``now``."""
        # Flow.__init__'s fields, set here without its call (one per message): a test
        # checks that every field of a Flow is set on a Transfer too
        links, shares = route.links, route.shares
        nbytes = self.payload.nbytes
        self.links = links
        if len(shares) == 1:  # Flow.on_shares's rule, without a second call per message
            self.share, self.shares = shares[0], None
        else:
            self.share, self.shares = None, shares
        self.beta = route.beta
        self.nbytes = nbytes
        self.remaining = float(nbytes)
        self.rate = 0.0
        self.last = 0.0
        self.version = 0
        self.on_done = self.arg = None  # arrived() is the message's own
        self.legs = None
        self.src, self.dst, self.tag = key
        self.start = now

    def arrived(self):
        """The last byte arrived: hand the receiver its copy, record, complete both sides
        (the sender's first: its process may resume and post before the receiver's)."""
        payload, out = self.payload, self.out
        if out is None:
            # a size-only payload carries no data, so the receiver may share it
            value = payload if type(payload) is CountOnly else payload.copy()
        elif isinstance(payload, CountOnly):
            value = out
        else:
            _check_fits(out, payload, self.src, self.dst, self.tag)
            if self.reduce is None:
                np.copyto(out, payload)
            else:
                self.reduce(out, payload, out=out)
            value = out
        mail = self.mail
        # the path it ends on: its route's, or its detour's once rerouted (the bytes each
        # path carried are the network's Reroute records, trace.faults.reroutes)
        mail.record(
            src=self.src,
            dst=self.dst,
            tag=self.tag,
            nbytes=payload.nbytes,
            start=self.start,
            end=mail.engine.now,
            links=self.links,
            label=self.label,
            meta=self.meta,
        )
        # each side's post is done: a group (an exchange or a collective's step) counts
        # it down and moves on when none is left; a single operation's handle completes
        sender, receiver = self.sender, self.receiver
        if self.src == self.dst and type(receiver) is not PostGroup:  # see Handle.settle
            found = Received(value, self.src, self.tag, payload.nbytes)
            receiver = receiver.settle(found if receiver.status else value)
        if type(sender) is PostGroup:
            sender.state[self.send_slot] = None
            left = sender.left = sender.left - 1
            if not left:
                sender.all_done()
        else:
            sender.complete(None)
        if type(receiver) is PostGroup:
            receiver.state[self.recv_slot] = value
            left = receiver.left = receiver.left - 1
            if not left:
                receiver.all_done()
        else:
            if receiver.status:  # the receive asked where it came from (MPI's Status)
                value = Received(value, self.src, self.tag, payload.nbytes)
            receiver.complete(value)


def _first_queued(mailbox, key, queue):
    """Take the first of the messages queued at ``key`` (more than one waited there)."""
    message = queue.popleft()
    if not queue:
        del mailbox[key]
    return message


def _queue_behind(mailbox, key, message):
    """Queue ``message`` behind those waiting at ``key`` (a deque from the second one on,
    so that a key with one message, the common case, costs no deque)."""
    waiting = mailbox[key]
    if type(waiting) is Transfer:
        mailbox[key] = deque((waiting, message))
    else:
        waiting.append(message)


def _delivered_combined(group):
    """A combined flow arrived: deliver every move, each recorded with the links only
    it used (the first with its whole route), so the trace's link bytes are the
    switch's, not K-1 copies of them."""
    claimed = set()
    for transfer in group:
        own = tuple(link for link in transfer.links if link not in claimed)
        claimed.update(own)
        transfer.links = own
        transfer.arrived()


def _check_fits(out, payload, src, dst, tag):
    if out.shape != payload.shape:
        raise ConfigError(
            f"rank {dst} received an array of shape {payload.shape} from rank {src} "
            f"(tag {tag!r}) into a buffer of shape {out.shape}"
        )
    # the same dtype always casts; only a mixed pair needs numpy's casting rule
    if payload.dtype is not out.dtype and not np.can_cast(payload.dtype, out.dtype, "same_kind"):
        raise ConfigError(
            f"rank {dst} received a {payload.dtype} array from rank {src} (tag {tag!r}) "
            f"into a {out.dtype} buffer: numpy does not cast {payload.dtype} to "
            f"{out.dtype} in place; give recv(out=...) a {payload.dtype} array"
        )


def _tag_matches(want, tag):
    """Whether a receive's tag (a tag, ANY or a TagPrefix) takes a send's ``tag``."""
    return want.matches(tag) if type(want) in PATTERNS else want == tag
