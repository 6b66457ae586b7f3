"""``MPI.Request`` (what ``isend``/``Irecv`` return) and ``MPI.Status`` (where a message came
from).

A request wraps the runtime's handle of a non-blocking send or receive.  ``Wait`` blocks
the rank until it is done; ``Test`` says whether it is.  A ``Test`` that finds it pending
lets simulated time pass (1 us, doubling with every further pending ``Test`` of that
request up to 1 ms): code between calls costs no simulated time, so without it a polling
loop ``while not req.Test(): ...`` would never let the message arrive.

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
...         got = comm.irecv(source=0, tag=7).wait(status)
...         return got, status.Get_source(), status.Get_tag(), status.Get_count() > 0
>>> collsim.runtime.blocking.run(collsim.Cluster(collsim.topology.ring(2)), main).returns[1]
({'step': 1}, 0, 7, True)
"""

from ..runtime import blocking
from .datatypes import BYTE, Datatype
from .exceptions import ERR_REQUEST, mpi_error

__all__ = ["Request", "Status", "ANY_SOURCE", "ANY_TAG", "PROC_NULL", "UNDEFINED"]

# mpi4py's values (MPICH's); a program compares against the names only
ANY_SOURCE = -2
ANY_TAG = -1
PROC_NULL = -1
UNDEFINED = -32766

FIRST_POLL = 1e-6  # simulated seconds a pending Test costs at first
LAST_POLL = 1e-3  # ... doubling up to this


class Status:
    """Where a received message came from: ``Get_source()``, ``Get_tag()``, ``Get_count()``."""

    def __init__(self):
        self.source = ANY_SOURCE
        self.tag = ANY_TAG
        self.error = 0
        self.count = 0  # bytes, as mpi4py's Status.count

    def _fill(self, source, tag, nbytes):
        self.source, self.tag, self.count = source, tag, nbytes

    def Get_source(self):
        return self.source

    def Get_tag(self):
        return self.tag

    def Get_error(self):
        return self.error

    def Get_count(self, datatype=BYTE):
        """Elements of ``datatype`` that arrived (bytes by default); ``UNDEFINED`` where the
        bytes are not a whole number of them."""
        if not isinstance(datatype, Datatype):
            raise mpi_error(ERR_REQUEST, f"Status.Get_count({datatype!r}): give an MPI datatype")
        whole, rest = divmod(self.count, datatype.size)
        return UNDEFINED if rest else whole

    Get_elements = Get_count

    def Set_source(self, source):
        self.source = source

    def Set_tag(self, tag):
        self.tag = tag

    def Set_error(self, error):
        self.error = error

    def Is_cancelled(self):
        return False

    def __repr__(self):
        return f"Status(source={self.source}, tag={self.tag}, count={self.count} B)"


class Request:
    """A pending send or receive; ``finish(value)`` turns the handle's value into
    ``(result, (source, tag, nbytes) or None)`` once it is done."""

    def __init__(self, handle, finish=None):
        self._handle = handle  # None: complete from the start (e.g. PROC_NULL)
        self._finish = finish
        self._result = None
        self._status = None
        self._finished = handle is None
        self._poll = FIRST_POLL

    def _conclude(self, status):
        if not self._finished:
            self._finished = True
            if self._finish is not None:
                self._result, self._status = self._finish(self._handle.value)
        if status is not None and self._status is not None:
            status._fill(*self._status)
        return self._result

    def _pending(self):
        return not self._finished and not self._handle.done

    # -- waiting --------------------------------------------------------------------------

    def wait(self, status=None):
        """Block until done; the received object (None for a send)."""
        if self._pending():
            rank = blocking.current_rank()
            blocking.call(rank.wait(self._handle))
        return self._conclude(status)

    def Wait(self, status=None):
        """Block until done; True, as mpi4py's Wait returns."""
        self.wait(status)
        return True

    def test(self, status=None):
        """``(True, object)`` if done, else ``(False, None)`` after a poll's simulated time."""
        if self._pending():
            rank = blocking.current_rank()
            blocking.call(rank.compute(seconds=self._poll, label="MPI Test (pending)"))
            self._poll = min(2 * self._poll, LAST_POLL)
            if self._pending():
                return False, None
        return True, self._conclude(status)

    def Test(self, status=None):
        return self.test(status)[0]

    def Free(self):
        """Drop the request (the operation still completes)."""

    @classmethod
    def waitall(cls, requests, statuses=None):
        """Block until every request is done; their objects, in order."""
        requests = _requests(requests, "waitall")
        pending = [r._handle for r in requests if r._pending()]
        if pending:
            rank = blocking.current_rank()
            blocking.call(rank.wait(*pending))
        if statuses is not None:
            while len(statuses) < len(requests):
                statuses.append(Status())
        return [
            r._conclude(None if statuses is None else statuses[i]) for i, r in enumerate(requests)
        ]

    @classmethod
    def Waitall(cls, requests, statuses=None):
        cls.waitall(requests, statuses)
        return True

    @classmethod
    def testall(cls, requests, statuses=None):
        """``(True, objects)`` once all are done, else ``(False, None)``."""
        requests = _requests(requests, "testall")
        pending = [r for r in requests if r._pending()]
        if pending:
            flag, _ = pending[0].test()
            if not flag or any(r._pending() for r in pending):
                return False, None
        return True, cls.waitall(requests, statuses)

    @classmethod
    def Testall(cls, requests, statuses=None):
        return cls.testall(requests, statuses)[0]

    def __repr__(self):
        state = "pending" if self._pending() else "done"
        what = "" if self._handle is None else f" {self._handle.describe()}"
        return f"<MPI.Request{what} {state}>"


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
