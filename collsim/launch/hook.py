"""The scoped import hook: within a run, ``mpi4py`` and ``mpi4py.MPI`` are collsim's."""

import sys
import types

__all__ = ["mpi4py_as_collsim"]


def _mpi4py_package():
    """A stand-in for the ``mpi4py`` package: ``MPI`` is :mod:`collsim.mpi`."""
    from .. import mpi

    package = types.ModuleType("mpi4py", "collsim's stand-in for mpi4py (collsim.mpi)")
    package.MPI = mpi
    package.__path__ = []  # a package, so `import mpi4py.MPI` looks in sys.modules
    package.__version__ = "collsim"
    # mpi4py.rc: the options scripts set before `from mpi4py import MPI`; read by nobody
    package.rc = types.SimpleNamespace(
        initialize=True, finalize=True, thread_level="multiple", threads=True
    )
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
            raise ModuleNotFoundError(
                f"No module named {name!r}: under collsim, mpi4py has "
                "only mpi4py.MPI (collsim.mpi)",
                name=name,
            )
        return None


def _is_mpi4py(name):
    return name == "mpi4py" or name.startswith("mpi4py.")
