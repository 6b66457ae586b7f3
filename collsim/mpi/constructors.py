"""Derived datatypes as MPI makes them: ``Create_vector``, ``Create_struct``, ...

Each constructor checks its arguments, places copies of the older type at byte
displacements (a :class:`~collsim.mpi.typemap.Layout`) and keeps its arguments, which
``decode()`` and ``Get_contents()`` give back (:mod:`~collsim.mpi.decoding`).  The
displacements of ``Create_vector``, ``Create_indexed`` and ``Create_indexed_block``
count extents of the older type; the ``h`` forms count bytes.
A constructor gives a new handle; ``Commit`` is needed before use in MPI (here a type can
be used at once), ``Free`` drops the handle (it becomes ``MPI.DATATYPE_NULL``).

Examples
--------
>>> from collsim import mpi as MPI
>>> t = MPI.INT.Create_vector(2, 3, 4).Commit()
>>> t.Get_size(), t.Get_extent(), t.decode()[1:]
(24, (0, 28), ('VECTOR', {'count': 2, 'blocklength': 3, 'stride': 4}))
>>> MPI.INT.Create_hindexed([1, 2], [0, 20]).Get_contents()[:2]
([2, 1, 2], [0, 20])
>>> MPI.Datatype.Create_struct([1, 1], [0, 8], [MPI.INT, MPI.DOUBLE]).Get_extent()
(0, 16)
"""

import dataclasses

import numpy as np

from ..collectives.checks import is_int
from .attributes import copy_attributes
from .decoding import Recipe, TypeContents, handle_of
from .exceptions import ERR_ARG, ERR_COUNT, ERR_TYPE, mpi_error
from .typemap import Layout, Part

__all__ = ["TypeConstructors", "INT_MAX"]

ORDER_C, ORDER_F = 0, 1
DISTRIBUTE_BLOCK, DISTRIBUTE_CYCLIC, DISTRIBUTE_NONE, DISTRIBUTE_DFLT_DARG = 121, 122, 123, -49767
INT_MAX = 2**31 - 1  # MPI-3.1's counts are C ints: a larger contiguous count is a struct
# Fortran kinds by (decimal range r, precision p) as gfortran picks them
_F90_INTEGER = ((2, "INTEGER1"), (4, "INTEGER2"), (9, "INTEGER4"), (18, "INTEGER8"))
_F90_REAL = ((6, 37, "4"), (15, 307, "8"), (18, 4931, "16"))


class TypeConstructors(TypeContents):
    """The derived-datatype calls of :class:`~collsim.mpi.datatypes.Datatype` (a mixin:
    it needs ``layout``, ``_derived(layout, recipe, numpy)`` and ``_named_type(name)``)."""

    def _old(self, call):
        if not self:
            raise mpi_error(ERR_TYPE, f"{call} of MPI.DATATYPE_NULL: give a datatype")
        return self.layout

    def _make(self, combiner, parts, params):
        layout = Layout.of_parts(combiner, parts)
        return self._derived(layout, Recipe(handle_of(self), params))

    def Dup(self):
        """A new handle for the same typemap (a derived type, as in MPI)."""
        old = self._old("Dup")
        part = Part(old, np.zeros(1, np.int64), np.ones(1, np.int64))
        layout = dataclasses.replace(old, combiner="DUP", parts=(part,), basic=None)
        made = self._derived(layout, Recipe(handle_of(self), {}), self.numpy)
        copy_attributes(self, made)  # as the keys' copy_fn say (collsim.mpi.attributes)
        return made

    Create_dup = Dup  # mpi4py's name for it in decode()'s "DUP" (Create_ + the combiner)

    def Create_contiguous(self, count):
        old = self._old("Create_contiguous")
        count = _count(count, "Create_contiguous", "count")
        if count > INT_MAX:  # as mpi4py builds it on an MPI-3 library: whole vectors + rest
            whole, rest = divmod(count, INT_MAX)
            vector = self.Create_vector(whole, INT_MAX, INT_MAX)
            tail = self.Create_contiguous(rest)
            return type(self).Create_struct(
                [1, 1], [0, whole * INT_MAX * old.extent], [vector, tail]
            )
        return self._make("CONTIGUOUS", [Part(old, [0], [count])], {"count": count})

    def Create_vector(self, count, blocklength, stride):
        """``count`` blocks of ``blocklength`` elements, ``stride`` extents apart."""
        return self._strided("Create_vector", count, blocklength, stride)

    def Create_hvector(self, count, blocklength, stride):
        """As :meth:`Create_vector`, with ``stride`` in bytes."""
        return self._strided("Create_hvector", count, blocklength, stride)

    def _strided(self, call, count, blocklength, stride):
        old = self._old(call)
        unit = 1 if call == "Create_hvector" else old.extent
        count = _count(count, call, "count")
        blocklength = _count(blocklength, call, "blocklength")
        stride = _int(stride, call, "stride")
        starts = np.arange(count, dtype=np.int64) * stride * unit
        params = {"count": count, "blocklength": blocklength, "stride": stride}
        return self._make(call[7:].upper(), [Part(old, starts, [blocklength] * count)], params)

    def Create_indexed(self, blocklengths, displacements):
        return self._indexed("Create_indexed", blocklengths, displacements)

    def Create_hindexed(self, blocklengths, displacements):
        return self._indexed("Create_hindexed", blocklengths, displacements)

    def Create_indexed_block(self, blocklength, displacements):
        return self._indexed("Create_indexed_block", blocklength, displacements)

    def Create_hindexed_block(self, blocklength, displacements):
        return self._indexed("Create_hindexed_block", blocklength, displacements)

    def _indexed(self, call, blocklengths, displacements):
        old = self._old(call)
        displacements = _ints(displacements, call, "displacements")
        block = call.endswith("_block")
        if block:
            lengths = [_count(blocklengths, call, "blocklength")] * len(displacements)
            params = {"blocklength": lengths[0] if lengths else int(blocklengths)}
        else:
            lengths = _counts(blocklengths, call, "blocklengths", len(displacements))
            params = {"blocklengths": lengths}
        params["displacements"] = displacements
        unit = 1 if call.startswith("Create_h") else old.extent
        starts = np.asarray(displacements, np.int64) * unit
        return self._make(call[7:].upper(), [Part(old, starts, lengths)], params)

    @classmethod
    def Create_struct(cls, blocklengths, displacements, datatypes):
        """Blocks of different types at byte displacements (a C struct's layout)."""
        call = "Create_struct"
        displacements = _ints(displacements, call, "displacements")
        lengths = _counts(blocklengths, call, "blocklengths", len(displacements))
        datatypes = list(datatypes)
        if len(datatypes) != len(displacements):
            raise ValueError(f"{call}: expecting {len(displacements)} items, got {len(datatypes)}")
        for t in datatypes:
            if not isinstance(t, TypeConstructors) or not t:
                raise mpi_error(ERR_TYPE, f"{call}(datatypes=[..., {t!r}]): give datatypes")
        parts = [
            Part(t.layout, [d], [n])
            for t, d, n in zip(datatypes, displacements, lengths, strict=True)
        ]
        # the recipe keeps handles of its own: freeing the user's leaves this type whole
        kept = [handle_of(t) for t in datatypes]
        params = {"blocklengths": lengths, "displacements": displacements, "datatypes": kept}
        layout = Layout.of_parts("STRUCT", parts)
        return cls._derived(layout, Recipe(None, params))

    def Create_subarray(self, sizes, subsizes, starts, order=ORDER_C):
        """The block ``starts`` .. ``starts + subsizes`` of an array of ``sizes`` (its
        extent is the whole array's, so consecutive elements are consecutive arrays)."""
        call = "Create_subarray"
        self._old(call)
        sizes = _counts(sizes, call, "sizes", None)
        subsizes = _counts(subsizes, call, "subsizes", len(sizes))
        starts = _counts(starts, call, "starts", len(sizes))
        order = _order(order, call)
        for n, sub, start in zip(sizes, subsizes, starts, strict=True):
            if not (sub >= 1 and start + sub <= n):
                raise mpi_error(
                    ERR_ARG,
                    f"{call}: subsize {sub} from start {start} does not fit in size {n} "
                    "(need subsize >= 1 and start + subsize <= size)",
                )
        ranges = [range(s, s + n) for s, n in zip(starts, subsizes, strict=True)]
        params = {"sizes": sizes, "subsizes": subsizes, "starts": starts, "order": order}
        return self._array("SUBARRAY", sizes, ranges, order, params)

    def Create_darray(self, size, rank, gsizes, distribs, dargs, psizes, order=ORDER_C):
        """Process ``rank``'s part of an array of ``gsizes`` distributed over a process
        grid of ``psizes`` (row-major), block or cyclic per dimension (HPF's rules)."""
        self._old("Create_darray")
        call = "Create_darray"
        gsizes = _counts(gsizes, call, "gsizes", None)
        distribs = _ints(distribs, call, "distribs", len(gsizes))
        dargs = _ints(dargs, call, "dargs", len(gsizes))
        psizes = _counts(psizes, call, "psizes", len(gsizes))
        size, rank, order = (
            _count(size, call, "size"),
            _count(rank, call, "rank"),
            _order(order, call),
        )
        if int(np.prod(psizes)) != size or rank >= size:
            raise mpi_error(
                ERR_ARG, f"{call}: psizes {psizes} must multiply to size {size} > rank {rank}"
            )
        coords = np.unravel_index(rank, psizes) if psizes else ()
        ranges = [
            _distributed(*dim, call)
            for dim in zip(gsizes, distribs, dargs, psizes, coords, strict=True)
        ]
        params = {"size": size, "rank": rank, "gsizes": gsizes, "distribs": distribs}
        params.update({"dargs": dargs, "psizes": psizes, "order": order})
        return self._array("DARRAY", gsizes, ranges, order, params)

    def _array(self, combiner, shape, ranges, order, params):
        """Copies at the elements ``ranges`` pick (one index list per dimension) of an
        array of ``shape``, in the array's order; the extent is the whole array's."""
        old, layout_order = self.layout, "CF"[order]
        grids = np.meshgrid(*(np.asarray(r, np.int64) for r in ranges), indexing="ij")
        # ORDER_C: the last index runs fastest; ORDER_F: the first
        flat = np.ravel_multi_index(grids, shape, order=layout_order).ravel(order=layout_order)
        part = Part(old, flat * old.extent, np.ones(flat.size, np.int64))
        layout = Layout.of_parts(combiner, [part])
        whole = int(np.prod(shape)) * old.extent
        layout = dataclasses.replace(layout, lb=0, ub=whole, marked=True)
        return self._derived(layout, Recipe(handle_of(self), params))

    def Create_resized(self, lb, extent):
        """The same bytes with bounds ``lb`` and ``lb + extent``: the stride between
        consecutive elements becomes ``extent``."""
        old = self._old("Create_resized")
        lb, extent = _int(lb, "Create_resized", "lb"), _int(extent, "Create_resized", "extent")
        return self._derived(
            Layout.resized(old, lb, extent), Recipe(handle_of(self), {"lb": lb, "extent": extent})
        )

    @classmethod
    def Create_f90_integer(cls, r):
        """The Fortran integer kind of at least ``r`` decimal digits (INTEGER1 ... INTEGER8)."""
        r = _int(r, "Create_f90_integer", "r")
        for most, name in _F90_INTEGER:
            if r <= most:
                return cls._f90("F90_INTEGER", name, {"r": r})
        raise mpi_error(ERR_ARG, f"Create_f90_integer(r={r}): the widest kind has r <= 18")

    @classmethod
    def Create_f90_real(cls, p, r):
        return cls._f90_float("F90_REAL", "REAL", p, r)

    @classmethod
    def Create_f90_complex(cls, p, r):
        return cls._f90_float("F90_COMPLEX", "COMPLEX", p, r)

    @classmethod
    def _f90_float(cls, combiner, kind, p, r):
        call = f"Create_{combiner.lower()}"
        p, r = _int(p, call, "p"), _int(r, call, "r")
        for most_p, most_r, bytes_ in _F90_REAL:
            if p <= most_p and r <= most_r:
                width = int(bytes_) * (2 if kind == "COMPLEX" else 1)
                return cls._f90(combiner, f"{kind}{width}", {"p": p, "r": r})
        raise mpi_error(ERR_ARG, f"{call}(p={p}, r={r}): the widest kind has p <= 18, r <= 4931")

    @classmethod
    def _f90(cls, combiner, name, params):
        named = cls._named_type(name)
        layout = Layout.of_basic(named.numpy, combiner)
        return cls._derived(layout, Recipe(None, params), named.numpy)


def _distributed(gsize, distrib, darg, psize, coord, call):
    """The indices of one dimension that process coordinate ``coord`` holds."""
    if distrib == DISTRIBUTE_NONE:
        return range(gsize)
    if distrib == DISTRIBUTE_BLOCK:
        block = -(-gsize // psize) if darg == DISTRIBUTE_DFLT_DARG else darg
        if block < 1 or block * psize < gsize:
            raise mpi_error(ERR_ARG, f"{call}: block {block} x {psize} processes < size {gsize}")
        return range(min(coord * block, gsize), min((coord + 1) * block, gsize))
    if distrib == DISTRIBUTE_CYCLIC:
        block = 1 if darg == DISTRIBUTE_DFLT_DARG else darg
        if block < 1:
            raise mpi_error(
                ERR_ARG, f"{call}: cyclic block {block}: give >= 1 or MPI.DISTRIBUTE_DFLT_DARG"
            )
        return [i for i in range(gsize) if (i // block) % psize == coord]
    raise mpi_error(
        ERR_ARG, f"{call}: distrib {distrib}: give MPI.DISTRIBUTE_BLOCK, _CYCLIC or _NONE"
    )


def _order(order, call):
    if order in (ORDER_C, ORDER_F):
        return int(order)
    raise mpi_error(ERR_ARG, f"{call}(order={order!r}): give MPI.ORDER_C or MPI.ORDER_F")


def _int(value, call, arg):
    if not is_int(value):
        raise mpi_error(ERR_ARG, f"{call}({arg}={value!r}): give an int")
    return int(value)


def _count(value, call, arg):
    value = _int(value, call, arg)
    if value < 0:
        raise mpi_error(ERR_COUNT, f"{call}({arg}={value}): a count is an int >= 0 (nearest: 0)")
    return value


def _ints(values, call, arg, n=None):
    try:
        values = [_int(v, call, arg) for v in values]
    except TypeError:
        raise mpi_error(ERR_ARG, f"{call}({arg}={values!r}): give a list of ints") from None
    if n is not None and len(values) != n:
        raise ValueError(f"{call}({arg}=...): expecting {n} items, got {len(values)}")
    return values


def _counts(values, call, arg, n):
    values = _ints(values, call, arg, n)
    for v in values:
        if v < 0:
            raise mpi_error(ERR_ARG, f"{call}({arg}={values}): every entry is an int >= 0")
    return values
