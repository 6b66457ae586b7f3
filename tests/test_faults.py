"""Faults and stragglers (issue 15, item 5): the records, the closed form of a degraded
ring, rerouting around a failed link, and the watchdog's report of a stalled run."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import collsim
from collsim import hardware, topology
from collsim.collectives.degraded import bottleneck_link, degraded_ring_all_reduce_time
from collsim.errors import ConfigError, DeadlockError, WatchdogTimeout
from collsim.runtime.faults import CrashRank, FailLink, Faults, SlowLink, SlowRank

ALPHA, BETA = 5e-6, 100e9


def _buffers(k, n=96):
    return [np.arange(n, dtype=np.float64) * (r + 1) + r for r in range(k)]


# -- the records and their refusals ------------------------------------------------------


def test_parse_reads_every_flag_as_the_issue_writes_it():
    f = Faults.parse(
        slow_rank=["3:2x"],
        slow_link=["2-3:0.25"],
        fail_link=["2-3@1ms"],
        crash_rank=["5@2ms"],
        watchdog="10s",
    )
    assert f.slow_ranks == (SlowRank(3, 2.0),)
    assert f.slow_links == (SlowLink(2, 3, 0.25),)
    assert f.fail_links == (FailLink(2, 3, 0.001),)
    assert f.crash_ranks == (CrashRank(5, 0.002),)
    assert f.watchdog_timeout == 10.0
    assert Faults.parse(slow_link=["nvswitch0-3:0.5"]).slow_links[0].u == "nvswitch0"


@pytest.mark.parametrize(
    "flag, value",
    [
        ("slow_rank", "3"),
        ("slow_rank", "3:"),
        ("slow_rank", "x:2"),
        ("slow_rank", "-1:2"),
        ("slow_rank", "3:0"),
        ("slow_rank", "3:nan"),
        ("slow_rank", "3:inf"),
        ("slow_rank", "3:1e300"),
        ("slow_rank", "3:-2x"),
        ("slow_link", "2-3"),
        ("slow_link", "2:0.5"),
        ("slow_link", "2-2:0.5"),
        ("slow_link", "2-3-4:0.5"),
        ("slow_link", "2-$:0.5"),
        ("slow_link", "2-3:abc"),
        ("fail_link", "2-3"),
        ("fail_link", "2-3@-1ms"),
        ("fail_link", "2-3@1parsec"),
        ("fail_link", "2-3@2days"),
        ("fail_link", "2-3@1e300s"),
        ("crash_rank", "5"),
        ("crash_rank", "5@"),
        ("crash_rank", "five@1ms"),
        ("crash_rank", "5@nan"),
    ],
)
def test_a_bad_value_is_refused_naming_it(flag, value):
    with pytest.raises(ConfigError) as err:
        Faults.parse(**{flag: [value]})
    assert value in str(err.value)
    assert "--" + flag.replace("_", "-") in str(err.value)


@pytest.mark.parametrize("value", ["0", "-1s", "abc", "2days", "nan"])
def test_a_bad_watchdog_timeout_is_refused_naming_it(value):
    with pytest.raises(ConfigError, match="--watchdog-timeout") as err:
        Faults.parse(crash_rank=["1@1ms"], watchdog=value)
    assert value in str(err.value)


def test_the_same_rank_or_link_twice_is_refused():
    with pytest.raises(ConfigError, match="give each rank once"):
        Faults.parse(slow_rank=["3:2", "3:4"])
    with pytest.raises(ConfigError, match="give each link once"):
        Faults.parse(fail_link=["2-3@1ms", "3-2@2ms"])


def test_a_link_the_topology_lacks_is_refused_with_the_links_it_has():
    with pytest.raises(ConfigError) as err:
        collsim.Cluster(topology.ring(8), faults=Faults.parse(slow_link=["2-5:0.25"]))
    text = str(err.value)
    assert "'2-5:0.25'" in text and "no link between 2 and 5" in text
    assert "the links at 2 are 2-1, 2-3" in text
    with pytest.raises(ConfigError, match=r"node 'nvswitch9' is not in topology.*switch"):
        collsim.Cluster(topology.switch(4), faults=Faults.parse(fail_link=["nvswitch9-1@1ms"]))
    with pytest.raises(ConfigError, match=r"rank 9 is not in topology ring\(8\)"):
        collsim.Cluster(topology.ring(8), faults=Faults.parse(crash_rank=["9@1ms"]))
    with pytest.raises(ConfigError, match="past the simulation's time guard"):
        collsim.Cluster(topology.ring(4), max_time=1.0, faults=Faults.parse(crash_rank=["1@2s"]))
    # a switch name is a node like any other
    collsim.Cluster(topology.switch(4), faults=Faults.parse(slow_link=["switch-3:0.5"]))


def test_faults_built_in_code_meet_the_same_rules():
    with pytest.raises(ConfigError, match="factor"):
        Faults(slow_links=(SlowLink(0, 1, 0.0),))
    with pytest.raises(ConfigError, match="not a SlowRank"):
        Faults(slow_ranks=((3, 2.0),))
    with pytest.raises(ConfigError, match="give a collsim.runtime.faults.Faults"):
        collsim.Cluster(topology.ring(4), faults={"slow_rank": "3:2x"})


# -- a degraded ring: the closed form ----------------------------------------------------


@pytest.mark.parametrize("name", ["ring", "bidirectional_ring"])
@pytest.mark.parametrize("k", [3, 4, 8])
@pytest.mark.parametrize("where", ["first", "middle", "wrap"])
@pytest.mark.parametrize("factor", [0.25, 0.5])
@pytest.mark.parametrize("model", ["maxmin", "ideal"])
def test_one_slow_link_sets_the_ring_all_reduce_time(name, k, where, factor, model):
    u = {"first": 0, "middle": k // 2, "wrap": k - 1}[where]
    v = (u + 1) % k
    graph = topology.PRESETS[name](k, "100GB/s", "5us")
    cluster = collsim.Cluster(
        graph, model=model, faults=Faults.parse(slow_link=[f"{u}-{v}:{factor}"])
    )
    size = 4 * k * 4096  # whole float32 chunks
    result = cluster.all_reduce(count=size // 4, dtype="float32")
    closed = degraded_ring_all_reduce_time(k, size, ALPHA, BETA, factor)
    assert result.time == pytest.approx(closed, rel=1e-12)
    # and without the fault it is the plain ring: the slow link costs exactly its share
    healthy = collsim.Cluster(graph, model=model).all_reduce(count=size // 4, dtype="float32")
    assert healthy.time == pytest.approx(degraded_ring_all_reduce_time(k, size, ALPHA, BETA))
    assert bottleneck_link(result.trace).link == (u, v)


# -- a failed link with another path: rerouted, correct ----------------------------------


def _used_links(trace):
    return {link for t in trace.transfers for link in t.links}


def _reroute_case(name):
    """(graph, link to fail) where the ring all-reduce uses the link and another path
    exists."""
    if name == "bidirectional_ring":
        return topology.bidirectional_ring(8, "100GB/s", "5us"), (2, 3)
    if name == "torus2d":
        return topology.torus2d(2, 4, "100GB/s", "5us"), (1, 2)
    if name == "hierarchical":  # its own routing has no detour: the shortest path does
        return topology.hierarchical(2, 4), (1, "node0")
    graph = hardware.topology("dgx-a100", nodes=2)
    return graph, topology.route(graph, 7, 8)[0]  # rank 7's NIC link to its rail


@pytest.mark.parametrize("name", ["bidirectional_ring", "torus2d", "hierarchical", "dgx-a100x2"])
@pytest.mark.parametrize("when", [0.0, 0.3, 0.6])
def test_a_failed_link_with_another_path_reroutes_and_stays_correct(name, when):
    graph, (u, v) = _reroute_case(name)
    k = sum(1 for _, d in graph.nodes(data=True) if d["kind"] == "rank")
    buffers = _buffers(k)
    healthy = collsim.Cluster(graph).all_reduce(buffers)
    at = when * healthy.time
    faults = Faults(fail_links=(FailLink(u, v, at),))
    result = collsim.Cluster(graph, faults=faults).all_reduce(buffers)
    expected = sum(buffers)
    for out in result.outputs:
        np.testing.assert_array_equal(out, expected)
    log = result.trace.faults
    assert not log.stalls
    # flows in flight over the link move to the next path; later ones start on it
    for reroute in log.reroutes:
        assert (u, v) in reroute.old_links or (v, u) in reroute.old_links
        assert not {(u, v), (v, u)} & set(reroute.new_links)
        assert reroute.time >= at
        assert 0 <= reroute.moved and reroute.remaining >= 0
    # the detour's links carry bytes that the healthy run did not put on them
    detour = _used_links(result.trace) - _used_links(healthy.trace)
    assert detour
    assert {link for r in log.reroutes for link in r.new_links} <= _used_links(result.trace)
    assert all(result.stats.link_bytes.get(link, 0) > 0 for link in detour)
    # no transfer that ends after the failure is recorded on the failed link
    late = [t for t in result.trace.transfers if t.start >= at and (u, v) in t.links]
    assert not late
    # a detour is never faster here; on hierarchical it hides behind the NIC hops
    assert result.time >= healthy.time


def test_a_reroute_keeps_its_bytes_moved_and_remaining():
    graph = topology.bidirectional_ring(4, "1GB/s", 0)
    cluster = collsim.Cluster(graph, faults=Faults(fail_links=(FailLink(0, 1, 0.5),)))

    def program(rank):
        if rank.id == 0:
            yield rank.send(1, collsim.CountOnly(10**9))  # 1 s alone on link 0->1
        elif rank.id == 1:
            yield rank.recv(0)

    result = cluster.run(program)
    (reroute,) = result.trace.faults.reroutes
    assert reroute.moved == pytest.approx(0.5e9) and reroute.remaining == pytest.approx(0.5e9)
    assert reroute.new_links == ((0, 3), (3, 2), (2, 1))
    assert result.time == pytest.approx(1.0)  # the detour is free of latency, as fast
    assert result.trace.transfers[0].links == reroute.new_links


# -- no other path, or a crash: the watchdog ---------------------------------------------


def test_a_failed_link_with_no_other_path_ends_in_the_watchdog_report():
    faults = Faults.parse(fail_link=["2-3@20us"], watchdog="1s")
    cluster = collsim.Cluster(topology.ring(8), faults=faults)
    with pytest.raises(WatchdogTimeout) as err:
        cluster.all_reduce(_buffers(8))
    hang = err.value
    assert isinstance(hang, DeadlockError)
    assert hang.culprit.kind == "failed link" and hang.culprit.link == (2, 3)
    assert hang.time == pytest.approx(hang.last_progress + 1.0)
    assert hang.last_progress >= 20e-6
    text = str(hang)
    assert "culprit: link 2-3 went down at t=20 us" in text
    assert "no other path from rank 2 to rank 3" in text
    assert "rank 3: last entered #0 all_reduce, last completed none" in text
    assert set(hang.ranks) == set(range(8))
    assert hang.trace is not None and hang.trace.faults.stalls


def _stall_time(graph, faults):
    with pytest.raises(WatchdogTimeout) as err:
        collsim.Cluster(graph, faults=faults).all_reduce(count=4096, dtype="float32")
    return err.value


@given(
    k=st.integers(3, 8),
    which=st.integers(0, 7),
    when=st.floats(0.0, 0.95),
    timeout=st.sampled_from(["1ms", "1s", "10s", "3600s"]),
)
def test_a_crashed_rank_is_named_at_the_timeout_after_the_stall(k, which, when, timeout):
    rank = which % k
    graph = topology.ring(k, "100GB/s", "5us")
    healthy = collsim.Cluster(graph).all_reduce(count=4096, dtype="float32").time
    faults = Faults(crash_ranks=(CrashRank(rank, when * healthy),), watchdog_timeout=timeout)
    hang = _stall_time(graph, faults)
    seconds = Faults.parse(watchdog=timeout).watchdog_timeout
    assert hang.culprit.kind == "crashed rank" and hang.culprit.rank == rank
    assert hang.time == pytest.approx(hang.last_progress + seconds)
    assert hang.last_progress <= healthy
    assert hang.ranks[rank].crashed_at == pytest.approx(when * healthy)
    assert f"culprit: rank {rank} crashed at" in str(hang)


@given(k=st.integers(3, 8), which=st.integers(0, 7), when=st.floats(0.0, 0.95))
def test_a_failed_ring_link_is_named_for_any_link_and_time(k, which, when):
    u = which % k
    graph = topology.ring(k, "100GB/s", "5us")
    healthy = collsim.Cluster(graph).all_reduce(count=4096, dtype="float32").time
    faults = Faults(fail_links=(FailLink(u, (u + 1) % k, when * healthy),), watchdog_timeout=2.0)
    hang = _stall_time(graph, faults)
    assert hang.culprit.link == (u, (u + 1) % k)
    assert hang.time == pytest.approx(hang.last_progress + 2.0)


def test_a_crash_after_the_run_ended_changes_nothing():
    graph = topology.ring(4)
    healthy = collsim.Cluster(graph).all_reduce(count=1024)
    late = Faults.parse(crash_rank=["2@1s"], fail_link=["0-1@2s"])
    result = collsim.Cluster(graph, faults=late).all_reduce(count=1024)
    assert result.time == healthy.time
    assert result.stats.link_bytes == healthy.stats.link_bytes


def test_a_rank_crashed_at_zero_never_starts():
    cluster = collsim.Cluster(topology.ring(4), faults=Faults.parse(crash_rank=["1@0"]))
    with pytest.raises(WatchdogTimeout) as err:
        cluster.all_reduce(count=1024)
    report = err.value.ranks[1]
    assert report.crashed_at == 0 and report.entered is None
    assert "rank 1: CRASHED at t=0 s; last entered none" in str(err.value)


def test_a_deadlock_without_faults_keeps_its_report():
    def program(rank):
        if rank.id != 2:
            yield from rank.all_reduce(np.ones(4))

    with pytest.raises(DeadlockError) as err:
        collsim.Cluster(topology.ring(3)).run(program)
    assert type(err.value) is DeadlockError
    assert str(err.value).startswith("deadlock at t=")


def test_the_same_faults_give_the_same_trace():
    graph = topology.bidirectional_ring(6, "100GB/s", "5us")
    faults = Faults.parse(slow_link=["4-5:0.5"], fail_link=["1-2@7us"], slow_rank=["3:2"])
    runs = [collsim.Cluster(graph, faults=faults).all_reduce(_buffers(6)) for _ in range(2)]
    assert runs[0].trace.to_chrome() == runs[1].trace.to_chrome()
    assert runs[0].trace.faults == runs[1].trace.faults
    assert math.isfinite(runs[0].time)


def test_a_crash_stops_the_rank_compute_stream_at_once():
    def program(rank):
        yield rank.compute(seconds=1e-3)
        yield rank.compute(seconds=1e-3)

    cluster = collsim.Cluster(topology.ring(2), faults=Faults.parse(crash_rank=["1@0.5ms"]))
    with pytest.raises(WatchdogTimeout) as err:
        cluster.run(program)
    spans = [(c.rank, c.start, c.end) for c in err.value.trace.computes]
    assert spans == [(0, 0.0, 1e-3), (1, 0.0, 0.5e-3), (0, 1e-3, 2e-3)]
    assert err.value.last_progress == 2e-3  # rank 0 went on alone


@pytest.mark.parametrize("model", ["maxmin", "ideal"])
def test_a_reroute_in_the_ideal_model_too(model):
    graph = topology.bidirectional_ring(6, "100GB/s", "5us")
    buffers = _buffers(6, 6000)
    faults = Faults.parse(fail_link=["1-2@12us"])
    result = collsim.Cluster(graph, model=model, faults=faults).all_reduce(buffers)
    np.testing.assert_array_equal(result.outputs[3], sum(buffers))
    assert result.trace.faults.reroutes
    assert result.time > collsim.Cluster(graph, model=model).all_reduce(buffers).time


def test_a_fault_after_plain_function_programs_does_not_move_the_clock():
    cluster = collsim.Cluster(topology.ring(3), faults=Faults.parse(crash_rank=["1@1ms"]))
    result = cluster.run(lambda rank: rank.id * 2)
    assert result.returns == [0, 2, 4] and result.time == 0.0


@given(
    flag=st.sampled_from(["slow_rank", "slow_link", "fail_link", "crash_rank"]),
    text=st.text(alphabet="0123456789-:@.xsmunabr_ ", max_size=12),
)
def test_fuzz_parse_any_text_is_read_or_refused_by_name(flag, text):
    from fuzzkit import check_api

    outcome = check_api(Faults.parse, bad=text, **{flag: [text]})
    if outcome.error is None:  # read: then a ring of 8 checks it against its links
        check_api(collsim.Cluster, topology.ring(8), bad=text.strip(), faults=outcome.value)
