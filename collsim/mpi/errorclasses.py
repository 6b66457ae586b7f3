"""MPI's error classes and codes: the predefined ``MPI.ERR_*`` and the ones a program adds.

The numbers are Open MPI 4.1's (the library collsim's conformance is measured against;
programs compare them with the names only).  ``MPI.Add_error_class()`` gives the next
number past ``MPI.ERR_LASTCODE`` (and ``COMM_WORLD.Get_attr(MPI.LASTUSEDCODE)`` says it),
``Add_error_code(errorclass)`` a code of that class, ``Add_error_string`` its text; the
``Remove_*`` calls undo them in reverse order, as MPI 4.1 defines.  Each rank keeps its
own table, as each MPI process does; a run's tables die with the run.  The calls
themselves, which raise ``MPI.Exception``, are in :mod:`~collsim.mpi.exceptions`.

Examples
--------
>>> UserErrors().string_of(ERR_TRUNCATE)
'MPI_ERR_TRUNCATE: a message longer than the receive buffer'
>>> table = UserErrors()
>>> errorclass = table.add_class()
>>> errorcode = table.add_code(errorclass)
>>> table.set_string(errorcode, "checksum mismatch")
>>> errorclass == ERR_LASTCODE + 1, table.class_of(errorcode) == errorclass
(True, True)
>>> table.string_of(errorcode), table.string_of(errorclass)
('checksum mismatch', '')
"""

from dataclasses import dataclass, field

from .settings import rank_table

# name: (Open MPI 4.1's number, what it means); MPI_SUCCESS is 0
_CLASSES = {
    "ERR_BUFFER": (1, "an invalid buffer"),
    "ERR_COUNT": (2, "an invalid count"),
    "ERR_TYPE": (3, "an invalid datatype"),
    "ERR_TAG": (4, "an invalid tag"),
    "ERR_COMM": (5, "an invalid communicator"),
    "ERR_RANK": (6, "an invalid rank"),
    "ERR_REQUEST": (7, "an invalid request"),
    "ERR_ROOT": (8, "an invalid root"),
    "ERR_GROUP": (9, "an invalid group"),
    "ERR_OP": (10, "an invalid reduction operation"),
    "ERR_TOPOLOGY": (11, "an invalid topology"),
    "ERR_DIMS": (12, "invalid topology dimensions"),
    "ERR_ARG": (13, "an invalid argument"),
    "ERR_UNKNOWN": (14, "an unknown error"),
    "ERR_TRUNCATE": (15, "a message longer than the receive buffer"),
    "ERR_OTHER": (16, "an error of no other class"),
    "ERR_INTERN": (17, "an internal error"),
    "ERR_IN_STATUS": (18, "the error is in the status"),
    "ERR_PENDING": (19, "a request still pending"),
    "ERR_ACCESS": (20, "file access denied"),
    "ERR_AMODE": (21, "an invalid file access mode"),
    "ERR_ASSERT": (22, "an invalid window assertion"),
    "ERR_BAD_FILE": (23, "an invalid file name"),
    "ERR_BASE": (24, "an invalid base address"),
    "ERR_CONVERSION": (25, "a data conversion failed"),
    "ERR_DISP": (26, "an invalid displacement"),
    "ERR_DUP_DATAREP": (27, "a data representation defined twice"),
    "ERR_FILE_EXISTS": (28, "the file exists"),
    "ERR_FILE_IN_USE": (29, "the file is in use"),
    "ERR_FILE": (30, "an invalid file"),
    "ERR_INFO_KEY": (31, "an invalid info key"),
    "ERR_INFO_NOKEY": (32, "no such info key"),
    "ERR_INFO_VALUE": (33, "an invalid info value"),
    "ERR_INFO": (34, "an invalid info object"),
    "ERR_IO": (35, "an input/output error"),
    "ERR_KEYVAL": (36, "an invalid attribute key"),
    "ERR_LOCKTYPE": (37, "an invalid window lock type"),
    "ERR_NAME": (38, "no such service name"),
    "ERR_NO_MEM": (39, "out of memory"),
    "ERR_NOT_SAME": (40, "ranks called collectively with different arguments"),
    "ERR_NO_SPACE": (41, "no space left"),
    "ERR_NO_SUCH_FILE": (42, "no such file"),
    "ERR_PORT": (43, "an invalid port"),
    "ERR_QUOTA": (44, "over quota"),
    "ERR_READ_ONLY": (45, "the file is read-only"),
    "ERR_RMA_CONFLICT": (46, "conflicting window accesses"),
    "ERR_RMA_SYNC": (47, "a window access outside a synchronisation"),
    "ERR_SERVICE": (48, "an invalid service name"),
    "ERR_SIZE": (49, "an invalid size"),
    "ERR_SPAWN": (50, "processes could not be spawned"),
    "ERR_UNSUPPORTED_DATAREP": (51, "an unsupported data representation"),
    "ERR_UNSUPPORTED_OPERATION": (52, "an unsupported operation"),
    "ERR_WIN": (53, "an invalid window"),
    "ERR_RMA_RANGE": (68, "a window access out of range"),
    "ERR_RMA_ATTACH": (69, "memory could not be attached to the window"),
    "ERR_RMA_FLAVOR": (70, "the wrong kind of window"),
    "ERR_RMA_SHARED": (71, "memory could not be shared"),
    "ERR_PROC_ABORTED": (74, "a process aborted"),
    "ERR_PROC_FAILED": (75, "a process failed"),
    "ERR_PROC_FAILED_PENDING": (76, "a process failed before the request matched"),
    "ERR_REVOKED": (77, "the communicator was revoked"),
    "ERR_SESSION": (78, "an invalid session"),
    "ERR_VALUE_TOO_LARGE": (79, "a value too large for its output argument"),
    "ERR_ERRHANDLER": (80, "an invalid error handler"),
    "ERR_ABI": (81, "an ABI mismatch"),
}
SUCCESS = 0
ERR_LASTCODE = 92  # the largest predefined code; Add_error_class counts on from here
# MPI.ERR_BUFFER, ...: the names programs use
globals().update({name: number for name, (number, _) in _CLASSES.items()})
ERROR_NAMES = {SUCCESS: "MPI_SUCCESS", **{n: f"MPI_{name}" for name, (n, _) in _CLASSES.items()}}
_MEANINGS = {SUCCESS: "no error", **{number: what for number, what in _CLASSES.values()}}

CONSTANTS = ["SUCCESS", "ERR_LASTCODE", *_CLASSES, "ERROR_NAMES"]
__all__ = [*CONSTANTS, "CONSTANTS", "UserErrors", "UnknownCode", "table"]


@dataclass
class UserErrors:
    """The error classes, codes and strings one rank (one MPI process) added."""

    last_used: int = ERR_LASTCODE
    classes: dict = field(default_factory=dict)  # code -> its class (a class is its own)
    strings: dict = field(default_factory=dict)  # code -> the text Add_error_string gave

    def add_class(self):
        self.last_used += 1
        self.classes[self.last_used] = self.last_used
        return self.last_used

    def add_code(self, errorclass):
        if errorclass not in self.classes and errorclass not in _MEANINGS:
            raise _error("Add_error_code", errorclass, "an error class (MPI.ERR_* or added)")
        self.last_used += 1
        self.classes[self.last_used] = errorclass
        return self.last_used

    def set_string(self, errorcode, string):
        if errorcode not in self.classes:
            raise _error("Add_error_string", errorcode, "a class or code Add_error_* gave")
        self.strings[errorcode] = str(string)

    def remove(self, call, errorcode, is_class):
        """Undo an add: a class only when no code of it is left, never a predefined one."""
        if errorcode not in self.classes or (self.classes[errorcode] == errorcode) != is_class:
            kind = "an error class" if is_class else "an error code"
            raise _error(call, errorcode, f"{kind} that Add_error_{kind.split()[-1]} gave")
        codes = [c for c, k in self.classes.items() if k == errorcode and c != errorcode]
        if codes or errorcode in self.strings:
            what = f"its codes {codes}" if codes else "its string (Remove_error_string)"
            raise _error(call, errorcode, f"a class or code whose {what} are removed first")
        del self.classes[errorcode]

    def remove_string(self, errorcode):
        if errorcode not in self.classes:
            raise _error("Remove_error_string", errorcode, "a class or code Add_error_* gave")
        self.strings.pop(errorcode, None)

    def class_of(self, errorcode):
        if errorcode in _MEANINGS:
            return errorcode
        if errorcode in self.classes:
            return self.classes[errorcode]
        raise _error("Get_error_class", errorcode, "an error code (MPI.ERR_* or added)")

    def string_of(self, errorcode):
        if errorcode in _MEANINGS:
            return f"{ERROR_NAMES[errorcode]}: {_MEANINGS[errorcode]}"
        if errorcode in self.classes:
            return self.strings.get(errorcode, "")
        raise _error("Get_error_string", errorcode, "an error code (MPI.ERR_* or added)")


class UnknownCode(LookupError):
    """A code no table has (``MPI.Add_error_*`` and ``Get_error_*`` raise it as an
    ``MPI.Exception`` of class ``MPI.ERR_ARG``)."""


def _error(call, errorcode, rule):
    return UnknownCode(f"MPI.{call}({errorcode!r}): give {rule}")


_OUTSIDE_A_RUN = UserErrors()  # a program that imports collsim.mpi without collsim exec


def table():
    """The calling rank's :class:`UserErrors` (kept with its run)."""
    return rank_table("error classes", UserErrors) or _OUTSIDE_A_RUN
