"""Taking a derived datatype apart: ``Get_envelope``, ``Get_contents``, ``decode``.

A constructor (:mod:`~collsim.mpi.constructors`) keeps its older type and its arguments
(a :class:`Recipe`); ``decode()`` gives them back as mpi4py names them (``("VECTOR",
{"count": 2, ...})``), ``Get_contents()`` as the MPI standard lists them (integers,
addresses, large counts and datatypes), and ``Get_envelope()`` how many of each there
are, with the combiner (``MPI.COMBINER_VECTOR``, ...).  Datatypes come back as new
handles the caller may free, as MPI's do; a named one as itself.

Examples
--------
>>> from collsim import mpi as MPI
>>> t = MPI.INT.Create_indexed([1, 2], [0, 5])
>>> t.Get_envelope() == (5, 0, 0, 1, MPI.COMBINER_INDEXED)
True
>>> t.Get_contents()[0], t.decode()[1:]
([2, 1, 2, 0, 5], ('INDEXED', {'blocklengths': [1, 2], 'displacements': [0, 5]}))
"""

from typing import NamedTuple

from .exceptions import ERR_TYPE, mpi_error

__all__ = ["TypeContents", "Recipe", "COMBINERS", "handle_of"]

# combiner constants (Open MPI's values; MPI names them, mpi4py exports them)
COMBINERS = {
    "NAMED": 0,
    "DUP": 1,
    "CONTIGUOUS": 2,
    "VECTOR": 3,
    "HVECTOR": 5,
    "INDEXED": 6,
    "HINDEXED": 8,
    "INDEXED_BLOCK": 9,
    "STRUCT": 11,
    "SUBARRAY": 12,
    "DARRAY": 13,
    "F90_REAL": 14,
    "F90_COMPLEX": 15,
    "F90_INTEGER": 16,
    "RESIZED": 17,
    "HINDEXED_BLOCK": 18,
}


class Recipe(NamedTuple):
    """How a derived type was made: the older type (None for STRUCT and F90) and the
    constructor's arguments as ``decode()`` names them."""

    base: object
    params: dict


class TypeContents:
    """The calls that take a type apart (a mixin of :class:`~collsim.mpi.datatypes.Datatype`:
    it needs ``layout``, ``recipe``, ``is_named`` and ``_named_type``)."""

    @property
    def combiner(self):
        return COMBINERS[self._old("combiner").combiner]

    def Get_envelope(self):
        """``(integers, addresses, large counts, datatypes, combiner)``: how many of each
        ``Get_contents`` gives, and the constructor that made the type."""
        ints, addrs, counts, types = self.Get_contents() if not self.is_named else ([], [], [], [])
        return len(ints), len(addrs), len(counts), len(types), self.combiner

    envelope = property(Get_envelope)

    def Get_contents(self):
        """The constructor's arguments as MPI lists them: integers, addresses (byte
        displacements), large counts (none here) and datatypes (new handles)."""
        combiner, (base, p) = self._old("Get_contents").combiner, self.recipe
        if combiner == "NAMED":
            raise mpi_error(ERR_TYPE, f"Get_contents of {self!r}: a named type has no contents")
        types = [handle_of(base)] if base is not None else []
        if combiner == "STRUCT":
            types = [handle_of(t) for t in p["datatypes"]]
        n = len(p.get("displacements", ()))
        ints, addrs = {
            "DUP": ([], []),
            "CONTIGUOUS": ([p.get("count")], []),
            "VECTOR": ([p.get("count"), p.get("blocklength"), p.get("stride")], []),
            "HVECTOR": ([p.get("count"), p.get("blocklength")], [p.get("stride")]),
            "INDEXED": ([n, *p.get("blocklengths", ()), *p.get("displacements", ())], []),
            "HINDEXED": ([n, *p.get("blocklengths", ())], p.get("displacements")),
            "INDEXED_BLOCK": ([n, p.get("blocklength"), *p.get("displacements", ())], []),
            "HINDEXED_BLOCK": ([n, p.get("blocklength")], p.get("displacements")),
            "STRUCT": ([n, *p.get("blocklengths", ())], p.get("displacements")),
            "RESIZED": ([], [p.get("lb"), p.get("extent")]),
            "F90_INTEGER": ([p.get("r")], []),
            "F90_REAL": ([p.get("p"), p.get("r")], []),
            "F90_COMPLEX": ([p.get("p"), p.get("r")], []),
        }.get(combiner) or (_array_ints(combiner, p), [])
        return list(ints), list(addrs), [], types

    contents = property(Get_contents)

    def decode(self):
        """``(older type, constructor, arguments)``, mpi4py's form (``"NAMED"`` for a
        predefined type, which is its own older type)."""
        combiner = self._old("decode").combiner
        if combiner == "NAMED":
            return self, "NAMED", {}
        base, params = self.recipe
        params = dict(params)
        if "datatypes" in params:
            params["datatypes"] = [handle_of(t) for t in params["datatypes"]]
        return (
            (handle_of(base) if base is not None else self._named_type("DATATYPE_NULL")),
            combiner,
            params,
        )


def handle_of(datatype):
    """A new handle for a contents' datatype (the caller frees it); a named one is itself."""
    return datatype if datatype.is_named else type(datatype)(datatype)


def _array_ints(combiner, p):
    shape = p.get("sizes") or p["gsizes"]
    if combiner == "SUBARRAY":
        return [len(shape), *shape, *p["subsizes"], *p["starts"], p["order"]]
    head = [p["size"], p["rank"], len(shape), *shape, *p["distribs"], *p["dargs"]]
    return [*head, *p["psizes"], p["order"]]
