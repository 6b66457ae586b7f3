"""Closed forms of the topology-aware all-reduce algorithms (NCCL's ring on rails, the
double binary tree, the 2-D hierarchical all-reduce, in-switch NVLS): per node and per link
class, on a :class:`Fabric` of two hops, one inside a node and one between nodes.

Examples
--------
>>> f = Fabric(0.5e-6, 240e9, 1.2e-6, 23.5e9)
>>> hardware_cost("hierarchical", 2, 8, 2**20, f).steps      # 2(G-1) + 2(M-1)
16
"""

from dataclasses import dataclass

from .formulas import closed_form

__all__ = [
    "HARDWARE_ALGORITHMS",
    "Fabric",
    "HardwareCost",
    "hardware_cost",
    "MAX_PIECES",
    "best_pieces",
]

# the all-reduce algorithms that read where the group's ranks sit (a NodeLayout), and
# the forms below; kept apart from ALGORITHMS, which every generic topology offers
HARDWARE_ALGORITHMS = {
    "all_reduce": (
        "nccl_ring",
        "double_tree",
        "hierarchical",
        "nvls",
        "nvls_tree",
        "collnet_direct",
        "collnet_chain",
    ),
    # NCCL runs CollNet Direct for these too (Simple only): collnet.collnet_all_gather
    "all_gather": ("collnet_direct",),
    "reduce_scatter": ("collnet_direct",),
}


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


def hardware_cost(
    algorithm, nodes, gpus_per_node, size, fabric, protocol=None, pieces=None, collective=None
):
    """The closed form of ``collective`` (default all-reduce) by ``algorithm`` on
    ``nodes`` nodes of ``gpus_per_node`` GPUs (a group of whole, equal nodes), S =
    ``size`` bytes, on ``fabric``.

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

    All-gather and reduce-scatter (``collective``) have collnet_direct: see
    :func:`_collnet_gather_cost`.
    """
    m, g, s = int(nodes), int(gpus_per_node), float(size)
    k = m * g
    if k == 1 or s == 0:  # nothing to move, as in closed_form
        return HardwareCost(0, 0.0, 0.0, 0.0, 0.0)
    if collective not in (None, "all_reduce"):
        return _collnet_gather_cost(collective, algorithm, m, g, s, fabric, protocol)
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
    if algorithm == "nvls_tree":
        return _nvls_tree_cost(m, g, s, fabric, protocol)
    if algorithm in ("double_tree", "nvls", "collnet_direct", "collnet_chain"):
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
    if algorithm in ("collnet_direct", "collnet_chain"):
        return _collnet_cost(algorithm, m, g, s, (a_in, b_in), (a_net, b_net), p)
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


def _collnet_cost(algorithm, m, g, s, intra, inter, p):
    """CollNet: the network switch of each rail used sums its part q (S/G a rail for
    Direct, S on rail 0 for Chain) as NVLS does, in P + 1 steps,
    2(α_net + (M-1)/M·q/(P·β_net)) + (P-1)(α_net + q/(P·β_net)), each rail
    link carrying q up and q down; around it Direct's reduce-scatter and all-gather in
    the node (a step each, (G-1)/G·S per GPU) or Chain's 2(G-1) chain steps of S.  SHARP
    sums at the links' rate (no reduce efficiency)."""
    (a_in, b_in), (a_net, b_net) = intra, inter
    direct = algorithm == "collnet_direct"
    q = s / g if direct else s
    # the first step only reduces and the last only copies back: each link then carries
    # the M-1 sub-pieces of the others, (M-1)/M of a piece; the P-1 between carry both
    time = 2 * (a_net + (m - 1) / m * q / (p * b_net)) + (p - 1) * (a_net + q / (p * b_net))
    inside = 0 if g == 1 else (2 if direct else 2 * (g - 1))
    hop = (g - 1) / g * s if direct else s  # what a GPU sends in one step in the node
    time += inside * (a_in + hop / b_in)
    # the busiest sender: Direct's GPUs send in all three phases; Chain's head sends the
    # network its sum and the chain its result, its other GPUs one way up and one down
    sent = q + ((2 * hop if direct else hop) if g > 1 else 0.0)
    # every hop inside a node is two NVLink/PCIe links; a rail's M GPUs send q up and get
    # q down (the switch's legs): M·q per rail used, counted once a hop like the others
    rails = g if direct else 1
    return HardwareCost(inside + p + 1, sent, 2 * m * (g - 1) * s, m * rails * q, time)


def _collnet_gather_cost(collective, algorithm, m, g, s, fabric, protocol):
    """CollNet Direct's all-gather or reduce-scatter, S the K blocks of c = S/K bytes: one
    step through the rails' switches, where every GPU's NIC link carries c one way and
    (M-1)·c the other (the switch multicasts c to, or sums c from, the M-1 other nodes),
    and one step in the node where GPU j sends its rail's M blocks to each of its G-1
    peers, (G-1)/G·S:

    time = α_net + (M-1)·c/β_net + [G > 1](α_in + (G-1)/G·S/β_in).

    Bytes sent per rank: (G-1)/G·S in the node, and c (all-gather: sent once, the switch
    copies it) or (M-1)·c (reduce-scatter: a part for every other node) up the rail.  Every
    block crosses M rail legs (M-1 down and 1 up, or the reverse): M·S in all, which a hop
    of two legs counts as M·S/2; in the node M(G-1)·S hop bytes.

    >>> f = Fabric(0.5e-6, 240e9, 1.2e-6, 23.5e9)
    >>> c = hardware_cost("collnet_direct", 2, 8, 2**20, f, collective="all_gather")
    >>> c.steps, c.bytes_per_rank == 7 / 8 * 2**20 + 2**20 / 16
    (2, True)
    """
    if algorithm != "collnet_direct":
        from ..errors import ConfigError

        raise ConfigError(
            f"no closed form of {collective} by {algorithm!r} on nodes: "
            "the topology-aware one is 'collnet_direct'"
        )
    a_in, b_in = fabric.hop(False, protocol)
    a_net, b_net = fabric.hop(True, protocol)
    block, inside = s / (m * g), (g - 1) / g * s
    time = a_net + (m - 1) * block / b_net + (a_in + inside / b_in if g > 1 else 0.0)
    up = block if collective == "all_gather" else (m - 1) * block
    return HardwareCost(1 + (g > 1), inside + up, m * (g - 1) * s, m * s / 2, time)


def _nvls_tree_cost(m, g, s, fabric, protocol):
    """NVLS-Tree: the in-switch reduce and multicast (a step each, S/G of the sum per GPU
    through the switch at its reduce efficiency e) around a binomial tree of the S/G parts
    across the nodes (D = ⌈log2 M⌉ levels up, D down).  Node 0's GPUs send most: their
    G-1 contributions, the part D times down the tree, and the multicast."""
    a_in, b_in = fabric.hop(False, protocol)
    a_net, b_net = fabric.hop(True, protocol)
    depth = (m - 1).bit_length()  # ⌈log2 M⌉
    part = s / g
    switch_steps = 2 if g > 1 else 0
    time = switch_steps * (a_in + (g - 1) * part / (b_in * fabric.reduce_efficiency))
    time += 2 * depth * (a_net + part / b_net)
    sent = (g - 1) * part + depth * part + (part if g > 1 else 0.0)
    # a switched hop is one up-link and one down-link: the switch's legs count once each
    intra = m * g * ((g - 1) * part + part) if g > 1 else 0.0
    inter = 2 * (m - 1) * g * part
    return HardwareCost(switch_steps + 2 * depth, sent, intra, inter, time)
