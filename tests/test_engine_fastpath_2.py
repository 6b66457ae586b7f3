"""The per-transfer path at thousands of ranks: what makes it cheap, and that it gives
the routes, rates and traces the general code gives.

* ``Network.route`` takes a ring neighbour's direct link by topology.route's own rule,
  with each node's fastest links found once per network: the same path on every kind of
  topology and on random graphs whose direct links sometimes lose to a detour.
"""

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_routing_shortcut import EDGES, ring_with_extra_links, slow_direct_link_graph

from collsim import topology
from collsim.network.engine import Engine
from collsim.network.flows import Network

TOPOLOGIES = {
    "ring": lambda: topology.ring(5),
    "bidirectional_ring": lambda: topology.bidirectional_ring(6, latency="1us"),
    "fully_connected": lambda: topology.fully_connected(4),
    "switch": lambda: topology.switch(4),
    "torus2d": lambda: topology.torus2d(2, 3),
    "hierarchical": lambda: topology.hierarchical(2, 2),
}


def _topology_routes(g):
    """``(src, dst) -> (links, α, β)`` as topology.route and the graph give them."""
    ranks = topology.ranks_of(g)
    found = {}
    for src in ranks:
        for dst in ranks:
            links = tuple(topology.route(g, src, dst))
            alpha = sum(g.edges[link]["latency"] for link in links)
            beta = min((g.edges[link]["bandwidth"] for link in links), default=float("inf"))
            found[(src, dst)] = (links, alpha, beta)
    return found


@pytest.mark.parametrize("name", sorted(TOPOLOGIES))
def test_network_routes_are_the_topologys_on_every_kind_of_topology(name):
    g = TOPOLOGIES[name]()
    net = Network(Engine(), g)
    expected = _topology_routes(g)
    found = {pair: net.route(*pair) for pair in expected}
    assert {pair: (r.links, r.alpha, r.beta) for pair, r in found.items()} == expected


@given(k=st.integers(2, 6), edges=EDGES, switch=st.booleans())
def test_network_routes_are_the_topologys_on_random_graphs(k, edges, switch):
    g = ring_with_extra_links(k, edges, switch)
    net = Network(Engine(), g)
    expected = _topology_routes(g)
    found = {pair: net.route(*pair) for pair in expected}
    assert {pair: (r.links, r.alpha, r.beta) for pair, r in found.items()} == expected


def test_a_slow_direct_link_is_not_taken_by_the_shortcut():
    net = Network(Engine(), slow_direct_link_graph())
    assert net._direct(0, 1) is None
    assert net.route(0, 1).links == ((0, 2), (2, 1))
    assert net._direct(1, 0) == ((1, 0),)


def test_a_ring_neighbours_route_takes_no_walk_of_the_graph(monkeypatch):
    net = Network(Engine(), topology.bidirectional_ring(64))
    net.route(0, 1)  # finds the fastest links once

    def walk(*args):
        raise AssertionError("topology.route called for a ring neighbour")

    monkeypatch.setattr(topology, "route", walk)
    for r in range(64):
        assert net.route(r, (r + 1) % 64).links == ((r, (r + 1) % 64),)
        assert net.route(r, (r - 1) % 64).links == ((r, (r - 1) % 64),)


def _by_sender(routes):
    table = {}
    for (src, dst), found in routes.items():
        table.setdefault(src, {})[dst] = found
    return table


def test_a_route_carries_the_active_table_of_each_of_its_links():
    net = Network(Engine(), topology.ring(4))
    route = net.route(0, 2)
    links, shares = route.links, route.shares
    assert links == ((0, 1), (1, 2))
    assert len(shares) == 2 and all(s is net.active[link] for s, link in zip(shares, links))
    assert net.routes_from == {0: {2: net.routes[(0, 2)]}}


def test_routes_by_sender_follow_the_routes_through_faults():
    engine = Engine()
    net = Network(engine, topology.bidirectional_ring(6, bandwidth=1e9, latency=0))
    done = []
    for r in range(6):
        net.transfer(r, (r + 1) % 6, 2e9, done.append, r)
    engine.at(1.0, 1, lambda _: net.fail_link(2, 3))
    engine.run()
    assert sorted(done) == list(range(6)) and len(net.reroutes) == 1
    assert net.routes_from == _by_sender(net.routes)
    assert not any((2, 3) in found[0] for found in net.routes.values())
    assert net.routes[(2, 3)][0] == ((2, 1), (1, 0), (0, 5), (5, 4), (4, 3))
    net.scale_link(0, 1, 0.5)
    assert net.routes == {} and net.routes_from == {}


def test_a_rerouted_flow_joins_and_leaves_the_tables_of_its_new_links():
    engine = Engine()
    net = Network(engine, topology.bidirectional_ring(4, bandwidth=1e9, latency=0))
    done = []
    net.transfer(0, 1, 2e9, done.append, "moved")
    seen = {}

    def probe(_):
        seen.update({link: len(flows) for link, flows in net.active.items() if flows})

    engine.at(1.0, 1, lambda _: net.fail_link(0, 1))
    engine.at(1.5, 1, probe)
    engine.run()
    assert done == ["moved"] and engine.now == 2.0
    assert seen == {(0, 3): 1, (3, 2): 1, (2, 1): 1}
    assert not any(net.active.values())
