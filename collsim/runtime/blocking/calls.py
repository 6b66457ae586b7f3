"""What a rank's code calls in a blocking run: which rank it is, a blocking operation, the
simulated clock, compute time.  Each works from the rank's own code and from any thread it
started (a strand of the rank, :mod:`~collsim.runtime.blocking.strand`)."""

import inspect

from ...errors import ConfigError
from ..ops import Compute, Exchange, Recv, Send, Start, Wait
from .strand import current_strand

__all__ = ["current_rank", "calling_rank", "call", "stopped", "now", "compute", "in_main_thread"]

_OPS = (Send, Recv, Wait, Compute, Exchange, Start)


def _current():
    strand = current_strand()
    if strand is None:
        raise ConfigError(
            "this call blocks a rank of a virtual cluster, but it was made outside a run: "
            "run the function with collsim.exec(main, n=K) or the script with "
            "`collsim exec -n K script.py`"
        )
    return strand


def current_rank():
    """The :class:`~collsim.runtime.rank.Rank` whose code is running (in a blocking run)."""
    return _current().rank


def calling_rank():
    """The rank whose code is calling, or None outside a run."""
    strand = current_strand()
    return None if strand is None else strand.rank


def in_main_thread():
    """Whether the caller is a rank's own code (True outside a run too), not a thread it
    started: what ``MPI.Is_thread_main()`` says."""
    strand = current_strand()
    return strand is None or strand.main


def call(x):
    """Run ``x`` for the current rank and block until it is done; returns its value.

    ``x`` is a rank operation (``rank.send(...)``, ``rank.recv(...)``, ``rank.isend`` or
    ``rank.irecv`` (which return a handle at once), ``rank.wait(...)``,
    ``rank.compute(...)``, ``rank.exchange(...)``, ``rank.start(...)``) or a generator
    program to run with ``yield from`` (``rank.all_reduce(x)`` or any other collective).
    """
    strand = _current()
    if not (isinstance(x, _OPS) or inspect.isgenerator(x)):
        raise ConfigError(
            f"rank {strand.rank.id}: call({x!r}) takes a rank operation (rank.send(...), "
            "rank.recv(...), rank.wait(...), rank.compute(...)) or a collective's generator "
            f"(rank.all_reduce(x)), not a {type(x).__name__}"
        )
    return strand.post(x)


def stopped():
    """Whether the run ended without the calling rank (it runs on only to unwind)."""
    strand = current_strand()
    return strand is not None and strand.stopped


def now():
    """Simulated seconds on the engine's clock (what ``MPI.Wtime()`` returns)."""
    return _current().rank.now


def compute(seconds=None, flops=None):
    """Charge the current rank ``seconds`` of compute (or ``flops`` at the cluster's rate):
    code between calls is otherwise free in simulated time."""
    rank = current_rank()
    return call(rank.compute(seconds=seconds, flops=flops))
