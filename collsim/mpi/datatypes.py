"""MPI's predefined datatypes: ``MPI.DOUBLE``, ``MPI.INT``, ... and ``MPI.DATATYPE_NULL``.

A :class:`Datatype` is an MPI name and the numpy type of one element (the C type the MPI
standard gives it, on this machine: ``MPI.LONG`` is a C ``long``, numpy's ``"l"``).  The
names mpi4py has but whose element numpy cannot hold (the Fortran ``REAL2``, ``BFLOAT16_T``,
...) are ``MPI.DATATYPE_NULL``, as mpi4py gives the ones its MPI library lacks.  A
predefined datatype pickles to its name, so it unpickles as the same object, and is
hashable.  Derived datatypes (``Create_vector``, ...) are not here: they raise
``NotImplementedError`` naming the call.

Examples
--------
>>> DOUBLE.Get_size(), DOUBLE.typechar, DOUBLE.Get_name()
(8, 'd', 'MPI_DOUBLE')
>>> datatype_of(np.dtype("int32")), datatype_of("Q")
(MPI.INT, MPI.UNSIGNED_LONG_LONG)
>>> import pickle
>>> pickle.loads(pickle.dumps(DATATYPES["FLOAT"])) is DATATYPES["FLOAT"]
True
>>> DATATYPES["REAL2"] == DATATYPE_NULL
True
"""

import numpy as np

from .attributes import Attributes, delete_attributes
from .constructors import TypeConstructors
from .exceptions import ERR_TYPE, mpi_error
from .handletable import Handle, predefine
from .packing import PackCalls
from .typemap import Layout

__all__ = ["Datatype", "DATATYPES", "DATATYPE_NULL", "BYTE", "DOUBLE", "datatype_of"]

# MPI name -> numpy type code of one element (C types as the standard names them; the
# Fortran ones by their kind); aliases (C_COMPLEX and C_FLOAT_COMPLEX) are one handle
_CODES = {
    "CHAR": "c",
    "SIGNED_CHAR": "b",
    "UNSIGNED_CHAR": "B",
    "BYTE": "B",
    "WCHAR": "i",
    "SHORT": "h",
    "UNSIGNED_SHORT": "H",
    "INT": "i",
    "UNSIGNED": "I",
    "LONG": "l",
    "UNSIGNED_LONG": "L",
    "LONG_LONG": "q",
    "UNSIGNED_LONG_LONG": "Q",
    "FLOAT": "f",
    "DOUBLE": "d",
    "LONG_DOUBLE": "g",
    "C_BOOL": "?",
    "INT8_T": "i1",
    "INT16_T": "i2",
    "INT32_T": "i4",
    "INT64_T": "i8",
    "UINT8_T": "u1",
    "UINT16_T": "u2",
    "UINT32_T": "u4",
    "UINT64_T": "u8",
    "FLOAT16_T": "e",
    "FLOAT32_T": "f4",
    "FLOAT64_T": "f8",
    "C_COMPLEX": "F",
    "C_DOUBLE_COMPLEX": "D",
    "C_LONG_DOUBLE_COMPLEX": "G",
    "CXX_BOOL": "?",
    "CXX_FLOAT_COMPLEX": "F",
    "CXX_DOUBLE_COMPLEX": "D",
    "CXX_LONG_DOUBLE_COMPLEX": "G",
    "AINT": "p",
    "OFFSET": "q",
    "COUNT": "q",
    "PACKED": "B",
    "CHARACTER": "c",
    "LOGICAL": "i4",
    "INTEGER": "i4",
    "REAL": "f4",
    "DOUBLE_PRECISION": "f8",
    "COMPLEX": "c8",
    "DOUBLE_COMPLEX": "c16",
    "LOGICAL1": "i1",
    "LOGICAL2": "i2",
    "LOGICAL4": "i4",
    "LOGICAL8": "i8",
    "INTEGER1": "i1",
    "INTEGER2": "i2",
    "INTEGER4": "i4",
    "INTEGER8": "i8",
    "REAL4": "f4",
    "REAL8": "f8",
    "REAL16": "g",
    "COMPLEX8": "c8",
    "COMPLEX16": "c16",
    "COMPLEX32": "G",
    "F_BOOL": "i4",
    "F_INT": "i4",
    "F_FLOAT": "f4",
    "F_DOUBLE": "f8",
    "F_COMPLEX": "c8",
    "F_FLOAT_COMPLEX": "c8",
    "F_DOUBLE_COMPLEX": "c16",
}
_ALIASES = {
    "C_FLOAT_COMPLEX": "C_COMPLEX",
    "BOOL": "C_BOOL",
    "SIGNED_SHORT": "SHORT",
    "SIGNED_INT": "INT",
    "SIGNED_LONG": "LONG",
    "SIGNED_LONG_LONG": "LONG_LONG",
    "UNSIGNED_INT": "UNSIGNED",
    "SINT8_T": "INT8_T",
    "SINT16_T": "INT16_T",
    "SINT32_T": "INT32_T",
    "SINT64_T": "INT64_T",
}
# names numpy has no element for (Fortran half precision, bfloat16, 128-bit integers):
# DATATYPE_NULL here, as mpi4py gives the ones its MPI library lacks
_NULL_NAMES = ("BFLOAT16_T", "REAL2", "COMPLEX4", "INTEGER16", "LOGICAL16")
# MINLOC/MAXLOC's (value, index) pairs: a C struct of the value and an int, aligned as C
# aligns it (so DOUBLE_INT is 16 bytes), which numpy's aligned structured dtype matches
_PAIRS = {
    "SHORT_INT": "h",
    "TWOINT": "i",
    "LONG_INT": "l",
    "FLOAT_INT": "f",
    "DOUBLE_INT": "d",
    "LONG_DOUBLE_INT": "g",
}
TYPECLASS_INTEGER, TYPECLASS_REAL, TYPECLASS_COMPLEX, TYPECLASS_LOGICAL = 1, 2, 3, 4
_TYPECLASSES = {
    TYPECLASS_INTEGER: "INTEGER",
    TYPECLASS_REAL: "REAL",
    TYPECLASS_COMPLEX: "COMPLEX",
    TYPECLASS_LOGICAL: "LOGICAL",
}


class Datatype(TypeConstructors, PackCalls, Attributes, Handle):
    """An MPI datatype: ``name`` (``"MPI_DOUBLE"``), ``numpy`` (the dtype of one element
    of a predefined type, None for a derived one and ``DATATYPE_NULL``) and ``layout``
    (its bounds and typemap, :mod:`~collsim.mpi.typemap`)."""

    _attr_kind = "Datatype"  # its attribute keys (collsim.mpi.attributes)

    def _construct(self, datatype=None):
        # MPI.Datatype() is DATATYPE_NULL's value; MPI.Datatype(MPI.INT) a copy of INT's
        if datatype is not None and not isinstance(datatype, Datatype):
            raise TypeError(f"MPI.Datatype({datatype!r}): give an MPI.Datatype to copy")
        self._become(datatype or _Null)

    def _attr_check(self, call):
        self._old(call)

    def _become(self, other):
        """Take ``other``'s handle (its name, element, layout and recipe)."""
        self.name, self.numpy = other.name, other.numpy
        self.layout, self.recipe = other.layout, other.recipe

    @classmethod
    def _named(cls, name, code):
        made = cls()
        made.name, made.numpy = f"MPI_{name}", None if code is None else np.dtype(code)
        made.layout = None if code is None else Layout.of_basic(made.numpy)
        return made

    @classmethod
    def _derived(cls, layout, recipe, numpy=None):
        """A new handle for a constructed type (``numpy``: the element of a Dup of a
        predefined type or an F90 kind, which move as that type does)."""
        made = cls()
        made.name, made.numpy, made.layout, made.recipe = "", numpy, layout, recipe
        return made

    @staticmethod
    def _named_type(name):
        return DATATYPES[name]

    def _dtype(self, call):
        if self.numpy is None:
            raise mpi_error(ERR_TYPE, f"Datatype.{call} of MPI.DATATYPE_NULL: give a datatype")
        return self.numpy

    def Get_size(self):
        """Bytes the type's data fills (``MPI.DOUBLE.Get_size() == 8``)."""
        return self._old("Get_size").size

    size = property(lambda self: self.Get_size())

    def Get_extent(self):
        """``(lb, extent)`` in bytes: where an element starts, and the stride between
        consecutive elements in a buffer."""
        layout = self._old("Get_extent")
        return layout.lb, layout.extent

    def Get_true_extent(self):
        """``(true_lb, true_extent)``: the bytes the data really touches."""
        layout = self._old("Get_true_extent")
        return layout.true_lb, layout.true_extent

    lb = property(lambda self: self._old("lb").lb)
    ub = property(lambda self: self._old("ub").ub)
    extent = property(lambda self: self._old("extent").extent)
    true_lb = property(lambda self: self._old("true_lb").true_lb)
    true_ub = property(lambda self: self._old("true_ub").true_ub)
    true_extent = property(lambda self: self._old("true_extent").true_extent)

    @staticmethod
    def Get_value_index(value, index):
        """The (value, index) pair type MINLOC and MAXLOC reduce, or DATATYPE_NULL."""
        if not value or not index:
            raise mpi_error(ERR_TYPE, "Datatype.Get_value_index of MPI.DATATYPE_NULL")
        if index.name != "MPI_INT" or value.numpy is None:
            return DATATYPE_NULL
        pairs = {code: name for name, code in _PAIRS.items()}
        return DATATYPES.get(pairs.get(value.numpy.char), DATATYPE_NULL)

    @staticmethod
    def Match_size(typeclass, size):
        """The Fortran type of ``typeclass`` (``MPI.TYPECLASS_REAL``, ...) and ``size`` bytes."""
        found = DATATYPES.get(f"{_TYPECLASSES.get(typeclass, '?')}{size}")
        if not found:
            raise mpi_error(ERR_TYPE, f"Match_size({typeclass}, {size}): no such datatype")
        return found

    def Get_name(self):
        return self.__dict__.get("label", self.name)

    def Set_name(self, name):
        self.label = str(name)  # a display name; the handle stays the MPI name's

    is_named = property(lambda self: self.layout is None or self.layout.combiner == "NAMED")

    def Is_predefined(self):
        """Whether the type is MPI's own (named, or a Fortran kind from Create_f90_*)."""
        return self.layout is None or self.layout.combiner in _PREDEFINED

    is_predefined = property(Is_predefined)

    @classmethod
    def fromcode(cls, code):
        """The datatype of a type code (``"d"``, ``"i4"``), as mpi4py's ``fromcode``."""
        found = datatype_of(code)
        if found is None:
            raise ValueError(f"Datatype.fromcode({code!r}): no MPI datatype has that code")
        return found

    @property
    def typechar(self):
        """The type's numpy character code; ``"V"`` (raw bytes) for a derived one."""
        return "V" if self.numpy is None and self else self._dtype("typechar").char

    def tocode(self):
        """The type code of a type that is one numpy scalar (else a ValueError)."""
        if self.numpy is None or self.numpy.kind == "V":
            raise ValueError(f"{self!r}.tocode(): cannot map to character code or type string")
        return self.numpy.char

    @property
    def typestr(self):
        """numpy's type string (``"<i4"`` without the byte order); ``"V<extent>"`` for a
        derived or pair type."""
        if self.numpy is None and self:
            return f"V{self.extent}"
        dtype = self._dtype("typestr")
        return f"V{dtype.itemsize}" if dtype.kind == "V" else dtype.str.lstrip("<>|=")

    def Commit(self):
        """Nothing to do: a type can move data as soon as it is made."""
        self._old("Commit")
        return self

    def Free(self):
        """Drop a derived type's handle (it becomes ``MPI.DATATYPE_NULL``); a predefined
        type cannot be freed (MPI_ERR_TYPE, as MPI defines)."""
        self._old("Free")
        if self.is_predefined:
            raise mpi_error(ERR_TYPE, f"Free() of {self!r}: a predefined type cannot be freed")
        try:
            delete_attributes(self)  # MPI runs the keys' delete callbacks first
        finally:
            self._become(_Null)

    def __eq__(self, other):
        if not isinstance(other, Datatype):
            return NotImplemented
        return self.name == other.name and self.layout is other.layout

    def _handle_key(self):
        # copies share the layout object; a derived type's is its own
        return None if self.layout is None else (self.name, id(self.layout))

    def _nullify(self):
        self._become(_Null)

    def __bool__(self):
        return self.layout is not None

    def __reduce__(self):
        if not self.is_named:  # a derived type: made again from its recipe
            return _remade, self.decode()
        return super().__reduce__()

    def __repr__(self):
        if not self.is_named:
            return f"MPI.Datatype({self.layout.combiner})"
        return f"MPI.{self.name.removeprefix('MPI_')}"


class _Null:
    """DATATYPE_NULL's fields (what a freed handle becomes)."""

    name, numpy, layout, recipe = "MPI_DATATYPE_NULL", None, None, None


_PREDEFINED = ("NAMED", "F90_INTEGER", "F90_REAL", "F90_COMPLEX")


def _remade(base, combiner, params):
    """A derived type made again from ``decode()``'s parts (how one unpickles)."""
    if combiner == "DUP":
        return base.Dup()
    return getattr(base, f"Create_{combiner.lower()}")(**params)


DATATYPE_NULL = Datatype()
DATATYPES = {name: Datatype._named(name, code) for name, code in _CODES.items()}
DATATYPES.update({alias: DATATYPES[name] for alias, name in _ALIASES.items()})
DATATYPES.update({name: DATATYPE_NULL for name in _NULL_NAMES})
DATATYPES.update(
    {
        name: Datatype._named(name, np.dtype([("value", code), ("index", "i")], align=True))
        for name, code in _PAIRS.items()
    }
)
DATATYPES["INT_INT"] = DATATYPES["TWOINT"]
DATATYPES["DATATYPE_NULL"] = DATATYPE_NULL
predefine(DATATYPE_NULL=DATATYPE_NULL)
predefine(**DATATYPES)  # their numbers, in this order
BYTE, DOUBLE = DATATYPES["BYTE"], DATATYPES["DOUBLE"]
# the datatype mpi4py infers from a buffer's type code (numpy's dtype.char or array's)
_BY_CODE = {
    c: DATATYPES[n]
    for c, n in (
        ("b", "SIGNED_CHAR"),
        ("B", "UNSIGNED_CHAR"),
        ("h", "SHORT"),
        ("H", "UNSIGNED_SHORT"),
        ("i", "INT"),
        ("I", "UNSIGNED"),
        ("l", "LONG"),
        ("L", "UNSIGNED_LONG"),
        ("q", "LONG_LONG"),
        ("Q", "UNSIGNED_LONG_LONG"),
        ("f", "FLOAT"),
        ("d", "DOUBLE"),
        ("g", "LONG_DOUBLE"),
        ("e", "FLOAT16_T"),
        ("?", "C_BOOL"),
        ("F", "C_COMPLEX"),
        ("D", "C_DOUBLE_COMPLEX"),
        ("G", "C_LONG_DOUBLE_COMPLEX"),
        ("c", "CHAR"),
        ("S", "CHAR"),
        ("u", "WCHAR"),
        ("w", "WCHAR"),
        ("p", "AINT"),
    )
}


def datatype_of(code):
    """The datatype mpi4py infers for a numpy dtype or a type code (``"d"``, ``"i4"``), or
    None where there is none."""
    if isinstance(code, str) and code in _BY_CODE:
        return _BY_CODE[code]
    try:
        dtype = np.dtype(code)
    except TypeError:
        return None
    return _BY_CODE.get(dtype.char) or _BY_CODE.get(np.dtype(dtype.str).char)
