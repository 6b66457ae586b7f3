"""The chain scan: a running prefix passed from each rank to the next.

Rank 0 sends its value to rank 1; rank r (0 < r < K) waits for the prefix of ranks
0 .. r-1 from rank r-1, combines it with its own value, the lower ranks' first (MPI's order,
which matters for an operation that does not commute), and sends the result on to rank
r+1.  Rank r's answer is ``x0 op ... op xr`` (``MPI_Scan``); an exclusive scan
(``MPI_Exscan``) answers with what arrived, ``x0 op ... op x(r-1)``.

K-1 messages, each rank sending once, but K-1 steps one after another.  The other form,
recursive doubling (MPICH's ``MPIR_Scan_intra_recursive_doubling``, and mpi4py's own
point-to-point object scan), takes ceil(log2 K) steps: in round i every rank exchanges
its partial result with rank r XOR 2^i and puts the lower rank's first, about K log2 K
messages in all.  collsim's object ``scan`` keeps the chain: the fewest messages, the
counts it has always shown, and an order of ``op`` a reader sees at a glance.

Examples
--------
>>> [[(m.src, m.dst, m.reduce) for m in step] for step in chain_scan(3).steps]
[[(0, 1, True)], [(1, 2, True)]]
"""

from .schedule import ChunkMove, Schedule
from .spec import CollectiveSpec

__all__ = ["chain_scan", "SCAN"]

SCAN = CollectiveSpec("scan", reduces=True)
WHOLE = range(0, 1)  # the value moves whole, as one chunk


def chain_scan(k):
    """K-1 steps; in step s rank s sends its prefix to rank s+1, which reduces it in."""
    steps = tuple((ChunkMove(s, s + 1, WHOLE, True),) for s in range(k - 1))
    return Schedule("scan", "chain", k, 1, steps, (("scan", 0, len(steps)),), spec=SCAN)
