"""``MPI.Intracomm`` (``COMM_WORLD``, ``COMM_SELF`` and what ``Split`` and the rest make:
:mod:`collsim.mpi.making`) and the communicators with a process topology: ``Cartcomm``
(a Cartesian grid of ranks, the heart of every stencil code), ``Graphcomm`` and
``Distgraphcomm``, and ``Create_cart``, ``Create_graph``, ``Create_dist_graph_adjacent``
that make them.

A Cartesian communicator numbers its ranks in row-major order (the last dimension varies
fastest), as MPI does.  ``Shift(direction, disp)`` gives the ``(source, dest)`` pair of a
halo exchange: ``MPI.PROC_NULL`` past the edge of a non-periodic dimension, so a
``Sendrecv`` there moves nothing.  ``Sub`` keeps some dimensions (a row or a column of the
grid).  ``reorder`` is accepted and ignored: ranks keep their order.

Examples
--------
>>> import collsim
>>> from collsim import mpi as MPI
>>> def main():
...     cart = MPI.COMM_WORLD.Create_cart([2, 3], periods=[False, True])
...     return cart.Get_coords(cart.rank), cart.Shift(0, 1), cart.Shift(1, 1)
>>> collsim.runtime.blocking.run(collsim.Cluster(collsim.topology.ring(6)), main).returns[2]
([0, 2], (-1, 5), (1, 0))
"""

import math

from ..collectives.checks import is_int
from .comm import COMM_KINDS, SELF, WORLD, Comm
from .exceptions import ERR_ARG, ERR_RANK, ERR_TOPOLOGY, mpi_error
from .handletable import predefine
from .making import CommunicatorMaker
from .neighbors import NeighborCollectives
from .status import PROC_NULL, UNDEFINED
from .topology import CART, DIST_GRAPH, GRAPH, edge_weights

__all__ = ["Intracomm", "Topocomm", "Cartcomm", "Graphcomm", "Distgraphcomm"]
__all__ += ["COMM_WORLD", "COMM_SELF"]


class Intracomm(CommunicatorMaker):
    """An intra-communicator: its ranks talk among themselves."""

    _kinded = True

    def Create_cart(self, dims, periods=None, reorder=False):
        return create_cart(self, dims, periods, reorder)

    def Create_graph(self, index, edges, reorder=False):
        return create_graph(self, index, edges, reorder)

    def Create_dist_graph_adjacent(
        self, sources, destinations, sourceweights=None, destweights=None, info=None, reorder=False
    ):
        return create_dist_graph_adjacent(self, sources, destinations, sourceweights, destweights)

    def Create_dist_graph(
        self, sources, degrees, destinations, weights=None, info=None, reorder=False
    ):
        return create_dist_graph(self, sources, degrees, destinations, weights)

    def Cart_map(self, dims, periods=None):
        """This rank's place in a grid of ``dims`` (ranks keep their order), or UNDEFINED."""
        me = self.Get_rank()
        return me if me < math.prod(dims) else UNDEFINED

    def Graph_map(self, index, edges):
        me = self.Get_rank()
        return me if me < len(index) else UNDEFINED


Intracomm._made_class = Intracomm
_KIND_WORDS = {CART: "a Cartesian", GRAPH: "a graph", DIST_GRAPH: "a distributed graph"}
COMM_KINDS[False] = Intracomm


class Topocomm(NeighborCollectives, Intracomm):
    """A communicator with a topology: who its neighbours are."""

    _kind = None  # each kind of topology says which (MPI.CART, MPI.GRAPH, MPI.DIST_GRAPH)

    def _construct(self, *args, **kwargs):
        # as in mpi4py, MPI.Cartcomm(c) is another handle of a Cartesian c: a communicator
        # of another (or no) topology is refused (COMM_NULL passes unchecked)
        comm = args[0] if args else None
        have = getattr(comm, "_kind", None)
        if isinstance(comm, Comm) and comm and (have is None or self._kind not in (None, have)):
            # mpi4py's words: no topology at all, or another kind than this class's
            want = "a topology" if have is None else _KIND_WORDS[self._kind]
            raise TypeError(f"MPI.{type(self).__name__}({comm!r}): expecting {want} communicator")
        super()._construct(*args, **kwargs)

    @property
    def degrees(self):
        return len(self.inneighbors), len(self.outneighbors)

    @property
    def indegree(self):
        return len(self.inneighbors)

    @property
    def outdegree(self):
        return len(self.outneighbors)

    @property
    def inoutedges(self):
        return self.inneighbors, self.outneighbors

    @property
    def inedges(self):
        return self.inneighbors

    @property
    def outedges(self):
        return self.outneighbors

    def Get_topology(self):
        self._me("Get_topology")
        return self._kind


class Cartcomm(Topocomm):
    """A Cartesian grid of ranks: ``dims``, ``periods``, ``coords``, ``Shift``, ``Sub``."""

    _kind = CART

    def Get_dim(self):
        return len(self._dims)

    ndim = dim = property(Get_dim)

    def Get_topo(self):
        return list(self._dims), list(self._periods), self.Get_coords(self.Get_rank())

    topo = property(Get_topo)
    dims = property(lambda self: list(self._dims))
    periods = property(lambda self: list(self._periods))
    coords = property(lambda self: self.Get_coords(self.Get_rank()))

    def Get_cart_rank(self, coords):
        coords = list(coords)
        if len(coords) != len(self._dims):
            raise mpi_error(ERR_ARG, f"Get_cart_rank({coords}): give {len(self._dims)} coords")
        rank = 0
        for c, d, periodic in zip(coords, self._dims, self._periods, strict=True):
            if not 0 <= c < d and not periodic:
                raise mpi_error(ERR_RANK, f"Get_cart_rank({coords}): past a non-periodic edge")
            rank = rank * d + c % d
        return rank

    def Get_coords(self, rank):
        if not is_int(rank) or not 0 <= rank < math.prod(self._dims):
            raise mpi_error(ERR_RANK, f"Get_coords({rank!r}): a rank of this grid")
        coords = []
        for d in reversed(self._dims):
            rank, c = divmod(rank, d)
            coords.append(c)
        return coords[::-1]

    def Shift(self, direction, disp):
        """``(source, dest)``: the ranks ``disp`` steps back and forward along
        ``direction`` (``MPI.PROC_NULL`` past a non-periodic edge)."""
        if not is_int(direction) or not 0 <= direction < len(self._dims):
            raise mpi_error(ERR_ARG, f"Shift(direction={direction!r}): 0..{len(self._dims) - 1}")
        me = self.Get_coords(self.Get_rank())
        return self._neighbour(me, direction, -disp), self._neighbour(me, direction, disp)

    def _neighbour(self, coords, direction, step):
        moved = list(coords)
        moved[direction] += step
        size = self._dims[direction]
        if not 0 <= moved[direction] < size and not self._periods[direction]:
            return PROC_NULL
        return self.Get_cart_rank(moved)

    @property
    def inneighbors(self):
        me = self.Get_coords(self.Get_rank())
        return [self._neighbour(me, d, s) for d in range(len(self._dims)) for s in (-1, 1)]

    outneighbors = inneighbors

    def Sub(self, remain_dims):
        """The grid of the kept dimensions that this rank is in (a row, a column)."""
        keep = [bool(k) for k in remain_dims]
        me = self.Get_coords(self.Get_rank())
        color = self.Get_cart_rank([c if not k else 0 for c, k in zip(me, keep, strict=True)])
        part = self.Split(color, self.Get_rank())
        dims = [d for d, k in zip(self._dims, keep, strict=True) if k]
        periods = [p for p, k in zip(self._periods, keep, strict=True) if k]
        return _as(Cartcomm, part, _dims=tuple(dims), _periods=tuple(periods))


class Graphcomm(Topocomm):
    """A graph of ranks (MPI's ``index`` and ``edges`` form)."""

    _kind = GRAPH

    def Get_dims(self):
        return len(self._graph_index), len(self._graph_edges)

    dims = property(Get_dims)
    nnodes = property(lambda self: len(self._graph_index))
    nedges = property(lambda self: len(self._graph_edges))
    index = property(lambda self: list(self._graph_index))
    edges = property(lambda self: list(self._graph_edges))

    def Get_topo(self):
        return list(self._graph_index), list(self._graph_edges)

    topo = property(Get_topo)

    def Get_neighbors(self, rank):
        start = self._graph_index[rank - 1] if rank else 0
        return list(self._graph_edges[start : self._graph_index[rank]])

    def Get_neighbors_count(self, rank):
        return len(self.Get_neighbors(rank))

    @property
    def neighbors(self):
        return self.Get_neighbors(self.Get_rank())

    @property
    def nneighbors(self):
        return len(self.neighbors)

    inneighbors = outneighbors = neighbors


class Distgraphcomm(Topocomm):
    """A distributed graph: each rank names its own sources and destinations."""

    _kind = DIST_GRAPH

    def Get_dist_neighbors_count(self):
        """``(indegree, outdegree, weighted)``."""
        return len(self._sources), len(self._destinations), self._weights is not None

    def Get_dist_neighbors(self):
        """``(sources, destinations, (sourceweights, destweights))``, the weights None
        when the graph was made ``MPI.UNWEIGHTED``."""
        weights = self._weights and tuple(list(w) for w in self._weights)
        return list(self._sources), list(self._destinations), weights

    inneighbors = property(lambda self: list(self._sources))
    outneighbors = property(lambda self: list(self._destinations))


def _as(cls, comm, **fields):
    """``comm`` (a communicator or COMM_NULL) as a ``cls`` with ``fields``."""
    if not comm:
        return comm
    made = cls.__new__(cls)  # not cls(comm): comm has no topology yet, which cls refuses
    Comm._construct(made, comm)  # another handle of the same communicator
    for name, value in fields.items():
        setattr(made, name, value)
    return made


def create_cart(comm, dims, periods=None, reorder=False):
    """``comm.Create_cart``: the first prod(dims) ranks form the grid; the rest get
    ``MPI.COMM_NULL``."""
    rank, me, size = comm._me("Create_cart")
    dims = [int(d) for d in dims]
    if periods is None or isinstance(periods, bool | int):  # one value for every dimension
        periods = [bool(periods)] * len(dims)
    periods = [bool(p) for p in periods]
    if len(periods) != len(dims) or any(d < 0 for d in dims) or math.prod(dims) > size:
        raise mpi_error(
            ERR_TOPOLOGY,
            f"Create_cart(dims={dims}, periods={periods}): one period a dimension, and at "
            f"most {size} ranks (the communicator's size)",
        )
    inside = me < math.prod(dims)
    part = comm.Split(0 if inside else UNDEFINED, me)
    return _as(Cartcomm, part, _dims=tuple(dims), _periods=tuple(periods))


def create_graph(comm, index, edges, reorder=False):
    rank, me, size = comm._me("Create_graph")
    index, edges = [int(i) for i in index], [int(e) for e in edges]
    if len(index) == size + 1 and index[0] == 0:  # mpi4py also takes the leading 0
        index = index[1:]
    if len(index) > size or (index and index[-1] != len(edges)):
        raise mpi_error(
            ERR_TOPOLOGY,
            f"Create_graph(index={index}, edges={edges}): index[i] counts the edges of nodes "
            f"0..i (the last is len(edges)), for at most {size} nodes",
        )
    part = comm.Split(0 if me < len(index) else UNDEFINED, me)
    return _as(Graphcomm, part, _graph_index=tuple(index), _graph_edges=tuple(edges))


def create_dist_graph_adjacent(comm, sources, destinations, sourceweights, destweights):
    """Each rank names its own in- and out-neighbours (no communication)."""
    call = "Create_dist_graph_adjacent"
    sources, destinations = tuple(sources or ()), tuple(destinations or ())
    weights = (
        edge_weights(sourceweights, len(sources), call, "sourceweights"),
        edge_weights(destweights, len(destinations), call, "destweights"),
    )
    fields = {
        "_sources": sources,
        "_destinations": destinations,
        # weighted unless both sides are UNWEIGHTED; a side without weights counts 1s
        "_weights": None
        if weights == (None, None)
        else tuple(w or (1,) * n for w, n in zip(weights, map(len, (sources, destinations)))),
    }
    return _as(Distgraphcomm, comm._duplicate(), **fields)


def create_dist_graph(comm, sources, degrees, destinations, weights=None):
    """Each rank gives some edges (``degrees[i]`` from ``sources[i]``, in order, to the
    next ``destinations``); every rank learns its neighbours from all of them (an
    allgather of the edges)."""
    destinations = [int(d) for d in destinations]
    weights = edge_weights(weights, len(destinations), "Create_dist_graph", "weights")
    ones = [1] * len(destinations)
    given, at = [], 0
    for source, degree in zip(sources, degrees, strict=True):
        given += zip([int(source)] * degree, destinations[at : at + degree], weights or ones)
        at += degree
    # weighted is every rank's choice (MPI asks all to agree); the edges an allgather
    edges = [edge for part in comm.allgather(given) for edge in part]
    me = comm.Get_rank()
    ins = [(s, w) for s, d, w in edges if d == me]
    outs = [(d, w) for s, d, w in edges if s == me]
    fields = {
        "_sources": tuple(s for s, _ in ins),
        "_destinations": tuple(d for d, _ in outs),
        "_weights": None
        if weights is None
        else (tuple(w for _, w in ins), tuple(w for _, w in outs)),
    }
    return _as(Distgraphcomm, comm._duplicate(), **fields)


COMM_WORLD = Intracomm(WORLD, 0, 1, "MPI_COMM_WORLD")
COMM_SELF = Intracomm(SELF, 2, 3, "MPI_COMM_SELF")
predefine(COMM_WORLD=COMM_WORLD, COMM_SELF=COMM_SELF)
