"""Topologies: the presets' nodes, links and attributes, routing rules, and bad input."""

import re

import networkx as nx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from collsim import topology
from collsim.errors import CollsimError, ConfigError

BW, LAT = 100e9, 5e-6


def rank_nodes(g):
    return [n for n, kind in g.nodes(data="kind") if kind == "rank"]


def switch_nodes(g):
    return sorted(n for n, kind in g.nodes(data="kind") if kind == "switch")


def assert_links(g, bandwidth, latency):
    for u, v, data in g.edges(data=True):
        assert data["bandwidth"] == bandwidth, (u, v)
        assert data["latency"] == latency, (u, v)


# --------------------------------------------------------------------------- presets


def test_ring_is_unidirectional():
    g = topology.ring(4, bandwidth="100GB/s", latency="5us")
    assert isinstance(g, nx.DiGraph)
    assert rank_nodes(g) == [0, 1, 2, 3] and switch_nodes(g) == []
    assert sorted(g.edges()) == [(0, 1), (1, 2), (2, 3), (3, 0)]
    assert_links(g, BW, LAT)
    assert topology.route(g, 1, 0) == [(1, 2), (2, 3), (3, 0)]  # the long way round


def test_bidirectional_ring_has_a_link_each_way():
    g = topology.bidirectional_ring(5, bandwidth="10GB/s", latency="1us")
    expected = {(i, (i + 1) % 5) for i in range(5)} | {((i + 1) % 5, i) for i in range(5)}
    assert set(g.edges()) == expected
    assert_links(g, 10e9, 1e-6)
    assert topology.route(g, 0, 4) == [(0, 4)]
    assert topology.route(g, 0, 1) == [(0, 1)]


def test_fully_connected_links_every_ordered_pair():
    g = topology.fully_connected(4, bandwidth=1e9, latency=0)
    assert g.number_of_edges() == 4 * 3
    assert all(g.has_edge(i, j) for i in range(4) for j in range(4) if i != j)
    assert_links(g, 1e9, 0.0)
    assert topology.route(g, 3, 1) == [(3, 1)]


def test_switch_has_an_up_and_a_down_link_per_rank():
    g = topology.switch(3, bandwidth="25GB/s", latency="2us")
    assert rank_nodes(g) == [0, 1, 2] and switch_nodes(g) == ["switch"]
    assert set(g.edges()) == {(r, "switch") for r in range(3)} | {("switch", r) for r in range(3)}
    assert_links(g, 25e9, 2e-6)
    assert topology.route(g, 0, 2) == [(0, "switch"), ("switch", 2)]
    assert topology.path_alpha_beta(g, 0, 2) == pytest.approx((4e-6, 25e9), rel=1e-12)


def test_torus2d_has_wraparound_links_in_both_dimensions():
    g = topology.torus2d(3, 4, bandwidth="50GB/s", latency="1us")
    assert rank_nodes(g) == list(range(12))
    assert g.graph["shape"] == (3, 4)
    assert g.number_of_edges() == 12 * 4  # four neighbours each, links both ways
    assert g.has_edge(3, 0) and g.has_edge(0, 3)  # row wrap
    assert g.has_edge(8, 0) and g.has_edge(0, 8)  # column wrap
    assert_links(g, 50e9, 1e-6)


def test_small_tori_do_not_duplicate_links():
    assert topology.torus2d(2, 3).number_of_edges() == 6 * 3  # one column neighbour
    assert topology.torus2d(1, 4).number_of_edges() == 8  # a bidirectional ring
    assert topology.torus2d(1, 1).number_of_edges() == 0


def test_hierarchical_nodes_links_and_attributes():
    g = topology.hierarchical(
        2, 4, intra="900GB/s", inter="50GB/s", intra_latency="1us", inter_latency="5us"
    )
    assert rank_nodes(g) == list(range(8))
    assert switch_nodes(g) == ["fabric", "node0", "node1"]
    assert g.graph["gpus_per_node"] == 4
    for gpu in range(8):
        node = f"node{gpu // 4}"
        assert g.nodes[gpu]["node"] == gpu // 4
        for u, v in ((gpu, node), (node, gpu)):
            assert g.edges[u, v] == {"bandwidth": 900e9, "latency": 1e-6}
        for u, v in ((gpu, "fabric"), ("fabric", gpu)):
            assert g.edges[u, v] == {"bandwidth": 50e9, "latency": 5e-6}
    assert g.number_of_edges() == 8 * 4  # each GPU: up/down to its node switch and its NIC


@pytest.mark.parametrize(
    "make",
    [
        lambda: topology.ring(6),
        lambda: topology.bidirectional_ring(6),
        lambda: topology.fully_connected(6),
        lambda: topology.switch(6),
        lambda: topology.torus2d(2, 3),
        lambda: topology.hierarchical(3, 2),
    ],
)
def test_every_preset_routes_every_pair_over_existing_links(make):
    g = make()
    assert set(topology.PRESETS) >= {"ring", "switch", "torus2d", "hierarchical"}
    ranks = topology.ranks_of(g)
    assert ranks == list(range(6))
    for src in ranks:
        for dst in ranks:
            links = topology.route(g, src, dst)
            if src == dst:
                assert links == []
                continue
            assert links[0][0] == src and links[-1][1] == dst
            assert all(g.has_edge(*link) for link in links)
            assert all(a[1] == b[0] for a, b in zip(links, links[1:]))


# --------------------------------------------------------------------------- routing


def line_graph(edges):
    """A user graph from (u, v, latency) triples, all at 1 GB/s, links both ways."""
    g = nx.Graph()
    for u, v, latency in edges:
        g.add_edge(u, v, bandwidth="1GB/s", latency=latency)
    return topology.from_graph(g)


def test_shortest_route_minimises_latency_before_hops():
    # direct 0-2 costs 3 us; via 1 costs 2 us in two hops: latency wins
    g = line_graph([(0, 1, "1us"), (1, 2, "1us"), (0, 2, "3us")])
    assert topology.route(g, 0, 2) == [(0, 1), (1, 2)]
    assert topology.path_alpha_beta(g, 0, 2) == pytest.approx((2e-6, 1e9), rel=1e-12)


def test_equal_latency_prefers_fewer_hops():
    g = line_graph([(0, 1, "1us"), (1, 2, "1us"), (0, 2, "2us")])
    assert topology.route(g, 0, 2) == [(0, 2)]


def test_free_links_still_prefer_the_direct_route():
    g = line_graph([(0, 1, 0), (1, 2, 0), (2, 3, 0), (0, 3, 0)])
    assert topology.route(g, 0, 3) == [(0, 3)]
    assert topology.route(g, 1, 3) in ([(1, 2), (2, 3)], [(1, 0), (0, 3)])
    assert topology.path_alpha_beta(g, 0, 3) == (0.0, 1e9)


def test_routes_are_deterministic():
    g1, g2 = topology.torus2d(4, 4), topology.torus2d(4, 4)
    for src in range(16):
        for dst in range(16):
            assert topology.route(g1, src, dst) == topology.route(g2, src, dst)


def test_torus_routes_x_then_y():
    g = topology.torus2d(4, 4)
    # (0,0) -> (2,2): along row 0 to column 2, then down column 2
    links = topology.route(g, 0, 10)
    assert [v for _, v in links] == [1, 2, 6, 10] or [v for _, v in links] == [3, 2, 6, 10]
    assert topology.route(g, 0, 15) == [(0, 3), (3, 15)]  # both wraparounds, X first
    assert topology.route(g, 15, 0) == [(15, 12), (12, 0)]


@given(
    st.integers(2, 5),
    st.integers(2, 5),
    st.data(),
)
def test_torus_dimension_order_property(rows, cols, data):
    g = topology.torus2d(rows, cols)
    src = data.draw(st.integers(0, rows * cols - 1))
    dst = data.draw(st.integers(0, rows * cols - 1))
    links = topology.route(g, src, dst)
    (r0, c0), (r1, c1) = divmod(src, cols), divmod(dst, cols)
    ring = lambda a, b, n: min((a - b) % n, (b - a) % n)  # noqa: E731
    assert len(links) == ring(c0, c1, cols) + ring(r0, r1, rows)  # shortest on each ring
    nodes = [src] + [v for _, v in links]
    x_moves = ring(c0, c1, cols)
    assert all(n // cols == r0 for n in nodes[: x_moves + 1])  # X (in the row) first
    assert all(n % cols == c1 for n in nodes[x_moves:])  # then Y (in the column)


def test_hierarchical_routes_intra_via_node_switch_and_inter_via_fabric():
    g = topology.hierarchical(2, 4)
    assert topology.route(g, 0, 3) == [(0, "node0"), ("node0", 3)]
    assert topology.route(g, 5, 6) == [(5, "node1"), ("node1", 6)]
    assert topology.route(g, 1, 6) == [(1, "fabric"), ("fabric", 6)]
    assert topology.path_alpha_beta(g, 0, 3) == pytest.approx((2e-6, 900e9), rel=1e-12)
    assert topology.path_alpha_beta(g, 0, 4) == pytest.approx((10e-6, 50e9), rel=1e-12)


def test_route_to_self_is_empty():
    g = topology.ring(3)
    assert topology.route(g, 1, 1) == []
    assert topology.path_alpha_beta(g, 1, 1) == (0.0, float("inf"))


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("bad", [5, -1, "0", None])
def test_unknown_rank_raises(bad):
    with pytest.raises(ConfigError, match="not in topology") as info:
        topology.route(topology.ring(4), 0, bad)
    assert "0..3" in str(info.value)


def test_a_switch_is_not_a_rank():
    with pytest.raises(ConfigError, match="'switch'"):
        topology.route(topology.switch(2), 0, "switch")


def test_disconnected_pair_raises():
    g = nx.Graph()
    g.add_edge(0, 1, bandwidth=1e9, latency=0)
    g.add_edge(2, 3, bandwidth=1e9, latency=0)
    topo = topology.from_graph(g)
    assert topology.route(topo, 0, 1) == [(0, 1)]
    with pytest.raises(ConfigError, match="no path from rank 1 to rank 2"):
        topology.route(topo, 1, 2)


def test_one_way_link_has_no_way_back():
    g = nx.DiGraph()
    g.add_edge(0, 1, bandwidth=1e9, latency=0)
    with pytest.raises(ConfigError, match="no path from rank 1 to rank 0"):
        topology.route(topology.from_graph(g), 1, 0)


@pytest.mark.parametrize("bad", [0, -1e9, "0GB/s", "-5GB/s"])
def test_non_positive_bandwidth_raises(bad):
    g = nx.Graph()
    g.add_edge(0, 1, bandwidth=bad, latency=0)
    with pytest.raises(ConfigError, match="bandwidth") as info:
        topology.from_graph(g)
    assert "0->1" in str(info.value) or "1->0" in str(info.value)
    with pytest.raises(ConfigError, match="bandwidth"):
        topology.ring(4, bandwidth=bad)
    with pytest.raises(ConfigError, match="bandwidth"):
        topology.hierarchical(2, 2, inter=bad)


def test_from_graph_checks_rank_numbering_and_attributes():
    g = nx.Graph()
    g.add_edge(0, 2, bandwidth=1e9, latency=0)  # rank 1 is missing
    with pytest.raises(ConfigError, match="0..K-1"):
        topology.from_graph(g)
    g = nx.Graph()
    g.add_edge(0, 1, bandwidth=1e9)
    with pytest.raises(ConfigError, match="latency"):
        topology.from_graph(g)


def test_from_graph_parses_strings_and_copies():
    g = nx.Graph()
    g.add_edge(0, "sw", bandwidth="100GB/s", latency="1us")
    g.add_edge(1, "sw", bandwidth="100GB/s", latency="1us")
    topo = topology.from_graph(g)
    assert topo.nodes["sw"]["kind"] == "switch" and topo.nodes[0]["kind"] == "rank"
    assert topo.edges["sw", 1] == {"bandwidth": 100e9, "latency": 1e-6}
    assert g.edges[0, "sw"]["bandwidth"] == "100GB/s"  # the user's graph is untouched
    assert topology.route(topo, 0, 1) == [(0, "sw"), ("sw", 1)]


@pytest.mark.parametrize("k", [0, -2, 2.5])
def test_bad_rank_counts_raise(k):
    with pytest.raises(CollsimError, match="ranks"):
        topology.ring(k)


# --------------------------------------------------------------------------- argument checks
# (issue 11, item 11): every preset names the bad value in a ConfigError, before building


SIZED = {
    "ring": topology.ring,
    "bidirectional_ring": topology.bidirectional_ring,
    "fully_connected": topology.fully_connected,
    "switch": topology.switch,
}


@pytest.mark.parametrize("name", list(SIZED))
@pytest.mark.parametrize("k", ["abc", None, float("nan"), 4.0, True, -1, 0, 2**62, [4], "4"])
def test_every_preset_refuses_a_bad_rank_count_naming_it(name, k):
    with pytest.raises(ConfigError) as info:
        SIZED[name](k)
    assert repr(k) in str(info.value) and "ranks" in str(info.value)


@pytest.mark.parametrize(
    "rows, cols, bad",
    [(2.5, 2, "2.5"), (-1, -3, "-1"), (2, 0, "0"), (2**10, 2**10, "1048576"), ("2", 2, "'2'")],
)
def test_torus2d_refuses_bad_sides(rows, cols, bad):
    with pytest.raises(ConfigError, match=re.escape(bad)):
        topology.torus2d(rows, cols)


@pytest.mark.parametrize(
    "nodes, gpus, bad", [(-1, -1, "-1"), (2, 0.5, "0.5"), (None, 4, "None"), (2**17, 2, "262144")]
)
def test_hierarchical_refuses_bad_sizes(nodes, gpus, bad):
    with pytest.raises(ConfigError, match=re.escape(bad)):
        topology.hierarchical(nodes, gpus)


def test_fully_connected_refuses_more_links_than_it_builds():
    with pytest.raises(ConfigError, match=r"24,995,000 directed links.*switch\(5000\)"):
        topology.fully_connected(5000)


@pytest.mark.parametrize(
    "bandwidth, latency, bad",
    [
        ("-1GB/s", "5us", "'-1GB/s'"),
        (float("nan"), "5us", "nan"),
        ("0.5B/s", "5us", "below the 1 B/s"),
        ("1e400GB/s", "5us", "too large"),
        ("abc", "5us", "'abc'"),
        ("100GB/s", "1e300s", "above the 86400 s"),
        ("100GB/s", 1e300, "above the 86400 s"),
        ("100GB/s", "-1us", "'-1us'"),
        ("100GB/s", float("nan"), "nan"),
        ("100GB/s", "5 parsecs", "'5 parsecs'"),
    ],
)
def test_bad_link_values_are_refused_with_their_bounds(bandwidth, latency, bad):
    for build in (
        lambda: topology.ring(4, bandwidth, latency),
        lambda: topology.torus2d(2, 2, bandwidth, latency),
        lambda: topology.hierarchical(2, 2, bandwidth, bandwidth, latency, latency),
    ):
        with pytest.raises(ConfigError, match=re.escape(bad)):
            build()


def test_the_largest_latency_still_routes():
    g = topology.ring(3, latency=topology.MAX_LATENCY)
    assert topology.path_alpha_beta(g, 0, 2) == (2 * topology.MAX_LATENCY, BW)


@pytest.mark.parametrize("src", [True, 1.0, "1", None, [1]])
def test_route_names_a_rank_that_is_not_an_int(src):
    with pytest.raises(ConfigError, match=re.escape(repr(src))):
        topology.route(topology.ring(3), src, 0)


@pytest.mark.parametrize(
    "graph, routing, shown",
    [
        (None, "shortest", "from_graph(None)"),
        (nx.path_graph(2), "fastest", "'fastest'"),
        (nx.path_graph(2), "dimension_order", "shape=(rows, cols)"),
        (nx.path_graph(2), "hierarchical", "'node' attribute"),
    ],
)
def test_from_graph_refuses_what_it_cannot_route(graph, routing, shown):
    if graph is not None:
        nx.set_edge_attributes(graph, 1e9, "bandwidth")
        nx.set_edge_attributes(graph, 0, "latency")
    with pytest.raises(ConfigError, match=re.escape(shown)):
        topology.from_graph(graph, routing)
