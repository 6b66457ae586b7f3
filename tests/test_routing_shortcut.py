"""The shortest-path routing takes a direct link without a Dijkstra where no other path
can beat it, and gives exactly the path Dijkstra gives (latency, then hops, ties by
insertion order) on every graph: a ring's neighbours and random graphs whose direct links
are sometimes slower than a detour."""

import networkx as nx
from hypothesis import given
from hypothesis import strategies as st

from collsim import topology


def _dijkstra(g, src, dst):
    scale = g.number_of_nodes() + 1

    def weight(u, v, d):
        return round(d["latency"] * 1e15) * scale + 1

    nodes = nx.dijkstra_path(g, src, dst, weight=weight)
    return list(zip(nodes[:-1], nodes[1:]))


EDGES = st.lists(
    st.tuples(st.integers(0, 6), st.integers(0, 6), st.sampled_from([0.0, 1e-6, 2e-6, 5e-6])),
    min_size=1,
    max_size=30,
)


def ring_with_extra_links(k, edges, switch=False):
    """A one-way ring of ``k`` ranks (so every pair is connected) plus ``edges``
    ``(u, v, latency)``, and with ``switch`` a switch whose fast links can beat a direct
    link too."""
    g = nx.DiGraph()
    g.add_nodes_from(range(k))
    for r in range(k):
        g.add_edge(r, (r + 1) % k, latency=3e-6, bandwidth=1e9)
    for u, v, latency in edges:
        if u < k and v < k and u != v:
            g.add_edge(u, v, latency=latency, bandwidth=2e9)
    if switch:
        for r in range(k):
            g.add_edge(r, "sw", latency=1e-6, bandwidth=1e9)
            g.add_edge("sw", r, latency=0.0, bandwidth=1e9)
    return topology.from_graph(g)


@given(k=st.integers(2, 7), edges=EDGES, switch=st.booleans())
def test_routes_equal_dijkstras_on_random_graphs(k, edges, switch):
    g = ring_with_extra_links(k, edges, switch)
    for src in range(k):
        for dst in range(k):
            if src != dst:
                assert topology.route(g, src, dst) == _dijkstra(g, src, dst), (src, dst)


def slow_direct_link_graph():
    """Three ranks where 0 -> 1 has a direct link 0.5 us slower than the detour via 2."""
    g = nx.DiGraph()
    g.add_edge(0, 1, latency=3e-6, bandwidth=1e9)  # direct, but 0.5 us slower
    g.add_edge(0, 2, latency=1e-6, bandwidth=1e9)
    g.add_edge(2, 1, latency=1.5e-6, bandwidth=1e9)
    g.add_edge(1, 0, latency=1e-6, bandwidth=1e9)
    g.add_edge(2, 0, latency=1e-6, bandwidth=1e9)
    g.add_edge(1, 2, latency=1e-6, bandwidth=1e9)
    return topology.from_graph(g)


def test_a_slow_direct_link_loses_to_a_fast_detour():
    assert topology.route(slow_direct_link_graph(), 0, 1) == [(0, 2), (2, 1)]
    ring = topology.bidirectional_ring(8)
    assert topology.route(ring, 3, 4) == [(3, 4)] and topology.route(ring, 4, 3) == [(4, 3)]
