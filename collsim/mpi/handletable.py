"""Integer handles of MPI objects, as mpi4py gives them: ``obj.handle``,
``Cls.fromhandle(n)``, ``toint``/``fromint``, ``py2f``/``f2py``, mpi4py's safe ``free()``,
and pickling that gives a predefined handle back as itself.

In C an MPI object is reached through a handle, and mpi4py's Python objects wrap one:
``MPI.Comm(c)`` is a second Python object with ``c``'s handle, equal to it.  Here every
Python object that refers to one MPI object (a copy, a ``fromhandle``, an unpickled
predefined one) has the same number.  The predefined objects are numbered in the order
``collsim.mpi`` makes them, the same in every run; the others when a program first asks,
counting on from there, so a run gives the same numbers every time.  A number is kept
while a Python object that asked for it lives, and forgotten with the last one.  Like
mpi4py's, the handles are not hashable (``Free`` changes what they are) and do not order.

Examples
--------
>>> from collsim import mpi as MPI
>>> comm = MPI.Comm(MPI.COMM_WORLD)              # another handle of COMM_WORLD
>>> comm.handle == MPI.COMM_WORLD.handle == comm.py2f()
True
>>> MPI.Intracomm.fromhandle(comm.handle) == MPI.COMM_WORLD
True
>>> import pickle
>>> pickle.loads(pickle.dumps(MPI.MAX)) is MPI.MAX
True
>>> comm.free(); bool(comm), bool(MPI.COMM_WORLD)  # a copy of a constant just lets go
(False, True)
"""

import weakref

from .exceptions import ERR_ARG, mpi_error

__all__ = [
    "Handle",
    "MadeInNew",
    "predefine",
    "constant",
    "is_constant",
    "sizeof",
    "addressof",
    "handleof",
]

HANDLE_BYTES = 8  # an Open MPI handle is a pointer: MPI._sizeof(MPI.Comm) is 8 there


class _Table:
    """The numbers in use: (family, key) -> number, and back to the objects holding it."""

    def __init__(self):
        self.numbers = {}  # (family, key) -> number
        self.predefined = {}  # number -> (name, the constant)
        self.names = {}  # name -> the constant
        self.holders = {}  # number -> ((family, key), [weak references to its objects])
        self.next = 0  # numbers only grow, so one never names two objects in a run

    def predefine(self, name, obj):
        key = (obj._family, obj._handle_key())
        number = self.numbers.get(key)
        if number is None:
            number = self.numbers[key] = self._new()
        self.predefined.setdefault(number, (name, obj))
        self.names[name] = obj

    def number(self, obj):
        key = (obj._family, obj._handle_key())
        number = self.numbers.get(key)
        if number is None:
            number = self.numbers[key] = self._new()
        if number not in self.predefined:
            _, refs = self.holders.setdefault(number, (key, []))
            if not any(ref() is obj for ref in refs):
                refs.append(weakref.ref(obj, lambda ref, n=number: self._let_go(n, ref)))
        return number

    def _new(self):
        self.next += 1
        return self.next - 1

    def _let_go(self, number, ref):
        key, refs = self.holders.get(number, (None, []))
        if ref in refs:
            refs.remove(ref)
        if not refs and key is not None:  # the last object of this number: forget it
            del self.holders[number]
            self.numbers.pop(key, None)

    def obj(self, cls, number):
        if number in self.predefined:
            found = self.predefined[number][1]
        else:
            key, refs = self.holders.get(number, (None, []))
            alive = [
                o for o in (ref() for ref in refs) if o is not None and o._handle_key() == key[1]
            ]
            # the most derived class any handle of it has (a Cartcomm's copy may be a Comm)
            found = max(alive, key=lambda o: len(type(o).__mro__), default=None)
        if found is None or found._family is not cls._family:
            raise mpi_error(
                ERR_ARG,
                f"MPI.{cls.__name__}.fromhandle({number!r}): no MPI.{cls._family.__name__} "
                "has this handle; give the .handle of a live one",
            )
        return found

    def constant_of(self, obj):
        """``(name, constant)`` of the predefined object ``obj`` is or copies, else None."""
        number = self.numbers.get((obj._family, obj._handle_key()))
        return self.predefined.get(number)


_TABLE = _Table()


class MadeInNew:
    """What mpi4py's MPI classes do that Python classes do not by themselves: the object
    is made in ``__new__`` (from a handle or a status to copy, or null), so a program's
    subclass may write ``super().__new__(cls, comm.Dup())``; a class says how in
    ``_construct``."""

    def __new__(cls, *args, **kwargs):
        # mpi4py makes the handle in __new__, so a subclass's own __new__ may hand super()
        # another handle than its caller gave (``super().__new__(cls, comm.Dup())``);
        # the class's _construct takes it here, and __init__ leaves it alone
        made = super().__new__(cls)
        made._construct(*args, **kwargs)
        return made

    def __init__(self, *args, **kwargs):
        """Nothing: ``__new__`` made the handle (Python calls this with the caller's
        arguments, which a subclass's ``__new__`` may have replaced)."""

    def _construct(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__}._construct")

    @classmethod
    def _made(cls, *args, **kwargs):
        """A new ``cls`` for what an MPI call makes: ``cls.__new__(cls)`` first, as
        mpi4py's calls do, so a subclass's own ``__new__`` runs; then filled in."""
        made = cls.__new__(cls)
        made._construct(*args, **kwargs)
        return made


class Handle(MadeInNew):
    """What every MPI handle class has (a class says what names its object,
    :meth:`_handle_key`, None for its null one, and how a copy lets go, :meth:`_nullify`)."""

    _family = None  # the class that took this mixin: Comm for Intracomm, Cartcomm, ...

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if Handle in cls.__bases__:
            cls._family = cls

    __hash__ = None  # as mpi4py's: Free changes what a handle is, so none is a dict key

    def _handle_key(self):
        raise NotImplementedError(f"{type(self).__name__}._handle_key")

    def _nullify(self):
        raise NotImplementedError(f"{type(self).__name__}._nullify")

    def _twin(self):
        """Another Python object of this handle, made without running a constructor (a
        subclass's ``__new__`` may make a new communicator): what a callback is handed."""
        twin = object.__new__(type(self))
        twin._share(self)
        return twin

    def _share(self, other):
        self.__dict__.update(other.__dict__)  # two Python objects, one MPI object

    @property
    def handle(self):
        """The handle's number (the same for every Python object of this MPI object)."""
        return _TABLE.number(self)

    @classmethod
    def fromhandle(cls, handle):
        """A new Python object of the MPI object whose ``.handle`` is ``handle``, of its
        own class where that is a ``cls`` (``MPI.Comm.fromhandle`` gives a Cartcomm back)."""
        found = _TABLE.obj(cls, handle)
        return (type(found) if isinstance(found, cls) else cls)(found)

    def toint(self):
        return self.handle

    py2f = toint
    fromint = f2py = fromhandle

    def free(self):
        """mpi4py's ``free()``: ``Free()`` what a program made; a null or predefined
        handle stays, and a copy of a predefined one just becomes null."""
        constant = _TABLE.constant_of(self) if self else None
        if constant is None:
            if self:
                self.Free()
        elif constant[1] is not self:
            self._nullify()

    def __repr__(self):
        constant = _TABLE.constant_of(self)
        if constant is not None and constant[1] is self:
            return f"MPI.{constant[0]}"
        return f"<MPI.{type(self).__name__}{'' if self else ' null'}>"

    def __reduce__(self):
        # a predefined handle unpickles as itself, a copy of one as a copy (mpi4py's rule)
        constant = _TABLE.constant_of(self)
        if constant is None:
            raise ValueError(f"cannot pickle {self!r}: only predefined MPI handles pickle")
        name, obj = constant
        return (_predefined, (name,)) if obj is self else (type(self), (obj,))


def constant(name):
    """The predefined handle ``name`` (``"COMM_WORLD"``)."""
    return _TABLE.names[name]


_predefined = constant  # what a pickle of a predefined handle calls


def predefine(**constants):
    """Number the predefined handles ``constants`` (name: object), in this order."""
    for name, obj in constants.items():
        _TABLE.predefine(name, obj)


def _struct_bytes(cls):
    # a C struct, not a handle (MPI.Status says its size so)
    return getattr(cls, "_struct_bytes", None)


def is_constant(obj):
    """Whether ``obj`` is itself one of MPI's predefined handles (not a copy of one)."""
    constant = _TABLE.constant_of(obj)
    return constant is not None and constant[1] is obj


def sizeof(obj):
    """``MPI._sizeof``: bytes of the C handle of ``obj`` (an object or its class)."""
    cls = obj if isinstance(obj, type) else type(obj)
    if issubclass(cls, Handle):
        return HANDLE_BYTES
    if _struct_bytes(cls):
        return _struct_bytes(cls)
    raise TypeError(f"MPI._sizeof({obj!r}): give an MPI handle or its class")


def addressof(obj):
    """``MPI._addressof``: where the Python object keeps its handle (its address)."""
    if isinstance(obj, Handle) or _struct_bytes(type(obj)):
        return id(obj)
    raise TypeError(f"MPI._addressof({obj!r}): give an MPI handle")


def handleof(obj):
    """``MPI._handleof``: the handle's number (a status's address: it has no handle)."""
    if isinstance(obj, Handle):
        return obj.handle
    if _struct_bytes(type(obj)):
        return id(obj)
    raise TypeError(f"MPI._handleof({obj!r}): give an MPI handle")
