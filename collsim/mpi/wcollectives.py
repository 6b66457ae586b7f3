"""The w-collectives: ``Alltoallw`` and ``Neighbor_alltoallw``, whose buffer spec gives
each peer its own count, byte displacement and datatype (MPI-4.1 §6.8, §8.6):
``[buf, (counts, displs), datatypes]`` or ``[buf, counts, displs, datatypes]``.

Block r is ``counts[r]`` elements of ``datatypes[r]`` starting ``displs[r]`` bytes into
``buf`` (bytes, not elements, unlike ``Alltoallv``: the datatypes may differ).  A block
travels as its packed bytes (:mod:`collsim.mpi.packing`), so a derived datatype on one
side matches plain elements on the other, as MPI's type signatures do; a message longer
than the receive block is MPI's truncation error.  At ``MPI.BOTTOM`` the displacements
(or the datatypes' own) are absolute addresses: collsim reads and writes them only inside
a live buffer whose address ``MPI.Get_address`` gave, and refuses any other.

Examples
--------
>>> import numpy as np, collsim
>>> from collsim import mpi as MPI
>>> def main():
...     comm = MPI.COMM_WORLD
...     out = np.full(2, comm.rank, "i")  # an int to each rank
...     back = np.zeros(2, "d")  # a double from each: 8 bytes apart
...     comm.Alltoallw([out, ([1, 1], [0, 4]), [MPI.INT] * 2], [back, ([1, 1], [0, 8]), MPI.INT])
...     return back.view("i")[[0, 2]].tolist()
>>> collsim.runtime.blocking.run(collsim.Cluster(collsim.topology.ring(2)), main).returns
[[0, 1], [0, 1]]
"""

from dataclasses import dataclass

import numpy as np

from ..collectives.checks import is_int
from ..errors import shorten
from .buffers import in_place
from .datatypes import Datatype
from .exceptions import ERR_TRUNCATE, mpi_error, value_error
from .memory import Bottom, array_of, at_address
from .packing import byte_positions
from .vectors import nonblocking, persistent

__all__ = ["WBuffer", "w_buffer", "WCollectives"]


@dataclass
class WBuffer:
    """A w-spec: the user's memory as bytes (``raw``) and, per peer, a count, a byte
    displacement and a datatype."""

    raw: np.ndarray  # uint8, a view of the user's memory (None at MPI.BOTTOM)
    counts: tuple
    displs: tuple
    datatypes: tuple

    def _where(self, r, what):
        """``(raw, where)``: the bytes block r lies in and its bytes' positions there, in
        the order they travel.  At ``MPI.BOTTOM`` the displacements are absolute
        addresses, inside a buffer ``MPI.Get_address`` was given."""
        start, layout, raw = self.displs[r], self.datatypes[r].layout, self.raw
        if self.counts[r] == 0 or not self.datatypes[r]:
            return np.zeros(0, np.uint8), np.zeros(0, np.int64)
        if raw is None:
            span = (self.counts[r] - 1) * layout.extent
            low, high = start + layout.true_lb + min(span, 0), start + layout.true_ub + max(span, 0)
            raw, base = at_address(low, high, what)
            start -= base
        where = byte_positions(layout, self.counts[r], raw.size - start, what)
        if isinstance(where, slice):
            return raw, slice(where.start + start, where.stop + start)
        return raw, where + start

    def block(self, r, what):
        """Block r's bytes, packed (a copy: the message)."""
        raw, where = self._where(r, what)
        return raw[where].copy()

    def put(self, r, value, what):
        """Write the arrived bytes ``value`` into block r (MPI's truncation error when
        they are more than it holds)."""
        raw, where = self._where(r, what)
        room = len(raw[where])
        data = value.reshape(-1).view(np.uint8)
        if data.size > room:
            raise mpi_error(
                ERR_TRUNCATE,
                f"{what}: a message of {data.size} bytes for block {r}, which holds "
                f"{room} ({self.counts[r]} x {self.datatypes[r]!r}): give a larger count",
            )
        if isinstance(where, slice):
            raw[where.start : where.start + data.size] = data
        else:
            raw[where[: data.size]] = data


def w_buffer(spec, size, call, arg, writable=False):
    """The :class:`WBuffer` of a w-spec for ``size`` peers; ``call`` and ``arg`` name it in
    errors."""
    what = f"{call}({arg}=...)"
    items = len(spec) if isinstance(spec, list | tuple) else 0
    if items == 2:  # [buf, datatypes]: one element of each at the buffer's start, as mpi4py
        (buf, datatypes), counts, displs = spec, None, None
    elif items == 3 and isinstance(spec[1], list | tuple) and len(spec[1]) == 2:
        buf, (counts, displs), datatypes = spec
    elif items == 4:
        buf, counts, displs, datatypes = spec
    else:
        raise value_error(
            f"{what}: {shorten(spec)} is not a w-spec: give 2 to 4 items, [buf, (counts, "
            "displs), datatypes] (displacements in bytes, one datatype per peer)"
        )
    if (counts is None or displs is None) and (isinstance(buf, Bottom) or counts != displs):
        raise value_error(
            f"{what}: counts={counts!r}, displs={displs!r}: give both (MPI.BOTTOM needs "
            "both: they are its absolute addresses), or neither (one element each, at 0)"
        )
    if counts is None:
        counts, displs = [1] * size, [0] * size
    counts = _per_peer(counts, size, what, "counts")
    if isinstance(datatypes, Datatype):  # one datatype for every peer
        datatypes = [datatypes] * size
    datatypes = tuple(datatypes)
    if len(datatypes) != size or not all(isinstance(d, Datatype) for d in datatypes):
        raise value_error(f"{what}: give {size} datatypes (one per peer), not {shorten(spec)}")
    displs = _per_peer(displs, size, what, "displs")
    raw = None if isinstance(buf, Bottom) else array_of(buf, what, writable)
    raw = None if raw is None else raw.reshape(-1).view(np.uint8)
    return WBuffer(raw, counts, displs, datatypes)


def _per_peer(values, size, what, name):
    values = [values] * size if is_int(values) else list(values)
    if len(values) != size or not all(is_int(v) and v >= 0 for v in values):
        raise value_error(f"{what}: {name}={values}: give {size} ints >= 0, one per peer")
    return tuple(int(v) for v in values)


class WCollectives:
    """``Alltoallw`` (a mixin of Comm): block r of the send spec goes to rank r, and what
    rank r sent lands in block r of the receive spec."""

    def Alltoallw(self, sendbuf, recvbuf):
        rank, me, size = self._me("Alltoallw")
        recv = w_buffer(recvbuf, size, "Alltoallw", "recvbuf", writable=True)
        if in_place(sendbuf):  # each block is sent from, and replaced in, the same place
            send = WBuffer(recv.raw.copy(), recv.counts, recv.displs, recv.datatypes)
        else:
            send = w_buffer(sendbuf, size, "Alltoallw", "sendbuf")
        what = "Alltoallw"
        blocks = [send.block(r, f"{what}(sendbuf=...)") for r in range(size)]
        recv.put(me, blocks[me], what)
        tag = self._collective_tag(rank, what)
        others = [r for r in range(size) if r != me]
        got = self._round(rank, tag, sends=[(r, blocks[r]) for r in others], recvs=others)
        for r, value in zip(others, got, strict=True):
            recv.put(r, value, what)


WCollectives.Ialltoallw = nonblocking("Alltoallw")
WCollectives.Alltoallw_init = persistent("Alltoallw")
