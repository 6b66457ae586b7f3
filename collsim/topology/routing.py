"""Routes over a topology: which directed links a message crosses, and their α and β.

The graph attribute ``routing`` chooses the rule:

* ``"shortest"``: least total latency, then fewest hops (networkx Dijkstra on an
  integer weight, so free links do not make every path equal);
* ``"dimension_order"``: on a 2-D torus, along the row (X) first, then the column (Y);
* ``"hierarchical"``: GPUs of one node meet at the node switch; other pairs go
  NIC -> fabric switch -> NIC.

Examples
--------
>>> from collsim.topology import ring
>>> route(ring(4), 0, 2)
[(0, 1), (1, 2)]
>>> path_alpha_beta(ring(4, bandwidth="100GB/s", latency="5us"), 0, 1)
(5e-06, 100000000000.0)
"""

import networkx as nx
import numpy as np

from ..errors import ConfigError
from .graphs import ranks_of

__all__ = [
    "route",
    "path_alpha_beta",
    "links_alpha_beta",
]


def route(g, src, dst):
    """The directed links a message from ``src`` to ``dst`` crosses, in order.

    Raises ``ConfigError`` for an unknown rank or a pair with no path.
    """
    for rank in (src, dst):
        whole = isinstance(rank, int | np.integer) and not isinstance(rank, bool)
        if not whole or rank not in g or g.nodes[rank].get("kind") != "rank":
            raise ConfigError(
                f"rank {rank!r} is not in topology {g.graph.get('name')} "
                f"(ranks 0..{len(ranks_of(g)) - 1})"
            )
    if src == dst:
        return []
    routing = g.graph.get("routing", "shortest")
    try:
        if routing == "dimension_order":
            nodes = _dimension_order(g, src, dst)
        elif routing == "hierarchical":
            nodes = _hierarchical(g, src, dst)
        else:
            nodes = _shortest(g, src, dst)
    except nx.NetworkXNoPath:
        raise ConfigError(
            f"no path from rank {src} to rank {dst} in topology {g.graph.get('name')}"
        ) from None
    return list(zip(nodes[:-1], nodes[1:]))


def _shortest(g, src, dst, subgraph=None):
    graph = g if subgraph is None else subgraph
    # integer weight: latency in femtoseconds, scaled past any hop count, plus one per
    # hop, so paths compare by (latency, hops) exactly and free links still prefer
    # direct routes; Dijkstra's tie-break on equal weights is insertion order.
    scale = g.number_of_nodes() + 1

    def weight(u, v, data):
        return latency_fs(data["latency"]) * scale + 1

    if graph.has_edge(src, dst):
        direct = latency_fs(graph.edges[src, dst]["latency"])
        out = min(latency_fs(d["latency"]) for d in graph.succ[src].values())
        into = min(latency_fs(d["latency"]) for d in graph.pred[dst].values())
        if direct_link_wins(direct, out, into):
            return [src, dst]
    return nx.dijkstra_path(graph, src, dst, weight=weight)


def latency_fs(seconds):
    """A link's latency as shortest-path routing weighs it: whole femtoseconds."""
    return round(seconds * 1e15)


def direct_link_wins(direct, fastest_out, fastest_in):
    """Whether a direct link of latency ``direct`` (femtoseconds) is the shortest path
    outright: any other path leaves the sender on some link and enters the receiver on
    another, so it weighs at least ``(fastest_out + fastest_in) * scale + 2`` against the
    direct link's ``direct * scale + 1`` (a ring's neighbours, thousands of routes per run,
    without a Dijkstra each).

    >>> direct_link_wins(3_000_000_000, 1_000_000_000, 1_500_000_000)  # a detour is faster
    False
    """
    return fastest_out + fastest_in >= direct


def _dimension_order(g, src, dst):
    rows, cols = g.graph["shape"]
    r0, c1 = src // cols, dst % cols
    corner = r0 * cols + c1  # finish X (the row) first, then Y (the column)
    row = g.subgraph(r0 * cols + c for c in range(cols))
    col = g.subgraph(r * cols + c1 for r in range(rows))
    first = _shortest(g, src, corner, row) if corner != src else [src]
    second = _shortest(g, corner, dst, col) if corner != dst else [dst]
    return first + second[1:]


def _hierarchical(g, src, dst):
    n_src, n_dst = g.nodes[src]["node"], g.nodes[dst]["node"]
    hub = f"node{n_src}" if n_src == n_dst else "fabric"
    if not (g.has_edge(src, hub) and g.has_edge(hub, dst)):
        raise nx.NetworkXNoPath
    return [src, hub, dst]


def path_alpha_beta(g, src, dst):
    """(α, β) of the route: summed latency (s) and narrowest bandwidth (bytes/s)."""
    return links_alpha_beta(g, route(g, src, dst))


def links_alpha_beta(g, links):
    """(α, β) of a path given as its links: summed latency (s), in the links' order, and
    narrowest bandwidth (bytes/s); ``(0.0, inf)`` for no links."""
    if not links:
        return 0.0, float("inf")
    alpha = sum(g.edges[e]["latency"] for e in links)
    beta = min(g.edges[e]["bandwidth"] for e in links)
    return alpha, beta
