"""The scoped import hook: within a run, ``mpi4py`` and ``mpi4py.MPI`` are collsim's."""

import dataclasses
import os
import sys
import types

__all__ = ["mpi4py_as_collsim"]


def _mpi4py_package():
    """A stand-in for the ``mpi4py`` package: ``MPI`` is :mod:`collsim.mpi`,
    ``mpi4py.util.dtlib`` is :mod:`collsim.mpi.dtlib`."""
    from .. import mpi
    from ..mpi import dtlib, lifecycle

    package = types.ModuleType("mpi4py", "collsim's stand-in for mpi4py (collsim.mpi)")
    package.MPI = mpi
    # a package (so `import mpi4py.MPI` looks in sys.modules) whose folder is collsim.mpi's;
    # _OnlyMPI keeps any other submodule from being searched for there
    package.__file__ = mpi.__file__
    package.__path__ = [os.path.dirname(mpi.__file__)]
    package.__version__ = "collsim"
    # mpi4py.rc: the options a script sets before `from mpi4py import MPI`, with mpi4py's
    # defaults; the run's MPI reads initialize and errors (collsim.mpi.lifecycle)
    package.rc = types.ModuleType("mpi4py.rc", "mpi4py's runtime options (collsim's)")
    for option, default in dataclasses.asdict(lifecycle.Options()).items():
        setattr(package.rc, option, default)
    package.get_config = dict
    util = types.ModuleType("mpi4py.util", "collsim's stand-in: only mpi4py.util.dtlib")
    util.__path__, util.dtlib = [], dtlib
    package.util = util
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
        sys.modules["mpi4py.rc"] = package.rc
        sys.modules["mpi4py.util"] = package.util
        sys.modules["mpi4py.util.dtlib"] = package.util.dtlib
        sys.meta_path.insert(0, _OnlyMPI)
        from ..mpi.settings import configure

        # the run's MPI reads the options the program sets in mpi4py.rc
        self._settings = configure(options=package.rc)
        return package

    def __exit__(self, *exc):
        from ..mpi.settings import configure

        configure(options=self._settings.options)
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
                "only mpi4py.MPI (collsim.mpi) and mpi4py.util.dtlib",
                name=name,
            )
        return None


def _is_mpi4py(name):
    return name == "mpi4py" or name.startswith("mpi4py.")
