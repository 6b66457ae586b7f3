"""The 2-D (hierarchical) all-reduce: reduce-scatter inside each node, all-reduce of each
shard across nodes on its rail, all-gather inside each node.

With M nodes of G GPUs, the buffer is cut into G shards of M chunks each (G·M chunks):

1. intra-node ring reduce-scatter, G-1 steps: local GPU l of every node ends with shard
   l summed over its node;
2. inter-node ring all-reduce of shard l among the M GPUs of local index l -- rail l --
   2(M-1) steps, all G rails at once: shard l summed over every GPU;
3. intra-node ring all-gather, G-1 steps: every GPU gets every shard.

Steps 2(G-1) + 2(M-1); each GPU sends 2(G-1)/G·S over NVLink and 2(M-1)/M·S/G through its
NIC, so the network carries 1/G of what a flat ring sends across it per GPU.

Examples
--------
>>> from collsim.hardware.layout import NodeLayout
>>> s = hierarchical_all_reduce(NodeLayout(((0, 1), (2, 3), (4, 5))))
>>> s.n_steps, s.n_chunks, [name for name, _, _ in s.phases]
(6, 6, ['intra-node reduce-scatter', 'inter-node reduce-scatter', 'inter-node all-gather', \
'intra-node all-gather'])
>>> s.steps[1]                            # rail 0 (ranks 0, 2, 4) reduces shard 0's chunks
(ChunkMove(src=0, dst=2, chunks=range(2, 3), reduce=True), \
ChunkMove(src=2, dst=4, chunks=range(0, 1), reduce=True), \
ChunkMove(src=4, dst=0, chunks=range(1, 2), reduce=True), \
ChunkMove(src=1, dst=3, chunks=range(5, 6), reduce=True), \
ChunkMove(src=3, dst=5, chunks=range(3, 4), reduce=True), \
ChunkMove(src=5, dst=1, chunks=range(4, 5), reduce=True))
"""

from ..errors import ConfigError
from .nccl_ring import ring_phase
from .schedule import Schedule

__all__ = ["hierarchical_all_reduce", "check_equal_nodes"]


def check_equal_nodes(layout, algorithm):
    """G, the GPUs per node, or a ConfigError when the group's nodes differ in size."""
    g = layout.gpus_per_node
    if g is None:
        sizes = [len(n) for n in layout.nodes]
        raise ConfigError(
            f"{algorithm} needs the same number of ranks on every node of the group, got "
            f"{sizes} ranks per node: take whole nodes (or equal slices of them), or use "
            "algorithm 'nccl_ring' or 'ring'"
        )
    return g


def hierarchical_all_reduce(layout):
    """The 2-D all-reduce on ``layout`` (a NodeLayout of the group, equal nodes)."""
    g = check_equal_nodes(layout, "hierarchical")
    m, nodes = layout.n_nodes, layout.nodes
    shards = [range(local * m, (local + 1) * m) for local in range(g)]
    intra_rs = [[] for _ in range(g - 1)]
    inter = [[] for _ in range(2 * (m - 1))]
    intra_ag = [[] for _ in range(g - 1)]
    for node in nodes:
        ring_phase(node, shards, 1, True, intra_rs)
        ring_phase(node, shards, 0, False, intra_ag)
    for local in range(g):
        rail = [node[local] for node in nodes]
        pieces = [range(local * m + j, local * m + j + 1) for j in range(m)]
        ring_phase(rail, pieces, 1, True, inter)
        ring_phase(rail, pieces, 0, False, inter[m - 1 :])
    steps = tuple(tuple(s) for s in intra_rs + inter + intra_ag)
    a, b, c = g - 1, g - 1 + m - 1, g - 1 + 2 * (m - 1)
    phases = (
        ("intra-node reduce-scatter", 0, a),
        ("inter-node reduce-scatter", a, b),
        ("inter-node all-gather", b, c),
        ("intra-node all-gather", c, c + g - 1),
    )
    phases = tuple(p for p in phases if p[2] > p[1])
    return Schedule("all_reduce", "hierarchical", layout.ranks, g * m, steps, phases)
