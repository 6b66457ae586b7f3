"""Threads a rank starts during a blocking run: each becomes a strand of that rank.

A thread that a rank's code starts (``threading.Thread(...).start()``, a thread pool's
worker) gets its own proxy process in the engine and its own baton, as the rank's own code
has: its MPI or torch.distributed calls are its own, so two threads of one rank may wait on
each other (one receives what the other sends), as in a process with
``MPI.THREAD_MULTIPLE``.  Only one Python thread of the whole run runs at any moment and the
order is the engine's, so a run gives the same trace byte for byte.

The blocking primitives a thread waits on hand the baton back instead of blocking the
Python thread, and wait in simulated time: ``Thread.join``, and every
``threading.Condition.wait`` and what is built on it (``Event``, ``Semaphore``,
``Barrier``, ``queue.Queue``, ``concurrent.futures``' futures and pools;
``queue.SimpleQueue`` is the pure-Python one during a run).  Their timeouts are simulated
seconds.  Not covered: a plain ``Lock`` (or ``RLock``; mpi4py's ``MPI._comm_lock`` gives
one) that one thread holds across a blocking collsim call while another thread of the run
waits for it, and any wait outside Python's thread primitives (a socket, a pipe): the
Python thread blocks, the run stops advancing, and Ctrl-C stops it with a report naming
the thread and its line.

Python's own ``start``, ``join``, ``Condition.wait`` and clocks are put back when the last
run ends; threads that no rank started are never changed.

>>> import threading, collsim
>>> def main():
...     ready, box = threading.Event(), {}
...     def worker():
...         ready.wait()               # hands the baton back until set() below
...         box["now"] = now()
...     t = threading.Thread(target=worker)
...     t.start()
...     compute(seconds=1e-3)
...     ready.set()
...     t.join()
...     return box["now"]
>>> from collsim.runtime.blocking import run, now, compute
>>> run(collsim.Cluster(collsim.topology.ring(2)), main).returns
[0.001, 0.001]
"""

import contextlib
import queue
import threading

from ...network import FINISH, START
from ..ops import Handle
from .strand import Aborted, Strand, current_strand, proxy, waiting

__all__ = ["threads_are_strands"]

_plain_start = threading.Thread.start
_plain_join = threading.Thread.join
_plain_wait = threading.Condition.wait
_plain_simple_queue = queue.SimpleQueue
_plain_clock = threading._time
_plain_counter = threading._counter
_runs = [0]  # blocking runs going on; the patches are in place while there is one
_runs_lock = threading.Lock()


def _cooperative():
    """The calling thread's strand while it runs user code, else None (a plain thread)."""
    me = current_strand()
    return me if me is not None and me.in_user_code else None


def _start(thread):
    """``Thread.start`` during a run: a thread a rank's code starts is a strand of the rank,
    run by its own process in the engine from the current simulated time on."""
    parent = _cooperative()
    if parent is None or thread._started.is_set():
        return _plain_start(thread)  # not a rank's, or started twice (Python refuses it)
    if parent.stopped:
        raise Aborted(f"rank {parent.rank.id}: the run ended")
    child = Strand(parent.rank, thread.run, parent.team, thread)
    thread.run = child._body  # the OS thread waits for its baton before the user's code
    parent.in_user_code = False  # start() waits for the OS thread to begin: a real wait
    try:
        _plain_start(thread)
    except BaseException:
        parent.team.remove(child)
        del thread.run
        raise
    finally:
        parent.in_user_code = True
    thread._collsim_strand = child
    child.thread_numbers = parent.thread_numbers
    execution = parent.rank._execution
    engine = execution.engine

    def begin(_):
        execution.spawn(child.rank, proxy(child.rank, child), child.name)

    engine.at(engine.now, START, begin)


def _join(thread, timeout=None):
    """``Thread.join`` during a run: a strand waits for another in simulated time."""
    me, child = _cooperative(), getattr(thread, "_collsim_strand", None)
    if me is None or child is None or child is me or child.team is not me.team:
        return _plain_join(thread, timeout)
    if not child.ended.done and (timeout is None or timeout > 0):
        me.post(waiting(me.rank, child.ended, timeout))
    if child.ended.done:  # its Python thread is on its last lines
        _plain_join(thread)
    return None


class _Waiter:
    """Stands in a Condition's queue of waiters for a strand: ``notify()`` releases it,
    which wakes the strand at the current simulated time."""

    __slots__ = ("handle", "engine", "notified")

    def __init__(self, strand):
        # the deadlock report's "waits in wait for ...": what would wake it
        self.handle = Handle(f"Event.set() or Condition.notify() (thread {strand.thread.name})")
        self.engine = strand.rank._execution.engine
        self.notified = False

    def release(self):
        if self.notified:  # as a real waiter's lock released twice
            raise RuntimeError("release unlocked lock")
        self.notified = True
        handle = self.handle
        self.engine.at(self.engine.now, FINISH, lambda _: handle.done or handle.complete(True))


def _wait(cond, timeout=None):
    """``Condition.wait`` during a run: a strand hands the baton back until notified (or
    until ``timeout`` simulated seconds have passed)."""
    me = _cooperative()
    if me is None or (timeout is not None and timeout <= 0):
        return _plain_wait(cond, timeout)  # a plain thread, or a poll that never blocks
    if not cond._is_owned():
        raise RuntimeError("cannot wait on un-acquired lock")
    waiter = _Waiter(me)
    cond._waiters.append(waiter)
    saved = cond._release_save()
    woke = False
    try:
        woke = bool(me.post(waiting(me.rank, waiter.handle, timeout)))
        return woke
    finally:
        cond._acquire_restore(saved)
        if not woke:
            with contextlib.suppress(ValueError):
                cond._waiters.remove(waiter)


def _thread_number():
    """threading's counter behind the names ``Thread-N``: numbered from 1 in each rank."""
    me = _cooperative()
    return next(me.thread_numbers) if me is not None else _plain_counter()


def _clock():
    """threading's and queue's clock during a run: simulated seconds in a strand, so that
    timeouts computed from it (``Semaphore.acquire(timeout=...)``) agree with the waits."""
    me = _cooperative()
    return me.rank.now if me is not None else _plain_clock()


def _patch():
    threading.Thread.start, threading.Thread.join = _start, _join
    threading.Condition.wait = _wait
    queue.SimpleQueue = queue._PySimpleQueue  # the C one blocks the Python thread
    threading._time = queue.time = _clock
    threading._counter = _thread_number


def _restore():
    threading.Thread.start, threading.Thread.join = _plain_start, _plain_join
    threading.Condition.wait = _plain_wait
    queue.SimpleQueue = _plain_simple_queue
    threading._time = queue.time = _plain_clock
    threading._counter = _plain_counter


@contextlib.contextmanager
def threads_are_strands():
    """While a run is on: threads its ranks start are strands (see the module's text)."""
    with _runs_lock:
        _runs[0] += 1
        if _runs[0] == 1:
            _patch()
    try:
        yield
    finally:
        with _runs_lock:
            _runs[0] -= 1
            if not _runs[0]:
                _restore()
