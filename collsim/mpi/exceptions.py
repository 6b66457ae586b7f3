"""MPI's error classes as collsim errors.

A bad MPI call returns an error class (``MPI_ERR_RANK``, ``MPI_ERR_ROOT``, ...), which
mpi4py raises as ``MPI.Exception``; a bad buffer argument mpi4py itself refuses with a
``ValueError`` before MPI sees it.  Here both are a
:class:`~collsim.errors.ConfigError` (itself a ``ValueError``) raised before anything
moves, whose message names the value, the rule and the exception mpi4py would raise.
The MPI ones are the subclass :class:`Exception` (exported as ``MPI.Exception``, so
``except MPI.Exception`` works as with mpi4py), which carries its error class.

Examples
--------
>>> err = mpi_error(ERR_ROOT, "Bcast(root=5): a root is a rank of the communicator, 0..3")
>>> err.Get_error_class() == ERR_ROOT, isinstance(err, ValueError)
(True, True)
>>> print(err)
Bcast(root=5): a root is a rank of the communicator, 0..3 (mpi4py raises MPI.Exception \
with MPI_ERR_ROOT)
"""

import builtins
import functools

from ..errors import ConfigError
from . import errorclasses
from .errorclasses import *  # noqa: F403  (SUCCESS, ERR_*, ERROR_NAMES: Open MPI's numbers)
from .errorclasses import ERR_ARG, ERR_OTHER, ERR_UNKNOWN, ERROR_NAMES, SUCCESS, UnknownCode

__all__ = ["Exception", "mpi_error", "value_error", *errorclasses.CONSTANTS]
__all__ += ["type_error", "key_error", "buffer_error", "memory_error", "unsupported"]
__all__ += ["Get_error_class", "Get_error_string", "Add_error_class", "Add_error_code"]
__all__ += ["Add_error_string", "Remove_error_class", "Remove_error_code"]
__all__ += ["Remove_error_string"]


@functools.total_ordering
class Exception(ConfigError, builtins.RuntimeError):  # mpi4py's name (shadows the builtin)
    """An MPI error raised as mpi4py's ``MPI.Exception`` (a RuntimeError there):
    ``MPI.Exception(MPI.ERR_ARG)`` has that code, its class and its string, and compares
    and orders with the code as an int does."""

    def __init__(self, message=ERR_OTHER, error_class=ERR_OTHER):
        if isinstance(message, int):  # MPI.Exception(MPI.ERR_OTHER), as mpi4py takes it
            # a negative code is no code: MPI calls it MPI_ERR_UNKNOWN, as mpi4py does
            code = ERR_UNKNOWN if message < SUCCESS else message
            message, error_class = _string_of(code), code
        super().__init__(message)
        self.error_code = error_class
        self.error_class = _class_of(error_class)

    @property
    def error_string(self):
        return _string_of(self.error_code)

    def __int__(self):
        return self.error_code

    def __bool__(self):
        return self.error_code != SUCCESS

    def __repr__(self):
        return f"MPI.Exception({self.error_code})"

    def __hash__(self):
        return hash(self.error_code)

    def __eq__(self, other):
        if isinstance(other, (Exception, int)):
            return self.error_code == int(other)
        return NotImplemented

    def __lt__(self, other):  # total_ordering makes <=, > and >= of it
        if isinstance(other, (Exception, int)):
            return self.error_code < int(other)
        return NotImplemented

    def Get_error_class(self):
        return self.error_class

    def Get_error_code(self):
        return self.error_code

    def Get_error_string(self):
        return self.error_string


def _class_of(code):
    # a code no table knows (past ERR_LASTCODE, never added) is its own class
    try:
        return errorclasses.table().class_of(code)
    except UnknownCode:
        return code


def _string_of(code):
    try:
        return errorclasses.table().string_of(code)
    except UnknownCode:
        return f"MPI error {code}"


def mpi_error(error_class, message):
    """An :class:`Exception` of ``error_class`` whose message says so."""
    name = ERROR_NAMES[error_class]
    return Exception(f"{message} (mpi4py raises MPI.Exception with {name})", error_class)


def value_error(message):
    """A ConfigError for what mpi4py refuses itself, with a ``ValueError``."""
    return ConfigError(f"{message} (mpi4py raises ValueError)")


# -- MPI's calls on the calling rank's error classes (collsim.mpi.errorclasses) ---------


def _on_table(method, *args):
    try:
        return getattr(errorclasses.table(), method)(*args)
    except UnknownCode as exc:
        raise mpi_error(ERR_ARG, str(exc)) from None


def Get_error_class(errorcode):
    """The error class of ``errorcode`` (a predefined class is its own)."""
    return _on_table("class_of", errorcode)


def Get_error_string(errorcode):
    """The text of ``errorcode``: its name and meaning, or what Add_error_string gave."""
    return _on_table("string_of", errorcode)


def Add_error_class():
    return _on_table("add_class")


def Add_error_code(errorclass):
    return _on_table("add_code", errorclass)


def Add_error_string(errorcode, string):
    _on_table("set_string", errorcode, string)


def Remove_error_class(errorclass):
    _on_table("remove", "Remove_error_class", errorclass, True)


def Remove_error_code(errorcode):
    _on_table("remove", "Remove_error_code", errorcode, False)


def Remove_error_string(errorcode):
    _on_table("remove_string", errorcode)


def last_used_code():
    """``COMM_WORLD.Get_attr(MPI.LASTUSEDCODE)``: the largest code in use."""
    return errorclasses.table().last_used


class _SpecTypeError(ConfigError, TypeError):
    """A buffer spec of the wrong type: a ConfigError that is mpi4py's ``TypeError``."""


class _SpecKeyError(ConfigError, KeyError):
    """A typecode with no datatype: a ConfigError that is mpi4py's ``KeyError``."""

    __str__ = builtins.Exception.__str__  # the message as written, not KeyError's repr


class _SpecMemoryError(ConfigError, MemoryError):
    """More memory than the machine has: ``MemoryError``, as mpi4py's allocation raises."""


class _SpecBufferError(ConfigError, BufferError):
    """Memory that cannot serve (read-only, strided, foreign byte order): ``BufferError``."""


def type_error(message):
    """A ConfigError for a spec mpi4py refuses with a ``TypeError`` (not a buffer, a
    count that is not an integer)."""
    return _SpecTypeError(f"{message} (mpi4py raises TypeError)")


def key_error(message):
    """A ConfigError for a typecode mpi4py cannot map to a datatype (its ``KeyError``).

    >>> isinstance(key_error("'zz'"), KeyError), str(key_error("'zz'"))
    (True, "'zz' (mpi4py raises KeyError)")
    """
    return _SpecKeyError(f"{message} (mpi4py raises KeyError)")


def unsupported(call, what="this call"):
    """The NotImplementedError for a call collsim does not simulate."""
    return builtins.NotImplementedError(
        f"{call}: {what} is not simulated by collsim; use point-to-point or collective calls"
    )


def memory_error(message):
    """A ConfigError for an allocation larger than the memory available (``MemoryError``)."""
    return _SpecMemoryError(f"{message} (mpi4py raises MemoryError)")


def buffer_error(message):
    """A ConfigError for memory mpi4py's buffer protocol refuses (its ``BufferError``)."""
    return _SpecBufferError(f"{message} (mpi4py raises BufferError)")
