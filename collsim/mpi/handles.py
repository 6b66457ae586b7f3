"""Small MPI handles: ``MPI.Info`` (key-value hints) and ``MPI.Errhandler``.

collsim reads no hints, so an :class:`Info` is a plain ordered dict of strings that a
program can set and read back (``MPI.Info(info)`` is another handle of the same one, as
in mpi4py).  Every error collsim finds is raised as an exception at once (``MPI.Exception``
or a collsim error), whichever predefined error handler is set: they exist so that
programs that set ``MPI.ERRORS_RETURN`` run.  A handler a program makes with
``Comm.Create_errhandler(function)`` is called by ``comm.Call_errhandler(code)`` as
``function(comm, code)``; mpi4py keeps 32 of them live a process, and so does each rank.

Examples
--------
>>> info = Info.Create()
>>> info.Set("cb_nodes", "4")
>>> info.Get("cb_nodes"), info.Get_nkeys(), list(info)
('4', 1, ['cb_nodes'])
>>> ERRORS_RETURN == Errhandler(ERRORS_RETURN) != ERRHANDLER_NULL
True
"""

from .exceptions import ERR_ARG, ERR_INFO, ERR_INFO_KEY, ERR_INFO_NOKEY, ERR_INTERN, mpi_error
from .handletable import Handle, is_constant, predefine
from .settings import rank_table

__all__ = ["Info", "INFO_NULL", "INFO_ENV", "Errhandler", "ERRHANDLER_NULL"]
__all__ += ["ERRORS_RETURN", "ERRORS_ARE_FATAL", "ERRORS_ABORT"]

MAX_INFO_KEY = 255


class Info(Handle):
    """``MPI.Info``: string keys and values, in the order they were set."""

    def _construct(self, info=None):
        if info is not None and not isinstance(info, Info):
            raise TypeError(f"MPI.Info({info!r}): give an MPI.Info to copy, or nothing")
        self._items = None if info is None else info._items  # the same info, as mpi4py's

    @classmethod
    def Create(cls, items=None):
        info = cls()
        info._items = {}
        for key, value in dict(items or {}).items():
            info.Set(key, value)
        return info

    def _dict(self, call):
        if self._items is None:
            raise mpi_error(
                ERR_INFO, f"Info.{call} on MPI.INFO_NULL: make one with MPI.Info.Create()"
            )
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
        keys = list(self._dict("Get_nthkey"))
        if not 0 <= n < len(keys):
            raise mpi_error(
                ERR_ARG, f"Info.Get_nthkey({n!r}): give 0..{len(keys) - 1}, a key's index"
            )
        return keys[n]

    def Dup(self):
        return type(self).Create(self._dict("Dup"))  # of the program's subclass, as mpi4py's

    @classmethod
    def Create_env(cls, args=None):
        raise NotImplementedError(
            "MPI.Info.Create_env: the environment's info is MPI 4.0; collsim follows MPI 3.1 "
            "(MPI.Get_version()), use MPI.INFO_ENV"
        )

    def Free(self):
        self._dict("Free")
        if is_constant(self):
            raise mpi_error(ERR_INFO, f"Free() of {self!r}: a predefined info cannot be freed")
        self._items = None

    def _handle_key(self):
        return None if self._items is None else id(self._items)

    def _nullify(self):
        self._items = None

    # the dict protocol mpi4py's Info has
    def __len__(self):
        return len(self._items or {})

    def __iter__(self):
        return iter(list(self._items or {}))

    def __contains__(self, key):
        return key in (self._items or {})

    def __getitem__(self, key):
        return (self._items or {})[key]

    # MPI.INFO_NULL has no keys: changing it is a KeyError, as a dict's missing key is
    def _keys_of(self, call):
        if self._items is None:
            raise KeyError(f"Info.{call} on MPI.INFO_NULL, which has no keys")
        return self._items

    def __setitem__(self, key, value):
        self._keys_of("__setitem__")
        self.Set(key, value)

    def __delitem__(self, key):
        if key not in self._keys_of("__delitem__"):
            raise KeyError(key)
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
        self._keys_of("update")
        for key, value in dict(other, **kwargs).items():
            self.Set(key, value)

    def pop(self, key, *default):
        if key in self:
            return self._items.pop(key)
        if default:
            return default[0]
        raise KeyError(key)

    def popitem(self):
        items = self._keys_of("popitem")
        if not items:
            raise KeyError("popitem(): the info has no keys")
        return items.popitem()

    def clear(self):
        (self._items or {}).clear()

    def copy(self):
        return self.Dup() if self else type(self)()

    def __reduce__(self):
        # a predefined info (or a copy) unpickles as Handle's rule says; one a program
        # made as a new info of the same keys, as mpi4py's does
        try:
            return super().__reduce__()
        except ValueError:
            return (type(self).Create, (dict(self._items),))

    def __bool__(self):
        return self._items is not None

    def __eq__(self, other):
        if not isinstance(other, Info):
            return NotImplemented
        return self._items is other._items


MAX_USER_ERRHANDLERS = 32  # live ones a process (mpi4py's limit)


class _Made:
    """What one ``Create_errhandler`` made: its function, shared by every handle of it."""

    def __init__(self, function, owner):
        self.function, self.owner = function, owner

    def release(self):
        if self.owner is not None:
            self.owner.remove(self)
            self.owner = None


class Errhandler(Handle):
    """An error handler: one of the predefined ones (collsim raises every error at once,
    whichever is set) or one a program made, whose function ``Call_errhandler`` calls."""

    def _construct(self, errhandler=None, name=None):
        if errhandler is not None and not isinstance(errhandler, Errhandler):
            raise TypeError(f"MPI.Errhandler({errhandler!r}): give an MPI.Errhandler to copy")
        # "ERRORS_RETURN", ... or a _Made; None for ERRHANDLER_NULL
        self._kind = getattr(errhandler, "_kind", None) if name is None else name

    @classmethod
    def _create(cls, function, call):
        if not callable(function):
            raise TypeError(f"{call}({function!r}): give a function(comm, errorcode)")
        live = rank_table("errhandlers", list)  # None outside a run: no limit there
        if live is not None and len(live) >= MAX_USER_ERRHANDLERS:
            raise mpi_error(
                ERR_INTERN,
                f"{call}: {MAX_USER_ERRHANDLERS} error handlers are live on this rank "
                "(mpi4py's limit): Free() one before creating another",
            )
        made = _Made(function, live)
        if live is not None:
            live.append(made)
        return cls._made(name=made)

    @property
    def name(self):
        return self._kind if isinstance(self._kind, str) or self._kind is None else "user"

    def _call(self, mpiobj, errorcode):
        """What ``Call_errhandler(errorcode)`` does on ``mpiobj`` with this handler set."""
        if isinstance(self._kind, _Made):
            self._kind.function(mpiobj, errorcode)

    def Free(self):
        """This handle becomes ``MPI.ERRHANDLER_NULL`` (a communicator that has the handler
        set keeps it); the predefined handles stay."""
        if not self:
            raise mpi_error(ERR_ARG, "Free() of MPI.ERRHANDLER_NULL: give an error handler")
        if is_constant(self):
            return
        if isinstance(self._kind, _Made):
            self._kind.release()
        self._kind = None

    def _handle_key(self):
        return self._kind if isinstance(self._kind, str | None) else id(self._kind)

    def _nullify(self):
        self._kind = None

    def __bool__(self):
        return self._kind is not None

    def __eq__(self, other):
        if not isinstance(other, Errhandler):
            return NotImplemented
        return self._kind is other._kind or self._kind == other._kind

    def __repr__(self):
        return (
            f"MPI.{self.name or 'ERRHANDLER_NULL'}"
            if self.name != "user"
            else ("<MPI.Errhandler made by Create_errhandler>")
        )


INFO_NULL = Info()
INFO_ENV = Info.Create()
ERRHANDLER_NULL = Errhandler()
ERRORS_RETURN = Errhandler(name="ERRORS_RETURN")
ERRORS_ARE_FATAL = Errhandler(name="ERRORS_ARE_FATAL")
ERRORS_ABORT = Errhandler(name="ERRORS_ABORT")
predefine(INFO_NULL=INFO_NULL, INFO_ENV=INFO_ENV, ERRHANDLER_NULL=ERRHANDLER_NULL)
predefine(ERRORS_RETURN=ERRORS_RETURN, ERRORS_ARE_FATAL=ERRORS_ARE_FATAL)
predefine(ERRORS_ABORT=ERRORS_ABORT)
