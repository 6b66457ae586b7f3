"""``collsim.mpi``: mpi4py's API on the virtual cluster (``from collsim import mpi as MPI``).

Programs written for mpi4py run unchanged on collsim's ranks: under ``collsim exec``,
``from mpi4py import MPI`` gives this module.  Each rank runs the program in a thread of
its own (:mod:`collsim.runtime.blocking`); every call blocks in simulated time, the
messages are real numpy arrays on the simulated network, and :func:`Wtime` reads the
simulated clock.  Code between calls costs no simulated time unless the program says so
(``collsim.runtime.blocking.compute(seconds=...)``).

What is here, with mpi4py's names and semantics: ``COMM_WORLD``, ``COMM_SELF``,
``Get_rank``/``Get_size``/``rank``/``size``; the lowercase calls on picklable objects
(``send``, ``recv``, ``isend``, ``irecv``, ``sendrecv``, ``bcast``, ``scatter``,
``gather``, ``allgather``, ``reduce``, ``allreduce``, ``alltoall``, ``barrier``); the
uppercase calls on buffers (``Send``, ``Recv``, ``Isend``, ``Irecv``, ``Sendrecv``,
``Bcast``, ``Scatter``, ``Gather``, ``Allgather``, ``Reduce``, ``Allreduce``,
``Reduce_scatter_block``, ``Alltoall``, ``Barrier``) with numpy arrays or
``[buf, MPI.DOUBLE]`` specs; ``IN_PLACE``; ``Request`` (``Wait``, ``Test``, ``Waitall``)
and ``Status``; ``ANY_SOURCE``, ``ANY_TAG``, ``PROC_NULL``; the ops ``SUM``, ``PROD``,
``MAX``, ``MIN`` (and the logical and bitwise ones for objects); ``Split``, ``Dup``,
``Free``; ``Wtime`` and ``Wtick``.  Which algorithm each collective runs:
:mod:`collsim.mpi.buffers` and :mod:`collsim.mpi.objects`; how to choose it:
:func:`configure`.

Where it differs from a real MPI, on purpose: a blocking ``Send`` up to
:func:`configure`'s ``eager_limit`` (64 KiB) returns at once, a larger one when the data
has arrived (so a program that only works thanks to buffering deadlocks, with a report);
a pending ``Request.Test`` lets a poll's simulated time pass; the uppercase collectives
move the datatypes collsim's collectives move (DOUBLE, FLOAT, FLOAT16_T, INT, LONG) and
reduce with SUM, PROD, MAX or MIN.  Not here: the v-variants (``Gatherv``, ...),
``Probe``, ``Waitany``, user-defined ``Op.Create``, persistent requests, one-sided and
intercommunicator calls.

Examples
--------
>>> import numpy as np, collsim
>>> from collsim import mpi as MPI
>>> def main():
...     comm = MPI.COMM_WORLD
...     x = np.full(1024, float(comm.Get_rank()))
...     total = np.empty_like(x)
...     comm.Allreduce(x, total, op=MPI.SUM)        # collsim's ring all-reduce
...     return float(total[0]), MPI.Wtime()
>>> cluster = collsim.Cluster(collsim.topology.ring(4, "100GB/s", "5us"))
>>> result = collsim.runtime.blocking.run(cluster, main)
>>> value, seconds = result.returns[0]
>>> value, result.stats.bytes_sent[0]     # 2(K-1)/K of 8 KiB sent by each rank
(6.0, 12288)
>>> round(seconds * 1e6, 5)              # 2(K-1) steps of 5 us + 2 KiB / 100 GB/s
30.12288
"""

from ..runtime import blocking
from .buffers import IN_PLACE, InPlace
from .comm import COMM_NULL, COMM_SELF, COMM_WORLD, TAG_UB, Comm, Intracomm
from .datatypes import DATATYPES, Datatype
from .exceptions import (
    ERR_ARG,
    ERR_BUFFER,
    ERR_COMM,
    ERR_COUNT,
    ERR_OP,
    ERR_OTHER,
    ERR_RANK,
    ERR_REQUEST,
    ERR_ROOT,
    ERR_TAG,
    ERR_TRUNCATE,
    ERR_TYPE,
    SUCCESS,
    Exception,
)
from .reduction import BAND, BOR, BXOR, LAND, LOR, LXOR, MAX, MIN, PROD, SUM, Op
from .request import ANY_SOURCE, ANY_TAG, PROC_NULL, UNDEFINED, Request, Status
from .settings import configure, configured

# the datatypes as module constants: MPI.DOUBLE, MPI.INT, MPI.INT64_T, ...
globals().update(DATATYPES)

__all__ = [
    "COMM_WORLD",
    "COMM_SELF",
    "COMM_NULL",
    "Comm",
    "Intracomm",
    "Request",
    "Status",
    "Datatype",
    "Op",
    "InPlace",
    "IN_PLACE",
    "ANY_SOURCE",
    "ANY_TAG",
    "PROC_NULL",
    "UNDEFINED",
    "TAG_UB",
    "SUM",
    "PROD",
    "MAX",
    "MIN",
    "LAND",
    "LOR",
    "LXOR",
    "BAND",
    "BOR",
    "BXOR",
    "Wtime",
    "Wtick",
    "Exception",
    "configure",
    "configured",
    "Init",
    "Finalize",
    "Is_initialized",
    "Is_finalized",
    "Get_processor_name",
    "Get_version",
    "SUCCESS",
    "ERR_ARG",
    "ERR_BUFFER",
    "ERR_COMM",
    "ERR_COUNT",
    "ERR_OP",
    "ERR_OTHER",
    "ERR_RANK",
    "ERR_REQUEST",
    "ERR_ROOT",
    "ERR_TAG",
    "ERR_TRUNCATE",
    "ERR_TYPE",
    *DATATYPES,
]

WTICK = 1e-9  # seconds: the simulated clock is a float; reports round to nanoseconds


def Wtime():
    """Simulated seconds since the run started (the engine's clock, never wall time)."""
    return blocking.now()


def Wtick():
    """The resolution of :func:`Wtime`, in seconds."""
    return WTICK


def Init():
    """Nothing to do: a run starts initialized, as mpi4py initializes on import."""


def Finalize():
    """Nothing to do: the run ends when every rank's program returns."""


def Is_initialized():
    return True


def Is_finalized():
    return False


def Get_processor_name():
    """``"collsim-rank<r>"``: every rank is its own virtual GPU."""
    return f"collsim-rank{blocking.current_rank().id}"


def Get_version():
    """The MPI standard version whose calls this follows (mpi4py's form: a pair)."""
    return (3, 1)
