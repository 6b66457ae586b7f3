"""Blocking rank code: each rank runs an ordinary function in its own thread, and the engine
passes a baton so that only one of them runs at any moment.

A rank program written as a generator yields its operations; code written the way people
write MPI or torch.distributed programs calls them and blocks.  Here each rank's function
runs in a thread of its own, but a thread runs only while it holds the baton: the engine
resumes it with the result of its last call and waits until it posts the next one (or
returns), so the order of everything is the engine's, in simulated time, and the same
inputs give the same trace byte for byte, with no locks in the user's code.

Each thread is driven by a small generator program (a proxy) that the engine runs like any
other, so point-to-point matching, collectives, the deadlock report (which also names the
line of the user's blocking call), the guards and the trace all work unchanged.

Compute between calls costs no simulated time unless the program says so with
:func:`compute`: ``compute(seconds=1e-3)`` or ``compute(flops=2e12)``.

Examples
--------
>>> import numpy as np, collsim
>>> def main():
...     rank = current_rank()
...     x = np.full(4, float(rank.id))
...     total = call(rank.all_reduce(x))          # blocks until the all-reduce is done
...     if rank.id == 0:
...         call(rank.send(1, total))
...     elif rank.id == 1:
...         return float(call(rank.recv(0)).sum())
>>> result = run(collsim.Cluster(collsim.topology.ring(4)), main)
>>> result.returns[1]
24.0
"""

import contextlib
import ctypes
import inspect
import signal
import sys
import threading
import time
from pathlib import Path

from ..errors import ConfigError
from .ops import Compute, Exchange, Recv, Send, Start, Wait

__all__ = [
    "run",
    "current_rank",
    "calling_rank",
    "call",
    "now",
    "compute",
    "stopped",
    "MAX_THREADS",
    "Aborted",
]

# a thread is cheap but not free (a stack each); past this, write a generator program
MAX_THREADS = 1024
# a rank told to stop that has not ended after this many wall-clock seconds (its code caught
# Aborted, or is busy outside collsim's calls) is told again
STOP_RETRY_S = 0.2
# after Ctrl-C, how long the ranks' threads get to end before the interrupt goes on without
# them (daemon threads, they end at their next line of Python or with the interpreter)
INTERRUPT_WAIT_S = 0.5
# how often the engine's thread, waiting for a rank, wakes to run a pending Ctrl-C
SIGNAL_CHECK_S = 0.1
_OPS = (Send, Recv, Wait, Compute, Exchange, Start)
_HERE = str(Path(__file__).resolve().parents[1])  # collsim/: frames inside it are not the user's
_local = threading.local()


class Aborted(BaseException):
    """Raised inside a rank's thread when the run ended without it (another rank failed, a
    deadlock, a guard, Ctrl-C): it unwinds the rank's code so that the thread ends.  A
    BaseException, as SystemExit is, so that ``except Exception`` in user code does not
    swallow it; code that catches everything (unittest runs the next test after any
    exception) gets it again from every later call, and from its running code if it
    does not end."""


class _RankThread:
    """One rank's thread and the baton between it and the engine (two semaphores: the
    engine waits on ``to_engine`` while the rank runs, the rank on ``to_rank`` while the
    engine does)."""

    def __init__(self, rank, main, args, kwargs):
        self.rank, self.main, self.args, self.kwargs = rank, main, args, kwargs
        self.to_rank = threading.Semaphore(0)
        self.to_engine = threading.Semaphore(0)
        # ("call", x, where), ("return", value), ("raise", exc) or ("aborted",)
        self.request = None
        self.reply = None  # ("value", v) | ("raise", exc) | ("abort",)
        self.where = None  # the user's line of the current blocking call
        self.running = False  # the rank's code holds the baton (the engine waits for it)
        # one call at a time from the rank's threads (its own and those it starts)
        self.posting = threading.Lock()
        self.stopped = False  # the run ended without this rank: every later call raises
        self.thread = threading.Thread(
            target=self._body, name=f"collsim rank {rank.id}", daemon=True
        )

    # -- in the rank's thread -------------------------------------------------------------

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
            try:
                self.request = ("return", self.main(*self.args, **self.kwargs))
            except Aborted:
                self.request = ("aborted",)
            except BaseException as exc:  # the engine re-raises it as this rank's error
                self.request = ("raise", exc)
        finally:
            _local.current = None
            self.to_engine.release()

    def post(self, x):
        """Hand ``x`` to the engine and sleep until it resumes this rank."""
        with self.posting:
            if self.stopped:  # its code caught Aborted and went on: stop it again
                raise Aborted(f"rank {self.rank.id}: the run ended")
            if self.request is not None and self.request[0] != "call":
                raise ConfigError(
                    f"rank {self.rank.id}: a thread it started made a call after the rank's "
                    "own code ended; join() the thread before the rank's code returns"
                )
            self.where = _callsite()
            self.request = ("call", x, self.where)
            self.to_engine.release()
            self.to_rank.acquire()
            kind, *value = self.reply
        if kind == "abort":
            raise Aborted(f"rank {self.rank.id}: the run ended")
        if kind == "raise":
            raise value[0]
        return value[0]

    # -- in the engine's thread -----------------------------------------------------------

    def resume(self, reply):
        """Give the baton to the rank with ``reply`` and wait until it hands it back."""
        self.reply = reply
        if not self.thread.is_alive() and self.request is None:
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
        interrupted the engine while it waited for this rank).  Waits until it has ended,
        or until ``deadline`` (``time.monotonic()``) for a run stopped by Ctrl-C: a rank in
        a long C call (``time.sleep``) stops only when it returns to Python."""
        self.stopped = True
        if self.request is not None and self.request[0] != "call":
            return  # it ended already
        self.reply = ("abort",)
        if not self.thread.is_alive():
            self.thread.start()
        self.to_rank.release()  # a rank blocked in a call raises Aborted from it
        if self.running:  # a busy rank stops where it is
            self._raise_aborted()
        self.thread.join(STOP_RETRY_S)
        while self.thread.is_alive():  # its code caught Aborted and went on
            if deadline is not None and time.monotonic() > deadline:
                return  # a daemon thread: it ends at its next line of Python, or with us
            self._raise_aborted()
            self.thread.join(STOP_RETRY_S)

    def _raise_aborted(self):
        """Raise Aborted in the rank's thread at its next line of Python, wherever it is."""
        ctypes.pythonapi.PyThreadState_SetAsyncExc(
            ctypes.c_ulong(self.thread.ident), ctypes.py_object(Aborted)
        )

    def running_at(self):
        """``"busy.py:7 in <module>"``: the user's line the rank's thread is running now."""
        frame = sys._current_frames().get(self.thread.ident)
        return _user_frame(frame) if frame is not None else None


def _proxy(rank, rt):
    """The generator program the engine runs for a blocking rank: it forwards each call
    the thread posts as the operation (or sub-program) it is, and the result back."""
    rank._execution.note_where(rank.id, rt)
    request = rt.resume(("value", None))
    while True:
        kind = request[0]
        if kind == "return":
            return request[1]
        if kind == "raise":
            try:
                raise request[1]
            finally:
                request = None  # the error's traceback holds this frame: not the error
        if kind == "aborted":
            return None
        x = request[1]
        try:
            value = (yield from x) if inspect.isgenerator(x) else (yield x)
        except Exception as exc:  # a refusal of the call: raised where the user called it
            request = rt.resume(("raise", exc))
            continue
        request = rt.resume(("value", value))


def _callsite():
    """``"ring.py:12 in main"`` of the first frame outside collsim: the user's call."""
    return _user_frame(sys._getframe(2))


def _user_frame(frame):
    """``"ring.py:12 in main"`` of ``frame`` or the first frame it was called from that is
    outside collsim and torch (None if there is none)."""
    libraries = (_HERE, *_torch_folder())
    while frame is not None and frame.f_code.co_filename.startswith(libraries):
        frame = frame.f_back
    if frame is None:
        return None
    return f"{Path(frame.f_code.co_filename).name}:{frame.f_lineno} in {frame.f_code.co_name}"


def _torch_folder():
    """torch's folder where torch is imported: a torch.distributed call's line is the
    script's that made it, not torch's inside it (torch is never imported here)."""
    torch = sys.modules.get("torch")
    found = getattr(torch, "__file__", None)
    return (str(Path(found).parent),) if found else ()


def _current():
    rt = _owner()
    if rt is None:
        raise ConfigError(
            "this call blocks a rank of a virtual cluster, but it was made outside a run: "
            "run the function with collsim.exec(main, n=K) or the script with "
            "`collsim exec -n K script.py`"
        )
    return rt


def _owner():
    """The rank thread the calling thread acts for: its own, or the one that started it."""
    rt = getattr(_local, "current", None)
    return rt if rt is not None else getattr(threading.current_thread(), "_collsim_rank", None)


_plain_start = threading.Thread.start
_runs = [0]  # blocking runs going on; Thread.start is ours while there is one
_runs_lock = threading.Lock()


def _start(thread):
    """``Thread.start`` during a run: a thread a rank starts acts for that rank, as a
    thread of a torch or MPI process does (its calls are the rank's, one at a time)."""
    owner = _owner()
    if owner is not None:
        thread._collsim_rank = owner
    _plain_start(thread)


@contextlib.contextmanager
def _threads_act_for_their_rank():
    with _runs_lock:
        _runs[0] += 1
        threading.Thread.start = _start
    try:
        yield
    finally:
        with _runs_lock:
            _runs[0] -= 1
            if not _runs[0]:
                threading.Thread.start = _plain_start


def current_rank():
    """The :class:`~collsim.runtime.rank.Rank` whose code is running (in a blocking run)."""
    return _current().rank


def calling_rank():
    """The rank whose code is calling, or None outside a run."""
    rt = _owner()
    return None if rt is None else rt.rank


def call(x):
    """Run ``x`` for the current rank and block until it is done; returns its value.

    ``x`` is a rank operation (``rank.send(...)``, ``rank.recv(...)``, ``rank.isend`` or
    ``rank.irecv`` (which return a handle at once), ``rank.wait(...)``,
    ``rank.compute(...)``, ``rank.exchange(...)``, ``rank.start(...)``) or a generator
    program to run with ``yield from`` (``rank.all_reduce(x)`` or any other collective).
    """
    rt = _current()
    if not (isinstance(x, _OPS) or inspect.isgenerator(x)):
        raise ConfigError(
            f"rank {rt.rank.id}: call({x!r}) takes a rank operation (rank.send(...), "
            "rank.recv(...), rank.wait(...), rank.compute(...)) or a collective's generator "
            f"(rank.all_reduce(x)), not a {type(x).__name__}"
        )
    return rt.post(x)


def stopped():
    """Whether the run ended without the calling rank (it runs on only to unwind)."""
    rt = _owner()
    return rt is not None and rt.stopped


def now():
    """Simulated seconds on the engine's clock (what ``MPI.Wtime()`` returns)."""
    return _current().rank.now


def compute(seconds=None, flops=None):
    """Charge the current rank ``seconds`` of compute (or ``flops`` at the cluster's rate):
    code between calls is otherwise free in simulated time."""
    rank = current_rank()
    return call(rank.compute(seconds=seconds, flops=flops))


def run(cluster, main, *args, **kwargs):
    """Run ``main(*args, **kwargs)`` on every rank of ``cluster``, each in its own thread;
    returns the :class:`~collsim.runtime.cluster.RunResult` (``returns[r]`` is rank r's
    return value).  An exception in a rank's code ends the run with it; every thread has
    ended when this returns or raises."""
    if not callable(main):
        raise ConfigError(f"run({main!r}): give the function each rank runs")
    if cluster.size > MAX_THREADS:
        raise ConfigError(
            f"a blocking run of {cluster.size} ranks needs a thread each, more than the "
            f"{MAX_THREADS} collsim starts; write the program as a generator "
            "(cluster.run(program)) for that many ranks"
        )
    threads = {}

    def program(rank):
        rt = threads[rank.id] = _RankThread(rank, main, args, kwargs)
        return (yield from _proxy(rank, rt))

    deadline = None  # wait for every thread to end, except after Ctrl-C
    try:
        with _threads_act_for_their_rank():
            return cluster.run(program)
    except BaseException as exc:
        if not isinstance(exc, Aborted):
            _note_others(exc, threads, cluster.size)
        if isinstance(exc, KeyboardInterrupt):  # the person waits: stop within a second
            deadline = time.monotonic() + INTERRUPT_WAIT_S
        raise
    finally:
        for rt in threads.values():
            rt.abort(deadline)
        for rt in threads.values():
            rt.thread.join(None if deadline is None else max(0, deadline - time.monotonic()))
            # a rank's error holds its thread's frames, whose `self` holds the error: a
            # cycle that would keep the run and its cluster until the collector's pass
            rt.request = rt.reply = None


def _note_others(exc, threads, size):
    """Say on ``exc`` what every other rank was doing when the run ended."""
    failed = getattr(exc, "rank", None)
    lines = []
    for r in range(size):
        rt = threads.get(r)
        if r == failed:
            continue
        kind = rt.request[0] if rt is not None and rt.request else "not started"
        if rt is not None and rt.running:  # interrupted (Ctrl-C) while its code ran
            kind = "running"
        where = rt.where if rt is not None else None
        state = {
            "call": f"blocked at {where}",
            "return": "finished",
            "raise": "raised too",
            "aborted": "stopped",
            "running": f"running at {rt and rt.running_at()}",
        }.get(kind, kind)
        lines.append(f"  rank {r}: {state}")
    if lines:
        others = "the other ranks" if failed is not None else "the ranks"
        exc.add_note(f"{others} when the run ended:\n" + "\n".join(lines))
