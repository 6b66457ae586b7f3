"""The script a run executes: loaded and checked before the run, and each rank's own
``__main__`` module while it runs."""

import builtins
import types
from pathlib import Path

from ..errors import ConfigError

__all__ = ["load_script", "PerRankMain", "RankForwarding", "MAX_SCRIPT_BYTES"]

MAX_SCRIPT_BYTES = 16 * 2**20  # a script larger than this is not a program but a data file


class RankForwarding(types.ModuleType):
    """A module whose every attribute is the calling rank's module's
    (``_collsim_target()``); its own fields start with ``_collsim_``."""

    def __getattribute__(self, name):
        if name.startswith("_collsim_"):
            return object.__getattribute__(self, name)
        return getattr(self._collsim_target(), name)

    def __setattr__(self, name, value):
        setattr(self._collsim_target(), name, value)

    def __delattr__(self, name):
        delattr(self._collsim_target(), name)

    def __dir__(self):
        return dir(self._collsim_target())


class PerRankMain(RankForwarding):
    """``sys.modules["__main__"]`` during a script's run: to the rank whose code reads it,
    that rank's own ``__main__`` module.

    On a real cluster every rank is a process with its own ``__main__``; here the ranks share
    one interpreter, so every attribute (``__dict__``, ``__doc__``, the script's classes and
    functions) is read from and written to the calling rank's module.  That is how pickle
    finds a class the script defined, and how ``unittest.main()``, ``doctest.testmod()``,
    ``dir()`` and ``vars()`` see the script's names.  Outside a rank (collsim's own threads)
    it is the interpreter's own ``__main__``.

    >>> import sys
    >>> main = PerRankMain(sys.modules[__name__])
    >>> main.PerRankMain is PerRankMain  # outside a rank: the module it stands in for
    True
    """

    def __init__(self, outer):
        super().__init__("__main__")
        # set past __setattr__ (which forwards); the prefix keeps them apart from the script's
        object.__setattr__(self, "_collsim_outer", outer)  # the interpreter's own __main__
        object.__setattr__(self, "_collsim_modules", {})  # rank id -> that rank's __main__

    def _collsim_run(self, path, code):
        """Run ``code`` (the script at ``path``) as the calling rank's ``__main__``."""
        module = types.ModuleType("__main__")
        module.__file__, module.__builtins__ = str(path), builtins
        self._collsim_modules[_rank_id()] = module
        builtins.exec(code, module.__dict__)

    def _collsim_target(self):
        """The module the calling thread means by ``__main__``."""
        module = self._collsim_modules.get(_rank_id())
        if module is None:  # collsim's own threads: the interpreter's __main__
            module = self._collsim_outer
        if module is None:
            raise AttributeError("module '__main__' is not available outside a rank")
        return module


def _rank_id():
    """The id of the rank whose code is running, or None outside a rank."""
    from ..runtime import blocking

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
