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
    "links_alpha_beta",
    "check_topology",
    "PRESETS",
    "ROUTINGS",
    "MAX_RANKS",
    "MAX_LINKS",
    "MIN_BANDWIDTH",
    "MAX_LATENCY",
]

# The builders and the routes are two modules; this package is the one import path.
from .graphs import (
    MAX_LATENCY,
    MAX_LINKS,
    MAX_RANKS,
    MIN_BANDWIDTH,
    PRESETS,
    ROUTINGS,
    bidirectional_ring,
    check_topology,
    from_graph,
    fully_connected,
    hierarchical,
    ranks_of,
    ring,
    switch,
    torus2d,
)

# direct_link_wins and latency_fs too: network/flows.py weighs routes as routing does
from .routing import direct_link_wins as direct_link_wins
from .routing import latency_fs as latency_fs
from .routing import links_alpha_beta, path_alpha_beta, route
