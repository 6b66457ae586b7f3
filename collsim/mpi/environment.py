"""What a program asks the MPI library about itself, and what collsim does not simulate.

mpi4py's helpers read these when they start (``MPI.get_vendor()``, ``MPI.Query_thread()``,
``MPI.Get_library_version()``), so they answer: the library is ``collsim``, following MPI
3.1, and threads are ``THREAD_MULTIPLE`` (each rank is a thread, and each thread it starts
makes calls of its own; the engine runs one at a time).  One-sided communication
(``Win``: :mod:`.window`), MPI-IO (``File``), sessions and dynamic processes
(``Comm.Spawn``, ports) are not simulated: they raise ``NotImplementedError`` naming the
call at once, so a program that needs them stops there.

Examples
--------
>>> get_vendor()[0], Get_version(), Query_thread() == THREAD_MULTIPLE
('collsim', (3, 1), True)
>>> Win.Create(None)
Traceback (most recent call last):
...
NotImplementedError: MPI.Win.Create: one-sided communication (Win) is not simulated by \
collsim; use point-to-point or collective calls
"""

from ..runtime import blocking
from .buffer_object import buffer
from .exceptions import ERR_BUFFER, Get_error_class, Get_error_string, mpi_error, unsupported
from .handletable import Handle, predefine
from .settings import run_state
from .window import WindowCalls

__all__ = [
    "get_vendor",
    "Get_library_version",
    "Get_version",
    "Query_thread",
    "Is_thread_main",
    "Pcontrol",
    "Get_error_string",
    "Get_error_class",
    "Wtime",
    "Wtick",
    "Get_processor_name",
    "THREAD_SINGLE",
    "THREAD_FUNNELED",
    "THREAD_SERIALIZED",
    "THREAD_MULTIPLE",
    "VERSION",
    "SUBVERSION",
    "Win",
    "File",
    "Session",
    "WIN_NULL",
    "FILE_NULL",
    "SESSION_NULL",
    "Open_port",
    "Close_port",
    "Lookup_name",
    "Publish_name",
    "Unpublish_name",
    "Flush_buffer",
    "Iflush_buffer",
    "Get_hw_resource_info",
    "Attach_buffer",
    "Detach_buffer",
    "Alloc_mem",
    "Free_mem",
    "BSEND_OVERHEAD",
    "MODE_CREATE",
    "MODE_RDONLY",
    "MODE_WRONLY",
    "MODE_RDWR",
    "MODE_DELETE_ON_CLOSE",
    "MODE_UNIQUE_OPEN",
    "MODE_EXCL",
    "MODE_APPEND",
    "MODE_SEQUENTIAL",
    "unsupported",
]

VERSION, SUBVERSION = 3, 1  # the MPI standard whose calls this follows
COLLSIM_VERSION = (0, 1, 0)
THREAD_SINGLE, THREAD_FUNNELED, THREAD_SERIALIZED, THREAD_MULTIPLE = 0, 1, 2, 3
# the file modes of MPI-IO (MPI.File is not simulated; programs name them in File.Open)
MODE_CREATE, MODE_RDONLY, MODE_WRONLY, MODE_RDWR = 1, 2, 4, 8
MODE_DELETE_ON_CLOSE, MODE_UNIQUE_OPEN, MODE_EXCL, MODE_APPEND = 16, 32, 64, 128
MODE_SEQUENTIAL = 256
BSEND_OVERHEAD = 0  # Bsend copies into the simulated message at once: no buffer header
WTICK = 1e-9  # seconds: the simulated clock is a float; reports round to nanoseconds


def get_vendor():
    """``("collsim", (major, minor, patch))``, as mpi4py names its MPI library."""
    return "collsim", COLLSIM_VERSION


def Get_library_version():
    return "collsim {}.{}.{}: mpi4py's API on a simulated cluster".format(*COLLSIM_VERSION)


def Get_version():
    """The MPI standard version whose calls this follows (mpi4py's form: a pair)."""
    return VERSION, SUBVERSION


def Query_thread():
    return THREAD_MULTIPLE


def Is_thread_main():
    """Whether the caller is its rank's own code, not a thread that code started."""
    return blocking.in_main_thread()


def Pcontrol(level):
    """Profiling control: nothing to do (the trace records everything)."""


def Wtime():
    """Simulated seconds since the run started (the engine's clock, never wall time)."""
    return blocking.now()


def Wtick():
    """The resolution of :func:`Wtime`, in seconds."""
    return WTICK


def Get_processor_name():
    """``"collsim-rank<r>"``: every rank is its own virtual GPU."""
    return f"collsim-rank{blocking.current_rank().id}"


class _Unsimulated(Handle):
    """A handle class of a part of MPI collsim does not simulate: its null handle
    (``MPI.WIN_NULL``, ``MPI.Win()``) exists, as a program compares with it; every call
    raises."""

    _what = ""

    def _construct(self, other=None):
        if other is not None and not isinstance(other, self._family):
            name = type(self).__name__
            raise TypeError(f"MPI.{name}({other!r}): give an MPI.{name} to copy, or nothing")

    def __getattr__(self, name):  # the calls, on a handle: WIN_NULL.Free(), ...
        if name.startswith("_"):
            raise AttributeError(name)
        return type(self)._refuse(name)

    def __bool__(self):
        return False  # only the null handle exists

    def __eq__(self, other):
        if not isinstance(other, _Unsimulated):
            return NotImplemented
        return other._family is self._family

    def _handle_key(self):
        return None

    def _nullify(self):
        """Nothing to let go."""

    def __class_getitem__(cls, item):
        return cls

    def __init_subclass__(cls, what="", **kwargs):
        super().__init_subclass__(**kwargs)
        cls._what = what
        if _Unsimulated in cls.__bases__:
            cls._family = cls  # a Win is no File

    @classmethod
    def _refuse(cls, name):
        def refuse(*args, **kwargs):
            raise unsupported(f"MPI.{cls.__name__}.{name}", cls._what)

        return refuse


class _Refusing(type):
    def __getattr__(cls, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return cls._refuse(name)


class Win(WindowCalls, _Unsimulated, metaclass=_Refusing, what="one-sided communication (Win)"):
    """``MPI.Win``: not simulated (``Put``, ``Get`` and ``Accumulate`` check their specs
    first: :mod:`.window`)."""


class File(_Unsimulated, metaclass=_Refusing, what="MPI-IO (File)"):
    """``MPI.File``: not simulated."""


class Session(_Unsimulated, metaclass=_Refusing, what="MPI sessions"):
    """``MPI.Session``: not simulated."""


WIN_NULL, FILE_NULL, SESSION_NULL = Win(), File(), Session()
predefine(WIN_NULL=WIN_NULL, FILE_NULL=FILE_NULL, SESSION_NULL=SESSION_NULL)


def _refused(name, what="dynamic process management (ports, names)"):
    def refuse(*args, **kwargs):
        raise unsupported(f"MPI.{name}", what)

    refuse.__name__ = name
    return refuse


Open_port, Close_port = _refused("Open_port"), _refused("Close_port")
Lookup_name, Publish_name = _refused("Lookup_name"), _refused("Publish_name")
Unpublish_name = _refused("Unpublish_name")
# MPI 4.1's; collsim follows MPI 3.1, and mpi4py raises NotImplementedError for a call the
# MPI library lacks (Bsend copies the message at once here, so there is nothing to flush)
_FLUSH = "MPI 4.1's buffer flush (collsim follows MPI 3.1)"
Flush_buffer, Iflush_buffer = _refused("Flush_buffer", _FLUSH), _refused("Iflush_buffer", _FLUSH)
# MPI 4.1's too: a program checks MPI.Get_version() >= (4, 1) first, as mpi4py's tests do
Get_hw_resource_info = _refused(
    "Get_hw_resource_info", "MPI 4.1's hardware resource info (collsim follows MPI 3.1)"
)


def Alloc_mem(size, info=None):
    """``size`` bytes of memory, an ``MPI.buffer`` as mpi4py gives (collsim has no special
    memory: it is ordinary host memory)."""
    return buffer.allocate(size)


def Free_mem(mem):
    """Release ``mem`` (an ``MPI.buffer``): it is empty from now on; the memory goes when
    nothing refers to it."""
    if isinstance(mem, buffer):
        mem.release()


def Attach_buffer(buf):
    """Keep ``buf`` for :func:`Detach_buffer` (``Bsend`` copies into the simulated
    message at once, so nothing is written into it); one buffer a rank at a time, and
    writable memory, as MPI writes into it."""
    from .memory import array_of

    array_of(buf, "MPI.Attach_buffer(buf)", writable=True)
    attached, rank = _attached()
    if rank in attached:
        raise mpi_error(
            ERR_BUFFER,
            f"MPI.Attach_buffer on rank {rank}: a buffer is attached already; "
            "MPI.Detach_buffer() it first",
        )
    attached[rank] = buf


def Detach_buffer():
    """The buffer :func:`Attach_buffer` gave (None when none is attached)."""
    attached, rank = _attached()
    return attached.pop(rank, None)


def _attached():
    rank = blocking.current_rank()
    return run_state(rank).attached, rank.id
