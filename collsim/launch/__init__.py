"""Run ordinary blocking SPMD code on K simulated ranks: ``collsim.exec`` and ``exec_script``.

Each rank runs the code in its own thread on the blocking core
(:mod:`collsim.runtime.blocking`): one rank at a time, in simulated-time order, so a run is
deterministic.  Within the run

- ``from mpi4py import MPI`` (and ``import mpi4py.MPI``) gives :mod:`collsim.mpi`.  The
  import hook is scoped: ``sys.modules`` is put back afterwards, so a real mpi4py, if
  installed, is untouched outside the run;
- each rank's ``print`` goes to ``sys.stdout`` tagged per line as Open MPI's
  ``mpirun --tag-output`` tags it (``[1,0]<stdout>:text``), and is also kept per rank in
  the result.

Compute between the calls is free: only communication (and ``collsim.compute(seconds=...)``
or ``flops=...``) takes simulated time.

Examples
--------
>>> def main():
...     from mpi4py import MPI
...     comm = MPI.COMM_WORLD
...     print("rank", comm.Get_rank(), "total", comm.allreduce(comm.Get_rank()))
>>> result = exec(main, n=2)
[1,0]<stdout>:rank 0 total 1
[1,1]<stdout>:rank 1 total 1
>>> result.stdout
['rank 0 total 1\\n', 'rank 1 total 1\\n']
"""

import contextlib
import os
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

from .. import topology as topo
from ..errors import ConfigError, DeadlockError, UnmatchedMessagesError
from ..runtime import Cluster, RunResult
from ..runtime.blocking import MAX_THREADS
from .failures import Exits, RankError, rank_error
from .hook import mpi4py_as_collsim
from .output import JOB_ID, TaggedWriter
from .rank_modules import script_modules
from .script import PerRankMain, load_script
from .torch_hook import torch_setting

__all__ = [
    "exec",
    "exec_script",
    "ExecResult",
    "RankError",
    "TaggedWriter",
    "mpi4py_as_collsim",
    "check_algorithm",
    "check_trace",
    "load_script",
    "MAX_EXEC_RANKS",
    "JOB_ID",
]

MAX_EXEC_RANKS = MAX_THREADS  # one thread per rank (the blocking core's limit)
_ACTIVE = threading.Lock()  # one run at a time: sys.stdout and sys.modules are global


@dataclass
class ExecResult:
    """What :func:`exec` and :func:`exec_script` return."""

    run: RunResult  # the simulation: time, stats (bytes per rank and link), trace
    returns: list  # per-rank return value of the function (None for a script)
    stdout: list = field(default_factory=list)  # per-rank text printed to stdout
    stderr: list = field(default_factory=list)  # per-rank text printed to stderr
    # messages no rank received (or receives never matched) when every rank had ended, which
    # MPI implementations warn of at finalize: UnmatchedMessage records, and the report's
    # sentences about them (a tag mismatch is one sentence for both ends)
    unmatched: tuple = ()
    unmatched_report: tuple = ()

    @property
    def time(self):
        """Simulated seconds of the run, from the engine's clock."""
        return self.run.time

    @property
    def bytes_sent(self):
        """Bytes each rank sent, a list by rank."""
        return list(self.run.stats.bytes_sent)

    @property
    def trace(self):
        return self.run.trace


# -- the runs ----------------------------------------------------------------------------


def exec(
    main,
    n=None,
    topology=None,
    algorithm=None,
    protocol=None,
    trace=None,
    args=(),
    kwargs=None,
    cluster=None,
    echo=True,
    strict=False,
):
    """Run ``main(*args, **kwargs)`` on ``n`` ranks, each in its own thread, and return an
    :class:`ExecResult` (the RunResult, each rank's return value, its output).

    Parameters
    ----------
    main : callable
        Ordinary blocking code: ``from mpi4py import MPI`` (or ``collsim.mpi``,
        ``collsim.distributed``) inside it is collsim's.
    n : int
        Number of ranks (``mpirun -n``).  Default: the cluster's or topology's size.
    topology : str or networkx.DiGraph, optional
        ``"ring"`` (default), ``"bidirectional_ring"``, ``"fully_connected"`` or
        ``"switch"`` of ``n`` ranks at 100 GB/s and 5 us per link, or a graph from
        :mod:`collsim.topology` / :mod:`collsim.hardware`.
    algorithm : str, optional
        The algorithm MPI collectives run (``"ring"``, ``"tree"``, ...); default ring.
    protocol : str, optional
        NCCL's wire protocol (see :class:`~collsim.Cluster`).
    trace : str or Path, optional
        Write the run's Chrome/Perfetto trace JSON here.
    cluster : Cluster, optional
        Run on this cluster instead (then ``topology`` and ``protocol`` stay ``None``).
    echo : bool
        Write each rank's output tagged to ``sys.stdout``/``sys.stderr`` (else only keep it).
    strict : bool
        Raise :class:`~collsim.errors.UnmatchedMessagesError` for a message no rank
        received.  Default: keep them in ``result.unmatched`` and return, as an MPI
        implementation warns of them at finalize and exits 0.

    A rank that raises ends the run with a :class:`RankError` naming it and its last frame;
    a deadlock raises :class:`~collsim.DeadlockError`.
    """
    if not callable(main):
        raise ConfigError(f"collsim.exec({main!r}): give a function to run on every rank")
    kwargs = {} if kwargs is None else dict(kwargs)
    cluster = _cluster(n, topology, protocol, cluster)
    trace_path = check_trace(trace)
    torch_run = torch_setting(getattr(main, "__code__", None), main)
    return _launch(
        cluster, lambda: main(*args, **kwargs), algorithm, trace_path, echo, strict, torch_run
    )


def exec_script(
    path,
    n=None,
    argv=(),
    topology=None,
    algorithm=None,
    protocol=None,
    trace=None,
    cluster=None,
    echo=True,
    strict=False,
):
    """Run the Python file ``path`` unmodified on ``n`` ranks, as ``mpirun -n n python path
    *argv`` would: each rank runs its code as ``__main__`` with ``sys.argv = [path, *argv]``
    and the script's folder first on ``sys.path``.  The other parameters are :func:`exec`'s.

    A missing or unreadable file, or one that does not compile, is refused before the run.
    """
    path, code = load_script(path)
    cluster = _cluster(n, topology, protocol, cluster)
    trace_path = check_trace(trace)
    torch_run = torch_setting(code, path)  # refused now if it needs torch and has none
    folder = str(path.parent)

    main = PerRankMain(sys.modules.get("__main__"))

    def script():
        main._collsim_run(path, code)  # the rank's copy of the script, as its __main__

    saved_argv, saved_path, before = sys.argv, list(sys.path), set(sys.modules)
    sys.argv, sys.path[:0] = [str(path), *map(str, argv)], [folder]
    sys.modules["__main__"] = main
    try:
        with script_modules(folder):  # each rank's own copy of the script's helper modules
            return _launch(cluster, script, algorithm, trace_path, echo, strict, torch_run)
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
        if main._collsim_outer is not None:
            sys.modules["__main__"] = main._collsim_outer
        else:
            sys.modules.pop("__main__", None)
        # the script's own modules (next to it) are imported afresh by the next run
        for name in set(sys.modules) - before:
            origin = getattr(sys.modules[name], "__file__", None) or ""
            if origin and os.path.dirname(os.path.abspath(origin)) == folder:
                del sys.modules[name]


def _cluster(n, topology, protocol, cluster):
    """The cluster to run on, every argument checked before any thread starts."""
    if n is not None and (isinstance(n, bool) or not isinstance(n, int)):
        raise ConfigError(f"n={n!r}: the number of ranks must be a whole number, e.g. n=4")
    if cluster is not None:
        if not isinstance(cluster, Cluster):
            raise ConfigError(f"cluster={cluster!r}: give a collsim.Cluster")
        if topology is not None or protocol is not None:
            raise ConfigError(
                "cluster= with topology= or protocol=: the cluster has its "
                "own; give one or the other"
            )
        size = cluster.size
    elif topology is None or isinstance(topology, str):
        name = "ring" if topology is None else topology
        shapes = ("ring", "bidirectional_ring", "fully_connected", "switch")
        if name not in shapes:
            raise ConfigError(
                f"topology={name!r}: choose one of {', '.join(shapes)}, or "
                "pass a graph from collsim.topology or collsim.hardware"
            )
        if n is None:
            raise ConfigError("collsim.exec: give n=, the number of ranks (mpirun -n), e.g. n=4")
        _check_n(n)
        cluster = Cluster(topo.PRESETS[name](n), protocol=protocol)
        size = n
    else:
        cluster = Cluster(topology, protocol=protocol)
        size = cluster.size
    if n is not None and n != size:
        raise ConfigError(f"n={n} on a cluster of {size} ranks: give n={size} or another cluster")
    _check_n(size)
    return cluster


def _check_n(n):
    if n < 1 or n > MAX_EXEC_RANKS:
        nearest = min(max(n, 1), MAX_EXEC_RANKS)
        raise ConfigError(
            f"n={n}: ranks must be 1 to {MAX_EXEC_RANKS:,} (one thread each); "
            f"nearest valid n={nearest}"
        )


def check_trace(trace, flag=None):
    """The trace file as a Path, refused before the run if it cannot be written (a
    missing folder, a folder, a device such as /dev/full)."""
    if trace is None:
        return None
    given = f"{flag} {trace}" if flag else f"trace={str(trace)!r}"
    if str(trace) == "":
        raise ConfigError(f"{given}: give a file name, like run.json")
    path = Path(trace)
    if path.is_dir():
        raise ConfigError(f"{given}: is a folder; give a file name inside it")
    if path.exists() and not path.is_file():
        raise ConfigError(f"{given}: is not a regular file (a device?); give a file name")
    folder = path.parent
    if not folder.is_dir():
        what = (
            "is a file, not a folder"
            if folder.exists() or _under_a_file(folder)
            else ("does not exist; create it first")
        )
        raise ConfigError(f"{given}: folder {folder} {what}")
    if not os.access(folder, os.W_OK):
        raise ConfigError(f"{given}: folder {folder} is not writable")
    return path


def _under_a_file(folder):
    return any(p.exists() and not p.is_dir() for p in folder.parents)


def _launch(cluster, body, algorithm, trace_path, echo, strict, torch_run):
    """Run ``body()`` on every rank with the hooks (mpi4py's, and ``torch_run`` for
    torch.distributed), the writers and the MPI setting in place."""
    from ..runtime import blocking

    setting = _mpi_setting(algorithm)  # checked (and named) before any thread
    if not _ACTIVE.acquire(blocking=False):
        raise ConfigError("collsim.exec inside a run of collsim.exec: one run at a time")
    size = cluster.size

    def rank_of():  # a thread a rank started prints as that rank
        rank = blocking.calling_rank()
        return None if rank is None else rank.id

    out = TaggedWriter("stdout", sys.stdout, rank_of, size, echo, muted=blocking.stopped)
    err = TaggedWriter("stderr", sys.stderr, rank_of, size, echo, muted=blocking.stopped)

    def rank_main():
        try:
            return body()
        except SystemExit as exc:  # sys.exit() in a script: 0 ends that rank normally
            status = 0 if exc.code is None else exc.code
            if isinstance(status, bool):  # unittest.main() exits with not successful
                status = int(status)
            if status != 0:
                if not isinstance(status, int):  # sys.exit("message") prints it, status 1
                    print(status, file=sys.stderr)
                    status = 1
                if not blocking.stopped():  # not an exit while the run is being stopped
                    exits.note(blocking.current_rank().id, status)
            return None

    saved, exits = (sys.stdout, sys.stderr), Exits()
    try:
        with mpi4py_as_collsim(), setting, torch_run:
            sys.stdout, sys.stderr = out, err
            run, unmatched, report = _run_to_finalize(cluster, rank_main, strict)
    except BaseException as exc:  # Ctrl-C too: the ranks' unfinished lines are written
        out.finish(), err.finish()
        if exits.first is not None and isinstance(exc, DeadlockError):
            raise exits.error(str(exc).split(":", 2)[-1].strip()) from None  # waited for it
        if getattr(exc, "rank", None) is not None and not isinstance(exc, DeadlockError):
            raise rank_error(exc, err) from exc  # the user's code (or one of its calls)
        raise
    finally:
        sys.stdout, sys.stderr = saved
        _ACTIVE.release()
    out.finish(), err.finish()
    if exits.first is not None:
        raise exits.error()
    if trace_path is not None:
        try:
            run.trace.to_chrome(trace_path)
        except OSError as exc:
            raise ConfigError(f"trace {trace_path}: cannot write it ({exc.strerror})") from None
    return ExecResult(
        run,
        list(run.returns),
        [out.text(r) for r in range(size)],
        [err.text(r) for r in range(size)],
        unmatched,
        report,
    )


def _run_to_finalize(cluster, rank_main, strict):
    """``(RunResult, unmatched messages, their report)``: a message left unmatched once
    every rank has ended is what MPI_Finalize warns of, not a failure of the run, unless
    ``strict``."""
    from ..runtime import blocking

    try:
        return blocking.run(cluster, rank_main), (), ()
    except UnmatchedMessagesError as exc:
        if strict:
            raise
        return exc.result, exc.messages, exc.lines


def check_algorithm(algorithm, flag=None):
    """Refuse an algorithm no MPI collective has, naming it (as ``flag`` when given).

    >>> check_algorithm("warp", flag="--algorithm")
    Traceback (most recent call last):
    ...
    collsim.errors.ConfigError: --algorithm 'warp': no collective has that algorithm: ...
    """
    from ..mpi.settings import configured

    if algorithm is None:
        return None
    try:
        with configured(algorithm=algorithm):  # refused here, before any thread starts
            pass
    except ConfigError as exc:
        rule = str(exc).split(": ", 1)[-1]
        given = f"{flag} {algorithm!r}" if flag else f"algorithm={algorithm!r}"
        raise ConfigError(f"{given}: {rule}") from None
    return algorithm


def _mpi_setting(algorithm):
    """The ``with`` block in which MPI and torch.distributed-style collectives run
    ``algorithm`` (None: as configured, the cluster's default); checked now."""
    check_algorithm(algorithm)
    return _both_settings(algorithm)


@contextlib.contextmanager
def _both_settings(algorithm):
    from ..distributed.settings import configured as distributed_configured
    from ..mpi.settings import configured

    if algorithm is None:
        with configured():
            yield
        return
    with configured(algorithm=algorithm), distributed_configured(algorithm=algorithm):
        yield
