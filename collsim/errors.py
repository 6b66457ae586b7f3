"""The errors collsim raises.

Every error names the bad value, the rule it broke and, where there is one, the
nearest valid choice, so that a student can fix the input without reading code.

Examples
--------
>>> from collsim.errors import CollsimError, DeadlockError
>>> issubclass(DeadlockError, CollsimError)
True
"""

__all__ = ["CollsimError", "DeadlockError", "ConfigError", "CollectiveMismatchError"]


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


class CollectiveMismatchError(CollsimError):
    """Ranks of one group entered different collectives at the same position."""
