"""What mpi4py reads when a process imports ``mpi4py.MPI``: the options in ``mpi4py.rc``,
the ``MPI4PY_RC_*`` and ``MPI4PY_PICKLE_*`` environment variables, read once per rank.

A program sets ``mpi4py.rc.initialize = False`` (or ``MPI4PY_RC_INITIALIZE=false`` in its
environment) before its first ``from mpi4py import MPI``; that import reads the options
(an environment variable wins over the attribute and is written back to it), warns with a
``RuntimeWarning`` of any value outside an option's choices and uses that option's default
instead.  These are the rules mpi4py documents ("Runtime configuration options" and
"Environment variables" in its docs).  Each rank of ``collsim exec`` has its own ``rc`` and
its own first import, as each process of ``mpirun`` has; what a rank read is kept with the
run (``RunState.imported``), so nothing outlives it.

Examples
--------
>>> rc = Rc()
>>> rc.errors = "fatal"
>>> read_at_import(rc, {"MPI4PY_RC_THREADS": "no"}).options.errors, rc.threads
('fatal', False)
>>> import warnings
>>> rc.irecv_bufsz = -1
>>> with warnings.catch_warnings(record=True) as said:
...     warnings.simplefilter("always")
...     read_at_import(rc, {}).options.irecv_bufsz, str(said[0].message)
(32768, 'mpi4py.rc.irecv_bufsz: unexpected value -1')
"""

import pickle as _pickle
import warnings
from dataclasses import dataclass, fields, replace

from ..errors import ConfigError
from ..runtime import blocking
from .settings import current, run_state

__all__ = ["Options", "Rc", "Imported", "read_at_import", "imported", "remember", "Pickle"]
__all__ += ["dumps", "loads"]

THREAD_LEVELS = ("multiple", "serialized", "funneled", "single")
ERROR_POLICIES = ("exception", "default", "fatal", "abort")
_TRUE, _FALSE = ("true", "yes", "on", "y", "1"), ("false", "no", "off", "n", "0")


@dataclass
class Options:
    """``mpi4py.rc``'s options, with mpi4py's defaults."""

    initialize: bool = True  # initialize MPI when mpi4py.MPI is imported
    threads: bool = True  # ask for thread support (MPI_Init_thread)
    thread_level: str = "multiple"
    finalize: object = None  # finalize at exit (None: when mpi4py initialized it)
    fast_reduce: bool = True
    recv_mprobe: bool = True
    irecv_bufsz: int = 32768  # bytes
    errors: str = "exception"  # "exception", "default", "fatal" or "abort"


_DEFAULTS = Options()


class Rc:
    """``mpi4py.rc``: set an option before the first ``from mpi4py import MPI``;
    ``rc(errors="fatal")`` sets several.  An unknown name is a TypeError, as mpi4py's."""

    locals().update({f.name: f.default for f in fields(Options)})

    def __init__(self, **options):
        self(**options)

    def __setattr__(self, name, value):
        if not hasattr(self, name):
            names = ", ".join(f.name for f in fields(Options))
            raise TypeError(f"mpi4py.rc has no option {name!r}: its options are {names}")
        super().__setattr__(name, value)

    def __call__(self, **options):
        for name, value in options.items():
            setattr(self, name, value)

    def __repr__(self):
        return "<mpi4py.rc>"


def _valid(name, value):
    """Whether ``value`` is one of option ``name``'s choices."""
    if name == "thread_level":
        return value in THREAD_LEVELS
    if name == "errors":
        return value in ERROR_POLICIES
    if name == "irecv_bufsz":
        return isinstance(value, int) and not isinstance(value, bool) and value >= 0
    if name == "finalize" and value is None:
        return True
    return isinstance(value, int) and value in (True, False)  # 1 and 0 are booleans too


def _from_environment(name, text):
    """An ``MPI4PY_RC_<NAME>`` value as the option's type (left a string if it is not one,
    so that the check warns of it)."""
    text = text.lower()
    if name == "irecv_bufsz":
        return int(text) if text.isdigit() else text
    if name in ("thread_level", "errors"):
        return text
    return True if text in _TRUE else False if text in _FALSE else text


@dataclass(frozen=True)
class Imported:
    """What one rank's import of ``mpi4py.MPI`` read: the options in force and
    ``MPI.pickle``'s protocol and threshold (bytes)."""

    options: Options
    pickle_protocol: int = _pickle.HIGHEST_PROTOCOL
    pickle_threshold: int = 256 * 1024
    # what MPI.pickle.__init__(dumps, loads, protocol) chose; None: the pickle module's
    pickle_dumps: object = None
    pickle_loads: object = None


def read_at_import(rc, environ):
    """The :class:`Imported` of an import with options ``rc`` (None: deleted, mpi4py's
    defaults) and environment ``environ``; writes the environment's options into ``rc``
    and warns of every value outside its choices."""
    in_force = {}
    for option in fields(Options):
        name = option.name
        value = getattr(rc, name, option.default) if rc is not None else option.default
        text = environ.get(f"MPI4PY_RC_{name.upper()}")
        if text is not None:
            value = _from_environment(name, text)
            if rc is not None:
                setattr(rc, name, value)
        if not _valid(name, value):
            warnings.warn(f"mpi4py.rc.{name}: unexpected value {value!r}", RuntimeWarning, 2)
            value = option.default
        in_force[name] = value
    found = Imported(Options(**in_force))
    for name in ("protocol", "threshold"):
        text = environ.get(f"MPI4PY_PICKLE_{name.upper()}")
        if text is not None:
            try:
                found = replace(found, **{f"pickle_{name}": int(text)})
            except ValueError:
                raise ValueError(
                    f"MPI4PY_PICKLE_{name.upper()}={text!r}: give an integer"
                ) from None
    return found


def remember(found):
    """Keep ``found`` (an :class:`Imported`) as what the calling rank's import read (with
    the run; outside a run there is no rank whose import it is, and nothing is kept)."""
    rank = blocking.calling_rank()
    if rank is not None:
        run_state(rank).imported[rank.id] = found


def imported():
    """What the calling rank's import of ``mpi4py.MPI`` read; before any (and outside a
    run), the options of :func:`~collsim.mpi.settings.configure`, else mpi4py's defaults."""
    rank = blocking.calling_rank()
    found = None if rank is None else run_state(rank).imported.get(rank.id)
    return found or Imported(current().options or _DEFAULTS)


class Pickle:
    """``MPI.pickle``: how the lowercase calls serialise objects, the calling rank's.
    ``MPI.pickle.__init__(dumps, loads, protocol)`` chooses other functions (``marshal``'s,
    ``dill``'s, JSON in bytes): ``dumps(obj, protocol)``, or ``dumps(obj)`` when the
    protocol is None; ``__init__()`` goes back to the pickle module.  ``PROTOCOL`` and
    ``THRESHOLD`` are the rank's (``MPI4PY_PICKLE_PROTOCOL``, ...)."""

    def __init__(self, dumps=None, loads=None, protocol=None):
        if blocking.calling_rank() is None:
            if (dumps, loads, protocol) != (None, None, None):
                raise ConfigError(
                    f"MPI.pickle.__init__({dumps!r}, {loads!r}, {protocol!r}) outside a run: "
                    "call it in the program a rank runs"
                )
            return
        if dumps is None and protocol is None:  # the pickle module's, at its protocol
            protocol = Imported.pickle_protocol
        chosen = {"pickle_dumps": dumps, "pickle_loads": loads, "pickle_protocol": protocol}
        remember(replace(imported(), **chosen))

    @staticmethod
    def dumps(obj):
        return dumps(obj)

    @staticmethod
    def loads(data):
        return loads(data)

    def _set(self, name, value):
        if blocking.calling_rank() is None:
            raise ConfigError(
                f"MPI.pickle.{name.removeprefix('pickle_').upper()} = {value!r} outside a "
                "run: set it in the program a rank runs"
            )
        remember(replace(imported(), **{name: int(value)}))

    PROTOCOL = property(
        lambda self: imported().pickle_protocol,
        lambda self, value: self._set("pickle_protocol", value),
    )
    THRESHOLD = property(
        lambda self: imported().pickle_threshold,
        lambda self, value: self._set("pickle_threshold", value),
    )


def dumps(obj):
    """``obj`` serialised as the calling rank's ``MPI.pickle`` does it."""
    found = imported()
    if found.pickle_dumps is None:
        return _pickle.dumps(obj, protocol=found.pickle_protocol)
    if found.pickle_protocol is None:
        return found.pickle_dumps(obj)
    return found.pickle_dumps(obj, found.pickle_protocol)


def loads(data):
    """What :func:`dumps` serialised, read back with the calling rank's ``loads``."""
    return (imported().pickle_loads or _pickle.loads)(data)
