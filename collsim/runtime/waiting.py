"""What a blocked rank waits for, in a report's words, and what explains it.

A blocked process waits in one operation, or on several messages at once (a wait, an
exchange, a collective's step).  The reports say it the one way: the operation, or the
messages grouped by peer, a collective's as its call and steps (``send to rank 1:
all_reduce call #3, steps 1–7``), however many channels and steps are pending.

What the mailboxes still hold says why nothing moves: a message sent with another tag
than the one awaited (:class:`TagMismatch`), and a peer whose program already ended
(:class:`FinishedRank`).

Examples
--------
>>> import numpy as np, collsim
>>> def program(rank):
...     if rank.id == 0:
...         yield rank.send(1, np.ones(2), tag=1)
...     else:
...         yield rank.recv(0, tag=0)
>>> try:
...     collsim.Cluster(collsim.topology.ring(2)).run(program)
... except collsim.DeadlockError as hang:
...     print(hang.waiting[1])
['recv from rank 0 (tag 0): rank 0 sent tag 1 to rank 1, which waits for tag 0']
"""

from dataclasses import dataclass

from ..errors import UnmatchedMessage, UnmatchedMessagesError, shorten
from ..units import format_time
from .ops import ANY, Exchange, Recv, Send, Wait
from .process import PATTERNS

__all__ = [
    "programs_running",
    "tag_text",
    "TagMismatch",
    "Pending",
    "FinishedRank",
    "finished_ranks",
    "describe",
    "waited_items",
    "group_messages",
    "unmatched_error",
]


def tag_text(tag):
    """How a report names a message tag: ``tag 1``; a typed tag by its own repr.

    >>> tag_text(1), tag_text("grad"), tag_text((3, 7))
    ('tag 1', "tag 'grad'", 'tag (3, 7)')
    """
    plain = type(tag) in (int, str, tuple)
    return f"tag {shorten(tag, 80)}" if plain else shorten(tag, 80)


def _step_of(tag):
    """``(collective, call, step number)`` of a collective step's tag, else None.  Read
    from the tag's fields (the collectives, above the runtime, define the record)."""
    collective = getattr(tag, "collective", None)
    number = getattr(tag, "number", None)
    if not isinstance(collective, str) or not isinstance(number, int):
        return None
    dim = getattr(tag, "dim", None)
    return (collective if dim is None else f"{collective} ({dim})"), tag.call, number


@dataclass(frozen=True)
class TagMismatch:
    """A message ``src`` sent to ``dst`` with tag ``sent`` that waits unmatched, while
    ``dst`` waits for ``awaited`` from it: neither will ever match."""

    src: int
    dst: int
    sent: object
    awaited: object

    def __str__(self):
        return (
            f"rank {self.src} sent {tag_text(self.sent)} to rank {self.dst}, which waits "
            f"for {tag_text(self.awaited)}"
        )


class Pending:
    """The posts the mailboxes hold (:meth:`Mailboxes.unmatched`): sends and receives that
    found no match, read by the reports."""

    def __init__(self, unmatched):
        self.unmatched = list(unmatched)  # [((src, dst, tag), "send" | "recv")]
        self.sends = [key for key, kind in self.unmatched if kind == "send"]
        self.recvs = [key for key, kind in self.unmatched if kind == "recv"]
        self.named = set()  # the mismatches a report line has named (describe adds them)

    def sent_instead(self, src, dst, awaited):
        """The mismatches of a receive by ``dst`` from ``src`` waiting for ``awaited``."""
        return [
            TagMismatch(s, d, t, awaited)
            for s, d, t in self.sends
            if d == dst and (src is ANY or s == src) and not _matches(awaited, t)
        ]

    def awaited_instead(self, src, dst, sent):
        """The mismatches of a send from ``src`` to ``dst`` with tag ``sent``."""
        return [
            TagMismatch(src, d, sent, t)
            for s, d, t in self.recvs
            if d == dst and (s is ANY or s == src) and not _matches(t, sent)
        ]

    def mismatches(self):
        """Every pending send whose receiver waits for it with another tag."""
        found = []
        for src, dst, tag in self.sends:
            found += self.awaited_instead(src, dst, tag)
        return found


def _matches(want, tag):
    return want.matches(tag) if type(want) in PATTERNS else want == tag


@dataclass(frozen=True)
class FinishedRank:
    """A rank whose every process ended: at ``time``; ``where`` its last blocking call
    (a script run by ``collsim exec``), or None; ``program`` the rank program's name."""

    rank: int
    time: float
    where: str = None
    program: str = None

    def how(self):
        """``finished at t=0 s after its last call at ring.py:9 in main``."""
        if self.where is not None:
            how = f"after its last call at {self.where}"
        elif self.program is not None:
            how = f"when its program {self.program} returned"
        else:
            how = "without making a call"
        return f"finished at t={format_time(self.time)} {how}"

    def __str__(self):
        return f"rank {self.rank} {self.how()}"


def programs_running(processes, rank_id):
    """How many of ``processes`` (a run's) of rank ``rank_id`` are still running: a rank with
    none posts no more messages, so a probe for one it never sent would wait for ever; None
    before its first has started (the run starts them one by one)."""
    programs = [p for p in processes if p.rank.id == rank_id]
    return sum(not p.handle.done for p in programs) if programs else None


def finished_ranks(processes):
    """``{rank: FinishedRank}`` of the ranks none of whose processes is still running."""
    running = {p.rank.id for p in processes if not p.handle.done}
    finished = {}
    for proc in processes:
        r = proc.rank.id
        if r in running or proc.name != "main":
            continue
        source = proc.source
        if source is not None:  # blocking code: the thread's last call, if it made one
            finished[r] = FinishedRank(r, proc.ended, getattr(source, "where", None))
        else:
            code = proc.gen.gi_code
            finished[r] = FinishedRank(r, proc.ended, program=f"{code.co_name}()")
    return finished


def describe(op, me=None, pending=None, finished=None):
    """How a report says what a process of rank ``me`` waits for in ``op``; ``pending``
    (:class:`Pending`) and ``finished`` (:func:`finished_ranks`) say why, where given."""
    if isinstance(op, Send):
        head = f"send to rank {op.dst} ({tag_text(op.tag)}): "
        wrong = pending.awaited_instead(me, op.dst, op.tag) if pending else []
        if wrong:
            m = wrong[0]
            pending.named.add(m)
            return head + (
                f"rank {m.dst} waits for {tag_text(m.awaited)} from rank {me}, "
                f"which sent {tag_text(op.tag)}"
            )
        return head + _never(op.dst, "never posted the recv", finished)
    if isinstance(op, Recv):
        head = f"recv from rank {op.src} ({tag_text(op.tag)}): "
        wrong = pending.sent_instead(op.src, me, op.tag) if pending else []
        if wrong:
            pending.named.add(wrong[0])
            return head + str(wrong[0])
        return head + _never(op.src, "never sent it", finished)
    if isinstance(op, Wait | Exchange):
        return "wait" if isinstance(op, Wait) else "exchange"
    return type(op).__name__.lower()


def _never(peer, what, finished):
    done = (finished or {}).get(peer)
    return f"rank {peer} {what}" + (f": it {done.how()}" if done else "")


def waited_items(proc, pending=None, finished=None):
    """What a blocked process waits for, as report items: its operation, or the messages
    it waits on grouped by peer (:func:`group_messages`); ``[]`` if it never started."""
    op = proc.blocked_on
    if op is None:
        return []
    if isinstance(op, Wait):
        return group_messages(h.what for h in op.handles if not h.done)
    return [describe(op, proc.rank.id, pending, finished)]


def group_messages(whats):
    """Pending messages ``(verb, peer, tag)`` (a handle's ``what``), one item per peer and
    collective call with its steps as ranges, or per peer and tag, counted.

    >>> from collections import namedtuple
    >>> Step = namedtuple("Step", "collective call number dim")
    >>> group_messages([("send to", 1, Step("all_reduce", 3, s, None)) for s in range(1, 8)]
    ...                + [("recv from", 2, 0), ("recv from", 2, 0)])
    ['send to rank 1: all_reduce call #3, steps 1–7', 'recv from rank 2 tag 0 (x2)']
    """
    groups = {}  # (verb, peer, call or tag) -> [step numbers or None], in first-seen order
    for what in whats:
        if not isinstance(what, tuple):
            groups.setdefault((str(what), None, None), []).append(None)
            continue
        verb, peer, tag = what
        step = _step_of(tag)
        key = (verb, peer, step[:2] if step else ("tag", tag))
        groups.setdefault(key, []).append(step[2] if step else None)
    items = []
    for (verb, peer, about), steps in groups.items():
        if peer is None:
            text = verb
        elif about[0] == "tag":
            text = f"{verb} rank {peer} {tag_text(about[1])}"
        else:
            numbers = sorted(set(steps))
            text = (
                f"{verb} rank {peer}: {about[0]} call #{about[1]}, "
                f"step{'s' if len(numbers) > 1 else ''} {_ranges(numbers)}"
            )
            steps = steps if len(steps) > len(numbers) else [None]
        items.append(text if len(steps) == 1 else f"{text} (x{len(steps)})")
    return items


def _ranges(numbers):
    """``[1, 2, 3, 5]`` -> ``'1–3, 5'``."""
    runs, start = [], numbers[0]
    for a, b in zip(numbers, numbers[1:] + [None]):
        if b != a + 1:
            runs.append(f"{start}" if start == a else f"{start}–{a}")
            start = b
    return ", ".join(runs)


def unmatched_error(pending):
    """The error of a run that ended with messages no receive took, or receives no
    message reached: a tag mismatch is named as one line, both of its ends."""
    lines, paired = [], set()
    for m in pending.mismatches():
        lines.append(str(m))
        paired.add((m.src, m.dst, m.sent, "send"))
        paired.update({(m.src, m.dst, m.awaited, "recv"), (ANY, m.dst, m.awaited, "recv")})
    for (src, dst, tag), kind in pending.unmatched:
        if (src, dst, tag, kind) in paired:
            continue
        if kind == "send":
            lines.append(
                f"rank {src} sent to rank {dst} with {tag_text(tag)}, "
                f"but rank {dst} never posted a matching recv"
            )
        else:
            lines.append(
                f"rank {dst} posted a recv from rank {src} with {tag_text(tag)}, "
                f"but rank {src} never sent it"
            )
    messages = [UnmatchedMessage(kind, *key) for key, kind in pending.unmatched]
    return UnmatchedMessagesError(lines, messages)
