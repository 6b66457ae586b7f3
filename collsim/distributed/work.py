"""``Work``: what a call with ``async_op=True`` (and ``isend``/``irecv``) returns.

The operation runs in simulated time while the rank goes on; its output tensor is
written when the operation completes, so before :meth:`Work.wait` (or while
:meth:`Work.is_completed` is False) the tensor may still hold its old values, as on a
GPU stream.

Examples
--------
>>> import numpy as np, collsim
>>> from collsim.runtime import blocking
>>> from collsim import distributed as dist
>>> def main():
...     dist.init_process_group()
...     t = np.full(2, float(dist.get_rank()))
...     work = dist.all_reduce(t, async_op=True)
...     before = t.tolist(), work.is_completed()
...     work.wait()
...     return before, t.tolist(), work.is_completed()
>>> blocking.run(collsim.Cluster(collsim.topology.ring(2)), main).returns[1]
(([1.0, 1.0], False), [1.0, 1.0], True)
"""

from ..runtime import blocking

__all__ = ["Work", "issue"]


class Work:
    """A pending operation of one rank: ``wait()`` blocks until it is done."""

    __slots__ = ("_rank", "_handle", "_tensors", "_what", "_source")

    def __init__(self, rank, handle, tensors, what, source=None):
        self._rank, self._handle, self._tensors, self._what = rank, handle, tensors, what
        self._source = source  # an irecv's sender, where it named one

    def wait(self, timeout=None):
        """Block the calling rank until the operation is done; returns True, as torch."""
        if not self._handle.done:
            blocking.call(self._rank.wait(self._handle))
        return True

    def is_completed(self):
        """Whether the operation is done (in simulated time), without blocking."""
        return self._handle.done

    def is_success(self):
        return self._handle.done

    def result(self):
        """The tensors the operation writes (valid once it is done)."""
        return list(self._tensors)

    def _source_rank(self):
        """The sender's global rank of a finished ``irecv`` (torch's private name)."""
        self.wait()
        return self._source if self._source is not None else self._handle.value.src

    def __repr__(self):
        state = "done" if self._handle.done else "pending"
        return f"<Work {self._what} {state}>"


def issue(rank, program, async_op, tensors, what):
    """Run ``program`` (a generator of rank operations) for ``rank``: now, blocking until
    it is done (returns None), or with ``async_op`` in the background on the rank's
    communication stream (returns its :class:`Work`)."""
    if async_op:
        return Work(rank, blocking.call(rank.start(program, name=what)), tensors, what)
    blocking.call(program)
    return None
