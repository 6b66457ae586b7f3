"""The dissemination barrier: no rank leaves before every rank has arrived.

In round i (from 0) every rank r sends an empty message to rank r + 2^i and waits for one
from rank r - 2^i (mod K).  A rank that got round i's message knows that its sender, and
everyone its sender had heard from, had arrived: after ceil(log2 K) rounds each rank has
heard, directly or not, from all K.  Hensgen, Finkel and Manber, "Two algorithms for
barrier synchronization" (1988); MPICH's ``MPIR_Barrier_intra_dissemination``.

As a schedule the buffer is empty and has one chunk, each rank's "I have arrived": a move
carries it (zero bytes) and the receiver *reduces* it into its own (the union of whom each
had heard from), so :func:`~collsim.collectives.schedule.contributions` shows who has
heard from whom after each round.

Examples
--------
>>> [[(m.src, m.dst) for m in step] for step in dissemination_barrier(3).steps]
[[(0, 1), (1, 2), (2, 0)], [(0, 2), (1, 0), (2, 1)]]
"""

import math

from .schedule import ChunkMove, Schedule
from .spec import CollectiveSpec

__all__ = ["dissemination_barrier", "BARRIER"]

BARRIER = CollectiveSpec("barrier", reduces=True)  # what it reduces is "has arrived"
TOKEN = range(0, 1)  # the one chunk: an empty buffer, "I have arrived"


def dissemination_barrier(k):
    """ceil(log2 K) rounds; in round i rank r sends to rank (r + 2^i) mod K."""
    rounds = 0 if k <= 1 else math.ceil(math.log2(k))
    steps = tuple(
        tuple(ChunkMove(r, (r + 2**i) % k, TOKEN, True) for r in range(k)) for i in range(rounds)
    )
    return Schedule(
        "barrier", "dissemination", k, 1, steps, (("barrier", 0, rounds),), spec=BARRIER
    )
