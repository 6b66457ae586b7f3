"""The guards stop a runaway program by themselves, deterministically, with a report that
names the looping ranks, what they yield and the parameter to raise (issue 11, item 7).

The three runaways from the issue run with the *default* guards: they must stop by the
``max_ops`` guard within seconds (``time_limit`` is only a safety net: hitting it fails).
"""

import math

import numpy as np
import pytest
from fuzzkit import time_limit

import collsim
from collsim import topology
from collsim.errors import ConfigError, SimulationLimitError
from collsim.network import Engine
from collsim.runtime.guards import OPS_BASE, SAMPLE_OPS, default_max_ops


def zero_time_loop(rank):
    while True:
        yield rank.compute(seconds=0)


def ping_pong_forever(rank):
    if rank.id == 0:
        while True:
            yield rank.send(1, np.zeros(1))
            yield rank.recv(1)
    elif rank.id == 1:
        while True:
            yield rank.send(0, (yield rank.recv(0)))


def nanosecond_compute_loop(rank):
    while True:
        yield rank.compute(seconds=1e-9)


RUNAWAYS = {
    # rank 0 never lets time pass, so rank 1 never even starts
    "zero-time loop": (zero_time_loop, {0: {"compute"}}),
    "ping-pong forever": (
        ping_pong_forever,
        {0: {"send to rank 1", "recv from rank 1"}, 1: {"send to rank 0", "recv from rank 0"}},
    ),
    "1 ns compute loop": (nanosecond_compute_loop, {0: {"compute"}, 1: {"compute"}}),
}


@pytest.mark.parametrize("name", list(RUNAWAYS))
def test_the_default_guard_stops_a_runaway_and_names_what_it_yields(name):
    program, expected = RUNAWAYS[name]
    cluster = collsim.Cluster(topology.ring(2))
    with time_limit(120), pytest.raises(SimulationLimitError) as info:
        cluster.run(program)
    error = info.value
    assert error.guard == "max_ops"
    assert error.limit == cluster.max_ops == default_max_ops(2) == OPS_BASE + 8
    # every looping rank is named with the kinds and peers of what it yields, and counts
    assert {r: set(kinds) for r, kinds in error.looping.items()} == expected
    assert sum(sum(kinds.values()) for kinds in error.looping.values()) == SAMPLE_OPS
    message = str(error)
    for rank_id, kinds in expected.items():
        assert f"rank {rank_id}: " in message
        for kind in kinds:
            assert f"x {kind}" in message
    assert "Cluster(topology, max_ops=...)" in message and f"{default_max_ops(2):,}" in message
    assert ("stood still" in message) == (name == "zero-time loop")


def test_a_runaway_stops_at_the_same_point_every_time():
    def stop(program):
        with pytest.raises(SimulationLimitError) as info:
            collsim.Cluster(topology.ring(3), max_ops=3000).run(program)
        return str(info.value), info.value.time, info.value.looping

    first = stop(ping_pong_forever)
    assert first == stop(ping_pong_forever)
    assert "rank 2" not in first[0]  # it ended at once: only the looping ranks are named


def test_max_ops_counts_exactly_the_operations_yielded():
    def program(rank):
        if rank.id == 0:
            for _ in range(10):
                yield rank.compute(seconds=1e-6)
            # an exchange counts once, plus one per message it sends
            yield rank.exchange(sends=[(1, np.zeros(2)), (1, np.ones(2), 1)])
        else:
            yield rank.exchange(recvs=[(0,), (0, 1)])

    ops = 10 + 3 + 1
    assert collsim.Cluster(topology.switch(2), max_ops=ops).run(program).returns == [None, None]
    with pytest.raises(SimulationLimitError, match="not endless, only bigger"):
        collsim.Cluster(topology.switch(2), max_ops=ops - 1).run(program)


def test_one_collective_over_every_rank_fits_the_default_guard():
    # a ring all-reduce sends 2K(K-1) messages, the most of any collective
    k = 128
    result = collsim.Cluster(topology.ring(k)).all_reduce(count=k, dtype="float32")
    assert sum(result.stats.messages) == 2 * k * (k - 1)
    for k in (2, 8, 1024, 2048):
        assert default_max_ops(k) >= OPS_BASE + 2 * (2 * k * (k - 1))


def test_a_loop_of_collectives_is_stopped_and_named():
    def program(rank):
        while True:
            yield from rank.all_reduce(np.ones(4))

    with pytest.raises(SimulationLimitError) as info:
        collsim.Cluster(topology.ring(4), max_ops=5000).run(program)
    assert set(info.value.looping) == {0, 1, 2, 3}
    assert "enter all_reduce" in str(info.value)


def test_the_time_guard_names_the_ranks_still_running():
    def program(rank):
        if rank.id == 1:
            while True:
                yield rank.compute(seconds=1.0, label="step")

    with pytest.raises(SimulationLimitError) as info:
        collsim.Cluster(topology.ring(3), max_time=100.0).run(program)
    error = info.value
    assert (error.guard, error.limit, error.time) == ("max_time", 100.0, 100.0)
    assert error.looping == {1: {"compute (step)": 1}}
    assert "rank 1 (main) was in: compute (step)" in str(error)
    assert "Cluster(topology, max_time=...)" in str(error)


def test_the_event_backstop_names_the_ranks_still_running():
    with pytest.raises(SimulationLimitError) as info:
        collsim.Cluster(topology.ring(2), max_events=100).run(ping_pong_forever)
    assert info.value.guard == "max_events" and set(info.value.looping) == {0, 1}
    assert "max_events=100 " in str(info.value)


def test_a_guard_switched_off_lets_a_long_program_finish():
    def program(rank):
        for _ in range(3):
            yield rank.compute(seconds=60.0)

    run = collsim.Cluster(topology.ring(2), max_time=math.inf, max_ops=math.inf).run(program)
    assert run.time == 180.0


@pytest.mark.parametrize("guard", ["max_time", "max_events", "max_ops"])
@pytest.mark.parametrize("bad", [math.nan, 0, -1, -math.inf, True, "abc", None, [3]])
def test_bad_guards_are_refused_naming_the_value(guard, bad):
    if guard == "max_ops" and bad is None:
        return  # None is max_ops' default: 1,000,000 + 4·K·(K-1)
    with pytest.raises(ConfigError) as info:
        collsim.Cluster(topology.ring(2), **{guard: bad})
    assert f"{guard}={bad!r}" in str(info.value)


@pytest.mark.parametrize("guard", ["max_events", "max_ops"])
def test_count_guards_must_be_whole(guard):
    with pytest.raises(ConfigError, match=rf"{guard}=2\.5"):
        collsim.Cluster(topology.ring(2), **{guard: 2.5})


def test_the_time_guard_takes_a_time_string():
    assert collsim.Cluster(topology.ring(2), max_time="2ms").max_time == 0.002


@pytest.mark.parametrize("bad", [math.nan, 0, -5.0, "1s"])
def test_the_engine_refuses_bad_guards(bad):
    with pytest.raises(ConfigError, match="max_time"):
        Engine(max_time=bad)
    with pytest.raises(ConfigError, match="max_events"):
        Engine(max_events=bad)
