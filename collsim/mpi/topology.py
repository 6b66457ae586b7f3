"""Process topologies: ``Compute_dims`` (a balanced grid of ranks) and the topology kinds.
The communicators with a topology (``Cartcomm``, the heart of every stencil code,
``Graphcomm``, ``Distgraphcomm``) are in :mod:`collsim.mpi.intracomm`.  ``Compute_dims``
gives the largest prime factors to the smallest dimensions, so the grid is as square as
the factors allow, and lists the free dimensions largest first, as MPI asks.

Examples
--------
>>> Compute_dims(12, 2), Compute_dims(16, [0, 0, 0]), Compute_dims(12, [0, 2])
([4, 3], [4, 2, 2], [6, 2])
"""

import math

from ..collectives.checks import is_int
from .exceptions import ERR_DIMS, mpi_error

__all__ = ["Compute_dims", "CART", "GRAPH", "DIST_GRAPH", "UNWEIGHTED", "WEIGHTS_EMPTY"]

GRAPH, CART, DIST_GRAPH = 1, 2, 3  # MPI's topology kinds (Get_topology)


class _WeightsMarker(str):
    """``MPI.UNWEIGHTED`` or ``MPI.WEIGHTS_EMPTY``: the two special weight arguments of
    ``Create_dist_graph(_adjacent)``, distinct from each other and from any list."""

    def __repr__(self):
        return f"MPI.{str(self)}"


UNWEIGHTED, WEIGHTS_EMPTY = _WeightsMarker("UNWEIGHTED"), _WeightsMarker("WEIGHTS_EMPTY")


def edge_weights(weights, degree, call, what):
    """``weights`` as a tuple of ``degree`` ints, or None for ``UNWEIGHTED`` (and None, as
    mpi4py reads it); ``WEIGHTS_EMPTY`` is the empty list, valid only when ``degree`` is 0.

    >>> edge_weights([3, 4], 2, "Create_dist_graph", "weights"), edge_weights(None, 2, "", "")
    ((3, 4), None)
    >>> edge_weights(WEIGHTS_EMPTY, 0, "Create_dist_graph", "weights")
    ()
    """
    if weights is None or weights is UNWEIGHTED:
        return None
    if weights is WEIGHTS_EMPTY:
        weights = ()
    weights = tuple(int(w) for w in weights)
    if len(weights) != degree:
        raise ValueError(
            f"{call}({what}={list(weights)}): one weight per edge, {degree} here "
            f"(MPI.WEIGHTS_EMPTY only for no edges; MPI.UNWEIGHTED for none)"
        )
    return weights


def _primes(n):
    """The prime factors of ``n``, largest first."""
    found, p = [], 2
    while p * p <= n:
        while n % p == 0:
            found.append(p)
            n //= p
        p += 1
    return sorted(found + ([n] if n > 1 else []), reverse=True)


def Compute_dims(nnodes, dims):
    """A balanced grid of ``nnodes`` ranks: ``dims`` is the number of dimensions or a list
    whose zeros are free (the others kept); the free ones come out non-increasing."""
    given = [0] * dims if is_int(dims) else [int(d) for d in dims]
    if not is_int(nnodes) or nnodes < 1 or any(d < 0 for d in given):
        raise mpi_error(ERR_DIMS, f"Compute_dims({nnodes!r}, {dims!r}): nnodes >= 1, dims >= 0")
    fixed = math.prod(d for d in given if d)
    free = [i for i, d in enumerate(given) if d == 0]
    if nnodes % fixed or (not free and fixed != nnodes):
        raise mpi_error(
            ERR_DIMS,
            f"Compute_dims({nnodes}, {given}): the fixed dimensions' product {fixed} must "
            f"divide {nnodes}",
        )
    sizes = [1] * len(free)
    for p in _primes(nnodes // fixed):  # the largest factor onto the smallest dimension
        sizes[sizes.index(min(sizes))] *= p
    for i, size in zip(free, sorted(sizes, reverse=True), strict=True):
        given[i] = size
    return given
