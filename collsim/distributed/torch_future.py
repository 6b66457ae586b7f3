"""``Work.get_future()`` of the collsim torch backend: a ``torch.futures.Future`` that a
rank completes by waiting for it in simulated time.

Gloo and NCCL complete a work's future from a thread of their own when the operation
ends.  A collsim rank is a thread that runs only while it holds the engine's baton, and
the operation ends in simulated time, so nothing may block outside collsim's calls: the
future here completes when the rank asks for it (``wait()``, ``value()``, ``done()`` once
the operation has ended), and ``then(callback)`` returns a future of the same kind, whose
callback runs when that one is waited for.  Its value is what gloo's is: the
operation's output tensors, a list (``[tensor]`` for ``all_reduce``; ``[]`` for
``barrier``).  ``torch.futures.wait_all`` and ``collect_all`` block in C++ and are not
supported on it: wait for each future.

Importing this module imports torch (only :mod:`collsim.distributed.torch_backend` does).

Examples
--------
>>> import torch, torch.distributed as dist, collsim
>>> def main():
...     dist.init_process_group()
...     t = torch.full((2,), float(dist.get_rank() + 1))
...     fut = dist.all_reduce(t, async_op=True).get_future()
...     halved = fut.then(lambda f: f.value()[0] / 2)
...     return fut.done(), halved.wait().tolist(), fut.done()
>>> collsim.exec(main, n=2, echo=False).returns[0]
(False, [1.5, 1.5], True)
"""

import torch

__all__ = ["CollsimFuture"]


class CollsimFuture(torch.futures.Future):
    """A future whose value ``complete()`` gives (blocking the rank in simulated time),
    and whose ``done()`` asks ``ended()``; completed once, on first need."""

    def __init__(self, complete, ended):
        super().__init__()
        self._complete, self._ended = complete, ended

    def _settle(self):
        if not super().done():
            try:
                value = self._complete()
            except Exception as exc:  # an error of the operation or the callback: torch's
                self.set_exception(exc)
            else:
                self.set_result(value)

    def done(self):
        if not super().done() and self._ended():
            self._settle()
        return super().done()

    def wait(self):
        self._settle()
        return super().wait()

    def value(self):
        self._settle()
        return super().value()

    def then(self, callback):
        """A future of ``callback(self)``, run when it is waited for (torch's ``then``)."""
        return CollsimFuture(lambda: callback(self._waited()), self.done)

    def _waited(self):
        self._settle()
        return self


def work_future(work, result):
    """The future of a :class:`~collsim.distributed.torch_backend.CollsimWork` whose
    operation writes the tensors ``result``."""

    def complete():
        work.wait()
        return result

    return CollsimFuture(complete, work.is_completed)
