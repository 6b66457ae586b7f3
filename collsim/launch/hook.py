"""The scoped import hook: within a run, ``mpi4py`` and ``mpi4py.MPI`` are collsim's.

Each rank has its own ``mpi4py`` package, as each ``mpirun`` process has: its own
``mpi4py.rc``, and its own first import of ``mpi4py.MPI``, which reads ``rc`` and the
``MPI4PY_*`` environment then (:mod:`collsim.mpi.rc`).  ``sys.modules`` is one for all
ranks, so its ``mpi4py`` entries forward to the calling rank's package; a rank that
deletes one (mpi4py's own demos do) deletes it for every rank, so each rank's first use
of ``mpi4py`` puts the entries back, as a fresh process would find them.
"""

import functools
import os
import sys
import types

from .script import RankForwarding, _rank_id

__all__ = ["mpi4py_as_collsim"]

_UTIL = ("dtlib", "pkl5", "sync")  # the mpi4py.util modules collsim has
# why the others are not there (one a module: what it would need that collsim has not)
_WHY_NOT = {
    "mpi4py.futures": "its executors run tasks on worker processes spawned with "
    "MPI.Comm.Spawn or started by mpiexec as a pool, which collsim does not simulate",
    "mpi4py.util.pool": "its pools run tasks on mpi4py.futures' spawned worker processes, "
    "which collsim does not simulate",
    "mpi4py._mpiabi": "it finds the ABI of the MPI C library mpi4py.MPI was built for; "
    "collsim.mpi is Python, with no MPI library",
    "mpi4py.bench": "its benchmarks time a real MPI library",
}


class _RankPackage(types.ModuleType):
    """One rank's stand-in for the ``mpi4py`` package: ``MPI`` is :mod:`collsim.mpi` (read
    at the rank's first ``import mpi4py.MPI``), ``mpi4py.util.dtlib``, ``pkl5`` and ``sync``
    are :mod:`collsim.mpi.dtlib`, :mod:`~collsim.mpi.pkl5` and :mod:`~collsim.mpi.sync`,
    ``mpi4py.typing`` :mod:`collsim.mpi.hints`, ``mpi4py.run`` :mod:`.mpi4py_run`;
    ``pkl5.pickle`` is the calling rank's own, as it is a process's own."""

    def __init__(self):
        from .. import mpi
        from ..mpi import dtlib, hints, pkl5, rc, sync
        from . import mpi4py_run

        super().__init__("mpi4py", "collsim's stand-in for mpi4py (collsim.mpi)")
        # a package (so `import mpi4py.MPI` looks in sys.modules) whose folder is
        # collsim.mpi's; _OnlyMPI keeps any other submodule from being searched for there
        self.__file__ = mpi.__file__
        self.__path__ = [os.path.dirname(mpi.__file__)]
        self.__version__ = "collsim"
        self.rc = rc.Rc()  # the options a program sets before `from mpi4py import MPI`
        self.get_config = dict
        self.util = _Util("mpi4py.util", "collsim's stand-in: dtlib, pkl5, sync")
        self.util.__path__ = []
        self.util.dtlib, self.util.pkl5, self.util.sync = dtlib, pkl5, sync
        self.typing, self.run = hints, mpi4py_run  # the same for every rank: no state
        self.__main__ = mpi4py_run  # what `python -m mpi4py` runs: mpi4py.run's main

    def __getattr__(self, name):  # only for what is not there: MPI before its import
        if name != "MPI":
            raise AttributeError(f"module 'mpi4py' has no attribute {name!r}")
        from .. import mpi
        from ..mpi import rc

        # this rank imports mpi4py.MPI now: mpi4py reads rc and the environment here
        rc.remember(rc.read_at_import(self.__dict__.get("rc"), os.environ))
        self.MPI = mpi
        return mpi


class _PerRankPackage(RankForwarding):
    """``sys.modules["mpi4py"]``: the calling rank's package, made at its first use."""

    def __init__(self):
        super().__init__("mpi4py")
        object.__setattr__(self, "_collsim_copies", {})  # rank id (None outside) -> package

    def _collsim_target(self):
        copies, rank = self._collsim_copies, _rank_id()
        package = copies.get(rank)
        if package is None:
            package = copies[rank] = _RankPackage()
            _register(self)
        return package


class _Entry(RankForwarding):
    """``sys.modules["mpi4py.<path>"]``: that attribute of the calling rank's package
    (``util.pkl5``: the attribute ``pkl5`` of its ``util``)."""

    def __init__(self, package, path):
        super().__init__(f"mpi4py.{path}")

        def read():
            return functools.reduce(getattr, path.split("."), package)

        object.__setattr__(self, "_collsim_read", read)

    def _collsim_target(self):
        return self._collsim_read()


def _register(package):
    """Put the ``mpi4py`` entries into ``sys.modules`` where they are missing."""
    for path in ("MPI", "rc", "util", "typing", "run", *(f"util.{name}" for name in _UTIL)):
        sys.modules.setdefault(f"mpi4py.{path}", _Entry(package, path))
    sys.modules.setdefault("mpi4py.__main__", _Entry(package, "__main__"))
    sys.modules.setdefault("mpi4py", package)


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
        # the MPI4PY_* variables a program sets die with it, as a process's environment does
        self._environ = {k: v for k, v in os.environ.items() if k.startswith("MPI4PY_")}
        for key in self._saved:
            del sys.modules[key]
        package = _PerRankPackage()
        package._collsim_target()  # registers the entries in sys.modules
        sys.meta_path.insert(0, _OnlyMPI)
        return package

    def __exit__(self, *exc):
        if _OnlyMPI in sys.meta_path:
            sys.meta_path.remove(_OnlyMPI)
        for key in [k for k in sys.modules if _is_mpi4py(k)]:
            del sys.modules[key]
        sys.modules.update(self._saved)
        for key in [k for k in os.environ if k.startswith("MPI4PY_")]:
            del os.environ[key]
        os.environ.update(self._environ)
        return False


class _OnlyMPI:
    """A finder that says why ``mpi4py.futures`` (or any other submodule) is not there."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if _is_mpi4py(name) and name not in sys.modules:
            raise _not_there(name)
        return None


def _not_there(name):
    why = next((why for top, why in _WHY_NOT.items() if _within(name, top)), None)
    return ModuleNotFoundError(
        f"No module named {name!r}{': ' + why if why else ''}; under collsim, mpi4py has "
        "only mpi4py.MPI (collsim.mpi), mpi4py.typing, mpi4py.run and mpi4py.util's "
        + ", ".join(_UTIL),
        name=name,
    )


def _within(name, package):
    return name == package or name.startswith(package + ".")


class _Util(types.ModuleType):
    """``mpi4py.util``: ``from mpi4py.util import pool`` says why as ``import`` does (Python
    turns a missing attribute into a bare "cannot import name"; an ImportError passes)."""

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(f"module 'mpi4py.util' has no attribute {name!r}")
        raise _not_there(f"mpi4py.util.{name}")


def _is_mpi4py(name):
    return _within(name, "mpi4py")
