"""Which node each rank of a group sits on: what the hierarchical algorithms read.

Examples
--------
>>> from collsim.hardware.build import topology
>>> layout = node_layout(topology("dgx-a100", nodes=2), range(0, 16, 2))
>>> layout.nodes, layout.gpus_per_node, layout.n_nodes
(((0, 1, 2, 3), (4, 5, 6, 7)), 4, 2)
"""

from dataclasses import dataclass

__all__ = ["NodeLayout", "node_layout"]


@dataclass(frozen=True)
class NodeLayout:
    """A group's ranks by node: ``nodes[n]`` holds the GROUP ranks (0..K-1, indices into
    the group) on its n-th node, in group order; nodes in order of their first rank."""

    nodes: tuple  # ((group ranks of node 0), (group ranks of node 1), ...)

    @property
    def n_nodes(self):
        return len(self.nodes)

    @property
    def ranks(self):
        return sum(len(n) for n in self.nodes)

    @property
    def gpus_per_node(self):
        """Ranks per node when every node holds as many, else ``None``."""
        sizes = {len(n) for n in self.nodes}
        return sizes.pop() if len(sizes) == 1 else None

    def node_of(self, group_rank):
        """The node index (in this layout) of a group rank."""
        for n, members in enumerate(self.nodes):
            if group_rank in members:
                return n
        raise KeyError(group_rank)


def node_layout(graph, ranks):
    """The :class:`NodeLayout` of group ``ranks`` (cluster ranks) on ``graph``: by each
    rank's ``node`` attribute, or one node holding them all when the graph has none."""
    ranks = list(ranks)
    by_node = {}
    for index, rank in enumerate(ranks):
        by_node.setdefault(graph.nodes[rank].get("node", 0), []).append(index)
    return NodeLayout(tuple(tuple(members) for members in by_node.values()))
