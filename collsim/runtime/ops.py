"""The operations a rank program yields, the handles they return, and size-only payloads.

A rank program is a generator: it ``yield``\\ s one of these operations and is resumed
by the engine when the operation completes in simulated time (blocking operations) or
at once with a :class:`Handle` (the ``i``-operations and :class:`Start`).  Users build
them through :class:`collsim.runtime.rank.Rank`'s methods, never directly.
"""

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..errors import ConfigError

__all__ = [
    "CountOnly",
    "Handle",
    "Send",
    "Recv",
    "Wait",
    "Compute",
    "Exchange",
    "Start",
    "ANY",
    "TagPrefix",
    "Received",
    "Outgoing",
    "Incoming",
]


class _Any:
    """A receive's source or tag that matches anything (MPI's ANY_SOURCE and ANY_TAG)."""

    __slots__ = ()

    def matches(self, tag):
        return True

    def __repr__(self):
        return "ANY"


ANY = _Any()


@dataclass(frozen=True)
class TagPrefix:
    """A receive's tag that matches every tuple tag starting with ``prefix``: an MPI
    communicator's ANY_TAG, whose tags are ``(comm_id, user_tag)``.

    >>> TagPrefix((3,)).matches((3, 7)), TagPrefix((3,)).matches((4, 7))
    (True, False)
    """

    prefix: tuple

    def matches(self, tag):
        n = len(self.prefix)
        return isinstance(tag, tuple) and tag[:n] == self.prefix

    def __repr__(self):
        # what a deadlock report prints for an MPI communicator's ANY_TAG receive
        return f"any tag {self.prefix + ('*',)!r}".replace("'*'", "*")


@dataclass(frozen=True)
class Received:
    """What a receive with ``status=True`` resumes with: the value, and where it came from
    (MPI's Status: source, tag, and the bytes that arrived)."""

    value: object
    src: int
    tag: object
    nbytes: int


@dataclass(frozen=True)
class CountOnly:
    """A payload with a size and no data, for count-only runs too big to hold in memory.

    >>> CountOnly(1 << 30).nbytes
    1073741824
    """

    nbytes: int

    def __post_init__(self):
        n = self.nbytes
        if isinstance(n, bool | np.bool_) or not isinstance(n, int | np.integer) or n < 0:
            raise ConfigError(f"CountOnly({n!r}): a size is a whole number of bytes >= 0")

    def copy(self):
        return self


def is_payload(obj):
    return isinstance(obj, np.ndarray | CountOnly)


class Handle:
    """Completion of a non-blocking operation; ``yield rank.wait(handle)`` gives its value."""

    __slots__ = ("done", "value", "callbacks", "what", "status")

    def __init__(self, what, status=False):
        self.done = False
        self.value = None
        self.callbacks = []
        self.what = what  # how the deadlock report names it: a string or (verb, peer, tag)
        self.status = status  # a receive's: complete with a Received record, not the value

    def complete(self, value=None):
        self.done = True
        self.value = value
        callbacks, self.callbacks = self.callbacks, []
        for callback in callbacks:
            callback()

    def settle(self, value):
        """Complete now with ``value``; the handle returned runs the callbacks when it
        completes.  A message to oneself settles its receive before the sender resumes
        (MPI's order: ``Testsome`` right after an ``ssend`` to self finds it)."""
        later = Handle(self.what)
        later.callbacks, self.callbacks = self.callbacks, []
        self.complete(value)
        return later

    def describe(self):
        """``'recv from rank 3 tag 0'``: formatted only when a report needs it."""
        if isinstance(self.what, tuple):
            verb, peer, tag = self.what
            return f"{verb} rank {peer} tag {tag!r}"
        return str(self.what)

    def __repr__(self):
        return f"<Handle {self.describe()} {'done' if self.done else 'pending'}>"


@dataclass
class Send:
    dst: int
    payload: object
    tag: object = 0
    blocking: bool = True
    label: str = ""  # for display only
    meta: object = None  # what the transfer belongs to (a typed record), kept on the trace


@dataclass
class Recv:
    src: int
    tag: object = 0
    out: object = None  # receive into this array instead of a fresh copy
    reduce: object = None  # a numpy ufunc: out = reduce(out, data)
    blocking: bool = True
    status: bool = False  # resume with a Received (value, src, tag, nbytes)


@dataclass
class Wait:
    handles: tuple


@dataclass
class Compute:
    seconds: float
    label: str = "compute"  # for display only
    meta: object = None  # what the span belongs to (a typed record), kept on the trace


class Outgoing(NamedTuple):
    """One message a rank sends in an exchange or a collective's step.

    >>> Outgoing(1, CountOnly(8), 7).dst
    1
    """

    dst: int  # the receiving rank
    payload: object  # the array sent (or a CountOnly size)
    tag: object
    label: str = ""  # for display only
    meta: object = None  # what the transfer belongs to (a typed record), kept on the trace


class Incoming(NamedTuple):
    """One message a rank receives in an exchange or a collective's step.

    >>> Incoming(0, 7).out is None
    True
    """

    src: int  # the sending rank (or ANY)
    tag: object
    out: object = None  # the array the data lands in, or None for a fresh copy
    reduce: object = None  # a ufunc that combines the data into ``out``, or None to copy


class Exchange:
    """Post several sends and receives at once and resume when all are done (like NCCL's
    group calls or ``torch.distributed.batch_isend_irecv``); resumes with the received
    values in the order of the receives.

    :meth:`Rank.exchange <collsim.runtime.rank.Rank.exchange>` builds it from checked
    entries, as a :class:`Steps` step holds them (``posts``): :class:`Outgoing` sends and
    :class:`Incoming` receives.
    ``sends`` and ``recvs`` give them as :class:`Send` and :class:`Recv` operations, for
    the reports that name them.
    """

    __slots__ = ("send_posts", "recv_posts", "patterns", "plain")

    def __init__(self, send_posts, recv_posts, patterns=True, plain=False):
        # [Outgoing] and [Incoming]; ``plain``: the
        # program's own entries, [(dst, payload, tag)] and [(src, tag)], every one checked
        # (no label, record, out or reduce), posted as they are
        self.send_posts = send_posts
        self.recv_posts = recv_posts
        # False: no receive names ANY or a TagPrefix, so each is matched by its key
        self.patterns = patterns
        self.plain = plain

    @property
    def sends(self):
        if self.plain:
            return [
                Send(dst, payload, tag, False, "", None) for dst, payload, tag in self.send_posts
            ]
        return [Send(m.dst, m.payload, m.tag, False, m.label, m.meta) for m in self.send_posts]

    @property
    def recvs(self):
        if self.plain:
            return [Recv(src, tag, None, None, False) for src, tag in self.recv_posts]
        return [Recv(m.src, m.tag, m.out, m.reduce, False) for m in self.recv_posts]

    def __repr__(self):
        return f"Exchange(sends={self.sends!r}, recvs={self.recvs!r})"


@dataclass
class Steps:
    """Post a sequence of exchanges, each as soon as every transfer of the one before it
    is done, and resume once the last is done: a collective's schedule, which runs back
    to back as a NCCL kernel runs all its steps without returning to the host.

    ``steps`` yields a :class:`Step` per step, its ``sends`` of :class:`Outgoing` and
    ``recvs`` of :class:`Incoming`, with the meanings of
    :class:`Send` and :class:`Recv`; a deadlock report shows the transfers of the step
    the process waits in, as for :class:`Exchange`."""

    steps: object  # iterable of Step


class Step(NamedTuple):
    """One step of a :class:`Steps` operation: the messages a rank posts together."""

    sends: list  # of Outgoing
    recvs: list  # of Incoming


@dataclass
class Start:
    """Run ``program`` in the background on the rank's communication stream."""

    program: object
    name: str = "background"


@dataclass
class Enter:
    """Mark that this process enters (``call`` set) or leaves (``call=None``) a
    collective; the execution checks that every rank of the group made the same call at
    the same position, and names the collective in a deadlock report."""

    group: tuple
    seq: int
    call: object  # a CollectiveCall, or None when leaving
