"""NCCL's double binary tree all-reduce: two trees across the nodes, each carrying half
the buffer, each node a leaf in one of them; a chain through each node's GPUs.

**The trees across nodes** follow NCCL's construction (``src/graph/trees.cc``).  Tree 0
is a binary tree on nodes 0..M-1 whose root is node 0: a node r > 0 with lowest set bit b
has parent (r XOR b) OR 2b, or r XOR b where that is past the last node, so odd nodes are
its leaves.  Tree 1 is tree 0 mirrored (node r plays M-1-r) when M is even, shifted by one
(node r plays r-1) when M is odd.  Mirroring maps the even (interior) nodes onto odd ones,
so with M even every node has children in at most one tree; with M odd the shift does
the same for every node but node 0, which is tree 0's root with a single child and has
children in tree 1 too.

**Inside a node** tree t is a chain: from the node's tree head -- local GPU 0 in tree 0,
local GPU G/2 in tree 1, so the trees cross the network on different rails -- through the
node's other GPUs in increasing local order.  The head talks to its parent node's head and
to its children's heads, all on its own rail.

**Pipelining.**  Each tree's half is cut into P pieces.  Reduce: a GPU of height h (the
longest path down to a leaf) sends piece j to its parent in step j + h, once its children
(of heights < h) have sent theirs.  Broadcast: the root of height H holds piece j reduced
after step j + H - 1 and a GPU at depth d forwards it in step j + H + d, so broadcast
runs while later pieces still reduce, as NCCL's tree overlaps its up and down passes.
Steps P - 1 + 2H with H = (G - 1) + the node tree's depth.  P is chosen per call, the
count in 1..64 with the least closed-form time for the size
(:func:`~collsim.collectives.hardware_forms.best_pieces`): one piece for a latency-bound message
(2H steps, the tree's whole point), more as the bandwidth term grows, as NCCL cuts a
tree's buffer into chunks of its pipeline size.

Examples
--------
>>> node_trees(4)                        # (parents in tree 0, parents in tree 1)
((None, 2, 0, 2), (1, 3, 1, None))
>>> from collsim.hardware.layout import NodeLayout
>>> s = double_tree_all_reduce(NodeLayout(((0, 1), (2, 3))), pieces=8)
>>> s.n_chunks, s.n_steps                # 2 trees x P pieces; P - 1 + 2H, H = 2
(16, 11)
"""

import functools
from dataclasses import dataclass

from .hierarchical import check_equal_nodes
from .schedule import ChunkMove, Lane, Schedule

__all__ = [
    "double_tree_all_reduce",
    "node_trees",
    "gpu_trees",
    "btree_parent",
    "double_tree_sizes",
    "TreeSizes",
]


def btree_parent(m, r):
    """The parent of node ``r`` in NCCL's binary tree on ``m`` nodes (None for the root)."""
    if r == 0:
        return None
    bit = r & -r  # the lowest set bit
    up = (r ^ bit) | (bit << 1)
    return up if up < m else r ^ bit


def node_trees(m):
    """Parents of every node in tree 0 and in tree 1 (mirror for even M, shift for odd)."""
    tree0 = tuple(btree_parent(m, r) for r in range(m))
    if m % 2 == 0:
        tree1 = tuple(
            None if tree0[m - 1 - r] is None else m - 1 - tree0[m - 1 - r] for r in range(m)
        )
    else:
        tree1 = tuple(
            None if tree0[(r - 1) % m] is None else (tree0[(r - 1) % m] + 1) % m for r in range(m)
        )
    return tree0, tree1


def gpu_trees(layout):
    """For tree 0 and tree 1, every group rank's parent (None for the root), GPU level."""
    g = check_equal_nodes(layout, "double_tree")
    nodes = layout.nodes
    trees = []
    for t, parents in enumerate(node_trees(layout.n_nodes)):
        head = 0 if t == 0 else g // 2
        parent = {}
        for n, node in enumerate(nodes):
            chain = [node[(head + i) % g] for i in range(g)]
            up = parents[n]
            parent[chain[0]] = None if up is None else nodes[up][head]
            for a, b in zip(chain, chain[1:]):
                parent[b] = a
        trees.append(tuple(parent[r] for r in range(layout.ranks)))
    return tuple(trees)


def _heights_and_depths(parent):
    k = len(parent)
    children = [[] for _ in range(k)]
    for r, p in enumerate(parent):
        if p is not None:
            children[p].append(r)
    depth = [0] * k
    order = [r for r in range(k) if parent[r] is None]
    for r in order:  # breadth first from the root: every parent before its children
        for c in children[r]:
            depth[c] = depth[r] + 1
            order.append(c)
    height = [0] * k
    for r in reversed(order):
        if children[r]:
            height[r] = 1 + max(height[c] for c in children[r])
    return children, height, depth


def tree_height(layout):
    """H, the larger of the two trees' heights in GPU hops."""
    return max(max(_heights_and_depths(p)[1]) for p in gpu_trees(layout))


@dataclass(frozen=True)
class TreeSizes:
    """What the closed form reads of the double tree on whole, equal nodes."""

    height: int  # H, the trees' height in GPU hops (H = G - 1 + depth)
    depth: int  # the node trees' depth
    sent: tuple  # what each group rank sends, in buffers S
    intra_load: int  # pieces the busiest GPU's NVLink carries a step, one way
    inter_load: int  # pieces the busiest NIC carries a step, one way


@functools.lru_cache(maxsize=64)
def double_tree_sizes(nodes, gpus_per_node):
    """The :class:`TreeSizes` of the double tree on whole equal nodes.  A rank sends S/2
    to its parent and to each child, per tree; in a step where every piece moves, a GPU's
    NVLink carries one piece for each neighbour it has in its node, summed over the
    trees, and its NIC one for each neighbour on another node.

    >>> double_tree_sizes(2, 2)
    TreeSizes(height=2, depth=1, sent=(1.5, 1.5, 1.5, 1.5), intra_load=2, inter_load=1)
    """
    from ..hardware.layout import NodeLayout

    g = gpus_per_node
    layout = NodeLayout(tuple(tuple(range(n * g, (n + 1) * g)) for n in range(nodes)))
    k = layout.ranks
    sent = [0.0] * k
    intra, inter = [0] * k, [0] * k
    for parent in gpu_trees(layout):
        for r, p in enumerate(parent):
            if p is None:
                continue
            sent[r] += 0.5  # its half up
            sent[p] += 0.5  # and the parent's half back down
            load = intra if r // g == p // g else inter
            load[r] += 1
            load[p] += 1
    h = tree_height(layout)
    return TreeSizes(h, h - (g - 1), tuple(sent), max(intra), max(inter))


def double_tree_all_reduce(layout, pieces=1):
    """The double binary tree all-reduce on ``layout``, pipelined over ``pieces`` per tree
    (the API takes the count that minimises the closed form for the call's size:
    :func:`~collsim.collectives.hardware_forms.best_pieces`)."""
    k = layout.ranks
    trees = gpu_trees(layout)
    shapes = [_heights_and_depths(p) for p in trees]
    big_h = max(max(h) for _, h, _ in shapes)
    p_count = pieces
    n_steps = 0 if k == 1 else p_count - 1 + 2 * big_h
    steps = [[] for _ in range(n_steps)]
    for t, (parent, (children, height, depth)) in enumerate(zip(trees, shapes)):
        root_h = max(height)
        piece = [range(t * p_count + j, t * p_count + j + 1) for j in range(p_count)]
        for j in range(p_count):
            for r in range(k):
                if parent[r] is not None:  # reduce: up in step j + height
                    steps[j + height[r]].append(ChunkMove(r, parent[r], piece[j], True))
                for c in children[r]:  # broadcast: down in step j + H + depth
                    steps[j + root_h + depth[r]].append(ChunkMove(r, c, piece[j], False))
    phases = (
        (
            ("reduce", 0, big_h),
            ("reduce + broadcast", big_h, n_steps - big_h),
            ("broadcast", n_steps - big_h, n_steps),
        )
        if k > 1
        else ()
    )
    phases = tuple(phase for phase in phases if phase[2] > phase[1])  # P = 1: no overlap
    lanes = tuple(Lane(f"tree {t}", range(t * p_count, (t + 1) * p_count)) for t in (0, 1))
    steps = tuple(tuple(s) for s in steps)
    return Schedule("all_reduce", "double_tree", k, 2 * p_count, steps, phases, lanes=lanes)
