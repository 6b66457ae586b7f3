"""How the MPI calls run: the collective algorithms, the eager limit, and per-run state.

:func:`configure` sets, for every run that starts afterwards, which algorithm the
uppercase collectives run (``collsim exec --algorithm`` passes it here) and up to how
many bytes a blocking ``Send`` returns before its receive is posted (eager, as MPICH and
Open MPI send small messages; ``eager_limit=0`` makes every ``Send`` synchronous, like
``MPI_Ssend``, which shows programs that only work thanks to buffering).
:func:`configured` does the same inside a ``with`` block only.

The per-run state (communicator ids, collective sequence numbers) lives with the run's
execution, so two runs never share it.

Examples
--------
>>> with configured(algorithm="halving_doubling"):
...     current().algorithm_for("all_reduce"), current().algorithm_for("broadcast")
('halving_doubling', None)
>>> current().algorithm_for("all_reduce") is None      # the cluster's default again
True
>>> configure(algorithm="warp")
Traceback (most recent call last):
...
collsim.errors.ConfigError: configure(algorithm='warp'): no collective has that \
algorithm: choose one of ring, tree, halving_doubling, naive, one_shot, two_shot, pat, direct, \
auto (or a dict {collective: algorithm})
"""

import contextlib
from dataclasses import dataclass, field, replace

from ..collectives.checks import is_int
from ..collectives.registry import algorithm_setting
from ..errors import ConfigError
from ..runtime import blocking

__all__ = ["Settings", "configure", "configured", "current", "run_state", "RunState"]
__all__ += ["rank_table"]

# the collsim collectives the uppercase calls run (Gather, Scatter and Barrier run over
# point-to-point and take no algorithm)
DEFAULT_EAGER_LIMIT = 64 * 1024  # bytes; MPICH's and Open MPI's thresholds are of this order


@dataclass(frozen=True)
class Settings:
    """What :func:`configure` sets."""

    # collective -> algorithm name; a collective not in it runs the cluster's default
    # (ring for all-reduce, reduce-scatter and all-gather, tree for broadcast and reduce,
    # direct for all-to-all; NCCL's choice, "auto", on a hardware preset)
    algorithms: dict = field(default_factory=dict)
    eager_limit: int = DEFAULT_EAGER_LIMIT
    # mpi4py.rc of the run: what the program asked of mpi4py before importing MPI (any
    # object with its attributes; collsim exec gives the run's mpi4py.rc module)
    options: object = None

    def algorithm_for(self, collective):
        """The algorithm for ``collective`` (a collsim name), None for the default."""
        return self.algorithms.get(collective)


_current = Settings()
_UNSET = object()


def current():
    """The :class:`Settings` in force."""
    return _current


def configure(algorithm=_UNSET, eager_limit=_UNSET, options=_UNSET):
    """Set how later runs' MPI calls run; returns the previous :class:`Settings`.

    ``algorithm`` is None (the cluster's defaults), one name (``"ring"``,
    ``"halving_doubling"``, ``"tree"``, ... : every collective that has it runs it, the
    others keep their default) or a dict ``{"all_reduce": "tree", "broadcast": "ring"}``.
    ``eager_limit`` is a number of bytes (0: every blocking Send is synchronous);
    ``options`` the run's ``mpi4py.rc`` (:class:`collsim.mpi.rc.Options`)."""
    global _current
    previous, changes = _current, {}
    if algorithm is not _UNSET:
        changes["algorithms"] = _algorithms(algorithm)
    if eager_limit is not _UNSET:
        if not is_int(eager_limit) or eager_limit < 0:
            raise ConfigError(
                f"configure(eager_limit={eager_limit!r}): a number of bytes, an int >= 0 "
                f"(default {DEFAULT_EAGER_LIMIT})"
            )
        changes["eager_limit"] = int(eager_limit)
    if options is not _UNSET:
        changes["options"] = options
    _current = replace(_current, **changes)
    return previous


@contextlib.contextmanager
def configured(**settings):
    """:func:`configure` inside a ``with`` block; the previous settings come back after."""
    global _current
    previous = configure(**settings)
    try:
        yield _current
    finally:
        _current = previous


def _algorithms(algorithm):
    return algorithm_setting(algorithm)


@dataclass
class RunState:
    """What the MPI layer remembers during one run (one per execution)."""

    settings: Settings
    # (parent context, call number, color) -> (point-to-point id, collective id) of a
    # communicator that Split or Dup made; ids are small ints, the same on every rank
    contexts: dict = field(default_factory=dict)
    next_id: int = 4  # COMM_WORLD has 0 and 1 (point-to-point, collectives), COMM_SELF 2, 3
    # (rank id, collective id) -> the number of that rank's next collective on it
    seq: dict = field(default_factory=dict)
    freed: set = field(default_factory=set)  # (rank id, point-to-point id) freed
    user_ops: dict = field(default_factory=dict)  # rank id -> live Op.Create ops
    locks: dict = field(default_factory=dict)  # (rank id, context) -> {key: Lock}
    lifecycle: dict = field(default_factory=dict)  # rank id -> "initialized" / "finalized"
    attached: dict = field(default_factory=dict)  # rank id -> the buffer Attach_buffer gave
    imported: dict = field(default_factory=dict)  # rank id -> what its mpi4py.MPI import read
    # (first byte, nbytes) -> weak reference to a buffer whose address Get_address gave
    # (mpi/memory.py): the run's ranks share one address space, as threads of one process
    addressed: dict = field(default_factory=dict)

    def context(self, key):
        """The two ids of the communicator ``key`` names, made on first use."""
        ids = self.contexts.get(key)
        if ids is None:
            ids = self.contexts[key] = (self.next_id, self.next_id + 1)
            self.next_id += 2
        return ids

    def lock_table(self, rank_id, context):
        """The rank's table of locks on communicator ``context`` (mpi4py's
        ``_comm_lock_table``: one per process and communicator), made on first use."""
        return self.locks.setdefault((rank_id, context), {})

    def next_seq(self, rank_id, context):
        key = (rank_id, context)
        seq = self.seq.get(key, 0)
        self.seq[key] = seq + 1
        return seq


def run_state(rank):
    """The :class:`RunState` of ``rank``'s run, made (with the settings in force) on first
    use and kept by the run itself (``execution.front_ends``), so it dies with the run."""
    kept = rank._execution.front_ends
    state = kept.get("mpi")
    if state is None:
        state = kept["mpi"] = RunState(_current)
    return state


def rank_table(name, make):
    """The calling rank's table ``name`` (``make()`` on first use), kept with its run so it
    dies with it; None outside a run."""
    rank = blocking.calling_rank()
    if rank is None:
        return None
    tables = rank._execution.front_ends.setdefault(f"mpi {name}", {})
    if rank.id not in tables:
        tables[rank.id] = make()
    return tables[rank.id]
