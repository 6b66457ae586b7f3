"""Closed forms for collective cost: the second oracle, and the planner's only cost model.

α is the latency of the path between two ranks (s), β the bandwidth of its narrowest
link (bytes/s), ``size`` is S as nccl-tests defines it (bytes): the buffer each rank
starts with for all-reduce, reduce-scatter, broadcast, reduce and all-to-all, and the
buffer each rank ends with for all-gather.  Reductions cost no simulated time.  The
forms assume K divides the element count and that no two transfers of one step share a
link (true for every algorithm here on ``switch`` and ``fully_connected`` topologies and
for every ring algorithm -- reduce-scatter, all-gather, all-reduce and the chain broadcast
and reduce, all sending r -> r+1 only -- on a ``ring`` or ``bidirectional_ring``); the
simulator agrees with them to floating-point
precision there, and differs in explainable ways elsewhere (multi-hop paths, shared
links, uneven chunks).

==========================  ==================  ======================  =========================
collective / algorithm      steps               bytes sent per rank     time
==========================  ==================  ======================  =========================
all-reduce ring             2(K-1)              2(K-1)/K·S              2(K-1)(α + S/(Kβ))
all-reduce halving-doubling 2·log2 K            2(K-1)/K·S              2·log2K·α + 2(K-1)/K·S/β
all-reduce tree             2⌈log2 K⌉           ⌈log2 K⌉·S (root)       2⌈log2 K⌉(α + S/β)
all-reduce naive            2                   (K-1)·S (root)          2(α + (K-1)S/β)
all-reduce one-shot         1                   (K-1)·S                 α + (K-1)S/β
all-reduce two-shot         2                   2(K-1)/K·S              2α + 2(K-1)/K·S/β
reduce-scatter ring         K-1                 (K-1)/K·S               (K-1)(α + S/(Kβ))
all-gather ring             K-1                 (K-1)/K·S               (K-1)(α + S/(Kβ))
reduce-scatter halving-d.   log2 K              (K-1)/K·S               log2K·α + (K-1)/K·S/β
all-gather halving-d.       log2 K              (K-1)/K·S               log2K·α + (K-1)/K·S/β
broadcast tree              ⌈log2 K⌉            ⌈log2 K⌉·S (root)       ⌈log2 K⌉(α + S/β)
reduce tree                 ⌈log2 K⌉            S (root receives K'·S)  ⌈log2 K⌉(α + S/β)
broadcast / reduce ring     2(K-1)              S                       2(K-1)(α + S/(Kβ))
all-to-all direct           K-1                 (K-1)/K·S               (K-1)(α + S/(Kβ))
all-to-allv direct          K-1, empty skipped  b·Σ_{d≠r} n[r][d]       read from the run
==========================  ==================  ======================  =========================

K' = ⌈log2 K⌉.  "Bytes sent per rank" is what the busiest sender sends (the reduce
tree's root sends nothing and receives ⌈log2 K⌉·S; every other rank sends S once).
A call of S = 0 costs 0 steps, 0 B and 0 s: NCCL returns at once from a zero-byte call,
and so does the simulator (:meth:`~collsim.collectives.schedule.Schedule.without_steps`).

Halving-doubling reduce-scatter (recursive halving) and all-gather (recursive doubling)
need K a power of two: step i moves S/2^i (reduce-scatter) or 2^(i-1)·S/K (all-gather),
which sums to (K-1)/K·S.  The all-reduce for K not a power of two folds the
K - 2^⌊log2 K⌋ extra ranks in with one whole-buffer step before and one after (2 steps
more, each α + S/β).  The naive root's link carries all K-1 buffers at once: on a
``switch`` they share its one link.

One-shot and two-shot (vLLM's custom all-reduce, NCCL's symmetric-memory kernels) send to
every peer at once, so on a ``switch`` a step's K-1 messages share each rank's link, and
the forms charge them that way (on ``fully_connected``, where each pair has its own link,
the simulator is faster).  With the same α and β, one-shot beats two-shot below
S* = αβ·K/((K-1)(K-2)) (:func:`one_shot_crossover`; always for K = 2, where both move S),
and two-shot beats the ring at every size: the same bytes in 2 steps instead of 2(K-1).

PAT (NCCL's all-gather and reduce-scatter for one GPU per node) sends to partners 1, 2,
4, ... away, what a rank gathered travelling on: ⌈log2 K⌉ steps for the ring's bytes,
⌈log2 K⌉·α + (K-1)/K·S/β.

The topology-aware all-reduce algorithms (NCCL's ring on rails, the double binary tree,
the 2-D hierarchical all-reduce, in-switch NVLS) have their forms in
:func:`collsim.collectives.hardware_forms.hardware_cost`, per node and per link class.

Examples
--------
>>> c = closed_form("all_reduce", "ring", ranks=8, size=64 * 2**20, alpha=5e-6, beta=100e9)
>>> c.steps, c.bytes_per_rank, round(c.time_s * 1e3, 4)
(14, 117440512.0, 1.2444)
>>> bus_factor("all_reduce", 8)
1.75
"""

import math
from dataclasses import dataclass

from ..errors import ConfigError
from .checks import check_power_of_two

__all__ = [
    "Cost",
    "closed_form",
    "bus_factor",
    "ALGORITHMS",
    "COLLECTIVES",
    "one_shot_crossover",
    "RaggedBytes",
    "all_to_allv_bytes",
]

# the algorithms each collective offers, first = default
ALGORITHMS = {
    "all_reduce": ("ring", "tree", "halving_doubling", "naive", "one_shot", "two_shot"),
    "reduce_scatter": ("ring", "halving_doubling", "pat"),
    "all_gather": ("ring", "halving_doubling", "pat"),
    "broadcast": ("tree", "ring"),
    "reduce": ("tree", "ring"),
    "all_to_all": ("direct",),
}
COLLECTIVES = tuple(ALGORITHMS)


@dataclass(frozen=True)
class Cost:
    """What a collective costs by its closed form."""

    steps: int  # rounds of the schedule (latency terms)
    bytes_per_rank: float  # bytes sent by the busiest rank
    time_s: float  # seconds on an uncongested network


def _log2_ceil(k):
    return 0 if k <= 1 else math.ceil(math.log2(k))


def _ring(steps, k, size, alpha, beta):
    return Cost(steps, steps * size / k, steps * (alpha + size / (k * beta)))


def closed_form(collective, algorithm, ranks, size, alpha, beta):
    """Cost of one collective by its closed form (see the module table).

    >>> closed_form("all_reduce", "halving_doubling", 8, 800, 1e-6, 1e9).steps
    6
    """
    k, s = int(ranks), float(size)
    _check(collective, algorithm, k)
    if k == 1 or s == 0:  # nothing to move: NCCL returns at once from a zero-byte call
        return Cost(0, 0.0, 0.0)
    key = (collective, algorithm)
    if key == ("all_reduce", "ring"):
        return _ring(2 * (k - 1), k, s, alpha, beta)
    if key in (("reduce_scatter", "ring"), ("all_gather", "ring"), ("all_to_all", "direct")):
        return _ring(k - 1, k, s, alpha, beta)
    if algorithm == "ring":  # pipelined chain broadcast/reduce with K chunks
        steps = 2 * (k - 1)
        return Cost(steps, s, steps * (alpha + s / (k * beta)))
    if algorithm == "tree":
        depth = _log2_ceil(k)
        phases = 2 if collective == "all_reduce" else 1
        # a reduce tree's senders each send the buffer once; the root only receives
        sent = s if collective == "reduce" else depth * s
        return Cost(phases * depth, sent, phases * depth * (alpha + s / beta))
    if algorithm == "halving_doubling" and collective in ("reduce_scatter", "all_gather"):
        # recursive halving / doubling: log2 K steps moving S/2, S/4, ... S/K in all
        name = f"halving-doubling {collective.replace('_', '-')}"
        depth = int(math.log2(check_power_of_two(k, name)))
        return Cost(depth, (k - 1) / k * s, depth * alpha + (k - 1) / k * s / beta)
    if algorithm == "pat":  # partners 1, 2, 4, ... away: log steps, the ring's bytes
        depth = _log2_ceil(k)
        return Cost(depth, (k - 1) / k * s, depth * alpha + (k - 1) / k * s / beta)
    if algorithm == "naive":
        return Cost(2, (k - 1) * s, 2 * (alpha + (k - 1) * s / beta))
    if algorithm == "one_shot":  # K-1 whole buffers on each rank's link at once
        return Cost(1, (k - 1) * s, alpha + (k - 1) * s / beta)
    if algorithm == "two_shot":  # K-1 parts of S/K out, then K-1 in, per step
        return Cost(2, 2 * (k - 1) / k * s, 2 * alpha + 2 * (k - 1) / k * s / beta)
    # halving-doubling: power-of-two core plus an optional fold-in before and after
    core = 2 ** int(math.log2(k))
    depth = int(math.log2(core))
    fold = 0 if core == k else 2
    time = 2 * depth * alpha + 2 * (core - 1) / core * s / beta + fold * (alpha + s / beta)
    sent = 2 * (core - 1) / core * s + (s if fold else 0.0)
    return Cost(2 * depth + fold, sent, time)


def one_shot_crossover(ranks, alpha, beta):
    """The size S* (bytes) below which one-shot beats two-shot, from their closed forms:
    α + (K-1)S/β = 2α + 2(K-1)S/(Kβ) at S* = αβ·K/((K-1)(K-2)); ``inf`` for K <= 2
    (one-shot moves no more bytes and pays one α less).

    >>> one_shot_crossover(8, 1e-6, 100e9)  # 1 us, 100 GB/s, 8 ranks: 19 KB
    19047.619047619046
    """
    k = int(ranks)
    if k <= 2:
        return float("inf")
    return alpha * beta * k / ((k - 1) * (k - 2))


def bus_factor(collective, ranks):
    """nccl-tests' busbw / algbw: 2(n-1)/n for all-reduce, (n-1)/n for the scatters
    and gathers and all-to-all, 1 for broadcast and reduce.

    >>> bus_factor("all_gather", 4), bus_factor("broadcast", 4)
    (0.75, 1.0)
    """
    _check(collective, None, ranks)
    n = int(ranks)
    if collective == "all_reduce":
        return 2 * (n - 1) / n
    if collective in ("broadcast", "reduce"):
        return 1.0
    return (n - 1) / n


def _check(collective, algorithm, ranks):
    if collective not in ALGORITHMS:
        raise ConfigError(
            f"unknown collective {collective!r}: choose one of {', '.join(COLLECTIVES)}"
        )
    if algorithm is not None and algorithm not in ALGORITHMS[collective]:
        raise ConfigError(
            f"{collective} has no algorithm {algorithm!r}: "
            f"choose one of {', '.join(ALGORITHMS[collective])}"
        )
    if int(ranks) < 1:
        raise ConfigError(f"a collective needs at least 1 rank, got {ranks}")


@dataclass(frozen=True)
class RaggedBytes:
    """Bytes an all-to-allv moves, per rank: ``sent[r]`` and ``received[r]``."""

    sent: tuple
    received: tuple


def all_to_allv_bytes(counts, row_bytes):
    """Closed form of an all-to-allv whose rank r sends ``counts[r][d]`` rows of
    ``row_bytes`` bytes to rank d: rank r sends ``b·Σ_{d≠r} n[r][d]`` and receives
    ``b·Σ_{s≠r} n[s][r]`` (its own block stays home).  With every count equal to n it is
    the all-to-all's (K-1)/K·S, S = K·n·b.

    >>> all_to_allv_bytes([[1, 2], [3, 0]], row_bytes=8)
    RaggedBytes(sent=(16, 24), received=(24, 16))
    """
    k = len(counts)
    sent = tuple(row_bytes * sum(counts[r][d] for d in range(k) if d != r) for r in range(k))
    received = tuple(row_bytes * sum(counts[s][r] for s in range(k) if s != r) for r in range(k))
    return RaggedBytes(sent, received)
