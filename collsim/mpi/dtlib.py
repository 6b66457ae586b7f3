"""``mpi4py.util.dtlib`` under ``collsim exec``: numpy dtypes to MPI datatypes and back.

numpy describes a record the way MPI's derived datatypes do: a scalar is a predefined
type, a subarray dtype (``"(3,4)i4"``) is a contiguous or subarray type, a structured dtype
is a struct of its fields at their byte offsets, resized to the dtype's itemsize.  Going
back, vectors and indexed types become structured dtypes with one field per block
(``f0``, ``f1``, ...), and a dtype is *aligned* (numpy's ``align=True``, a C struct's
layout) when every basic type sits at a multiple of its own alignment.  These are the
rules of mpi4py's ``dtlib`` (its documentation, "mpi4py.util.dtlib"); a dtype with
Python objects, a foreign byte order or raw bytes (``"V"``) has no MPI datatype, and a
datatype that leaves holes numpy cannot name (a resized scalar, a part of a subarray)
has no dtype: both raise ``ValueError``.

Examples
--------
>>> import numpy as np
>>> from .datatypes import DATATYPES
>>> point = np.dtype("i4,f8", align=True)
>>> mpi_point = from_numpy_dtype(point)
>>> mpi_point.Get_size(), mpi_point.Get_extent(), to_numpy_dtype(mpi_point) == point
(12, (0, 16), True)
>>> to_numpy_dtype(DATATYPES["INT"].Create_vector(2, 3, 4))
dtype({'names': ['f0', 'f1'], 'formats': [('<i4', (3,)), ('<i4', (3,))], 'offsets': [0, 16], \
'itemsize': 28}, align=True)
"""

import numpy as np

from .datatypes import DATATYPES, Datatype  # noqa: F401  (DATATYPES: the examples)

__all__ = ["from_numpy_dtype", "to_numpy_dtype", "typecode", "typealign"]

# mpi4py's module reads numpy through this name, and its tests set it to None to see what
# dtlib gives without numpy (the specs numpy would take: strings, tuples and dicts)
_np_dtype = np.dtype


def typecode(datatype):
    """mpi4py's ``MPI._typecode``: a predefined scalar type's code (``"i"``), else None.

    >>> typecode(DATATYPES["DOUBLE"]), typecode(DATATYPES["SHORT_INT"])
    ('d', None)
    """
    element = datatype.numpy
    if element is None or element.kind == "V":
        return None
    return "c" if element == np.dtype("S1") else datatype.tocode()


def typealign(datatype):
    """mpi4py's ``MPI._typealign``: the alignment in bytes of a predefined type (a C
    compiler's, numpy's) or a duplicate of one; None for other derived types.

    >>> typealign(DATATYPES["DOUBLE"]), typealign(DATATYPES["INT"].Create_contiguous(2))
    (8, None)
    """
    if datatype.is_predefined:
        return datatype.numpy.alignment
    if datatype.layout.combiner == "DUP":
        return typealign(datatype.decode()[0])
    return None


def from_numpy_dtype(dtype):
    """The MPI datatype of a numpy dtype (a new handle): a scalar's predefined type
    duplicated, a subarray's contiguous or subarray type, a record's struct resized to
    its itemsize."""
    if _np_dtype is None:
        raise RuntimeError("from_numpy_dtype: numpy is not available (pip install numpy)")
    dtype = _np_dtype(dtype)
    if dtype.hasobject:
        raise ValueError(f"from_numpy_dtype({dtype!r}): Python objects have no MPI datatype")
    if not dtype.isnative:
        raise ValueError(
            f"from_numpy_dtype({dtype!r}): MPI moves native byte order only; "
            f"use {dtype.newbyteorder('=')!r}"
        )
    if dtype.names is not None:
        fields = [dtype.fields[name] for name in dtype.names]
        struct = Datatype.Create_struct(
            [1] * len(fields),
            [offset for _, offset, *_ in fields],
            [from_numpy_dtype(field) for field, *_ in fields],
        )
        return struct.Create_resized(0, dtype.itemsize)
    if dtype.subdtype is not None:
        element, shape = dtype.subdtype
        inner = from_numpy_dtype(element)
        if len(shape) == 1:
            return inner.Create_contiguous(shape[0])
        return inner.Create_subarray(shape, shape, [0] * len(shape))
    return Datatype.fromcode(dtype.char).Dup()


def to_numpy_dtype(datatype):
    """The numpy dtype whose itemsize and fields lay bytes out as ``datatype`` does
    (without numpy, the spec numpy would take)."""
    if not isinstance(datatype, Datatype) or not datatype:
        raise ValueError(f"to_numpy_dtype({datatype!r}): give an MPI datatype, not a null one")
    combiner = datatype.layout.combiner
    if combiner == "NAMED" or combiner.startswith("F90_"):
        return _predefined(datatype)
    base, combiner, info = datatype.decode()
    if combiner == "DUP":
        return to_numpy_dtype(base)
    if combiner == "CONTIGUOUS":
        return _dtype((to_numpy_dtype(base), (info["count"],)))
    if combiner == "SUBARRAY":
        return _whole_subarray(datatype, base, info)
    if combiner == "RESIZED" and base and base.layout.combiner == "STRUCT":
        struct = base.decode()[2]
        aligned = _is_aligned(base, info["extent"])
        return _struct_dtype(datatype, struct, aligned)
    if combiner == "STRUCT":
        return _struct_dtype(datatype, info, True)
    if combiner in ("VECTOR", "HVECTOR"):
        return _vector_dtype(datatype, base, combiner, info)
    if combiner in ("INDEXED", "HINDEXED", "INDEXED_BLOCK", "HINDEXED_BLOCK"):
        return _indexed_dtype(base, combiner, info)
    raise ValueError(
        f"to_numpy_dtype({datatype!r}): a {combiner} datatype has no numpy dtype "
        "(a resized scalar leaves holes numpy cannot name)"
    )


def _dtype(spec, **options):
    """numpy's dtype of ``spec``; without numpy, the spec itself."""
    if _np_dtype is None:
        return (spec, options) if options else spec
    return _np_dtype(spec, **options)


def _predefined(datatype):
    code = typecode(datatype)
    if code is not None:
        return _dtype(code)
    if datatype.numpy is not None and datatype.numpy.names:  # a MINLOC/MAXLOC pair
        value, index = (datatype.numpy.fields[name][0] for name in datatype.numpy.names)
        return _dtype(f"{value.str},{index.str}", align=True)
    raise ValueError(f"to_numpy_dtype({datatype!r}): no numpy dtype for this MPI datatype")


def _whole_subarray(datatype, base, info):
    sizes, starts = info["sizes"], info["starts"]
    if list(info["subsizes"]) != list(sizes) or any(starts):
        raise ValueError(
            f"to_numpy_dtype({datatype!r}): a subarray of part of an array "
            f"(subsizes {info['subsizes']} of sizes {sizes}) has no numpy dtype"
        )
    if info["order"] == 1:  # MPI.ORDER_FORTRAN: numpy's shapes are in C order
        sizes = sizes[::-1]
    return _dtype((to_numpy_dtype(base), tuple(sizes)))


def _record(names, formats, offsets, itemsize, aligned):
    spec = {"names": names, "formats": formats, "offsets": offsets}
    if itemsize is not None:
        spec["itemsize"] = itemsize
    spec["aligned"] = aligned
    return _dtype(spec)


def _field(datatype, count):
    element = to_numpy_dtype(datatype)
    return element if count == 1 else (element, count)


def _struct_dtype(datatype, info, aligned):
    types, offsets = info["datatypes"], list(info["displacements"])
    aligned = aligned and all(map(_is_aligned, types, offsets))
    formats = [_field(t, n) for t, n in zip(types, info["blocklengths"], strict=True)]
    names = [f"f{i}" for i in range(len(types))]
    return _record(names, formats, offsets, datatype.extent, aligned)


def _vector_dtype(datatype, base, combiner, info):
    count, stride = info["count"], info["stride"]
    if combiner == "VECTOR":  # the stride counts elements; HVECTOR's counts bytes
        stride, aligned = stride * base.extent, _is_aligned(base)
    else:
        stride = stride if count > 1 else 0
        aligned = _is_aligned(base, stride)
    block = (to_numpy_dtype(base), (info["blocklength"],))
    names = [f"f{i}" for i in range(count)]
    return _record(names, [block] * count, [i * stride for i in range(count)],
                   datatype.extent, aligned)  # fmt: skip


def _indexed_dtype(base, combiner, info):
    offsets = list(info["displacements"])
    lengths = info.get("blocklengths") or [info["blocklength"]] * len(offsets)
    aligned = _is_aligned(base)
    if combiner.startswith("H"):  # displacements in bytes
        aligned = aligned and all(_is_aligned(base, offset) for offset in offsets)
    else:
        offsets = [offset * base.extent for offset in offsets]
    element = to_numpy_dtype(base)
    formats = [(element, (n,)) for n in lengths]
    return _record([f"f{i}" for i in range(len(offsets))], formats, offsets, None, aligned)


def _is_aligned(datatype, offset=0):
    """Whether ``datatype`` placed at byte ``offset`` keeps its basic types aligned, as
    mpi4py's dtlib judges it (each constructor's first copy only, where its copies
    repeat the same alignment)."""
    if datatype.is_predefined:
        return offset == 0 or offset % (typealign(datatype) or 1) == 0
    base, combiner, info = datatype.decode()
    if combiner == "STRUCT":
        placed = zip(info["datatypes"], info["displacements"], strict=True)
    elif combiner == "RESIZED":
        placed = [(base, info["extent"])]
    elif combiner == "HVECTOR":
        placed = [(base, info["stride"] if info["count"] > 1 else 0)]
    elif combiner in ("HINDEXED", "HINDEXED_BLOCK"):
        placed = [(base, d) for d in info["displacements"]]
    else:  # DUP, CONTIGUOUS, VECTOR, INDEXED, SUBARRAY: the base at the type's start
        placed = [(base, 0)]
    return all(_is_aligned(inner, offset + at) for inner, at in placed)
