"""The topology builders: networkx directed graphs of ranks, switches and links.

Ranks are the integer nodes ``0..K-1`` (node attribute ``kind="rank"``); switches are
string nodes (``kind="switch"``).  Every directed edge is one direction of a link and
carries ``bandwidth`` (bytes/s, in that direction) and ``latency`` (s).  The graph
attribute ``routing`` names how :mod:`.routing` chooses paths over it.

Examples
--------
>>> g = ring(4, bandwidth="100GB/s", latency="5us")
>>> sorted(g.edges())
[(0, 1), (1, 2), (2, 3), (3, 0)]
"""

import math

import networkx as nx
import numpy as np

from ..errors import ConfigError
from ..units import format_rate, parse_rate, parse_time

__all__ = [
    "ring",
    "bidirectional_ring",
    "fully_connected",
    "switch",
    "torus2d",
    "hierarchical",
    "from_graph",
    "ranks_of",
    "check_topology",
    "PRESETS",
    "ROUTINGS",
    "MAX_RANKS",
    "MAX_LINKS",
    "MIN_BANDWIDTH",
    "MAX_LATENCY",
]

# Bounds on what a preset builds, so that a typo fails at once instead of filling memory:
# networkx needs about 1 KiB and a few microseconds per node or link.
MAX_RANKS = 1 << 17  # 131,072 ranks: a ring of them builds in about a second
MAX_LINKS = 1 << 22  # 4 million directed links: fully_connected(2048)
# Link values a run can use.  A byte a second is already a million times slower than any
# network; a hop slower than a day (Cluster's default max_time guard) never arrives.
MIN_BANDWIDTH = 1.0  # bytes/s
MAX_LATENCY = 86_400.0  # s
ROUTINGS = ("shortest", "dimension_order", "hierarchical")


def _new(name, routing="shortest"):
    g = nx.DiGraph(name=name, routing=routing)
    return g


def _whole(value, what, maximum=MAX_RANKS):
    """``value`` as an int in ``1..maximum``; a bool, float or string is refused."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ConfigError(
            f"{what} must be a whole number (an int) of ranks >= 1, got {value!r} "
            f"({type(value).__name__})"
        )
    if not 1 <= value <= maximum:
        raise ConfigError(f"{what} must be between 1 and {maximum:,} ranks, got {value!r}")
    return int(value)


def _add_ranks(g, k):
    g.add_nodes_from(range(k), kind="rank")


def _links(name, k, bandwidth, latency, count):
    """Parse and bound the link values; refuse a graph of more than MAX_LINKS links."""
    if count > MAX_LINKS:
        raise ConfigError(
            f"{name} would have {count:,} directed links, more than the {MAX_LINKS:,} "
            f"collsim builds: use switch({k}) for that many ranks"
        )
    return link_bandwidth(bandwidth), link_latency(latency)


def link_bandwidth(value):
    """A link's bandwidth in bytes/s: :func:`~collsim.units.parse_rate` within bounds."""
    bw = parse_rate(value)
    if bw < MIN_BANDWIDTH:
        raise ConfigError(
            f"bandwidth {value!r} is {format_rate(bw)}, below the {MIN_BANDWIDTH:g} B/s "
            "collsim accepts (a typo? e.g. '100GB/s')"
        )
    return bw


def link_latency(value):
    """A link's latency in seconds: :func:`~collsim.units.parse_time` within bounds."""
    lat = parse_time(value)
    if lat > MAX_LATENCY:
        raise ConfigError(
            f"latency {value!r} is {lat:g} s, above the {MAX_LATENCY:g} s (one day, the "
            "Cluster's max_time guard) a hop may take: a message would never arrive"
        )
    return lat


def _link(g, u, v, bandwidth, latency, both=True):
    g.add_edge(u, v, bandwidth=bandwidth, latency=latency)
    if both:
        g.add_edge(v, u, bandwidth=bandwidth, latency=latency)


def ring(k, bandwidth="100GB/s", latency="5us"):
    """A unidirectional ring: rank i has one link, to rank (i+1) mod K."""
    k = _whole(k, "ring(k): k")
    bw, lat = _links(f"ring({k})", k, bandwidth, latency, k)
    g = _new(f"ring({k})")
    _add_ranks(g, k)
    for i in range(k):
        if k > 1:
            _link(g, i, (i + 1) % k, bw, lat, both=False)
    return g


def bidirectional_ring(k, bandwidth="100GB/s", latency="5us"):
    """A ring with a link each way between neighbours (each direction its own capacity)."""
    k = _whole(k, "bidirectional_ring(k): k")
    bw, lat = _links(f"bidirectional_ring({k})", k, bandwidth, latency, 2 * k)
    g = _new(f"bidirectional_ring({k})")
    _add_ranks(g, k)
    for i in range(k):
        if k > 1:
            _link(g, i, (i + 1) % k, bw, lat)
    return g


def fully_connected(k, bandwidth="100GB/s", latency="5us"):
    """A direct link, each way, between every pair of ranks."""
    k = _whole(k, "fully_connected(k): k")
    bw, lat = _links(f"fully_connected({k})", k, bandwidth, latency, k * (k - 1))
    g = _new(f"fully_connected({k})")
    _add_ranks(g, k)
    for i in range(k):
        for j in range(k):
            if i != j:
                _link(g, i, j, bw, lat, both=False)
    return g


def switch(k, bandwidth="100GB/s", latency="5us"):
    """One switch; each rank has an up link and a down link to it.

    A rank-to-rank path is two links, so its latency is twice ``latency``.

    >>> from collsim.topology import path_alpha_beta
    >>> path_alpha_beta(switch(4, "10GB/s", "1us"), 0, 3)
    (2e-06, 10000000000.0)
    """
    k = _whole(k, "switch(k): k")
    bw, lat = _links(f"switch({k})", k, bandwidth, latency, 2 * k)
    g = _new(f"switch({k})")
    _add_ranks(g, k)
    g.add_node("switch", kind="switch")
    for i in range(k):
        _link(g, i, "switch", bw, lat)
    return g


def torus2d(rows, cols, bandwidth="100GB/s", latency="5us"):
    """A rows x cols torus; rank r sits at (r // cols, r % cols); X-then-Y routing.

    >>> from collsim.topology import route
    >>> route(torus2d(3, 3), 0, 4)
    [(0, 1), (1, 4)]
    """
    rows, cols = _whole(rows, "torus2d(rows, cols): rows"), _whole(cols, "torus2d: cols")
    k = _whole(rows * cols, f"torus2d({rows}, {cols}): rows * cols")
    bw, lat = _links(f"torus2d({rows}x{cols})", k, bandwidth, latency, 4 * k)
    g = _new(f"torus2d({rows}x{cols})", routing="dimension_order")
    _add_ranks(g, k)
    g.graph["shape"] = (rows, cols)
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
    >>> from collsim.topology import route
    >>> route(g, 0, 1), route(g, 0, 4)
    ([(0, 'node0'), ('node0', 1)], [(0, 'fabric'), ('fabric', 4)])
    """
    nodes = _whole(nodes, "hierarchical(nodes, gpus_per_node): nodes")
    gpus_per_node = _whole(gpus_per_node, "hierarchical: gpus_per_node")
    k = _whole(nodes * gpus_per_node, f"hierarchical({nodes}, {gpus_per_node}): ranks")
    bw_in, lat_in = _links(f"hierarchical({nodes}x{gpus_per_node})", k, intra, intra_latency, 4 * k)
    bw_out, lat_out = link_bandwidth(inter), link_latency(inter_latency)
    g = _new(f"hierarchical({nodes}x{gpus_per_node})", routing="hierarchical")
    _add_ranks(g, k)
    g.graph["gpus_per_node"] = gpus_per_node
    g.add_node("fabric", kind="switch")
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
    if not isinstance(graph, nx.Graph):
        raise ConfigError(
            f"from_graph({graph!r}): give a networkx graph whose rank nodes are 0..K-1"
        )
    if not isinstance(routing, str) or routing not in ROUTINGS:
        raise ConfigError(f"unknown routing {routing!r}: choose one of {', '.join(ROUTINGS)}")
    if graph.number_of_nodes() + graph.number_of_edges() > MAX_LINKS:
        raise ConfigError(
            f"the graph has {graph.number_of_nodes():,} nodes and {graph.number_of_edges():,} "
            f"links, more than the {MAX_LINKS:,} collsim builds"
        )
    g = nx.DiGraph(graph) if not graph.is_directed() else graph.copy()
    g.graph.setdefault("name", "custom")
    g.graph["routing"] = routing
    for node in g.nodes:
        rank = isinstance(node, int) and not isinstance(node, bool)
        g.nodes[node].setdefault("kind", "rank" if rank else "switch")
    try:
        ranks = ranks_of(g)
    except TypeError:
        raise ConfigError("rank nodes must be the integers 0..K-1 (kind='rank')") from None
    if ranks != list(range(len(ranks))) or not ranks:
        raise ConfigError(f"rank nodes must be the integers 0..K-1, got {ranks}")
    if routing == "dimension_order":
        shape = g.graph.get("shape")
        if not (isinstance(shape, tuple) and len(shape) == 2 and math.prod(shape) == len(ranks)):
            raise ConfigError(
                f"routing 'dimension_order' needs graph attribute shape=(rows, cols) with "
                f"rows * cols = {len(ranks)} ranks, got shape={shape!r}"
            )
    if routing == "hierarchical":
        missing = [r for r in ranks if "node" not in g.nodes[r]]
        if missing:
            raise ConfigError(
                f"routing 'hierarchical' needs a 'node' attribute on every rank; ranks "
                f"{missing[:8]} have none"
            )
    for u, v, data in g.edges(data=True):
        for key, parse in (("bandwidth", link_bandwidth), ("latency", link_latency)):
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


def check_topology(g, who="a cluster"):
    """The number of ranks of collsim topology ``g``; a :class:`ConfigError` naming ``g``
    if it is not one (a preset or :func:`from_graph`'s result).

    >>> check_topology(ring(4))
    4
    """
    if not isinstance(g, nx.DiGraph) or "routing" not in g.graph:
        raise ConfigError(
            f"{who} needs a topology from collsim.topology (e.g. ring(8), switch(8) or "
            f"from_graph(graph)), got {g!r}"
        )
    ranks = ranks_of(g)
    if not ranks or ranks != list(range(len(ranks))):
        raise ConfigError(f"{who}: the topology's rank nodes must be 0..K-1, got {ranks[:8]}")
    return len(ranks)


PRESETS = {
    "ring": ring,
    "bidirectional_ring": bidirectional_ring,
    "fully_connected": fully_connected,
    "switch": switch,
    "torus2d": torus2d,
    "hierarchical": hierarchical,
}
