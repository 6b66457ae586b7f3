"""Small MPI handles: ``MPI.Info`` (key-value hints) and ``MPI.Errhandler``.

collsim reads no hints, so an :class:`Info` is a plain ordered dict of strings that a
program can set and read back.  Every error collsim finds is raised as an exception at
once (``MPI.Exception`` or a collsim error), whichever error handler is set: the
handlers exist so that programs that set ``MPI.ERRORS_RETURN`` run.

Examples
--------
>>> info = Info.Create()
>>> info.Set("cb_nodes", "4")
>>> info.Get("cb_nodes"), info.Get_nkeys(), list(info)
('4', 1, ['cb_nodes'])
>>> ERRORS_RETURN == Errhandler(ERRORS_RETURN)
True
"""

from .exceptions import ERR_INFO_KEY, ERR_INFO_NOKEY, mpi_error

__all__ = ["Info", "INFO_NULL", "INFO_ENV", "Errhandler", "ERRHANDLER_NULL"]
__all__ += ["ERRORS_RETURN", "ERRORS_ARE_FATAL", "ERRORS_ABORT"]

MAX_INFO_KEY = 255


class Info:
    """``MPI.Info``: string keys and values, in the order they were set."""

    def __init__(self, info=None):
        self._items = None if info is None else dict(getattr(info, "_items", None) or {})

    @classmethod
    def Create(cls, items=None):
        info = cls({})
        info._items = {}
        for key, value in dict(items or {}).items():
            info.Set(key, value)
        return info

    def _dict(self, call):
        if self._items is None:
            self._items = {}
        return self._items

    def Set(self, key, value):
        if not isinstance(key, str) or not key or len(key) > MAX_INFO_KEY:
            raise mpi_error(ERR_INFO_KEY, f"Info.Set({key!r}): a key is a non-empty string")
        self._dict("Set")[key] = str(value)

    def Get(self, key, default=None):
        return self._dict("Get").get(key, default)

    def Delete(self, key):
        if key not in self._dict("Delete"):
            raise mpi_error(ERR_INFO_NOKEY, f"Info.Delete({key!r}): no such key")
        del self._items[key]

    def Get_nkeys(self):
        return len(self._dict("Get_nkeys"))

    def Get_nthkey(self, n):
        return list(self._dict("Get_nthkey"))[n]

    def Dup(self):
        return Info.Create(self._items or {})

    def Free(self):
        self._items = None

    # the dict protocol mpi4py's Info has
    def __len__(self):
        return len(self._items or {})

    def __iter__(self):
        return iter(list(self._items or {}))

    def __contains__(self, key):
        return key in (self._items or {})

    def __getitem__(self, key):
        return self._dict("get")[key]

    def __setitem__(self, key, value):
        self.Set(key, value)

    def __delitem__(self, key):
        self.Delete(key)

    def get(self, key, default=None):
        return (self._items or {}).get(key, default)

    def keys(self):
        return list(self._items or {})

    def values(self):
        return list((self._items or {}).values())

    def items(self):
        return list((self._items or {}).items())

    def update(self, other=(), **kwargs):
        for key, value in dict(other, **kwargs).items():
            self.Set(key, value)

    def clear(self):
        (self._items or {}).clear()

    def copy(self):
        return self.Dup()

    def __bool__(self):
        return self._items is not None

    def __eq__(self, other):
        if not isinstance(other, Info):
            return NotImplemented
        return self is other or (self._items is None and other._items is None)

    __hash__ = object.__hash__


class Errhandler:
    """An error handler; collsim raises every error at once, whichever is set."""

    def __init__(self, errhandler=None, name=None):
        self.name = getattr(errhandler, "name", None) if name is None else name

    def Free(self):
        """Predefined handlers stay."""

    def __bool__(self):
        return self.name is not None

    def __eq__(self, other):
        if not isinstance(other, Errhandler):
            return NotImplemented
        return self.name == other.name

    def __hash__(self):
        return hash(self.name)

    def __repr__(self):
        return f"MPI.{self.name or 'ERRHANDLER_NULL'}"


INFO_NULL = Info()
INFO_ENV = Info.Create()
ERRHANDLER_NULL = Errhandler()
ERRORS_RETURN = Errhandler(name="ERRORS_RETURN")
ERRORS_ARE_FATAL = Errhandler(name="ERRORS_ARE_FATAL")
ERRORS_ABORT = Errhandler(name="ERRORS_ABORT")
