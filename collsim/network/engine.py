"""The discrete-event engine: a heap of ``(time, priority, seq, callback)``.

As in SimPy, the whole engine is one heap.  Ties on time break on priority, then on a
sequence number, so the same inputs always give the same order of events and the same
trace, byte for byte.

Rule for events at the same instant: flows and compute spans that *finish* are settled
(priority ``FINISH``) before flows that *start* moving bytes (priority ``START``), so a
max-min share computed at that instant never depends on which was pushed first.

Examples
--------
>>> engine = Engine()
>>> order = []
>>> engine.at(1.0, START, order.append, "start")
>>> engine.at(1.0, FINISH, order.append, "finish")
>>> engine.run()
>>> order, engine.now
(['finish', 'start'], 1.0)
"""

import heapq
import math
import numbers

from ..errors import CollsimError, ConfigError, SimulationLimitError

_push = heapq.heappush  # bound once: at() runs twice per transfer

__all__ = ["Engine", "FINISH", "START", "SimulationLimitError", "DEFAULT_MAX_TIME",
           "DEFAULT_MAX_EVENTS"]  # fmt: skip

# A day of simulated time: no training step or collective simulated here lasts that long.
DEFAULT_MAX_TIME = 86_400.0
# Engine events are bounded by the messages posted, so this backstop only stops a fault
# in the network model; heavy max-min contention (an all-to-all on a 256-rank one-way
# ring) legitimately needs tens of millions.
DEFAULT_MAX_EVENTS = 200_000_000

FINISH = 0
START = 1


class Engine:
    """Simulated clock and event heap.

    Parameters
    ----------
    max_time : float
        Simulated seconds after which the run is stopped with a
        :class:`~collsim.errors.SimulationLimitError` (``math.inf``: never).
    max_events : int
        Events after which the run is stopped the same way (``math.inf``: never).
    """

    def __init__(self, max_time=DEFAULT_MAX_TIME, max_events=DEFAULT_MAX_EVENTS):
        for name, value in (("max_time", max_time), ("max_events", max_events)):
            if not (isinstance(value, numbers.Real) and not isinstance(value, bool)) or not (
                value == math.inf or (math.isfinite(value) and value > 0)
            ):
                raise ConfigError(
                    f"Engine({name}={value!r}): a guard must be a number > 0 "
                    "(or math.inf to switch it off)"
                )
        self.now = 0.0
        self.events = 0
        self.max_time = max_time
        self.max_events = max_events
        self._heap = []
        self._seq = 0

    def at(self, time, priority, callback, arg=None):
        """Call ``callback(arg)`` at simulated ``time``."""
        if not time >= self.now:  # also catches NaN
            raise CollsimError(f"cannot schedule an event at t={time} s, before now={self.now} s")
        seq = self._seq = self._seq + 1
        # one integer orders same-time events by priority, then by sequence number
        _push(self._heap, (time, (priority << 48) | seq, callback, arg))

    def run(self):
        """Process events until the heap is empty."""
        heap, pop = self._heap, heapq.heappop
        max_time = self.max_time
        # the count lives in a local while events run; the guard is the last event allowed
        events, last = self.events, self.max_events
        try:
            while heap:
                time, _, callback, arg = pop(heap)
                if time > max_time:
                    raise SimulationLimitError(
                        f"simulated time reached {time:.6g} s, past the guard "
                        f"max_time={max_time} s; "
                        "raise Cluster(max_time=...) if the program is meant to run that long",
                        "max_time",
                        max_time,
                        self.now,
                    )
                self.now = time
                events += 1
                if events > last:
                    raise SimulationLimitError(
                        f"more than max_events={last} events at t={time:.6g} s; "
                        "raise Cluster(max_events=...) if the program is meant to run that long",
                        "max_events",
                        last,
                        time,
                    )
                callback(arg)
        finally:
            self.events = events
