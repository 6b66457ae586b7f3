"""Each rank's own copy of the modules next to the script, as each mpirun process has its own.

The ranks share one interpreter, so a module is imported once for all of them, and a
module-level variable one rank sets is what another rank reads.  Library modules (numpy,
collsim) are meant to be shared; the script's own helper modules are the program, and a
program written for mpirun may keep state in them (mpi4py's test helpers keep the array
type of the loop they are in as an attribute of a function).  So while a script runs, a
module found in the script's folder is a :class:`PerRankModule`: to the rank whose code
reads it, that rank's own copy, executed on its first use by that rank.

>>> import sys, tempfile, pathlib
>>> folder = tempfile.mkdtemp()
>>> _ = (pathlib.Path(folder) / "helper_mod.py").write_text("state = []\\n")
>>> with script_modules(folder):
...     import helper_mod
...     type(helper_mod).__name__, helper_mod.state
('PerRankModule', [])
>>> "helper_mod" in sys.modules
False
"""

import importlib.machinery
import importlib.util
import os
import sys

from .script import RankForwarding, _rank_id

__all__ = ["PerRankModule", "script_modules"]


class PerRankModule(RankForwarding):
    """``sys.modules[name]`` for a module of the script's folder: the calling rank's copy."""

    def __init__(self, spec):
        super().__init__(spec.name)
        object.__setattr__(self, "_collsim_spec", spec)
        object.__setattr__(self, "_collsim_copies", {})  # rank id (None outside) -> module

    def _collsim_target(self):
        copies, rank = self._collsim_copies, _rank_id()
        module = copies.get(rank)
        if module is None:  # this rank's first use: run the module's code for it
            spec = self._collsim_spec
            module = copies[rank] = importlib.util.module_from_spec(spec)
            try:
                spec.loader.exec_module(module)
            except BaseException:
                del copies[rank]
                raise
        return module


class _Loader:
    """Makes the proxy; each rank's copy runs when that rank first reads it."""

    def __init__(self, spec):
        self.spec = spec

    def create_module(self, spec):
        return PerRankModule(self.spec)

    def exec_module(self, module):
        module._collsim_target()  # the importing rank's copy runs now, as an import does


class _FolderFinder:
    """Finds the top-level modules of one folder and gives them per-rank copies."""

    def __init__(self, folder):
        self.folder = os.path.abspath(folder)

    def find_spec(self, name, path=None, target=None):
        if "." in name:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, [self.folder])
        if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
            return None
        proxy = importlib.machinery.ModuleSpec(name, _Loader(spec), origin=spec.origin)
        proxy.has_location = True
        return proxy


class script_modules:  # a context manager, named like the function it acts as
    """Within the block, the top-level modules of ``folder`` are per rank; afterwards they
    are dropped from ``sys.modules`` (the next run imports them afresh)."""

    def __init__(self, folder):
        self.finder = _FolderFinder(folder)

    def __enter__(self):
        sys.meta_path.insert(0, self.finder)
        return self

    def __exit__(self, *exc):
        if self.finder in sys.meta_path:
            sys.meta_path.remove(self.finder)
        for name, module in list(sys.modules.items()):
            if isinstance(module, PerRankModule):
                del sys.modules[name]
        return False
