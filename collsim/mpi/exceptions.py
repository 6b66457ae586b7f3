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

from ..errors import ConfigError

__all__ = [
    "Exception",
    "mpi_error",
    "value_error",
    "type_error",
    "key_error",
    "buffer_error",
    "memory_error",
    "ERROR_NAMES",
    "SUCCESS",
    "ERR_BUFFER",
    "ERR_COUNT",
    "ERR_TYPE",
    "ERR_TAG",
    "ERR_COMM",
    "ERR_RANK",
    "ERR_REQUEST",
    "ERR_ROOT",
    "ERR_OP",
    "ERR_ARG",
    "ERR_TRUNCATE",
    "ERR_OTHER",
    "ERR_GROUP",
    "ERR_TOPOLOGY",
    "ERR_DIMS",
    "ERR_UNKNOWN",
    "ERR_INTERN",
    "ERR_IN_STATUS",
    "ERR_PENDING",
    "ERR_INFO",
    "ERR_INFO_KEY",
    "ERR_INFO_NOKEY",
    "ERR_UNSUPPORTED_OPERATION",
    "ERR_LASTCODE",
]

# MPICH's numbers for the classes (mpi.h); programs compare them with the names only
SUCCESS = 0
ERR_BUFFER = 1
ERR_COUNT = 2
ERR_TYPE = 3
ERR_TAG = 4
ERR_COMM = 5
ERR_RANK = 6
ERR_ROOT = 7
ERR_OP = 9
ERR_ARG = 12
ERR_TRUNCATE = 14
ERR_OTHER = 15
ERR_REQUEST = 19
ERR_GROUP = 8
ERR_TOPOLOGY = 10
ERR_DIMS = 11
ERR_UNKNOWN = 13
ERR_INTERN = 16
ERR_IN_STATUS = 17
ERR_PENDING = 18
ERR_INFO = 28
ERR_INFO_KEY = 29
ERR_INFO_NOKEY = 31
ERR_UNSUPPORTED_OPERATION = 52
ERR_LASTCODE = 0x3FFFFFFF

ERROR_NAMES = {
    SUCCESS: "MPI_SUCCESS",
    ERR_BUFFER: "MPI_ERR_BUFFER",
    ERR_COUNT: "MPI_ERR_COUNT",
    ERR_TYPE: "MPI_ERR_TYPE",
    ERR_TAG: "MPI_ERR_TAG",
    ERR_COMM: "MPI_ERR_COMM",
    ERR_RANK: "MPI_ERR_RANK",
    ERR_ROOT: "MPI_ERR_ROOT",
    ERR_OP: "MPI_ERR_OP",
    ERR_ARG: "MPI_ERR_ARG",
    ERR_TRUNCATE: "MPI_ERR_TRUNCATE",
    ERR_OTHER: "MPI_ERR_OTHER",
    ERR_REQUEST: "MPI_ERR_REQUEST",
    ERR_GROUP: "MPI_ERR_GROUP",
    ERR_TOPOLOGY: "MPI_ERR_TOPOLOGY",
    ERR_DIMS: "MPI_ERR_DIMS",
    ERR_UNKNOWN: "MPI_ERR_UNKNOWN",
    ERR_INTERN: "MPI_ERR_INTERN",
    ERR_IN_STATUS: "MPI_ERR_IN_STATUS",
    ERR_PENDING: "MPI_ERR_PENDING",
    ERR_INFO: "MPI_ERR_INFO",
    ERR_INFO_KEY: "MPI_ERR_INFO_KEY",
    ERR_INFO_NOKEY: "MPI_ERR_INFO_NOKEY",
    ERR_UNSUPPORTED_OPERATION: "MPI_ERR_UNSUPPORTED_OPERATION",
}


class Exception(ConfigError, builtins.RuntimeError):  # mpi4py's name (shadows the builtin)
    """An MPI error class raised as mpi4py's ``MPI.Exception`` (a RuntimeError there)."""

    def __init__(self, message=ERR_OTHER, error_class=ERR_OTHER):
        if isinstance(message, int):  # MPI.Exception(MPI.ERR_OTHER), as mpi4py takes it
            message, error_class = ERROR_NAMES.get(message, f"MPI error {message}"), message
        super().__init__(message)
        self.error_class = self.error_code = error_class

    def __int__(self):
        return self.error_class

    def __eq__(self, other):
        if isinstance(other, int):
            return self.error_class == other
        return builtins.Exception.__eq__(self, other)

    __hash__ = builtins.Exception.__hash__

    def Get_error_class(self):
        return self.error_class

    def Get_error_code(self):
        return self.error_class

    def Get_error_string(self):
        return ERROR_NAMES.get(self.error_class, "MPI_ERR_OTHER")


def mpi_error(error_class, message):
    """An :class:`Exception` of ``error_class`` whose message says so."""
    name = ERROR_NAMES[error_class]
    return Exception(f"{message} (mpi4py raises MPI.Exception with {name})", error_class)


def value_error(message):
    """A ConfigError for what mpi4py refuses itself, with a ``ValueError``."""
    return ConfigError(f"{message} (mpi4py raises ValueError)")


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
