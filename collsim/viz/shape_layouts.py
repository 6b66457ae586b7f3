"""Where each rank goes in a drawing shaped like its algorithm.

Each placement is read from the schedule's moves (or the group's nodes), never from the
algorithm's own rules: a tree's parents are who reduces into whom (or copies to whom),
halving-doubling's distances are those of its moves.

* :func:`tree_placement`: a layered tree, the root on top, each level a row, leaves in
  depth-first order and every parent centred over its children;
* :func:`row_placement`: ranks in a row, each pairwise exchange an arc (rightward above,
  leftward below), each rank's buffer a column under the arcs (halving-doubling, and PAT,
  whose partners r - 1, r - 2, r - 4, ... wrap round past rank 0 as long arcs);
* :func:`switch_placement`: ranks on a circle around the NVSwitch that reduces and
  multicasts;
* :func:`switch_nodes_placement`: each node a box with its GPUs in a column and its own
  NVSwitch beside them (NVLS-Tree: the switch reduces and multicasts inside the node, a
  tree over the GPUs of one local index crosses the nodes);
* :func:`node_placement`: each node a box with its GPUs in a column, nodes side by side,
  GPU j of every node on one row, so a ring's hops inside a node run down a column and
  its hops between nodes (one rail each) straight across.

>>> from collsim.collectives.tree import tree_broadcast
>>> moves = [m for step in tree_broadcast(4, 0).steps for m in step]
>>> tree_parents(moves)
{1: 0, 2: 0, 3: 1}
>>> p = tree_placement(moves, 4)
>>> [p.positions[r][1] for r in range(4)]  # levels: the root on top
[0.0, -1.5, -1.5, -3.0]
"""

import math
from dataclasses import dataclass, field

from .cells import Strip

__all__ = [
    "Placement",
    "tree_parents",
    "tree_placement",
    "row_placement",
    "switch_placement",
    "switch_nodes_placement",
    "node_placement",
]

NODE = 0.2  # radius of a rank's disc, data units
LEVEL = 1.5  # distance between a tree's levels
ROW = 1.0  # distance between a node's GPUs in its column
ARC = 0.2  # an arc's height per rank of distance (halving-doubling)


@dataclass
class Placement:
    """Ranks' positions, their buffer strips and what else the drawing holds."""

    positions: dict  # rank -> (x, y)
    strips: dict  # rank -> Strip of its buffer cells
    edges: list = field(default_factory=list)  # (a, b) drawn faint: the structure moves use
    boxes: list = field(default_factory=list)  # (node number, x0, y0, width, height)
    hubs: dict = field(default_factory=dict)  # switch name -> (x, y): reduces, multicasts
    bend: float = 0.0  # arc3 curvature of a move's arrow
    n_cells: int = 1  # cells in each strip
    reach: tuple = ()  # further points the drawing reaches (the tops of arcs)
    curve: object = None  # curve(p0, p2) -> arc3 curvature of a move, instead of ``bend``

    def bend_of(self, p0, p2):
        """The arc3 curvature of an arrow from p0 to p2."""
        return self.bend if self.curve is None else self.curve(p0, p2)

    def extent(self, margin=0.45):
        """(x0, x1, y0, y1) around everything placed."""
        xs, ys = [], []
        for x, y in [*self.positions.values(), *self.reach]:
            xs.append(x)
            ys.append(y)
        for s in self.strips.values():
            n_end = s.depth * self.n_cells
            xs.append(s.origin[0] + s.along[0] * n_end)
            ys.append(s.origin[1] + s.along[1] * n_end)
        for _, x0, y0, w, h in self.boxes:
            xs += [x0, x0 + w]
            ys += [y0, y0 + h]
        return min(xs) - margin, max(xs) + margin, min(ys) - margin, max(ys) + margin


def tree_parents(moves):
    """``{child: parent}`` read from a tree's moves: a reduce goes from child to parent, a
    copy from parent to child."""
    parent = {}
    for m in moves:
        child, up = (m.src, m.dst) if m.reduce else (m.dst, m.src)
        parent.setdefault(child, up)
    return parent


def tree_placement(moves, k, n_cells=1):
    """The layered tree of ``moves`` over ranks 0..k-1 (ranks in no move stand alone)."""
    parent = tree_parents(moves)
    children = {r: [] for r in range(k)}
    for child, up in sorted(parent.items()):
        children[up].append(child)
    roots = [r for r in range(k) if r not in parent]
    positions, next_leaf = {}, [0.0]
    # a deep, narrow tree (the double tree's chains through a node's GPUs) spreads its
    # leaves wider, so the drawing fills a panel instead of a thin column
    leaves = sum(1 for r in range(k) if not children[r])
    spacing = max(1.0, 0.6 * _height(parent) * LEVEL / max(1, leaves - 1))

    def place(r, depth):
        if not children[r]:
            x = next_leaf[0]
            next_leaf[0] += spacing
        else:
            xs = [place(c, depth + 1) for c in children[r]]
            x = (xs[0] + xs[-1]) / 2
        positions[r] = (x, -depth * LEVEL)
        return x

    for root in roots:
        place(root, 0)
    length = min(0.5, 0.25 * n_cells)  # beside the disc, clear of the next leaf
    strips = {
        r: Strip((x + NODE + 0.06, y), (1.0, 0.0), length / n_cells, 0.3)
        for r, (x, y) in positions.items()
    }
    edges = sorted({tuple(sorted((c, p))) for c, p in parent.items()})
    return Placement(positions, strips, edges=edges, bend=0.0, n_cells=n_cells)


def _height(parent):
    """The tree's depth in levels: the longest way from a rank up to its root."""
    deepest = 0
    for r in parent:
        depth, up = 0, r
        while up in parent and depth <= len(parent):  # a cycle cannot loop forever
            up, depth = parent[up], depth + 1
        deepest = max(deepest, depth)
    return deepest


def row_placement(moves, k, n_cells):
    """Ranks 0..k-1 in a row; each rank's buffer a column below the lowest arc."""
    positions = {r: (float(r), 0.0) for r in range(k)}
    reach = max((abs(m.src - m.dst) for m in moves), default=1)
    top = -(ARC * reach + NODE + 0.25)
    depth = min(0.22, 1.8 / n_cells)
    strips = {r: Strip((x, top), (0.0, -1.0), depth, 0.5) for r, (x, _) in positions.items()}
    arcs = [(0.0, ARC * reach + NODE), (float(k - 1), ARC * reach + NODE)]
    return Placement(positions, strips, bend=-2 * ARC, n_cells=n_cells, reach=arcs)


def _circle(k, radius, centre=(0.0, 0.0)):
    """Rank i of k at angle 90° - 360°·i/k around ``centre``: the first on top, clockwise."""
    angles = [math.pi / 2 - 2 * math.pi * i / k for i in range(k)]
    cx, cy = centre
    return [(cx + radius * math.cos(a), cy + radius * math.sin(a)) for a in angles], angles


def _radial_strips(ranks, points, angles, n_cells, length):
    depth = min(0.2, length / n_cells)
    strips = {}
    for r, (x, y), a in zip(ranks, points, angles):
        along = (math.cos(a), math.sin(a))
        origin = (x + along[0] * (NODE + 0.08), y + along[1] * (NODE + 0.08))
        strips[r] = Strip(origin, along, depth, 0.2)
    return strips


def switch_placement(k, switch, n_cells):
    """Ranks on a circle around the switch ``switch`` (its name), buffers outward."""
    radius = max(2.0, 0.4 * k)  # room between the legs to and from the switch
    points, angles = _circle(k, radius)
    positions = dict(enumerate(points))
    strips = _radial_strips(range(k), points, angles, n_cells, 1.0)
    return Placement(positions, strips, hubs={switch: (0.0, 0.0)}, bend=0.3, n_cells=n_cells)


def switch_nodes_placement(nodes, switches, n_cells, edges=()):
    """``nodes`` (tuples of ranks) as boxes side by side, each with its GPUs in a column and
    its switch (``switches[n]``, a name) beside them, on the outer side: the first node's
    on its left, the others' on their right, so the rails between the first two nodes run
    straight across.  Buffers sit on the side away from the switch."""
    g = max(len(n) for n in nodes)
    length = min(0.9, 0.12 * n_cells)
    positions, strips, boxes, hubs = {}, {}, [], {}
    reach = 5.5  # from a GPU's column to its switch: its legs' labels clear of the discs
    width = reach + 0.75 + NODE + 0.1 + length + 0.3
    for n, ranks in enumerate(nodes):
        left = n == 0  # the first node's switch on its left, the others' on their right
        x0 = n * (width + 1.6)
        x = x0 + (reach + 0.75 if left else 0.3 + length + NODE + 0.1)
        for j, r in enumerate(ranks):
            y = -j * ROW
            positions[r] = (x, y)
            start = x + NODE + 0.05 if left else x - NODE - 0.05 - length
            strips[r] = Strip((start, y - 0.3), (1.0, 0.0), length / n_cells, 0.16)
        hubs[switches[n]] = (x - reach if left else x + reach, -(g - 1) * ROW / 2)
        top, bottom = 0.55, -(g - 1) * ROW - 0.55
        boxes.append((n, x0, bottom, width, top - bottom))
    return Placement(
        positions,
        strips,
        edges=list(edges),
        boxes=boxes,
        hubs=hubs,
        bend=0.15,
        n_cells=n_cells,
        curve=_column_curve,
    )


def _column_curve(p0, p2):
    """arc3 curvature of a move between GPUs laid out in node columns: straight between
    neighbouring rows, a wide bow to the left for a ring's wrap-around inside a node (so
    it clears the rows between), a slight bow between nodes (a pair sent both ways at
    once then runs on two sides)."""
    (x0, y0), (x2, y2) = p0, p2
    if abs(x2 - x0) > 1e-9:
        return 0.08
    if abs(y2 - y0) <= ROW + 1e-9:
        return 0.0
    return -0.35 if y2 > y0 else 0.35  # arc3 bows right of travel for rad > 0


def node_placement(nodes, n_cells, edges=()):
    """Each node of ``nodes`` (tuples of group ranks) a box with its GPUs in a column, in
    local order, nodes side by side: GPU j of every node on one row, so the hops between
    nodes (one rail, one local index) run straight across and a ring inside a node runs
    down its column."""
    g = max(len(n) for n in nodes)
    length = min(0.9, 0.12 * n_cells)
    positions, strips, boxes = {}, {}, []
    width = NODE + 0.1 + length + 0.9  # the wrap-around's bow on the left, the strip right
    for n, ranks in enumerate(nodes):
        x = n * (width + 1.6)
        for j, r in enumerate(ranks):
            y = -j * ROW
            positions[r] = (x, y)
            # under the row's centre line, so arrows leaving the GPU sideways pass above it
            origin = (x + NODE + 0.05, y - 0.3)
            strips[r] = Strip(origin, (1.0, 0.0), length / n_cells, 0.16)
        top, bottom = 0.55, -(g - 1) * ROW - 0.55
        boxes.append((n, x - 0.75, bottom, width, top - bottom))
    return Placement(
        positions,
        strips,
        edges=list(edges),
        boxes=boxes,
        n_cells=n_cells,
        curve=_column_curve,
    )
