"""``mpi4py.util.sync`` under ``collsim exec``: ``Sequential`` runs; the rest needs ``Win``.

``Sequential(comm, tag)`` runs a block one rank after another in rank order: ``begin``
waits for an empty message from the rank before, ``end`` sends one to the rank after
(mpi4py's documentation, "mpi4py.util.sync").  ``Counter``, ``Mutex``, ``Condition`` and
``Semaphore`` live in memory that any rank reads and updates without its owner taking part
(``MPI.Win.Allocate`` and atomic ``Fetch_and_op``/``Compare_and_swap``, MPI 4.1 chapter 12):
one-sided communication, which collsim does not simulate, so making one raises
``NotImplementedError`` at once, naming the class and ``MPI.Win``.

Examples
--------
>>> import collsim
>>> from collsim import mpi as MPI
>>> def main():
...     with Sequential(MPI.COMM_WORLD):
...         print(f"rank {MPI.COMM_WORLD.rank} in turn")
>>> _ = collsim.exec(main, n=3)
[1,0]<stdout>:rank 0 in turn
[1,1]<stdout>:rank 1 in turn
[1,2]<stdout>:rank 2 in turn
>>> Counter()
Traceback (most recent call last):
    ...
NotImplementedError: mpi4py.util.sync.Counter needs MPI one-sided communication \
(MPI.Win.Allocate, atomic Fetch_and_op), which collsim does not simulate (Win is out of \
scope); count with comm.allreduce, or order a block with sync.Sequential
"""

import numpy as np

from .status import PROC_NULL

__all__ = ["Sequential", "Counter", "Mutex", "Condition", "Semaphore"]

_NOTHING = np.zeros(0, dtype=np.uint8)  # the token passed from rank to rank


class Sequential:
    """A block that the ranks of ``comm`` run one at a time, in rank order."""

    def __init__(self, comm, tag=0):
        self.comm, self.tag = comm, tag

    def __enter__(self):
        self.begin()
        return self

    def __exit__(self, *exc):
        self.end()

    def _neighbour(self, step):
        rank, size = self.comm.Get_rank(), self.comm.Get_size()
        return rank + step if 0 <= rank + step < size else PROC_NULL

    def begin(self):
        """Wait for the rank before to finish its block (rank 0 goes at once)."""
        self.comm.Recv(_NOTHING, self._neighbour(-1), self.tag)

    def end(self):
        """Let the rank after begin."""
        self.comm.Send(_NOTHING, self._neighbour(+1), self.tag)


def _needs_win(name, what, instead):
    def refused(self, *args, **kwargs):
        raise NotImplementedError(
            f"mpi4py.util.sync.{name} needs MPI one-sided communication (MPI.Win.Allocate, "
            f"{what}), which collsim does not simulate (Win is out of scope); {instead}"
        )

    return type(name, (), {"__init__": refused, "__doc__": f"``sync.{name}``: needs MPI.Win."})


Counter = _needs_win(
    "Counter",
    "atomic Fetch_and_op",
    "count with comm.allreduce, or order a block with sync.Sequential",
)
Mutex = _needs_win(
    "Mutex",
    "atomic Compare_and_swap",
    "order a block with sync.Sequential, or pass a token with send and recv",
)
Condition = _needs_win(
    "Condition",
    "a Mutex and a queue in a window",
    "wait for a message with comm.recv, or use comm.barrier",
)
Semaphore = _needs_win(
    "Semaphore",
    "atomic Fetch_and_op",
    "order a block with sync.Sequential, or pass a token with send and recv",
)
