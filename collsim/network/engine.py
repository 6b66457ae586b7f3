"""The discrete-event engine: events in order of ``(time, priority, seq)``.

As in SimPy, events run in order of time; ties on time break on priority, then on a
sequence number (the order they were scheduled in), so the same inputs always give the
same order of events and the same trace, byte for byte.

Rule for events at the same instant: flows and compute spans that *finish* are settled
(priority ``FINISH``) before flows that *start* moving bytes (priority ``START``), so a
max-min share computed at that instant never depends on which was pushed first.

The order is that of a heap of ``(time, priority, seq, callback)`` entries, kept without
comparing entries: a heap holds the distinct pending times, and each time a queue of its
events per priority, in the order they were scheduled.  A collective's or an exchange's
transfers start and end in lockstep, thousands at one instant; a heap of their entries
would compare them (ties on time, then on order) at every push and pop, here they are
appended and read in turn.

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
from collections import deque
from typing import NamedTuple

from ..errors import CollsimError, ConfigError, SimulationLimitError

_push = heapq.heappush  # a new instant joins the heap of pending times

__all__ = [
    "Engine",
    "Event",
    "FINISH",
    "START",
    "SimulationLimitError",
    "DEFAULT_MAX_TIME",
    "DEFAULT_MAX_EVENTS",
]

# A day of simulated time: no training step or collective simulated here lasts that long.
DEFAULT_MAX_TIME = 86_400.0
# Engine events are bounded by the messages posted, so this backstop only stops a fault
# in the network model; heavy max-min contention (an all-to-all on a 256-rank one-way
# ring) legitimately needs tens of millions.
DEFAULT_MAX_EVENTS = 200_000_000

FINISH = 0
START = 1


class Event(NamedTuple):
    """An event not yet run, as :meth:`Engine.pending` lists it."""

    time: float  # the simulated second it runs at
    priority: int  # FINISH or START (None: the event a stopped run was in)
    callback: object  # called with ``arg`` when it runs
    arg: object


class Engine:
    """Simulated clock and its pending events.

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
        self._times = []  # heap of the instants that have events pending
        # instant -> its events, (FINISH ones, START ones), each a deque, flat: callback,
        # arg, callback, arg, ...  (no tuple to make per event)
        self._at = {}
        self._stopped_at = None  # (time, callback, arg) of the event a run stopped in

    def at(self, time, priority, callback, arg=None):
        """Call ``callback(arg)`` at simulated ``time``; ``priority`` is FINISH or START."""
        if not time >= self.now:  # also catches NaN
            raise CollsimError(f"cannot schedule an event at t={time} s, before now={self.now} s")
        if priority != FINISH and priority != START:
            raise CollsimError(f"event priority {priority!r}: give FINISH or START")
        self.schedule(time, priority, callback, arg)

    def schedule(self, time, priority, callback, arg):
        """:meth:`at` without its checks, for a caller whose ``time`` is now plus a delay
        it computed (never negative) and whose ``priority`` is FINISH or START: the
        network, which schedules two events per message.

        >>> engine = Engine()
        >>> engine.schedule(0.5, FINISH, print, "done")
        >>> engine.run()
        done
        """
        events = self._at.get(time)
        if events is None:
            events = self._at[time] = (deque(), deque())
            _push(self._times, time)
        events = events[priority]
        events.append(callback)
        events.append(arg)

    def pending(self):
        """The :class:`Event` records not yet run, in the order they will run (to inspect
        a run stopped midway, in tests or a debugger).

        >>> engine = Engine()
        >>> engine.at(2.0, START, print, "b"); engine.at(1.0, START, print, "a")
        >>> [(event.time, event.arg) for event in engine.pending()]
        [(1.0, 'a'), (2.0, 'b')]
        """
        events = []
        for time in sorted(self._at):
            for priority, queue in enumerate(self._at[time]):
                flat = list(queue)  # callback, arg, callback, arg, ...
                pairs = zip(flat[::2], flat[1::2])
                events += [Event(time, priority, callback, arg) for callback, arg in pairs]
        return events

    def clear(self):
        """Drop the events not yet run (a run stopped midway: a deadlock, an error, a
        guard) and return them, as :meth:`pending` lists them, after the event the run
        stopped in (priority None); their callbacks refer back to the network and the
        run, a cycle that only the collector would free.

        >>> engine = Engine()
        >>> engine.at(1.0, START, print, "a")
        >>> [event.arg for event in engine.clear()], engine.pending()
        (['a'], [])
        """
        events = self.pending()
        if self._stopped_at is not None:  # the one that raised, taken off but not done
            time, callback, arg = self._stopped_at
            events.insert(0, Event(time, None, callback, arg))
        self._times, self._at, self._stopped_at = [], {}, None
        return events

    def run(self):
        """Process events until none is left."""
        times, at, pop = self._times, self._at, heapq.heappop
        max_time = self.max_time
        # the count lives in a local while events run; the guard is the last event allowed
        events, last = self.events, self.max_events
        callback = arg = None
        try:
            while times:
                time = times[0]
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
                # this instant's events, FINISH before START, each in the order scheduled;
                # an event scheduled now for now joins its queue and runs in its turn.
                # Each is taken off as it runs: what a guard stops stays, what ran is freed
                first, second = at[time]
                finishing, starting = first.popleft, second.popleft
                while True:
                    if first:
                        callback = finishing()
                        arg = finishing()
                    elif second:
                        callback = starting()
                        arg = starting()
                    else:
                        break
                    events += 1
                    if events > last:
                        raise SimulationLimitError(
                            f"more than max_events={last} events at t={time:.6g} s; "
                            "raise Cluster(max_events=...) if the program is meant to run "
                            "that long",
                            "max_events",
                            last,
                            time,
                        )
                    callback(arg)
                pop(times)
                del at[time]
        except BaseException:
            # the event that raised (or that a guard stopped) is no longer pending, but
            # what it carries (a flow half delivered) may still wait: clear() returns it
            self._stopped_at = (self.now, callback, arg)
            raise
        finally:
            self.events = events
