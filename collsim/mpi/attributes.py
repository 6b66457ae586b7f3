"""MPI attribute caching (MPI-3.1 section 6.7): keyvals, and the values a program hangs
on a communicator or a datatype under them.

``Comm.Create_keyval(copy_fn, delete_fn, nopython)`` makes a key; ``Set_attr``,
``Get_attr`` and ``Delete_attr`` keep a value under it on one communicator (or datatype:
``Datatype.Create_keyval`` makes their keys).  What happens to the value when the object
is duplicated is the key's ``copy_fn``, as mpi4py reads it: None or False, the copy has no
value; True, the copy has the same object; a function ``copy_fn(obj, keyval, value)``
gives the copy's value, or ``NotImplemented`` for none.  ``delete_fn(obj, keyval, value)``
runs when the value goes (``Delete_attr``, ``Free``, a new ``Set_attr``; ``Finalize``
for ``COMM_SELF``'s).  A callback that
raises makes the call fail with ``MPI.ERR_OTHER`` after printing its traceback, as
mpi4py does.  With ``nopython=True`` values are C pointers: ints, read back unsigned.

Keys and values belong to one rank (each rank is its own process); they live with the
run, so nothing outlives it.  ``Free_keyval`` retires a key: values already set under it
stay and their callbacks still run, as the standard says; a new ``Set_attr`` is refused.

Examples
--------
>>> import collsim
>>> from collsim import mpi as MPI
>>> def main():
...     world = MPI.COMM_WORLD
...     key = MPI.Comm.Create_keyval(copy_fn=True)   # a Dup shares the value
...     world.Set_attr(key, {"owner": world.rank})
...     dup = world.Dup()
...     return dup.Get_attr(key) is world.Get_attr(key), dup.Get_attr(key)["owner"]
>>> collsim.runtime.blocking.run(collsim.Cluster(collsim.topology.ring(2)), main).returns
[(True, 0), (True, 1)]
"""

import contextlib
import sys
import traceback
from dataclasses import dataclass, field

from .exceptions import ERR_KEYVAL, ERR_OTHER, mpi_error, type_error
from .settings import rank_table

__all__ = ["Attributes", "KEYVAL_INVALID", "AttributeTable", "Keyval"]

KEYVAL_INVALID = -1  # what Free_keyval gives back, as in MPI
FIRST_KEYVAL = 16  # user keys start here; the predefined ones (TAG_UB, ...) are far above
POINTER_BITS = 64  # a nopython value is a C ``void *``


@dataclass
class Keyval:
    """One key: its number, the kind of object it serves and its callbacks."""

    number: int
    kind: str  # "Comm" or "Datatype": a key of one is refused on the other
    copy_fn: object  # None (no copy), True (the same value) or copy_fn(obj, keyval, value)
    delete_fn: object  # None or delete_fn(obj, keyval, value)
    nopython: bool  # values are ints (C pointers), not Python objects
    freed: bool = False  # Free_keyval called: no new values, old ones keep working


@dataclass
class AttributeTable:
    """One rank's keys and the values set under them, by the object's handle key."""

    keyvals: dict = field(default_factory=dict)  # number -> Keyval
    next_keyval: int = FIRST_KEYVAL
    # handle key -> {keyval number: value}; ``owners`` keeps each object alive while it has
    # values, so a key made of an id() cannot be reused by another object meanwhile
    values: dict = field(default_factory=dict)
    owners: dict = field(default_factory=dict)


_OUTSIDE_A_RUN = AttributeTable()  # datatypes may be used without collsim exec


def table():
    """The calling rank's :class:`AttributeTable` (kept with its run)."""
    return rank_table("attributes", AttributeTable) or _OUTSIDE_A_RUN


class Attributes:
    """``Create_keyval``, ``Free_keyval``, ``Set_attr``, ``Get_attr`` and ``Delete_attr``
    (a mixin of ``MPI.Comm`` and ``MPI.Datatype``: each says its ``_attr_kind``, how a
    call checks the handle, ``_attr_check(call)``, and its predefined keys'
    ``_predefined_attr(keyval)``)."""

    _attr_kind = None
    _PREDEFINED_KEYS = frozenset()  # keys MPI sets itself: read-only

    def _predefined_attr(self, keyval):
        return None

    @classmethod
    def Create_keyval(cls, copy_fn=None, delete_fn=None, nopython=False):
        """A new attribute key for this kind of object (see the module's rules)."""
        for name, callback in (("copy_fn", copy_fn), ("delete_fn", delete_fn)):
            if callback not in (None, False, True) and not callable(callback):
                raise type_error(
                    f"{cls._attr_kind}.Create_keyval({name}={callback!r}): give a function "
                    "f(obj, keyval, value), True, False or None"
                )
        mine = table()
        number = mine.next_keyval
        mine.next_keyval += 1
        mine.keyvals[number] = Keyval(
            number,
            cls._attr_kind,
            None if copy_fn is False else copy_fn,
            None if delete_fn in (False, True) else delete_fn,
            bool(nopython),
        )
        return number

    @classmethod
    def Free_keyval(cls, keyval):
        """Retire ``keyval``; gives ``MPI.KEYVAL_INVALID`` (values already set stay)."""
        found = _keyval(cls._attr_kind, keyval, "Free_keyval", cls._PREDEFINED_KEYS)
        found.freed = True
        return KEYVAL_INVALID

    def Set_attr(self, keyval, attrval):
        """Keep ``attrval`` on this object under ``keyval`` (an old value is deleted first)."""
        self._attr_check("Set_attr")
        found = _keyval(self._attr_kind, keyval, "Set_attr", self._PREDEFINED_KEYS)
        if found.freed:
            raise mpi_error(
                ERR_KEYVAL, f"Set_attr({keyval!r}): the key was freed (Free_keyval); make a new one"
            )
        if found.nopython:
            attrval = _pointer(attrval, f"{self._attr_kind}.Set_attr")
        values = _values_of(self, make=True)
        if keyval in values:
            _delete(self, found, values.pop(keyval))
        values[keyval] = attrval

    def Get_attr(self, keyval):
        """The value under ``keyval``, or None where none is set."""
        self._attr_check("Get_attr")
        if keyval in self._PREDEFINED_KEYS:
            return self._predefined_attr(keyval)
        _keyval(self._attr_kind, keyval, "Get_attr", (), any_state=True)
        return (_values_of(self) or {}).get(keyval)

    def Delete_attr(self, keyval):
        """Drop the value under ``keyval``, calling the key's ``delete_fn``."""
        self._attr_check("Delete_attr")
        found = _keyval(self._attr_kind, keyval, "Delete_attr", self._PREDEFINED_KEYS, True)
        values = _values_of(self) or {}
        if keyval not in values:
            raise mpi_error(ERR_KEYVAL, f"Delete_attr({keyval!r}): no value is set under it")
        value = values.pop(keyval)
        _forget_if_empty(self)
        _delete(self, found, value)


def copy_attributes(old, new):
    """Give ``new`` (a Dup of ``old``) the values ``old``'s keys copy; on a failing
    ``copy_fn`` the values copied so far are deleted again and the call fails."""
    try:
        for number, value in list((_values_of(old) or {}).items()):
            _copy(old, new, table().keyvals[number], value)
    except Exception:
        with contextlib.suppress(Exception):  # the copy's own failures add nothing
            delete_attributes(new)
        raise


def _copy(old, new, found, value):
    if found.copy_fn is None:
        return
    copied = value
    if found.copy_fn is not True:
        copied = _callback(found.copy_fn, old, found, value, "copy_fn")
        if copied is NotImplemented:
            return
    if found.nopython:
        copied = _pointer(copied, "copy_fn")
    _values_of(new, make=True)[found.number] = copied


def delete_attributes(obj):
    """Delete every value on ``obj`` (it is being freed), each with its ``delete_fn``;
    the first failure is raised after all have run."""
    values = table().values.get(obj._handle_key()) or {}
    failed = None
    for number in list(values):
        try:
            _delete(obj, table().keyvals[number], values.pop(number))
        except Exception as error:
            failed = failed or error
    _forget_if_empty(obj)
    if failed is not None:
        raise failed


def _keyval(kind, keyval, call, predefined, any_state=False):
    """The live (or, with ``any_state``, retired) key ``keyval`` of ``kind``."""
    found = table().keyvals.get(keyval) if isinstance(keyval, int) else None
    if keyval in predefined:
        rule = "a predefined key is MPI's own: it cannot be set, deleted or freed"
    elif found is None or found.kind != kind:
        rule = f"not a key of {kind}.Create_keyval"
    elif found.freed and not any_state:
        rule = "the key was freed already"
    else:
        return found
    raise mpi_error(ERR_KEYVAL, f"{kind}.{call}({keyval!r}): {rule}")


def _values_of(obj, make=False):
    key, mine = obj._handle_key(), table()
    if make and key not in mine.values:
        mine.values[key], mine.owners[key] = {}, obj
    return mine.values.get(key)


def _forget_if_empty(obj):
    key, mine = obj._handle_key(), table()
    if key in mine.values and not mine.values[key]:
        del mine.values[key], mine.owners[key]


def _delete(obj, found, value):
    if found.delete_fn is not None:
        _callback(found.delete_fn, obj, found, value, "delete_fn")


def _callback(function, obj, found, value, call):
    """``function(handle, keyval, value)`` with a handle of ``obj`` that is null afterwards
    (as mpi4py passes one); an exception becomes MPI.ERR_OTHER after its traceback."""
    handle = obj._twin()
    try:
        return function(handle, found.number, value)
    except Exception as error:
        traceback.print_exception(error, file=sys.stderr)
        message = f"{found.kind} attribute {call} of key {found.number} raised {error!r}"
        raise mpi_error(ERR_OTHER, message) from error
    finally:
        handle._nullify()


def _pointer(value, call):
    """A nopython value: an int, kept as a C pointer keeps it (unsigned, 64 bits)."""
    if not isinstance(value, int):
        raise type_error(f"{call}({value!r}): a nopython key's value is an int (a C pointer)")
    return value % (1 << POINTER_BITS)
