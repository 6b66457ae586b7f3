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

The topology-aware all-reduce algorithms (NCCL's ring on rails, the double binary tree,
the 2-D hierarchical all-reduce, in-switch NVLS) have their forms in
:func:`hardware_cost`, per node and per link class.

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
    "Fabric",
    "HardwareCost",
    "hardware_cost",
    "best_pieces",
    "HARDWARE_ALGORITHMS",
    "MAX_PIECES",
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


# -- topology-aware all-reduce: nodes of GPUs, NVLink inside, NICs between -----------------

# the all-reduce algorithms that read where the group's ranks sit (a NodeLayout), and
# the forms below; kept apart from ALGORITHMS, which every generic topology offers
HARDWARE_ALGORITHMS = {"all_reduce": ("nccl_ring", "double_tree", "hierarchical", "nvls")}


@dataclass(frozen=True)
class Fabric:
    """α (s), β (bytes/s) and link class of the two hops a hardware algorithm takes: GPU
    to GPU inside a node (``intra``) and GPU to the same-rail GPU of another node
    (``inter``); ``reduce_efficiency`` is an in-switch reduction's fraction of β."""

    intra_alpha: float
    intra_beta: float
    inter_alpha: float = 0.0
    inter_beta: float = float("inf")
    intra_class: str = None
    inter_class: str = None
    reduce_efficiency: float = 1.0

    def hop(self, inter, protocol=None):
        """``(α, β)`` of one hop, with ``protocol``'s latency and efficiency folded in:
        α + the protocol's latency for the hop's link class, β · its efficiency."""
        alpha, beta = (
            (self.inter_alpha, self.inter_beta) if inter else (self.intra_alpha, self.intra_beta)
        )
        if protocol is None:
            return alpha, beta
        return protocol.on_hop(alpha, beta, self.inter_class if inter else self.intra_class)


@dataclass(frozen=True)
class HardwareCost:
    """A topology-aware algorithm's closed form: steps, the busiest sender's bytes, the
    bytes summed over every intra-node and every inter-node hop (a hop GPU -> switch ->
    GPU is two links, so a link class carries twice its hops' bytes on a switched node),
    and the time."""

    steps: int
    bytes_per_rank: float
    intra_hop_bytes: float
    inter_hop_bytes: float
    time_s: float


def hardware_cost(algorithm, nodes, gpus_per_node, size, fabric, protocol=None, pieces=None):
    """The closed form of all-reduce ``algorithm`` on ``nodes`` nodes of ``gpus_per_node``
    GPUs (a group of whole, equal nodes), S = ``size`` bytes, on ``fabric``.

    ============  ===============  =====================  ==============================
    algorithm     steps            bytes sent per rank    hop bytes (intra; inter)
    ============  ===============  =====================  ==============================
    nccl_ring     2(K-1)           2(K-1)/K·S             M(G-1)·2(K-1)/K·S; M·2(K-1)/K·S
    hierarchical  2(G-1)+2(M-1)    2(G-1)/G·S             K·2(G-1)/G·S; K·2(M-1)/M·S/G
                                   + 2(M-1)/M·S/G
    double_tree   P-1+2H           see double_tree_sizes  2M(G-1)·S; 2(M-1)·S
    nvls          P+1              S                      K·S; 0
    ============  ===============  =====================  ==============================

    (nccl_ring on one node is the textbook ring: K hops inside.)  Per NIC, nccl_ring
    moves 2(K-1)/K·S/G each way; the hierarchical ring 2(M-1)/M·S/G.  Times: every step
    lasts as long as its slowest hop, α + (bytes on that hop's busiest link)/β:

    * nccl_ring, M > 1: 2(K-1)·max(α_in + (G-1)·S/(GK·β_in), α_net + S/(GK·β_net));
    * hierarchical: 2(G-1)(α_in + S/(G·β_in)) + 2(M-1)(α_net + S/(GM·β_net));
    * double_tree: 2((G-1)·t_in + D·t_net) + (P-1)·max(t_in, t_net), the first piece's
      way up and down the chains and the D node levels and then one step per piece,
      t_in = α_in + L_in·c/β_in and t_net = α_net + L_net·c/β_net, c = S/(2P), where
      L_in (L_net) counts the busiest GPU's neighbours in its node (on other nodes)
      over both trees: a chain GPU sends both trees' pieces up and down (L_in <= 4), a
      head two children's and its parent's (L_net <= 3);
    * nvls: (P+1)(α_in + S/(P·β_in·e)), e the switch's reduce efficiency.

    ``pieces`` (P) defaults to :func:`best_pieces`.

    >>> f = Fabric(0.5e-6, 240e9, 1.2e-6, 23.5e9)
    >>> c = hardware_cost("nccl_ring", 2, 8, 2**30, f)
    >>> c.steps, c.bytes_per_rank == 2 * 15 / 16 * 2**30
    (30, True)
    >>> round(2**30 / c.time_s * 2 * 15 / 16 / 1e9)      # busbw: 8 NICs at 23.5 GB/s
    187
    """
    m, g, s = int(nodes), int(gpus_per_node), float(size)
    k = m * g
    if k == 1 or s == 0:  # nothing to move, as in closed_form
        return HardwareCost(0, 0.0, 0.0, 0.0, 0.0)
    a_in, b_in = fabric.hop(False, protocol)
    a_net, b_net = fabric.hop(True, protocol)
    if algorithm == "nccl_ring":
        per_hop = 2 * (k - 1) / k * s  # one channel's S/C over 2(K-1) steps, times C
        if m == 1:
            return HardwareCost(
                2 * (k - 1), per_hop, k * per_hop, 0.0, 2 * (k - 1) * (a_in + s / (k * b_in))
            )
        step = max(a_in + (g - 1) * s / (g * k * b_in), a_net + s / (g * k * b_net))
        return HardwareCost(
            2 * (k - 1), per_hop, m * (g - 1) * per_hop, m * per_hop, 2 * (k - 1) * step
        )
    if algorithm == "hierarchical":
        intra, inter = 2 * (g - 1) / g * s, 2 * (m - 1) / m * s / g
        time = 2 * (g - 1) * (a_in + s / (g * b_in)) if g > 1 else 0.0
        time += 2 * (m - 1) * (a_net + s / (g * m * b_net)) if m > 1 else 0.0
        return HardwareCost(2 * (g - 1) + 2 * (m - 1), intra + inter, k * intra, k * inter, time)
    if algorithm in ("double_tree", "nvls"):
        p = best_pieces(algorithm, m, g, s, fabric, protocol) if pieces is None else pieces
        return _pipelined_cost(algorithm, m, g, s, fabric, protocol, p)
    # a generic algorithm on nodes: its own form, every hop as slow as the slowest
    slow = m > 1
    alpha, beta = fabric.hop(slow, protocol)
    cost = closed_form("all_reduce", algorithm, k, s, alpha, beta)
    return HardwareCost(cost.steps, cost.bytes_per_rank, float("nan"), float("nan"), cost.time_s)


MAX_PIECES = 64  # the most pieces a pipelined schedule is cut into (its moves grow with P)


def _pipelined_cost(algorithm, m, g, s, fabric, protocol, p):
    a_in, b_in = fabric.hop(False, protocol)
    a_net, b_net = fabric.hop(True, protocol)
    k = m * g
    if algorithm == "nvls":
        time = (p + 1) * (a_in + s / (p * b_in * fabric.reduce_efficiency))
        return HardwareCost(p + 1, s, k * s, 0.0, time)
    from .double_tree import double_tree_sizes

    tree = double_tree_sizes(m, g)
    c = s / (2 * p)
    t_in = a_in + tree.intra_load * c / b_in
    t_net = a_net + tree.inter_load * c / b_net
    slowest = max(t_in if g > 1 else 0.0, t_net if m > 1 else 0.0)
    time = 2 * ((g - 1) * t_in + tree.depth * t_net) + (p - 1) * slowest
    return HardwareCost(
        p - 1 + 2 * tree.height, max(tree.sent) * s, 2 * m * (g - 1) * s, 2 * (m - 1) * s, time
    )


def best_pieces(algorithm, nodes, gpus_per_node, size, fabric, protocol=None):
    """The pieces P, a power of two in 1..MAX_PIECES, with the least closed-form time of a
    pipelined algorithm (double_tree, nvls) for S = ``size`` bytes; the fewest on a tie.
    (Powers of two, as NCCL's chunk sizes are: a count that MAX_PIECES·K divides then
    cuts into equal pieces whatever P is chosen.)

    >>> f = Fabric(0.5e-6, 370.8e9, reduce_efficiency=0.8)
    >>> best_pieces("nvls", 1, 8, 8, f), best_pieces("nvls", 1, 8, 2**30, f)
    (1, 64)
    """
    if nodes * gpus_per_node == 1:
        return 1
    counts = [2**i for i in range(MAX_PIECES.bit_length()) if 2**i <= MAX_PIECES]
    times = [
        _pipelined_cost(algorithm, nodes, gpus_per_node, float(size), fabric, protocol, p).time_s
        for p in counts
    ]
    return counts[times.index(min(times))]


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
