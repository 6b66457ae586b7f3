"""Where a datatype's bytes are: its typemap and the bounds MPI defines for it.

A datatype is a *typemap*: a list of (basic type, byte displacement) pairs, in the order
its bytes travel, with a lower bound ``lb`` and an ``extent`` (the stride between two
consecutive elements of the type in a buffer).  MPI-4.1 §5.1 builds every derived type
the same way: copies of older types placed at byte displacements.  A :class:`Layout`
says exactly that: its ``parts`` are blocks of copies (``lengths[i]`` consecutive copies
of ``datatype``, one extent apart, from byte ``starts[i]``), and everything else is read
from them:

* ``size``: the bytes that travel (the sum of the copies' sizes);
* ``lb``/``ub``: the least and greatest byte the copies' own bounds reach (a block of
  no copies counts for nothing), the extent rounded up to a multiple of the widest basic
  type's alignment (as a C compiler pads a struct; Open MPI pads every constructor's);
  where a copy's bounds were set by ``Create_resized`` they are *markers*, and markers
  win, unpadded (the standard's sticky lb/ub);
* ``true_lb``/``true_ub``: the bytes really touched, whatever the markers say;
* :meth:`Layout.typemap`: the flat typemap, built only when bytes move (a type of 2**31
  bytes is cheap to describe, not to list).

Examples
--------
>>> import numpy as np
>>> INT = Layout.of_basic(np.dtype("i"))
>>> vector = Layout.of_parts("VECTOR", [Part(INT, [0, 16], [3, 3])])  # 2 blocks of 3
>>> vector.size, vector.lb, vector.extent, vector.true_ub
(24, 0, 28, 28)
>>> vector.typemap().offsets.tolist()
[0, 4, 8, 16, 20, 24]
>>> Layout.resized(vector, -4, 40).extent, Layout.resized(vector, -4, 40).true_lb
(40, 0)
"""

from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple

import numpy as np

__all__ = ["Layout", "Part", "Typemap"]


class Typemap(NamedTuple):
    """A flat typemap: ``offsets[i]`` is the byte displacement of entry i, whose basic
    type is ``dtypes[kinds[i]]``."""

    offsets: np.ndarray  # int64, one per basic element, in the order the bytes travel
    kinds: np.ndarray  # int64 indices into dtypes
    dtypes: tuple  # the distinct basic numpy dtypes

    @property
    def sizes(self):
        """Bytes of each entry."""
        return np.array([d.itemsize for d in self.dtypes], np.int64)[self.kinds]


class Part(NamedTuple):
    """Blocks of copies of one older type: block i is ``lengths[i]`` copies of
    ``layout``, one extent apart, from byte ``starts[i]``."""

    layout: "Layout"
    starts: object  # bytes, a sequence of ints (one per block)
    lengths: object  # copies per block, a sequence of ints >= 0


@dataclass(frozen=True, eq=False)
class Layout:
    """A datatype's bounds (bytes) and how its typemap is made (see the module's text)."""

    combiner: str  # "NAMED" for a basic type, else the constructor's: "VECTOR", ...
    size: int  # bytes that travel
    lb: int
    ub: int
    true_lb: int
    true_ub: int
    marked: bool = False  # lb and ub are Create_resized's markers (they stick)
    basic: np.dtype = None  # a basic type's numpy dtype (NAMED only)
    parts: tuple = field(default=(), repr=False)

    @property
    def extent(self):
        return self.ub - self.lb

    @property
    def true_extent(self):
        return self.true_ub - self.true_lb

    @classmethod
    def of_basic(cls, dtype, combiner="NAMED"):
        """A predefined type: one element of ``dtype`` at byte 0."""
        n = dtype.itemsize
        return cls(combiner, n, 0, n, 0, n, basic=dtype)

    @classmethod
    def of_parts(cls, combiner, parts):
        """The layout of ``parts`` (blocks of copies of older layouts)."""
        parts = tuple(
            Part(p.layout, np.asarray(p.starts, np.int64), np.asarray(p.lengths, np.int64))
            for p in parts
        )
        size = sum(int(p.lengths.sum()) * p.layout.size for p in parts)
        reach = [_reach(p) for p in parts if (p.lengths > 0).any()]
        if not reach:  # no copies at all (count 0, or every block empty): all bounds 0
            return cls(combiner, size, 0, 0, 0, 0, parts=parts)
        marked = [r for r, p in zip(reach, parts, strict=False) if p.layout.marked]
        outer = marked or reach  # markers win over the bytes' own bounds
        lb, ub = min(r[0] for r in outer), max(r[1] for r in outer)
        if not marked:
            align = max(_alignment(p.layout) for p in parts)
            ub += -(ub - lb) % align
        true_lb, true_ub = min(r[2] for r in reach), max(r[3] for r in reach)
        return cls(combiner, size, lb, ub, true_lb, true_ub, bool(marked), parts=parts)

    @classmethod
    def resized(cls, old, lb, extent):
        """``old`` with its bounds set to ``lb`` and ``lb + extent`` (markers)."""
        part = Part(old, np.zeros(1, np.int64), np.ones(1, np.int64))
        return cls(
            "RESIZED", old.size, lb, lb + extent, old.true_lb, old.true_ub, True, parts=(part,)
        )

    def typemap(self):
        """The flat :class:`Typemap` (built on first use, then kept with the layout)."""
        return self._typemap

    @cached_property
    def dtypes(self):
        """The distinct basic numpy dtypes of the typemap, in the order they first occur
        (read without listing the typemap)."""
        if self.basic is not None:
            return (self.basic,)
        found = []
        for part in self.parts:
            for dtype in part.layout.dtypes:
                _index(found, dtype)
        return tuple(found)

    @cached_property
    def dense(self):
        """Whether the typemap's bytes are one gapless run in memory order (so a
        message of it is a slice of the buffer: no typemap needs listing)."""
        if self.basic is not None:
            return True
        end = None  # where the run reaches so far
        for part in self.parts:
            inner, full = part.layout, part.lengths > 0
            if not inner.dense or inner.true_extent != inner.size:
                return False
            if (part.lengths > 1).any() and inner.extent != inner.size:
                return False  # consecutive copies leave a gap (or overlap)
            firsts = part.starts[full] + inner.true_lb
            ends = firsts + part.lengths[full] * inner.size
            if firsts.size == 0:
                continue
            if (end is not None and firsts[0] != end) or (firsts[1:] != ends[:-1]).any():
                return False
            end = ends[-1]
        return True

    @cached_property
    def _typemap(self):
        if self.basic is not None:
            return Typemap(np.zeros(1, np.int64), np.zeros(1, np.int64), (self.basic,))
        dtypes, offsets, kinds = [], [], []
        for part in self.parts:
            inner = part.layout.typemap()
            # each inner dtype's index in this typemap's list of distinct dtypes
            remap = np.array([_index(dtypes, d) for d in inner.dtypes] or [0], np.int64)
            copies = _copy_starts(part)  # (copies,) byte displacement of every copy
            offsets.append((copies[:, None] + inner.offsets[None, :]).reshape(-1))
            kinds.append(np.tile(remap[inner.kinds], copies.size))
        if not offsets:
            return Typemap(np.zeros(0, np.int64), np.zeros(0, np.int64), ())
        return Typemap(np.concatenate(offsets), np.concatenate(kinds), tuple(dtypes))


def _copy_starts(part):
    """The byte displacement of every copy of ``part``, block by block."""
    extent = part.layout.extent
    return np.concatenate(
        [
            s + extent * np.arange(n, dtype=np.int64)
            for s, n in zip(part.starts, part.lengths, strict=False)
        ]
        or [np.zeros(0, np.int64)]
    )


def _reach(part):
    """``(lb, ub, true_lb, true_ub)`` over the non-empty blocks of ``part``."""
    full = part.lengths > 0
    starts, last = part.starts[full], (part.lengths[full] - 1) * part.layout.extent
    low, high = starts + np.minimum(last, 0), starts + np.maximum(last, 0)
    inner = part.layout
    return (
        int(low.min()) + inner.lb,
        int(high.max()) + inner.ub,
        int(low.min()) + inner.true_lb,
        int(high.max()) + inner.true_ub,
    )


def _alignment(layout):
    """The widest alignment of ``layout``'s basic types (a C struct's padding unit)."""
    if layout.basic is not None:
        return layout.basic.alignment
    return max((_alignment(p.layout) for p in layout.parts), default=1)


def _index(items, item):
    if item not in items:
        items.append(item)
    return items.index(item)
