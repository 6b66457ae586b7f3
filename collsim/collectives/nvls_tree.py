"""NVLS-Tree (NCCL 2.18+): in-switch reduction inside every node, a tree across the nodes.

A node's buffer is cut into G parts, part j owned by the node's j-th GPU.  Then:

1. **in-switch reduce** (1 step): in every node, for every part j, the G-1 other GPUs send
   their part j up to the NVSwitch, which sums them (NVLS's ``multimem.ld_reduce``) and
   sends the sum once down to GPU j, which adds its own -- one
   :class:`~collsim.collectives.schedule.Combine` group per part and node;
2. **tree across nodes** (2⌈log2 M⌉ steps): the M GPUs that own part j (GPU j of every
   node) all-reduce it with a binomial tree (:mod:`.tree`): reduce up to node 0's GPU j,
   broadcast back down; the G parts go over the G rails at once;
3. **in-switch multicast** (1 step): every GPU j sends its finished part up once and the
   switch copies it to the node's other GPUs (``multimem.st``).

Each GPU's NVLink carries about S each way, as in NVLS; across nodes only S/G per GPU
crosses its NIC per tree step.  NCCL pipelines these phases over chunks and uses a double
binary tree across nodes; this schedule keeps each phase whole and the binomial tree, so it
reads in one screen.  Every node's NVSwitch must reduce (dgx-h100).

Examples
--------
>>> from collsim.hardware.layout import NodeLayout
>>> layout = NodeLayout(((0, 1), (2, 3), (4, 5), (6, 7)))   # 4 nodes of 2 GPUs
>>> s = nvls_tree_all_reduce(layout, ("sw0", "sw1", "sw2", "sw3"))
>>> s.n_steps, s.n_chunks, [first for _, first, _ in s.phases]    # 1 + 2 + 2 + 1 steps
(6, 2, [0, 1, 3, 5])
>>> [(m.src, m.dst, m.chunks) for m in s.steps[1]]    # nodes 2, 3 to nodes 0, 1, per rail
[(4, 0, range(0, 1)), (6, 2, range(0, 1)), (5, 1, range(1, 2)), (7, 3, range(1, 2))]
"""

from .schedule import ChunkMove, Combine, Schedule
from .tree import tree_all_reduce

__all__ = ["nvls_tree_all_reduce"]


def nvls_tree_all_reduce(layout, switches, efficiency=1.0):
    """The NVLS-Tree all-reduce of a group of whole, equal nodes (``layout``), node n's
    reducing NVSwitch named ``switches[n]``."""
    g, m = layout.gpus_per_node, layout.n_nodes
    parts = [range(j, j + 1) for j in range(g)]
    reduce_in, multicast = [], []
    for n, members in enumerate(layout.nodes):
        for j, owner in enumerate(members):
            up = Combine(switches[n], ("reduce", n, j), g - 1, efficiency)
            down = Combine(switches[n], ("multicast", n, j), g - 1, efficiency)
            others = [r for r in members if r != owner]
            reduce_in += [ChunkMove(r, owner, parts[j], True, combine=up) for r in others]
            multicast += [ChunkMove(owner, r, parts[j], False, combine=down) for r in others]
    # the tree over nodes, once per rail: node n's GPU j stands for node n in tree j
    tree = tree_all_reduce(m).steps  # reduce up to node 0, then broadcast down
    tree_up, tree_down = tree[: len(tree) // 2], tree[len(tree) // 2 :]

    def on_rails(step, reduce):
        return tuple(
            ChunkMove(layout.nodes[move.src][j], layout.nodes[move.dst][j], parts[j], reduce)
            for j in range(g)
            for move in step
        )

    steps = [tuple(reduce_in)] if g > 1 else []
    steps += [on_rails(step, True) for step in tree_up]
    steps += [on_rails(step, False) for step in tree_down]
    steps += [tuple(multicast)] if g > 1 else []
    first = 1 if g > 1 else 0
    depth = len(tree_up)
    phases = (
        ("in-switch reduce", 0, first),
        ("tree reduce across nodes", first, first + depth),
        ("tree broadcast across nodes", first + depth, first + 2 * depth),
        ("in-switch multicast", first + 2 * depth, len(steps)),
    )
    phases = tuple(phase for phase in phases if phase[2] > phase[1])
    k = layout.ranks
    return Schedule("all_reduce", "nvls_tree", k, g, tuple(steps), phases)
