"""The event engine and the flow-level network: α–β timing, max-min sharing, accounting.

Oracles: the α–β closed form (latency + n / bandwidth) and max-min rates worked out by
hand.  Simulated times are compared with a relative tolerance of 1e-12 (the engine adds
and divides floats; it never drifts further than that on these sizes).
"""

import math

import networkx as nx
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import collsim
from collsim import CountOnly, topology
from collsim.errors import CollsimError
from collsim.network import FINISH, START, Engine, Network, SimulationLimitError
from collsim.network import flows as flows_module

REL = 1e-12

bandwidths = st.floats(min_value=1e3, max_value=1e12, allow_nan=False)
latencies = st.one_of(st.just(0.0), st.floats(min_value=1e-9, max_value=1e-3))
sizes = st.integers(min_value=1, max_value=10**10)


def approx(x):
    return pytest.approx(x, rel=REL, abs=1e-300)


def simulate(graph, transfers, model="maxmin", probes=()):
    """Run ``(name, src, dst, nbytes[, issue_time])`` transfers on a bare network.

    Returns ``(finish time by name, engine, network, probe results)``; each probe time
    records ``{name: rate}`` of the flows moving bytes at that instant."""
    engine = Engine(max_time=math.inf)  # slow links on big messages: keep the time guard out
    net = Network(engine, graph, model)
    done, seen = {}, {}

    def finished(name):
        done[name] = engine.now

    for name, src, dst, nbytes, *when in transfers:
        if when:
            args = (src, dst, nbytes, finished, name)
            engine.at(when[0], START, lambda a: net.transfer(*a), args)
        else:
            net.transfer(src, dst, nbytes, finished, name)
    for t in probes:
        engine.at(t, START, lambda t: seen.__setitem__(t, rates(net)), t)
    engine.run()
    return done, engine, net, seen


def rates(net):
    return {flow.arg: flow.rate for flows in net.active.values() for flow in flows}


def line(capacities, latency=0.0):
    """Ranks 0..n on a line, one directed link i -> i+1 of each capacity."""
    g = nx.DiGraph()
    for i, bw in enumerate(capacities):
        g.add_edge(i, i + 1, bandwidth=bw, latency=latency)
    return topology.from_graph(g)


# --------------------------------------------------------------------------- the engine


def test_engine_orders_by_time_then_priority_then_insertion():
    engine, order = Engine(), []
    engine.at(2.0, FINISH, order.append, "late")
    engine.at(1.0, START, order.append, "start-1")
    engine.at(1.0, START, order.append, "start-2")
    engine.at(1.0, FINISH, order.append, "finish")  # pushed last, runs first at t=1
    engine.run()
    assert order == ["finish", "start-1", "start-2", "late"]
    assert engine.now == 2.0 and engine.events == 4


def test_engine_refuses_the_past_and_nan():
    engine = Engine()
    engine.at(1.0, START, lambda _: engine.at(0.5, START, print))
    with pytest.raises(CollsimError, match="before now"):
        engine.run()
    with pytest.raises(CollsimError):
        Engine().at(math.nan, START, print)


def test_engine_guards():
    engine = Engine(max_time=10.0)

    def tick(_):
        engine.at(engine.now + 1.0, START, tick)

    engine.at(0.0, START, tick)
    with pytest.raises(SimulationLimitError, match="max_time"):
        engine.run()
    engine = Engine(max_events=100)
    engine.at(0.0, START, tick)
    with pytest.raises(SimulationLimitError, match="max_events"):
        engine.run()
    assert engine.events == 101


# --------------------------------------------------------------------------- one flow


@given(bandwidths, latencies, st.integers(min_value=0, max_value=10**12))
def test_one_transfer_takes_latency_plus_size_over_bandwidth(bw, lat, n):
    cluster = collsim.Cluster(topology.ring(2, bandwidth=bw, latency=lat), max_time=math.inf)

    def program(rank):
        if rank.id == 0:
            yield rank.send(1, CountOnly(n))
        else:
            yield rank.recv(0)

    result = cluster.run(program)
    expected = lat + (n / bw if n else 0.0)
    assert result.time == approx(expected)
    (t,) = result.trace.transfers
    assert (t.src, t.dst, t.nbytes, t.links) == (0, 1, n, ((0, 1),))
    assert t.start == 0.0 and t.end == approx(expected)


@given(st.integers(min_value=1, max_value=4), sizes, bandwidths, latencies)
def test_a_multi_hop_path_pays_every_latency_and_the_narrowest_link(hops, n, bw, lat):
    g = line([bw * (1 + i) for i in range(hops)], latency=lat)  # link 0 is narrowest
    done, *_ = simulate(g, [("x", 0, hops, n)])
    assert done["x"] == approx(hops * lat + n / bw)


def test_free_links_cost_nothing():
    g = nx.DiGraph()
    g.add_edge(0, "sw", bandwidth="inf", latency=0)
    g.add_edge("sw", 1, bandwidth="inf", latency=0)
    g.add_edge("sw", 2, bandwidth="1GB/s", latency="1us")
    g = topology.from_graph(g)
    done, *_ = simulate(g, [("free", 0, 1, 10**9), ("paid", 0, 2, 10**9)])
    # the two flows share the free up link; it limits neither
    assert done == {"free": 0.0, "paid": approx(1e-6 + 1.0)}


def test_zero_bytes_pay_only_latency():
    done, *_ = simulate(topology.ring(3, "1GB/s", "2us"), [("empty", 0, 2, 0)])
    assert done["empty"] == approx(4e-6)


# --------------------------------------------------------------------------- sharing


@given(sizes, sizes, bandwidths, latencies)
def test_two_flows_on_one_link_each_get_half(a, b, bw, lat):
    g = topology.ring(2, bandwidth=bw, latency=lat)
    first_end = lat + 2 * min(a, b) / bw  # both at β/2 until the smaller one is done
    probe = lat + (first_end - lat) / 2  # halfway through the shared phase
    done, _, _, seen = simulate(g, [("a", 0, 1, a), ("b", 0, 1, b)], probes=[probe])
    assert seen[probe] == {"a": bw / 2, "b": bw / 2}
    # then the larger one has the link to itself: α + 2a/β + (b - a)/β = α + (a + b)/β
    assert min(done.values()) == approx(first_end)
    assert max(done.values()) == approx(lat + (a + b) / bw)


def test_two_flows_sharing_a_switch_down_link():
    g = topology.switch(3, bandwidth="1GB/s", latency="1us")
    done, *_ = simulate(g, [("a", 0, 2, 10**9), ("b", 1, 2, 3 * 10**9)])
    assert done["a"] == approx(2e-6 + 2.0)  # half of 1 GB/s for 1 GB
    assert done["b"] == approx(2e-6 + 4.0)  # (1 + 3) GB at 1 GB/s in total


@given(st.lists(sizes, min_size=4, max_size=4), bandwidths, latencies)
def test_flows_on_disjoint_links_do_not_interfere(ns, bw, lat):
    g = topology.bidirectional_ring(4, bandwidth=bw, latency=lat)
    pairs = [(0, 1), (1, 0), (2, 3), (3, 2)]  # each direction of a link is its own capacity
    transfers = [(i, s, d, n) for i, ((s, d), n) in enumerate(zip(pairs, ns))]
    done, *_ = simulate(g, transfers)
    assert done == {i: approx(lat + n / bw) for i, n in enumerate(ns)}


def test_a_reshare_touches_only_flows_that_share_links():
    g = topology.bidirectional_ring(6, bandwidth=1.0, latency=0)
    transfers = [("lone", 3, 4, 100), ("x", 0, 1, 10), ("y", 0, 1, 20), ("z", 0, 1, 30)]
    _, _, net, seen = simulate(g, transfers, probes=[1.0])
    assert seen[1.0] == {"lone": 1.0, "x": 1 / 3, "y": 1 / 3, "z": 1 / 3}
    # the three on link (0, 1) were reshared at every start and end; "lone" never was
    lone = next(f for f in _scheduled_flows(g, transfers) if f.arg == "lone")
    assert lone.version == 1


def _scheduled_flows(g, transfers):
    """The Flow objects of a run, kept by wrapping the network's start of each flow."""
    engine = Engine()
    net = Network(engine, g)
    kept = []
    begin = net._begin_event
    net._begin_event = lambda flow: (kept.append(flow), begin(flow))
    for name, src, dst, nbytes in transfers:
        net.transfer(src, dst, nbytes, lambda _: None, name)
    engine.run()
    return kept


def test_parking_lot_max_min_rates():
    # link A = 0->1 at 1 B/s, link B = 1->2 at 3 B/s; "long" crosses both
    g = line([1.0, 3.0])
    transfers = [("long", 0, 2, 3), ("s1", 0, 1, 1), ("s2", 1, 2, 12)]
    done, _, _, seen = simulate(g, transfers, probes=[1.0, 3.0, 4.5])
    # A is the bottleneck: long and s1 get 1/2 each; s2 takes what is left of B, 3 - 1/2
    assert seen[1.0] == {"long": 0.5, "s1": 0.5, "s2": 2.5}
    # s1 has sent its byte at t=2; long now gets all of A (1), s2 the rest of B (2)
    assert seen[3.0] == {"long": 1.0, "s2": 2.0}
    # long is done at t=4 (1 byte by t=2, then 2 at 1 B/s); s2 has sent 5 + 4 = 9 bytes
    assert seen[4.5] == {"s2": 3.0}
    assert done == {"s1": approx(2.0), "long": approx(4.0), "s2": approx(5.0)}


def test_three_flows_on_a_switch_split_the_shared_down_link():
    g = topology.switch(4, bandwidth=6.0, latency=0)
    transfers = [("a", 0, 3, 6), ("b", 1, 3, 6), ("c", 2, 3, 6)]
    done, _, _, seen = simulate(g, transfers, probes=[1.0])
    assert seen[1.0] == {"a": 2.0, "b": 2.0, "c": 2.0}
    assert done == {"a": approx(3.0), "b": approx(3.0), "c": approx(3.0)}


# --------------------------------------------------------------------------- ideal model


@given(st.lists(sizes, min_size=4, max_size=4), bandwidths, latencies)
def test_ideal_and_maxmin_agree_when_no_link_is_shared(ns, bw, lat):
    g = topology.bidirectional_ring(8, bandwidth=bw, latency=lat)
    transfers = [(0, 0, 1, ns[0]), (1, 1, 0, ns[1]), (2, 2, 4, ns[2]), (3, 7, 5, ns[3])]
    maxmin, *_ = simulate(g, transfers, "maxmin")
    ideal, *_ = simulate(g, transfers, "ideal")
    assert maxmin.keys() == ideal.keys()
    for name in maxmin:
        assert maxmin[name] == approx(ideal[name])


def test_ideal_and_maxmin_differ_when_a_link_is_shared():
    g = topology.switch(3, bandwidth=1.0, latency=0)
    transfers = [("a", 0, 2, 10), ("b", 1, 2, 10)]
    maxmin, *_ = simulate(g, transfers, "maxmin")
    ideal, *_ = simulate(g, transfers, "ideal")
    assert ideal == {"a": 10.0, "b": 10.0}  # each as if alone
    assert maxmin == {"a": 20.0, "b": 20.0}  # the down link to 2 carries both


@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 3), sizes, st.floats(0, 1e-3)),
        min_size=1,
        max_size=8,
    )
)
def test_congestion_never_makes_a_message_faster(specs):
    g = topology.switch(4, bandwidth="10GB/s", latency="1us")
    transfers = [(i, s, d, n, t) for i, (s, d, n, t) in enumerate(specs)]
    maxmin, *_ = simulate(g, transfers, "maxmin")
    ideal, *_ = simulate(g, transfers, "ideal")
    for name, end in ideal.items():
        assert maxmin[name] >= end * (1 - REL)


def test_unknown_model_is_a_config_error():
    with pytest.raises(collsim.ConfigError, match="maxmin"):
        Network(Engine(), topology.ring(2), "fancy")
    with pytest.raises(collsim.ConfigError, match="maxmin"):
        collsim.Cluster(topology.ring(2), model="fancy")


# --------------------------------------------------------------------------- same instant


def same_instant_case():
    """Flow A ends on link 0->2 at t=1, exactly when flow B (which paid 1 s of latency on
    a free link first) starts on it.  B's START was pushed before A's FINISH."""
    g = nx.DiGraph()
    g.add_edge(1, 0, bandwidth=math.inf, latency=1.0)
    g.add_edge(0, 2, bandwidth=1.0, latency=0.0)
    g = topology.from_graph(g)
    return g, [("A", 0, 2, 1), ("B", 1, 2, 1)]


def test_flows_that_finish_are_settled_before_flows_that_start():
    g, transfers = same_instant_case()
    done, engine, _, seen = simulate(g, transfers, probes=[1.5])
    assert done == {"A": 1.0, "B": 2.0}
    assert seen[1.5] == {"B": 1.0}
    # A was gone before B was shared: one START and one FINISH each, B never reshared
    assert engine.events == 4 + 1  # + the probe
    assert [f.version for f in _scheduled_flows(g, transfers)] == [1, 1]


def test_the_same_instant_rule_is_what_keeps_b_from_sharing_with_a(monkeypatch):
    # with the priorities swapped, B starts first and is shared with the finished A
    monkeypatch.setattr(flows_module, "START", FINISH)
    monkeypatch.setattr(flows_module, "FINISH", START)
    g, transfers = same_instant_case()
    done, engine, *_ = simulate(g, transfers)
    assert done == {"A": 1.0, "B": 2.0}  # the end times agree on this exact case ...
    assert engine.events > 4  # ... but only after stale events and a second reshare
    assert [f.version for f in _scheduled_flows(g, transfers)] == [2, 2]


# --------------------------------------------------------------------------- accounting


messages = st.lists(
    st.tuples(st.integers(0, 5), st.integers(0, 5), st.integers(0, 64)), min_size=1, max_size=12
)


@given(messages, st.sampled_from(["torus", "switch", "ring", "hierarchical"]))
def test_bytes_are_conserved(specs, name):
    g = {
        "torus": lambda: topology.torus2d(2, 3),
        "switch": lambda: topology.switch(6),
        "ring": lambda: topology.ring(6),
        "hierarchical": lambda: topology.hierarchical(3, 2),
    }[name]()
    cluster = collsim.Cluster(g)
    arrays = [np.arange(n, dtype=np.float32) + i for i, (_, _, n) in enumerate(specs)]

    def program(rank):
        sends = [
            rank.isend(d, arrays[i], tag=i) for i, (s, d, _) in enumerate(specs) if s == rank.id
        ]
        recvs = [rank.irecv(s, tag=i) for i, (s, d, _) in enumerate(specs) if d == rank.id]
        handles = []
        for op in sends + recvs:
            handles.append((yield op))
        if handles:
            yield rank.wait(*handles)
        return [h.value for h in handles[len(sends) :]]

    result = cluster.run(program)
    stats = result.stats
    nbytes = [a.nbytes for a in arrays]
    assert sum(stats.bytes_sent) == sum(stats.bytes_received) == sum(nbytes)
    for r in range(6):
        assert stats.bytes_sent[r] == sum(n for (s, _, _), n in zip(specs, nbytes) if s == r)
        assert stats.bytes_received[r] == sum(n for (_, d, _), n in zip(specs, nbytes) if d == r)
        assert stats.messages_sent[r] == sum(1 for s, _, _ in specs if s == r)
    carried = {}
    for (s, d, _), n in zip(specs, nbytes):
        for link in topology.route(g, s, d):
            carried[link] = carried.get(link, 0) + n
    assert {k: v for k, v in stats.link_bytes.items() if v} == {
        k: v for k, v in carried.items() if v
    }
    hops = sum(n * len(topology.route(g, s, d)) for (s, d, _), n in zip(specs, nbytes))
    assert sum(stats.link_bytes.values()) == hops
    # and every array arrived intact
    for r, got in enumerate(result.returns):
        expected = [arrays[i] for i, (_, d, _) in enumerate(specs) if d == r]
        assert len(got) == len(expected)
        for a, b in zip(got, expected):
            np.testing.assert_array_equal(a, b)
