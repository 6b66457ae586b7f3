"""The buffer constants ``MPI.BOTTOM``, ``MPI.IN_PLACE`` and ``MPI.BUFFER_AUTOMATIC``:
one object each, int-like as mpi4py's are.  In C they are addresses (Open MPI's are 0, 1
and 0); mpi4py gives each a type of its own whose object equals, converts to and hashes as
that number, does no arithmetic, and pickles by its name.  ``BOTTOM`` is also an index
(``operator.index``), as an address is.  collsim tests them by identity
(``buf is MPI.IN_PLACE``), so asking for a new one gives the one there is.

Examples
--------
>>> int(BOTTOM), int(IN_PLACE), IN_PLACE == 1, BOTTOM == 0 != IN_PLACE, BOTTOM
(0, 1, True, True, BOTTOM)
>>> type(IN_PLACE)() is IN_PLACE, bool(BOTTOM), bool(IN_PLACE)
(True, False, True)
>>> import pickle
>>> pickle.loads(pickle.dumps(BUFFER_AUTOMATIC)) is BUFFER_AUTOMATIC
True
"""

import operator

__all__ = ["Bottom", "InPlace", "BufferAutomatic", "BOTTOM", "IN_PLACE", "BUFFER_AUTOMATIC"]


class _BufferConstant:
    """One of MPI's buffer constants: its ``_name`` and C value ``_value``."""

    _name, _value = "", 0

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls._the_one = None  # each kind its own one object, made at first use

    def __new__(cls):
        # one object a kind: a copy, an unpickled one and type(c)() are that object
        if cls._the_one is None:
            cls._the_one = super().__new__(cls)
        return cls._the_one

    def __int__(self):
        return self._value

    def __eq__(self, other):
        if isinstance(other, _BufferConstant):
            return other is self
        try:
            return self._value == operator.index(other)
        except TypeError:
            return NotImplemented

    def __hash__(self):
        return hash(self._value)

    def __bool__(self):
        return bool(self._value)

    def __repr__(self):
        return self._name

    def __reduce__(self):
        return self._name  # pickled by name: this module's global of that name

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self


class Bottom(_BufferConstant):
    """``MPI.BOTTOM``: address zero; as a buffer, empty (or absolute addresses)."""

    _name, _value = "BOTTOM", 0

    def __index__(self):
        return self._value


class InPlace(_BufferConstant):
    """``MPI.IN_PLACE``: the receive buffer holds this rank's input too."""

    _name, _value = "IN_PLACE", 1


class BufferAutomatic(_BufferConstant):
    """``MPI.BUFFER_AUTOMATIC``: MPI 4.1's "the library buffers Bsend itself"."""

    _name, _value = "BUFFER_AUTOMATIC", 0


BOTTOM, IN_PLACE, BUFFER_AUTOMATIC = Bottom(), InPlace(), BufferAutomatic()
