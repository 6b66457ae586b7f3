"""``MPI.Request`` (what ``isend``/``Irecv`` return), ``MPI.Prequest`` (a persistent one) and
the calls that complete many (``Waitall``, ``Waitany``, ``Waitsome``, their ``Test``
forms).

A request wraps the runtime's handle of a non-blocking send or receive.  Once completed
(by a wait or a successful test) it is ``MPI.REQUEST_NULL``, as in MPI: it compares equal
to it, is false, and waiting on it again returns at once with an empty status.  A
persistent request (``Send_init``, ``Recv_init``) is started with ``Start`` and becomes
inactive, not null, when it completes, until ``Free``.

``Test``, ``Testany`` and ``Waitany`` poll: a poll that finds every request pending lets
simulated time pass (1 us, doubling up to 1 ms), since code between calls costs no
simulated time and a polling loop would otherwise never let a message arrive.

Examples
--------
>>> import numpy as np, collsim
>>> from collsim import mpi as MPI
>>> def main():
...     comm = MPI.COMM_WORLD
...     if comm.rank == 0:
...         comm.isend({"step": 1}, dest=1, tag=7).wait()
...     else:
...         status = MPI.Status()
...         request = comm.irecv(source=0, tag=7)
...         got = request.wait(status)
...         return got, status.Get_source(), request == MPI.REQUEST_NULL
>>> collsim.runtime.blocking.run(collsim.Cluster(collsim.topology.ring(2)), main).returns[1]
({'step': 1}, 0, True)
"""

from ..runtime import blocking
from .exceptions import ERR_REQUEST, mpi_error
from .handletable import Handle, predefine
from .status import ANY_SOURCE, ANY_TAG, PROC_NULL, UNDEFINED, Status

__all__ = ["Request", "Prequest", "Compound", "REQUEST_NULL", "Status"]
__all__ += ["ANY_SOURCE", "ANY_TAG", "PROC_NULL", "UNDEFINED"]

FIRST_POLL = 1e-6  # simulated seconds a pending Test costs at first
LAST_POLL = 1e-3  # ... doubling up to this
_EMPTY = (ANY_SOURCE, ANY_TAG, 0)  # the status of a null or send request


class Request(Handle):
    """A pending operation; ``finish(value)`` turns the handle's value into
    ``(result, (source, tag, nbytes))`` once it is done.  ``Request()`` is null;
    ``Request(req)`` is ``req`` (as :class:`Prequest`'s copy is: they complete together)."""

    def _construct(self, handle=None, finish=None, active=None):
        if isinstance(handle, Request):  # MPI.Request(request): another handle of it
            if handle:
                self.__dict__ = handle.__dict__
                return
            handle = None  # of a null one: a null request of its own
        elif handle is not None and (isinstance(handle, Handle) or not hasattr(handle, "done")):
            # what collsim's p2p passes is a runtime operation's handle; nothing else is
            raise TypeError(f"MPI.{type(self).__name__}({handle!r}): give an MPI.Request")
        self._handle = handle
        self._finish = finish
        self._result = None
        self._status = _EMPTY
        self._active = handle is not None if active is None else active
        self._poll = FIRST_POLL

    # -- state ----------------------------------------------------------------------------

    def _done(self):
        return not self._active or self._handle is None or self._handle.done

    def _conclude(self, status):
        """Finish a completed request: its result, its status copied; it becomes null."""
        if self._active:
            if self._finish is not None:
                value = None if self._handle is None else self._handle.value
                self._result, self._status = self._finish(value)
            self._active, self._handle = False, None
            result = self._result
        else:
            result, self._status = None, _EMPTY
        if status is not None:
            status._fill(*self._status)
        self._result = None
        return result

    def _pending_handles(self):
        """The runtime handles to wait for (a :class:`Compound`'s parts' own)."""
        if self._done():
            return []
        if isinstance(self._handle, Compound):
            return [h for part in self._handle.parts for h in part._pending_handles()]
        return [self._handle]

    def _poll_once(self, label):
        """Let a poll's simulated time pass (the next one waits twice as long)."""
        rank = blocking.current_rank()
        blocking.call(rank.compute(seconds=self._poll, label=label))
        self._poll = min(2 * self._poll, LAST_POLL)

    def __bool__(self):
        return self._active

    def __eq__(self, other):
        if not isinstance(other, Request):
            return NotImplemented
        # one request: the same object, or handles made of it (they share their state)
        return self.__dict__ is other.__dict__ or (not self and not other)

    def _handle_key(self):
        return id(self.__dict__) if self else None  # copies share their state

    def _nullify(self):
        self._active, self._handle = False, None

    # -- one request ----------------------------------------------------------------------

    def wait(self, status=None):
        """Block until done; the received object (None for a send or a null request)."""
        pending = self._pending_handles()
        if pending:
            blocking.call(blocking.current_rank().wait(*pending))
        return self._conclude(status)

    def Wait(self, status=None):
        """Block until done; True, as mpi4py's Wait returns."""
        Request.wait(self, status)  # not self.wait: a subclass may define its own wait()
        return True

    def test(self, status=None):
        """``(True, object)`` if done, else ``(False, None)`` after a poll's simulated time."""
        if not self._done():
            self._poll_once("MPI Test (pending)")
            if not self._done():
                return False, None
        return True, self._conclude(status)

    def Test(self, status=None):
        return Request.test(self, status)[0]  # (as Wait: a subclass's test() is its own)

    def Get_status(self, status=None):
        """Whether it is done, without completing it (its status filled in if so); a
        pending one lets a poll's simulated time pass, as :meth:`test` does."""
        if not self._done():
            self._poll_once("MPI Get_status (pending)")
        done = self._done()
        if done and status is not None:
            status._fill(*(self._status if not self._active else _EMPTY))
        return done

    get_status = Get_status

    def Free(self):
        """Drop the request (the operation still completes); it becomes null."""
        self._refuse_null("Free")
        self._active, self._handle = False, None

    def Cancel(self):
        """A cancel that does not succeed, which MPI allows: the operation still completes
        (``Status.Is_cancelled()`` stays False), so the program receives or waits as usual."""
        self._refuse_null("Cancel")

    def _refuse_null(self, call):
        if not self:
            raise mpi_error(
                ERR_REQUEST,
                f"Request.{call} of {self!r}: give an active request (MPI.REQUEST_NULL has none)",
            )

    cancel = Cancel

    # -- many requests --------------------------------------------------------------------

    @classmethod
    def waitall(cls, requests, statuses=None):
        """Block until every request is done; their objects, in order."""
        requests = _requests(requests, "waitall")
        pending = [h for r in requests for h in r._pending_handles()]
        if pending:
            rank = blocking.current_rank()
            blocking.call(rank.wait(*pending))
        statuses = _statuses(statuses, len(requests))
        return [r._conclude(s) for r, s in zip(requests, statuses, strict=True)]

    @classmethod
    def Waitall(cls, requests, statuses=None):
        cls.waitall(requests, statuses)
        return True

    @classmethod
    def testall(cls, requests, statuses=None):
        """``(True, objects)`` once all are done, else ``(False, None)``."""
        requests = _requests(requests, "testall")
        pending = [r for r in requests if not r._done()]
        if pending:
            pending[0]._poll_once("MPI Testall (pending)")
            if any(not r._done() for r in pending):
                return False, None
        return True, cls.waitall(requests, statuses)

    @classmethod
    def Testall(cls, requests, statuses=None):
        return cls.testall(requests, statuses)[0]

    @classmethod
    def testany(cls, requests, status=None):
        """``(index, True, object)`` of the first done active request; ``(UNDEFINED, True,
        None)`` if none is active; ``(UNDEFINED, False, None)`` after a poll if none is done."""
        requests = _requests(requests, "testany")
        active = [i for i, r in enumerate(requests) if r._active]
        if not active:
            if status is not None:
                status._fill(*_EMPTY)
            return UNDEFINED, True, None
        for attempt in range(2):
            for i in active:
                if requests[i]._done():
                    return i, True, requests[i]._conclude(status)
            if attempt == 0:
                requests[active[0]]._poll_once("MPI Testany (pending)")
        return UNDEFINED, False, None

    @classmethod
    def Testany(cls, requests, status=None):
        index, flag, _ = cls.testany(requests, status)
        return index, flag

    @classmethod
    def waitany(cls, requests, status=None):
        """``(index, object)`` of a completed request (polling), ``(UNDEFINED, None)`` if
        none is active."""
        while True:
            index, flag, result = cls.testany(requests, status)
            if flag:
                return index, result

    @classmethod
    def Waitany(cls, requests, status=None):
        return cls.waitany(requests, status)[0]

    @classmethod
    def testsome(cls, requests, statuses=None):
        """Indices and objects of every done active request (None if none is active);
        ``statuses``, a list, becomes their statuses, one each, as in mpi4py."""
        requests = _requests(requests, "testsome")
        if not any(r._active for r in requests):
            return None, None
        done = [i for i, r in enumerate(requests) if r._active and r._done()]
        filled = [Status() for _ in done] if statuses is not None else [None] * len(done)
        results = [requests[i]._conclude(s) for i, s in zip(done, filled, strict=True)]
        if isinstance(statuses, list):
            statuses[:] = filled
        return done, results

    @classmethod
    def Testsome(cls, requests, statuses=None):
        return cls.testsome(requests, statuses)[0]

    @classmethod
    def waitsome(cls, requests, statuses=None):
        """Block until at least one active request is done; as :meth:`testsome`."""
        requests = _requests(requests, "waitsome")
        active = [r for r in requests if r._active]
        while active and not any(r._done() for r in active):
            active[0]._poll_once("MPI Waitsome (pending)")
        return cls.testsome(requests, statuses)

    @classmethod
    def Waitsome(cls, requests, statuses=None):
        return cls.waitsome(requests, statuses)[0]

    @classmethod
    def Get_status_any(cls, requests, status=None):
        requests = _requests(requests, "Get_status_any")
        for i, r in enumerate(requests):
            if r and r._done():
                return i, r.Get_status(status)
        if status is not None and not any(requests):
            status._fill(*_EMPTY)
        return UNDEFINED, not any(requests)

    get_status_any = Get_status_any

    @classmethod
    def Get_status_all(cls, requests, statuses=None):
        requests = _requests(requests, "Get_status_all")
        done = all(r._done() for r in requests)
        if done and statuses is not None:
            for r, s in zip(requests, _statuses(statuses, len(requests)), strict=True):
                r.Get_status(s)
        return done

    get_status_all = Get_status_all

    @classmethod
    def Get_status_some(cls, requests, statuses=None):
        requests = _requests(requests, "Get_status_some")
        if not any(requests):
            return None
        return [i for i, r in enumerate(requests) if r and r._done()]

    get_status_some = Get_status_some

    def __repr__(self):
        state = "null" if not self else ("done" if self._done() else "pending")
        what = "" if self._handle is None else f" {self._handle.describe()}"
        return f"<MPI.{type(self).__name__}{what} {state}>"


class Prequest(Request):
    """A persistent request: ``start()`` posts the operation again (a new Request each
    time); completing it leaves it inactive, and usable again, until ``Free``."""

    def _construct(self, start=None):
        super()._construct(None)
        if isinstance(start, Prequest):  # MPI.Prequest(preq): another handle of it
            self.__dict__ = start.__dict__
            return
        if isinstance(start, Request) and not start:  # MPI.Prequest(MPI.REQUEST_NULL)
            start = None
        elif start is not None and not callable(start):
            raise TypeError(f"MPI.Prequest({start!r}): give an MPI.Prequest to copy")
        self._start = start  # () -> Request: posts the operation once
        self._current = None

    def Start(self):
        if self._start is None:
            raise mpi_error(ERR_REQUEST, "Prequest.Start on a freed persistent request")
        self._current = self._start()
        self._handle, self._finish = self._current._handle, self._current._finish
        self._active = True

    start = Start

    def _conclude(self, status):
        result = super()._conclude(status)
        self._current = None
        return result

    def __bool__(self):
        return self._start is not None

    def _nullify(self):
        self._start = self._current = self._handle = None
        self._active = False

    def _done(self):
        return self._current is None or self._current._done()

    def Free(self):
        self._start = self._current = self._handle = None
        self._active = False

    @classmethod
    def Startall(cls, requests):
        for request in _requests(requests, "Startall"):
            request.Start()

    startall = Startall


class Compound:
    """The handle of a request made of others (``Isendrecv``, a non-blocking collective):
    done when all its parts are."""

    value = None

    def __init__(self, parts, what):
        self.parts, self.what = tuple(parts), what

    @property
    def done(self):
        return all(part._done() for part in self.parts)

    def describe(self):
        return self.what


def _requests(requests, call):
    requests = list(requests)
    bad = [r for r in requests if not isinstance(r, Request)]
    if bad:
        raise mpi_error(
            ERR_REQUEST,
            f"Request.{call}: {bad[0]!r} is not a request (give the "
            "requests isend, irecv, Isend and Irecv return)",
        )
    return requests


def _statuses(statuses, n):
    """The statuses to fill, one a request (appended to a short list, as mpi4py does)."""
    if statuses is None:
        return [None] * n
    while len(statuses) < n and isinstance(statuses, list):
        statuses.append(Status())
    return list(statuses[:n]) + [None] * (n - len(statuses))


REQUEST_NULL = Request()
predefine(REQUEST_NULL=REQUEST_NULL)
