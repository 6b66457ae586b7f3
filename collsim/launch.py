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

import builtins
import contextlib
import io
import os
import sys
import threading
import traceback
import types
from dataclasses import dataclass, field
from pathlib import Path

from . import topology as topo
from .errors import CollsimError, ConfigError, DeadlockError
from .runtime import Cluster, RunResult
from .runtime.blocking import MAX_THREADS

__all__ = ["exec", "exec_script", "ExecResult", "RankError", "TaggedWriter", "mpi4py_as_collsim",
           "check_algorithm", "check_trace", "load_script", "MAX_EXEC_RANKS", "JOB_ID"]  # fmt: skip

MAX_EXEC_RANKS = MAX_THREADS  # one thread per rank (the blocking core's limit)
JOB_ID = 1  # the "1" of Open MPI's "[1,rank]" tag (its job number; one job per run)
MAX_SCRIPT_BYTES = 16 * 2**20  # a script larger than this is not a program but a data file
_ACTIVE = threading.Lock()  # one run at a time: sys.stdout and sys.modules are global


class RankError(CollsimError):
    """A rank's code raised (or called ``sys.exit`` with a non-zero status).

    ``rank`` is the rank, ``error`` the exception its code raised, ``where`` the last
    frame of the traceback (``file:line, in function``) and ``others`` what the other
    ranks were doing then (the blocking core's note), ``status`` the exit status.
    """

    def __init__(self, message, rank=None, error=None, where=None, others="", status=1):
        super().__init__(message)
        self.rank, self.error, self.where, self.others = rank, error, where, others
        self.status = status


class _RankExit(Exception):
    """Raised in a rank's thread for ``sys.exit(status)`` with a non-zero status."""

    def __init__(self, status):
        super().__init__(f"sys.exit({status!r})")
        self.status = status


@dataclass
class ExecResult:
    """What :func:`exec` and :func:`exec_script` return."""

    run: RunResult  # the simulation: time, stats (bytes per rank and link), trace
    returns: list  # per-rank return value of the function (None for a script)
    stdout: list = field(default_factory=list)  # per-rank text printed to stdout
    stderr: list = field(default_factory=list)  # per-rank text printed to stderr

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


class TaggedWriter(io.TextIOBase):
    """A ``sys.stdout`` for the run: a rank's text is tagged per line and kept per rank.

    ``rank_of()`` says which rank the calling thread belongs to, or ``None`` (collsim's
    own threads, whose text passes through untagged).  A line is written once complete;
    :meth:`finish` writes the unfinished ones.

    >>> out = io.StringIO()
    >>> w = TaggedWriter("stdout", out, rank_of=lambda: 3, size=4)
    >>> _ = w.write("a\\nb"); _ = w.write("c\\n")
    >>> out.getvalue()
    '[1,3]<stdout>:a\\n[1,3]<stdout>:bc\\n'
    """

    def __init__(self, name, target, rank_of, size, echo=True):
        self.name, self.target, self.rank_of, self.echo = name, target, rank_of, echo
        self.texts = [[] for _ in range(size)]  # every piece a rank wrote, in order
        self._partial = [""] * size  # a rank's unfinished line

    @property
    def encoding(self):
        return getattr(self.target, "encoding", "utf-8")

    def isatty(self):
        return False  # the tags make it a log, as mpirun's output is

    def writable(self):
        return True

    def write(self, text):
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        rank = self.rank_of()
        if rank is None:
            return self.target.write(text)
        self.texts[rank].append(text)
        *lines, self._partial[rank] = (self._partial[rank] + text).split("\n")
        if self.echo:
            for line in lines:
                self.target.write(f"{self.tag(rank)}{line}\n")
        return len(text)

    def tag(self, rank):
        """``[1,rank]<stdout>:``, Open MPI's ``--tag-output`` prefix."""
        return f"[{JOB_ID},{rank}]<{self.name}>:"

    def flush(self):
        self.target.flush()

    def finish(self):
        """Write every rank's unfinished line (with a newline), then flush."""
        for rank, rest in enumerate(self._partial):
            if rest and self.echo:
                self.target.write(f"{self.tag(rank)}{rest}\n")
            self._partial[rank] = ""
        self.flush()

    def text(self, rank):
        return "".join(self.texts[rank])


# -- the scoped import hook ------------------------------------------------------------


def _mpi4py_package():
    """A stand-in for the ``mpi4py`` package: ``MPI`` is :mod:`collsim.mpi`."""
    from . import mpi

    package = types.ModuleType("mpi4py", "collsim's stand-in for mpi4py (collsim.mpi)")
    package.MPI = mpi
    package.__path__ = []  # a package, so `import mpi4py.MPI` looks in sys.modules
    package.__version__ = "collsim"
    # mpi4py.rc: the options scripts set before `from mpi4py import MPI`; read by nobody
    package.rc = types.SimpleNamespace(initialize=True, finalize=True, thread_level="multiple",
                                       threads=True)  # fmt: skip
    package.get_config = dict
    return package


class mpi4py_as_collsim:  # a context manager, named like the function it acts as
    """Within the block ``mpi4py`` and ``mpi4py.MPI`` are collsim's; afterwards every
    ``mpi4py`` entry of ``sys.modules`` is what it was (absent, or a real mpi4py).

    >>> with mpi4py_as_collsim():
    ...     from mpi4py import MPI
    ...     MPI.__name__
    'collsim.mpi'
    >>> "mpi4py" in sys.modules
    False
    """

    def __enter__(self):
        self._saved = {k: v for k, v in sys.modules.items() if _is_mpi4py(k)}
        for key in self._saved:
            del sys.modules[key]
        package = _mpi4py_package()
        sys.modules["mpi4py"] = package
        sys.modules["mpi4py.MPI"] = package.MPI
        sys.meta_path.insert(0, _OnlyMPI)
        return package

    def __exit__(self, *exc):
        if _OnlyMPI in sys.meta_path:
            sys.meta_path.remove(_OnlyMPI)
        for key in [k for k in sys.modules if _is_mpi4py(k)]:
            del sys.modules[key]
        sys.modules.update(self._saved)
        return False


class _OnlyMPI:
    """A finder that says why ``mpi4py.futures`` (or any other submodule) is not there."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if _is_mpi4py(name) and name not in sys.modules:
            raise ModuleNotFoundError(f"No module named {name!r}: under collsim, mpi4py has "
                                      "only mpi4py.MPI (collsim.mpi)", name=name)  # fmt: skip
        return None


def _is_mpi4py(name):
    return name == "mpi4py" or name.startswith("mpi4py.")


# -- the runs ----------------------------------------------------------------------------


def exec(main, n=None, topology=None, algorithm=None, protocol=None, trace=None, args=(),
         kwargs=None, cluster=None, echo=True):  # fmt: skip
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

    A rank that raises ends the run with a :class:`RankError` naming it and its last frame;
    a deadlock raises :class:`~collsim.DeadlockError`.
    """
    if not callable(main):
        raise ConfigError(f"collsim.exec({main!r}): give a function to run on every rank")
    kwargs = {} if kwargs is None else dict(kwargs)
    cluster = _cluster(n, topology, protocol, cluster)
    trace_path = check_trace(trace)
    return _launch(cluster, lambda: main(*args, **kwargs), algorithm, trace_path, echo)


def exec_script(path, n=None, argv=(), topology=None, algorithm=None, protocol=None,
                trace=None, cluster=None, echo=True):  # fmt: skip
    """Run the Python file ``path`` unmodified on ``n`` ranks, as ``mpirun -n n python path
    *argv`` would: each rank runs its code as ``__main__`` with ``sys.argv = [path, *argv]``
    and the script's folder first on ``sys.path``.  The other parameters are :func:`exec`'s.

    A missing or unreadable file, or one that does not compile, is refused before the run.
    """
    path, code = load_script(path)
    cluster = _cluster(n, topology, protocol, cluster)
    trace_path = check_trace(trace)
    folder = str(path.parent)

    main = _PerRankMain(sys.modules.get("__main__"))

    def script():
        # the rank's __main__ is the namespace its copy of the script runs in
        namespace = {"__name__": "__main__", "__file__": str(path), "__builtins__": builtins,
                     "__spec__": None}  # fmt: skip
        main._collsim_modules[_rank_id()] = namespace
        builtins.exec(code, namespace)

    saved_argv, saved_path, before = sys.argv, list(sys.path), set(sys.modules)
    sys.argv, sys.path[:0] = [str(path), *map(str, argv)], [folder]
    sys.modules["__main__"] = main
    try:
        return _launch(cluster, script, algorithm, trace_path, echo)
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


class _PerRankMain(types.ModuleType):
    """``sys.modules["__main__"]`` during a script's run: each rank's own ``__main__``.

    On a real cluster every rank is a process with its own ``__main__``; here the ranks share
    one interpreter, so a name looked up in ``__main__`` (as pickle looks up a class the
    script defined, to send its instances) is read from the calling rank's module.
    """

    def __init__(self, outer):
        super().__init__("__main__")
        # (names a script will not define: the module's own attributes shadow the script's)
        self._collsim_outer = outer  # the interpreter's own __main__, for collsim's threads
        self._collsim_modules = {}  # rank id -> that rank's __main__ namespace

    def __getattr__(self, name):
        namespace = self._collsim_modules.get(_rank_id())
        try:
            if namespace is None:  # collsim's own threads: the interpreter's __main__
                return getattr(self._collsim_outer, name)
            return namespace[name]
        except (KeyError, AttributeError):
            raise AttributeError(f"module '__main__' has no attribute {name!r}") from None


def _rank_id():
    """The id of the rank whose code is running, or None outside a rank."""
    from .runtime import blocking

    try:
        return blocking.current_rank().id
    except ConfigError:
        return None


def load_script(path):
    """``(Path, code object)`` of a script; a bad path or a syntax error is refused naming it."""
    if path is None or str(path) == "":
        raise ConfigError(f"script {path!r}: give the Python file to run, e.g. pi.py")
    given, p = str(path), Path(path)
    try:
        problem = _file_problem(p)
        source = None if problem else p.read_bytes()
    except OSError as exc:
        raise ConfigError(f"script {given}: cannot read it ({exc.strerror or exc})") from None
    if problem:
        raise ConfigError(f"script {given}: {problem}")
    try:
        code = compile(source, str(p.resolve()), "exec", dont_inherit=True)
    except (SyntaxError, ValueError, UnicodeDecodeError) as exc:
        line = f":{exc.lineno}" if getattr(exc, "lineno", None) else ""
        what = getattr(exc, "msg", None) or str(exc)
        raise ConfigError(f"script {given}{line}: {type(exc).__name__}: {what}") from None
    return p.resolve(), code


def _file_problem(p):
    """Why ``p`` is not a script to run, or None."""
    if not p.exists():
        return f"no such file{_nearest(p)}"
    if not p.is_file():
        return "is not a regular file (a folder or a device); give a Python file"
    if p.stat().st_size > MAX_SCRIPT_BYTES:
        return f"{p.stat().st_size:,} bytes is not a Python program (at most {MAX_SCRIPT_BYTES:,})"
    return None


def _nearest(path):
    """`` (did you mean pi.py?)`` when a Python file in the same folder is close."""
    import difflib

    folder = path.parent
    if not folder.is_dir():
        return f" (folder {folder} does not exist)"
    names = sorted(q.name for q in folder.glob("*.py"))
    near = difflib.get_close_matches(path.name, names, n=1)
    return f" (did you mean {folder / near[0]}?)" if near else ""


def _cluster(n, topology, protocol, cluster):
    """The cluster to run on, every argument checked before any thread starts."""
    if n is not None and (isinstance(n, bool) or not isinstance(n, int)):
        raise ConfigError(f"n={n!r}: the number of ranks must be a whole number, e.g. n=4")
    if cluster is not None:
        if not isinstance(cluster, Cluster):
            raise ConfigError(f"cluster={cluster!r}: give a collsim.Cluster")
        if topology is not None or protocol is not None:
            raise ConfigError("cluster= with topology= or protocol=: the cluster has its "
                              "own; give one or the other")  # fmt: skip
        size = cluster.size
    elif topology is None or isinstance(topology, str):
        name = "ring" if topology is None else topology
        shapes = ("ring", "bidirectional_ring", "fully_connected", "switch")
        if name not in shapes:
            raise ConfigError(f"topology={name!r}: choose one of {', '.join(shapes)}, or "
                              "pass a graph from collsim.topology or collsim.hardware")  # fmt: skip
        if n is None:
            raise ConfigError("collsim.exec: give n=, the number of ranks (mpirun -n), e.g. n=4")
        _check_n(n)
        cluster = Cluster(topo.PRESETS[name](n), protocol=protocol)
        size = n
    else:
        cluster = Cluster(topology, protocol=protocol)
        size = cluster.size
    if n is not None and n != size:
        raise ConfigError(f"n={n} on a cluster of {size} ranks: give n={size} or another "
                          "cluster")  # fmt: skip
    _check_n(size)
    return cluster


def _check_n(n):
    if n < 1 or n > MAX_EXEC_RANKS:
        nearest = min(max(n, 1), MAX_EXEC_RANKS)
        raise ConfigError(f"n={n}: ranks must be 1 to {MAX_EXEC_RANKS:,} (one thread each); "
                          f"nearest valid n={nearest}")  # fmt: skip


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
        what = "is a file, not a folder" if folder.exists() or _under_a_file(folder) else (
            "does not exist; create it first")  # fmt: skip
        raise ConfigError(f"{given}: folder {folder} {what}")
    if not os.access(folder, os.W_OK):
        raise ConfigError(f"{given}: folder {folder} is not writable")
    return path


def _under_a_file(folder):
    return any(p.exists() and not p.is_dir() for p in folder.parents)


def _launch(cluster, body, algorithm, trace_path, echo):
    """Run ``body()`` on every rank with the hook, the writers and the MPI setting in place."""
    from .runtime import blocking

    setting = _mpi_setting(algorithm)  # checked (and named) before any thread
    if not _ACTIVE.acquire(blocking=False):
        raise ConfigError("collsim.exec inside a run of collsim.exec: one run at a time")
    size = cluster.size
    threads = {}  # thread id -> rank id, filled as each rank starts

    def rank_of():
        return threads.get(threading.get_ident())

    out = TaggedWriter("stdout", sys.stdout, rank_of, size, echo)
    err = TaggedWriter("stderr", sys.stderr, rank_of, size, echo)

    def rank_main():
        threads[threading.get_ident()] = blocking.current_rank().id
        try:
            return body()
        except SystemExit as exc:  # sys.exit() in a script: 0 ends that rank normally
            status = 0 if exc.code is None else exc.code
            if status != 0:
                if not isinstance(status, int):  # sys.exit("message") prints it, status 1
                    print(status, file=sys.stderr)
                raise _RankExit(status) from None
            return None

    saved = sys.stdout, sys.stderr
    try:
        with mpi4py_as_collsim(), setting:
            sys.stdout, sys.stderr = out, err
            run = blocking.run(cluster, rank_main)
    except Exception as exc:
        out.finish(), err.finish()
        if isinstance(exc, _RankExit):
            raise _rank_error(exc, err) from None
        if getattr(exc, "rank", None) is not None and not isinstance(exc, DeadlockError):
            raise _rank_error(exc, err) from exc  # the user's code (or one of its calls)
        raise
    finally:
        sys.stdout, sys.stderr = saved
        _ACTIVE.release()
    out.finish(), err.finish()
    if trace_path is not None:
        try:
            run.trace.to_chrome(trace_path)
        except OSError as exc:
            raise ConfigError(f"trace {trace_path}: cannot write it ({exc.strerror})") from None
    return ExecResult(run, list(run.returns), [out.text(r) for r in range(size)],
                      [err.text(r) for r in range(size)])  # fmt: skip


def check_algorithm(algorithm, flag=None):
    """Refuse an algorithm no MPI collective has, naming it (as ``flag`` when given).

    >>> check_algorithm("warp", flag="--algorithm")
    Traceback (most recent call last):
    ...
    collsim.errors.ConfigError: --algorithm 'warp': no collective has that algorithm: ...
    """
    from .mpi.settings import configured

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
    from .distributed.settings import configured as distributed_configured
    from .mpi.settings import configured

    if algorithm is None:
        with configured():
            yield
        return
    with configured(algorithm=algorithm), distributed_configured(algorithm=algorithm):
        yield


def _rank_error(exc, err):
    """A :class:`RankError` for the exception a rank raised; its traceback goes to the
    rank's stderr first, as the Python interpreter in an mpirun process prints it."""
    rank = exc.rank
    others = "\n".join(getattr(exc, "__notes__", []) or [])
    if isinstance(exc, _RankExit):
        return RankError(f"rank {rank} called sys.exit({exc.status!r}); the run stopped there"
                         + (f"\n{others}" if others else ""), rank=rank, error=exc,
                         others=others, status=exc.status)  # fmt: skip
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not _ours(f.filename)]
    last = frames[-1] if frames else None
    where = f"{last.filename}:{last.lineno}, in {last.name}" if last else "(no frame of yours)"
    shown = traceback.format_list(frames) + [_exception_line(exc)]
    text = "Traceback (most recent call last):\n" + "".join(shown)
    if err.echo:
        for line in text.rstrip("\n").split("\n"):
            err.target.write(f"{err.tag(rank)}{line}\n")
        err.flush()
    code = f": {last.line}" if last is not None and last.line else ""
    message = (f"rank {rank} raised {type(exc).__name__}: {exc}\n  at {where}{code}"
               + (f"\n{others}" if others else ""))  # fmt: skip
    return RankError(message, rank=rank, error=exc, where=where, others=others)


def _exception_line(exc):
    """``ZeroDivisionError: division by zero`` as Python prints it, without collsim's notes."""
    kind, module = type(exc).__qualname__, type(exc).__module__
    if module not in ("builtins", "__main__"):
        kind = f"{module}.{kind}"
    text = str(exc)
    return f"{kind}: {text}\n" if text else f"{kind}\n"


_PACKAGE = os.path.dirname(os.path.abspath(__file__))


def _ours(filename):
    """Whether a traceback frame is collsim's own (the user's frames are what they read)."""
    return os.path.abspath(filename).startswith(_PACKAGE + os.sep)
