"""One Python thread acting for a rank, and the baton between it and the engine.

Every thread of a blocking run is a strand: a rank's own code (its main thread) and every
thread that code starts.  Each strand is driven by a small generator program (its proxy)
that the engine runs like any other process of the rank, so a strand runs only while it
holds its baton and only one Python thread of the whole run runs at any moment, in the
engine's order.  A strand posts each blocking call to its proxy and sleeps until the engine
resumes it with the result.
"""

import contextlib
import ctypes
import inspect
import itertools
import signal
import sys
import threading
import time
import types

from ...network import FINISH
from ..ops import Handle, Wait
from .callsite import callsite, user_frame

__all__ = ["Aborted", "Strand", "proxy", "waiting", "current_strand"]

# a rank told to stop that has not ended after this many wall-clock seconds (its code caught
# Aborted, or is busy outside collsim's calls) is told again
STOP_RETRY_S = 0.2
# how often the engine's thread, waiting for a rank, wakes to run a pending Ctrl-C
SIGNAL_CHECK_S = 0.1
_local = threading.local()


class Aborted(BaseException):
    """Raised inside a rank's thread when the run ended without it (another rank failed, a
    deadlock, a guard, Ctrl-C): it unwinds the rank's code so that the thread ends.  A
    BaseException, as SystemExit is, so that ``except Exception`` in user code does not
    swallow it; code that catches everything (unittest runs the next test after any
    exception) gets it again from every later call, and from its running code if it
    does not end."""


def current_strand():
    """The strand the calling Python thread is, or None (a thread outside any run)."""
    return getattr(_local, "current", None)


class Strand:
    """One thread of a rank and its baton (two semaphores: the engine waits on
    ``to_engine`` while the strand runs, the strand on ``to_rank`` while the engine does).

    ``target`` is the code it runs; ``thread`` the user's ``threading.Thread`` for a thread
    the rank started (None: the rank's own code, in a thread made here); ``team`` the list
    of every strand of the run, which this one joins."""

    def __init__(self, rank, target, team, thread=None):
        self.rank, self.target, self.team = rank, target, team
        self.main = thread is None  # the rank's own code: its error is the rank's
        self.to_rank = threading.Semaphore(0)
        self.to_engine = threading.Semaphore(0)
        # ("call", x, where), ("return", value), ("raise", exc) or ("aborted",)
        self.request = None
        self.reply = None  # ("value", v) | ("raise", exc) | ("abort",)
        self.where = None  # the user's line of the current blocking call
        self.running = False  # it holds the baton (the engine waits for it)
        self.in_user_code = False  # its waits on threading's primitives pass the baton
        self.stopped = False  # the run ended without this rank: every later call raises
        # "Thread-N" numbers its rank's threads from 1, as each process of a real run does
        # (a thread it starts shares it: set by the start)
        self.thread_numbers = itertools.count(1)
        # "MainThread" as in a real process (mpi4py's test_threads reads the name)
        self.thread = thread or threading.Thread(target=self._body, name="MainThread", daemon=True)
        # the strand's end, which a Thread.join() of it waits on in simulated time
        self.ended = Handle(f"thread {self.thread.name} of rank {rank.id} to end")
        team.append(self)

    @property
    def daemon(self):
        """A daemon thread the rank started: one still waiting when everything else has
        ended is no deadlock (the interpreter ends daemon threads at exit)."""
        return not self.main and self.thread.daemon

    @property
    def name(self):
        """``"main"`` for the rank's own code, ``"thread Thread-1"`` for one it started."""
        return "main" if self.main else f"thread {self.thread.name}"

    # -- in the strand's thread -----------------------------------------------------------

    def _body(self):
        _local.current = self
        # Ctrl-C goes to the main thread: the kernel may hand a process's SIGINT to any
        # thread that does not block it, and one handed to a busy rank would leave the
        # main thread asleep on the baton, never running Python's handler
        if hasattr(signal, "pthread_sigmask"):
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            self.to_rank.acquire()
            if self.reply[0] == "abort":
                self.request = ("aborted",)
                return
            self.in_user_code = True
            try:
                self.request = ("return", self.target())
            except Aborted:
                self.request = ("aborted",)
            except BaseException as exc:
                if self.main:  # the engine re-raises it as this rank's error
                    self.request = ("raise", exc)
                else:  # as in a real process: printed by threading.excepthook, the rank goes on
                    self._excepthook(exc)
                    self.request = ("return", None)
        finally:
            self.in_user_code = False
            _local.current = None
            self.to_engine.release()

    def _excepthook(self, exc):
        """Print ``exc`` as Python prints an exception that ends a thread, its traceback
        from threading's frame that ran the thread (this one, in between, is left out)."""
        bootstrap = sys._getframe(2)  # _bootstrap_inner, which called run(): this _body
        tb = types.TracebackType(
            exc.__traceback__.tb_next, bootstrap, bootstrap.f_lasti, bootstrap.f_lineno
        )
        args = threading.ExceptHookArgs([type(exc), exc.with_traceback(tb), tb, self.thread])
        try:
            threading.excepthook(args)
        finally:
            del args, exc, tb, bootstrap  # the traceback holds this frame

    def post(self, x):
        """Hand ``x`` to the engine and sleep until it resumes this strand."""
        if self.stopped:  # its code caught Aborted and went on: stop it again
            raise Aborted(f"rank {self.rank.id}: the run ended")
        self.where = callsite()
        self.request = ("call", x, self.where)
        self.in_user_code = False
        self.to_engine.release()
        self.to_rank.acquire()
        self.in_user_code = True
        kind, *value = self.reply
        if kind == "abort":
            raise Aborted(f"rank {self.rank.id}: the run ended")
        if kind == "raise":
            raise value[0]
        return value[0]

    # -- in the engine's thread -----------------------------------------------------------

    def resume(self, reply):
        """Give the baton to the strand with ``reply`` and wait until it hands it back."""
        self.reply = reply
        if self.main and not self.thread.is_alive() and self.request is None:
            self.thread.start()
        self.running = True
        self.to_rank.release()
        # Ctrl-C lands here, in the main thread (running stays True).  Wait in slices: a
        # signal that arrives just before a lock wait leaves Python's handler pending while
        # the thread sleeps (the wait itself checks for none), and a busy rank never wakes it
        while not self.to_engine.acquire(timeout=SIGNAL_CHECK_S):
            pass
        self.running = False
        return self.request

    def abort(self, deadline=None):
        """End the thread: blocked in a call, not started yet, or running (when Ctrl-C
        interrupted the engine while it waited for this strand).  Waits until it has ended,
        or until ``deadline`` (``time.monotonic()``) for a run stopped by Ctrl-C: a strand
        in a long C call (``time.sleep``) stops only when it returns to Python."""
        self.stopped = True
        if self.request is not None and self.request[0] != "call":
            return  # it ended already
        self.reply = ("abort",)
        if not self.thread.is_alive():
            if not self.main:
                return  # a thread the rank made and never started
            self.thread.start()
        self.to_rank.release()  # a strand blocked in a call raises Aborted from it
        if self.running:  # a busy strand stops where it is
            self._raise_aborted()
        self.thread.join(STOP_RETRY_S)
        while self.thread.is_alive():  # its code caught Aborted and went on
            if deadline is not None and time.monotonic() > deadline:
                return  # a daemon thread: it ends at its next line of Python, or with us
            self._raise_aborted()
            self.thread.join(STOP_RETRY_S)

    def _raise_aborted(self):
        """Raise Aborted in the strand's thread at its next line of Python, wherever it is."""
        ctypes.pythonapi.PyThreadState_SetAsyncExc(
            ctypes.c_ulong(self.thread.ident), ctypes.py_object(Aborted)
        )

    def release(self):
        """Cut what ties the strand to its thread and its run once the thread has ended, so
        that reference counting frees the run: a rank's error holds its thread's frames,
        whose ``self`` holds the error, and a thread the rank started (which the user may
        keep) holds the strand through its ``run``."""
        self.request = self.reply = None
        self.ended.callbacks = []
        if not self.main:  # the thread's own run and mark go; its class's run stays
            for name in ("run", "_collsim_strand"):
                with contextlib.suppress(AttributeError):
                    delattr(self.thread, name)
            self.target = None

    def running_at(self):
        """``"busy.py:7 in <module>"``: the user's line the strand's thread is running now."""
        frame = sys._current_frames().get(self.thread.ident)
        return user_frame(frame) if frame is not None else None


def proxy(rank, strand):
    """The generator program the engine runs for a strand: it forwards each call the
    thread posts as the operation (or sub-program) it is, and the result back."""
    rank._execution.note_where(rank.id, strand)
    request = strand.resume(("value", None))
    while True:
        kind = request[0]
        if kind == "raise":
            try:
                raise request[1]
            finally:
                request = None  # the error's traceback holds this frame: not the error
        if kind in ("return", "aborted"):
            # its joiners go on, from the engine's loop: not inside this generator's step
            engine = rank._execution.engine
            engine.at(engine.now, FINISH, lambda _: strand.ended.complete(True))
            return request[1] if kind == "return" else None
        x = request[1]
        try:
            value = (yield from x) if inspect.isgenerator(x) else (yield x)
        except Exception as exc:  # a refusal of the call: raised where the user called it
            request = strand.resume(("raise", exc))
            continue
        request = strand.resume(("value", value))


def waiting(rank, handle, timeout=None):
    """A program that waits until ``handle`` completes (its value) or, after ``timeout``
    simulated seconds, gives False: what a strand posts to wait on a thread primitive.
    It waits on a handle of its own, so that a timeout leaves ``handle`` (a thread's end,
    which others may join) as it is."""
    if handle.done:
        return handle.value
    wake = Handle(handle.what)
    handle.callbacks.append(lambda: wake.done or wake.complete(handle.value))
    engine = rank._execution.engine
    # a timeout past the max_time guard is left out: the run ends before it either way, and
    # an event left there after an early wake would trip the guard for nothing
    if timeout is not None and engine.now + timeout <= engine.max_time:
        engine.at(engine.now + timeout, FINISH, lambda _: wake.done or wake.complete(False))
    return (yield Wait((wake,)))
