"""MPI's life on one rank, as mpi4py drives it: ``Init``, ``Finalize`` and the options a
program sets in ``mpi4py.rc`` before ``from mpi4py import MPI``.

mpi4py initializes MPI when its ``MPI`` module is imported, unless ``rc.initialize`` is
False (then the program calls ``MPI.Init()``), and sets the error handler of
``COMM_WORLD`` and ``COMM_SELF`` from ``rc.errors``: ``"exception"`` (the default) is
``ERRORS_RETURN`` with a Python exception raised, ``"fatal"`` and ``"default"`` are
``ERRORS_ARE_FATAL``, ``"abort"`` is ``ERRORS_ABORT``.  Each rank is initialized and
finalized on its own, as each process of ``mpirun`` is; calling ``Init`` twice, or
``Finalize`` before ``Init`` or twice, is erroneous in MPI (MPI 4.1, section 11.2) and
raises ``MPI.Exception``.  collsim's calls always raise, whatever the handler says.

Examples
--------
>>> import collsim
>>> from collsim import mpi as MPI
>>> def main():
...     before = MPI.Is_initialized(), MPI.Is_finalized()
...     MPI.Finalize()
...     return before, (MPI.Is_initialized(), MPI.Is_finalized())
>>> collsim.exec(main, n=2, echo=False).returns
[((True, False), (True, True)), ((True, False), (True, True))]
"""

from ..runtime import blocking
from .attributes import delete_attributes
from .exceptions import ERR_OTHER, mpi_error
from .handles import ERRORS_ABORT, ERRORS_ARE_FATAL, ERRORS_RETURN
from .handletable import constant
from .rc import imported
from .settings import run_state

# MPI's names (collsim.mpi re-exports them); errhandler_by_default is collsim's
__all__ = ["Init", "Init_thread", "Finalize", "Is_initialized", "Is_finalized"]

THREAD_MULTIPLE = 3  # the level collsim provides: each rank is a thread, run one at a time
INITIALIZED, FINALIZED = "initialized", "finalized"


_ERRHANDLERS = {
    "exception": ERRORS_RETURN,
    "default": ERRORS_ARE_FATAL,
    "fatal": ERRORS_ARE_FATAL,
    "abort": ERRORS_ABORT,
}


def errhandler_by_default():
    """The error handler a communicator has until ``Set_errhandler``: ``rc.errors``'s."""
    return _ERRHANDLERS.get(getattr(imported().options, "errors", None), ERRORS_RETURN)


def _stage():
    """``(states, rank id, stage)`` of the calling rank; None outside a run."""
    rank = blocking.calling_rank()
    if rank is None:  # outside a run: MPI is as mpi4py leaves it after import
        return None
    states = run_state(rank).lifecycle
    stage = states.get(rank.id)
    if stage is None and getattr(imported().options, "initialize", True):
        stage = INITIALIZED  # mpi4py initialized it when the program imported MPI
    return states, rank.id, stage


def Is_initialized():
    found = _stage()
    return True if found is None else found[2] is not None


def Is_finalized():
    found = _stage()
    return False if found is None else found[2] == FINALIZED


def Init():
    """Initialize MPI on this rank: only once, when ``mpi4py.rc.initialize`` is False."""
    Init_thread()


def Init_thread(required=THREAD_MULTIPLE):
    """:func:`Init`; gives the thread level provided (``THREAD_MULTIPLE``)."""
    found = _stage()
    if found is not None:
        states, rank, stage = found
        if stage is not None:
            raise mpi_error(
                ERR_OTHER,
                f"MPI.Init on rank {rank}: MPI is {stage} already; mpi4py initializes it "
                "when `from mpi4py import MPI` runs, unless mpi4py.rc.initialize = False",
            )
        states[rank] = INITIALIZED
    return THREAD_MULTIPLE


def Finalize():
    """End MPI on this rank (the run goes on until every rank's program returns); first,
    as MPI-3.1 section 8.7.1 says, ``COMM_SELF``'s attributes are deleted (their delete
    callbacks are where a library cleans up at the end)."""
    found = _stage()
    if found is None:
        return
    states, rank, stage = found
    if stage != INITIALIZED:
        said = "never initialized" if stage is None else "finalized already"
        raise mpi_error(ERR_OTHER, f"MPI.Finalize on rank {rank}: MPI was {said}")
    try:
        delete_attributes(constant("COMM_SELF"))
    finally:
        states[rank] = FINALIZED
