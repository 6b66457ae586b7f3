"""torch.distributed under ``collsim exec``: a script that imports torch runs its
``torch.distributed`` calls on the virtual cluster (the ``"collsim"`` backend of
:mod:`collsim.distributed.torch_run`); without torch installed it is refused before the
run, with the command that installs it.

>>> imports_torch(compile("import torch.distributed as dist", "s.py", "exec"))
True
>>> imports_torch(compile("from mpi4py import MPI", "s.py", "exec"))
False
"""

import contextlib
import dis
import importlib.util
import os
import sys

from ..errors import ConfigError

__all__ = ["imports_torch", "torch_setting", "INSTALL_TORCH"]

INSTALL_TORCH = "pip install 'collsim[torch]'"


def imports_torch(code):
    """Whether ``code`` (a script's code object, functions in it included) imports torch."""
    for instruction in dis.get_instructions(code):
        if instruction.opname == "IMPORT_NAME" and instruction.argval.split(".")[0] == "torch":
            return True
    return any(imports_torch(c) for c in code.co_consts if hasattr(c, "co_code"))


def torch_setting(code=None, what=None):
    """The ``with`` block a run needs for torch: torch.distributed on collsim if ``code``
    (a script's, or the function's) imports torch or torch is imported already; else
    nothing.  Code that imports torch where it is not installed is refused now, naming
    ``what`` (the script's path, or the function)."""
    wanted = code is not None and imports_torch(code)
    if wanted and not _installed("torch"):
        name = f"script {what}" if isinstance(what, str | os.PathLike) else repr(what)
        raise ConfigError(
            f"{name}: imports torch, which is not installed; install it with "
            f"{INSTALL_TORCH} (its torch.distributed calls then run on collsim's backend)"
        )
    if wanted or "torch.distributed" in sys.modules:
        from ..distributed.torch_run import torch_on_collsim

        return torch_on_collsim()
    return contextlib.nullcontext()


def _installed(name):
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a parent that fails to import, a module set to None
        return False
