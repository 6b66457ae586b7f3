"""Topologies: networkx directed graphs of ranks, switches and links, and their routes.

Ranks are the integer nodes ``0..K-1`` (node attribute ``kind="rank"``); switches are
string nodes (``kind="switch"``).  Every directed edge is one direction of a link and
carries ``bandwidth`` (bytes/s, in that direction) and ``latency`` (s).  The graph
attribute ``routing`` names how paths are chosen, so routing is data too:

* ``"shortest"``: least total latency, then fewest hops (networkx Dijkstra on an
  integer weight, so free links do not make every path equal);
* ``"dimension_order"``: on a 2-D torus, along the row (X) first, then the column (Y);
* ``"hierarchical"``: GPUs of one node meet at the node switch; other pairs go
  NIC -> fabric switch -> NIC.

Examples
--------
>>> g = ring(4, bandwidth="100GB/s", latency="5us")
>>> sorted(g.edges())
[(0, 1), (1, 2), (2, 3), (3, 0)]
>>> route(g, 0, 2)
[(0, 1), (1, 2)]
>>> path_alpha_beta(g, 0, 1)
(5e-06, 100000000000.0)
"""

import networkx as nx

from .errors import ConfigError
from .units import parse_rate, parse_time

__all__ = [
    "ring",
    "bidirectional_ring",
    "fully_connected",
    "switch",
    "torus2d",
    "hierarchical",
    "from_graph",
    "ranks_of",
    "route",
    "path_alpha_beta",
    "PRESETS",
]


def _new(name, routing="shortest"):
    g = nx.DiGraph(name=name, routing=routing)
    return g


def _add_ranks(g, k):
    if int(k) != k or k < 1:
        raise ConfigError(f"a topology needs a whole number of ranks >= 1, got {k!r}")
    g.add_nodes_from(range(int(k)), kind="rank")


def _link(g, u, v, bandwidth, latency, both=True):
    g.add_edge(u, v, bandwidth=bandwidth, latency=latency)
    if both:
        g.add_edge(v, u, bandwidth=bandwidth, latency=latency)


def ring(k, bandwidth="100GB/s", latency="5us"):
    """A unidirectional ring: rank i has one link, to rank (i+1) mod K."""
    g = _new(f"ring({k})")
    _add_ranks(g, k)
    bw, lat = parse_rate(bandwidth), parse_time(latency)
    for i in range(k):
        if k > 1:
            _link(g, i, (i + 1) % k, bw, lat, both=False)
    return g


def bidirectional_ring(k, bandwidth="100GB/s", latency="5us"):
    """A ring with a link each way between neighbours (each direction its own capacity)."""
    g = _new(f"bidirectional_ring({k})")
    _add_ranks(g, k)
    bw, lat = parse_rate(bandwidth), parse_time(latency)
    for i in range(k):
        if k > 1:
            _link(g, i, (i + 1) % k, bw, lat)
    return g


def fully_connected(k, bandwidth="100GB/s", latency="5us"):
    """A direct link, each way, between every pair of ranks."""
    g = _new(f"fully_connected({k})")
    _add_ranks(g, k)
    bw, lat = parse_rate(bandwidth), parse_time(latency)
    for i in range(k):
        for j in range(k):
            if i != j:
                _link(g, i, j, bw, lat, both=False)
    return g


def switch(k, bandwidth="100GB/s", latency="5us"):
    """One switch; each rank has an up link and a down link to it.

    A rank-to-rank path is two links, so its latency is twice ``latency``.

    >>> path_alpha_beta(switch(4, "10GB/s", "1us"), 0, 3)
    (2e-06, 10000000000.0)
    """
    g = _new(f"switch({k})")
    _add_ranks(g, k)
    g.add_node("switch", kind="switch")
    bw, lat = parse_rate(bandwidth), parse_time(latency)
    for i in range(k):
        _link(g, i, "switch", bw, lat)
    return g


def torus2d(rows, cols, bandwidth="100GB/s", latency="5us"):
    """A rows x cols torus; rank r sits at (r // cols, r % cols); X-then-Y routing.

    >>> route(torus2d(3, 3), 0, 4)
    [(0, 1), (1, 4)]
    """
    g = _new(f"torus2d({rows}x{cols})", routing="dimension_order")
    _add_ranks(g, rows * cols)
    g.graph["shape"] = (rows, cols)
    bw, lat = parse_rate(bandwidth), parse_time(latency)
    for r in range(rows):
        for c in range(cols):
            here = r * cols + c
            if cols > 1:
                _link(g, here, r * cols + (c + 1) % cols, bw, lat)
            if rows > 1:
                _link(g, here, ((r + 1) % rows) * cols + c, bw, lat)
    return g


def hierarchical(
    nodes,
    gpus_per_node,
    intra="900GB/s",
    inter="50GB/s",
    intra_latency="1us",
    inter_latency="5us",
):
    """``nodes`` machines of ``gpus_per_node`` GPUs: a fast node switch inside each
    machine (``intra`` per GPU link, e.g. NVSwitch) and one NIC per GPU into a shared
    fabric switch (``inter`` per NIC, e.g. 400 Gbit/s InfiniBand = 50 GB/s).

    The default 900 GB/s is NVLink 4's figure for both directions together; pass
    ``intra="450GB/s"`` for the per-direction rate if you want the stricter model.

    >>> g = hierarchical(2, 4)
    >>> route(g, 0, 1), route(g, 0, 4)
    ([(0, 'node0'), ('node0', 1)], [(0, 'fabric'), ('fabric', 4)])
    """
    g = _new(f"hierarchical({nodes}x{gpus_per_node})", routing="hierarchical")
    _add_ranks(g, nodes * gpus_per_node)
    g.graph["gpus_per_node"] = gpus_per_node
    g.add_node("fabric", kind="switch")
    bw_in, bw_out = parse_rate(intra), parse_rate(inter)
    lat_in, lat_out = parse_time(intra_latency), parse_time(inter_latency)
    for n in range(nodes):
        g.add_node(f"node{n}", kind="switch", node=n)
        for local in range(gpus_per_node):
            gpu = n * gpus_per_node + local
            g.nodes[gpu]["node"] = n
            _link(g, gpu, f"node{n}", bw_in, lat_in)
            _link(g, gpu, "fabric", bw_out, lat_out)
    return g


def from_graph(graph, routing="shortest"):
    """Validate a user's graph and return it as a collsim topology (a copy).

    Rank nodes must be the integers ``0..K-1``; every other node is a switch.
    Undirected graphs get a link each way.
    """
    g = nx.DiGraph(graph) if not graph.is_directed() else graph.copy()
    g.graph.setdefault("name", "custom")
    g.graph["routing"] = routing
    for node in g.nodes:
        g.nodes[node].setdefault("kind", "rank" if isinstance(node, int) else "switch")
    ranks = ranks_of(g)
    if ranks != list(range(len(ranks))) or not ranks:
        raise ConfigError(f"rank nodes must be the integers 0..K-1, got {ranks}")
    for u, v, data in g.edges(data=True):
        for key, parse in (("bandwidth", parse_rate), ("latency", parse_time)):
            if key not in data:
                raise ConfigError(f"link {u}->{v} has no {key!r} attribute")
            try:
                data[key] = parse(data[key])
            except ConfigError as exc:
                raise ConfigError(f"link {u}->{v}: {exc}") from None
    return g


def ranks_of(g):
    """The rank nodes of ``g``, sorted."""
    return sorted(n for n, kind in g.nodes(data="kind") if kind == "rank")


def route(g, src, dst):
    """The directed links a message from ``src`` to ``dst`` crosses, in order.

    Raises ``ConfigError`` for an unknown rank or a pair with no path.
    """
    for rank in (src, dst):
        if rank not in g or g.nodes[rank].get("kind") != "rank":
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
        return round(data["latency"] * 1e15) * scale + 1

    return nx.dijkstra_path(graph, src, dst, weight=weight)


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
    links = route(g, src, dst)
    if not links:
        return 0.0, float("inf")
    alpha = sum(g.edges[e]["latency"] for e in links)
    beta = min(g.edges[e]["bandwidth"] for e in links)
    return alpha, beta


PRESETS = {
    "ring": ring,
    "bidirectional_ring": bidirectional_ring,
    "fully_connected": fully_connected,
    "switch": switch,
    "torus2d": torus2d,
    "hierarchical": hierarchical,
}
