"""The errors collsim raises.

Every error names the bad value, the rule it broke and, where there is one, the
nearest valid choice, so that a student can fix the input without reading code.

Examples
--------
>>> from collsim.errors import CollsimError, DeadlockError
>>> issubclass(DeadlockError, CollsimError)
True
"""

from typing import NamedTuple

__all__ = [
    "CollsimError",
    "DeadlockError",
    "WatchdogTimeout",
    "ConfigError",
    "CollectiveMismatchError",
    "SimulationLimitError",
    "UnyieldedOperationError",
    "nearest_first",
    "check_choice",
    "UnmatchedMessage",
    "UnmatchedMessagesError",
]


class CollsimError(Exception):
    """Base class of every error collsim raises on purpose."""


class ConfigError(CollsimError, ValueError):
    """An input broke a rule: a bad size string, a non-divisible degree, an unknown name."""


class DeadlockError(CollsimError):
    """The event queue ran dry while ranks were still waiting.

    On a real cluster this program would hang forever.  ``waiting`` maps each
    blocked rank to descriptions of what it waits for; ``stuck`` maps each collective
    that never completed, ``(group ranks, seq, name)``, to ``(joined, missing)`` rank
    lists; ``time`` is the simulated second it happened and ``trace`` what ran until then.
    """

    def __init__(self, message, waiting=None, stuck=None, time=None, trace=None):
        super().__init__(message)
        self.waiting = dict(waiting or {})
        self.stuck = dict(stuck or {})
        self.time = time
        self.trace = trace


class WatchdogTimeout(DeadlockError):
    """A run with faults made no progress for the watchdog's timeout, as NCCL's watchdog
    reports a hung collective: ``time`` is the last progress plus the timeout.

    Besides :class:`DeadlockError`'s fields, ``ranks`` maps every rank to its
    :class:`~collsim.runtime.diagnosis.RankReport` (the flight recorder: the last
    collective it entered and completed, what it waits for), ``culprit`` is the
    :class:`~collsim.runtime.diagnosis.Culprit` (the crashed rank, the failed link with no
    other path, or the slowest rank), ``last_progress`` the simulated second the run last
    moved and ``timeout`` the watchdog's timeout.
    """

    def __init__(
        self,
        message,
        waiting=None,
        stuck=None,
        time=None,
        trace=None,
        ranks=None,
        culprit=None,
        last_progress=None,
        timeout=None,
    ):
        super().__init__(message, waiting, stuck, time, trace)
        self.ranks = dict(ranks or {})
        self.culprit = culprit
        self.last_progress = last_progress
        self.timeout = timeout


class CollectiveMismatchError(CollsimError):
    """Ranks of one group entered different collectives at the same position."""


class UnyieldedOperationError(CollsimError):
    """A rank program made an operation (``rank.recv(...)``) or a collective and never
    yielded it, so it never ran: the forgotten ``yield`` (or ``yield from``).  ``rank`` is
    the rank whose program made it."""


class SimulationLimitError(CollsimError):
    """A guard stopped the run: the program would run forever, or longer than allowed.

    ``guard`` names the guard (``"max_ops"``, ``"max_time"`` or ``"max_events"``, each a
    :class:`~collsim.Cluster` parameter), ``limit`` its value and ``time`` the simulated
    second it tripped.  ``looping`` maps each rank that was still running to what it did:
    ``{description: count}`` of the operations it yielded after ``max_ops`` tripped
    (e.g. ``{"send to rank 1": 2500}``), or what it waited in for the other guards.
    """

    def __init__(self, message, guard=None, limit=None, time=None, looping=None):
        super().__init__(message)
        self.guard = guard
        self.limit = limit
        self.time = time
        self.looping = dict(looping or {})


class UnmatchedMessage(NamedTuple):
    """A post left waiting when every rank had ended: a ``"send"`` no rank received, or a
    ``"recv"`` (one never waited for) no rank sent to."""

    kind: str  # "send" or "recv"
    src: int  # the sending rank
    dst: int  # the receiving rank
    tag: object  # the message's tag, as the program gave it


class UnmatchedMessagesError(CollsimError):
    """Every rank ended, but messages were left unmatched: ``messages`` are their
    :class:`UnmatchedMessage` records, ``lines`` the report's sentences about them (a tag
    mismatch is one sentence for both of its ends).  ``result`` is the run's RunResult: the
    run itself completed, so a caller that treats this as a warning (as MPI implementations
    do at finalize, and ``collsim exec`` does) still has its time, trace and returns.

    >>> error = UnmatchedMessagesError(["rank 0 sent to rank 1 with tag 7, but ..."],
    ...                                [UnmatchedMessage("send", 0, 1, 7)])
    >>> print(error)
    messages left unmatched when the run ended:
      rank 0 sent to rank 1 with tag 7, but ...
    """

    def __init__(self, lines, messages, result=None):
        self.lines, self.messages, self.result = tuple(lines), tuple(messages), result
        super().__init__(
            "messages left unmatched when the run ended:\n  " + "\n  ".join(self.lines)
        )


def shorten(value, width=60):
    """``repr(value)`` cut to ``width`` characters, for naming a bad value in a message.

    >>> shorten(list(range(100)), 20)
    '[0, 1, 2, 3, 4, 5...'
    """
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def nearest_first(value, choices):
    """Every valid choice, the nearest to the refused ``value`` first (the smaller on a tie):
    the one way a refusal lists what would work, so that no list stops short.

    >>> nearest_first(3, [1, 2, 4, 8, 16, 32, 64])
    [2, 4, 1, 8, 16, 32, 64]
    """
    return sorted(choices, key=lambda choice: (abs(choice - value), choice))


def check_choice(value, what, choices):
    """``value`` if it is one of ``choices`` (names), else a ConfigError naming it, the
    choices and the nearest by spelling.

    >>> check_choice("zipff", "routing", ("uniform", "zipf"))
    Traceback (most recent call last):
    ...
    collsim.errors.ConfigError: routing='zipff' is not one of uniform, zipf; nearest valid 'zipf'
    """
    if value not in choices:
        import difflib  # only when refusing: most callers never need it

        near = difflib.get_close_matches(str(value), choices, n=1, cutoff=0)[0]
        raise ConfigError(
            f"{what}={value!r} is not one of {', '.join(choices)}; nearest valid {near!r}"
        )
    return value
