"""Blocking rank code (collsim.runtime.blocking): ordinary functions in threads, one at a
time, in the engine's order. The values are numpy's, a deadlock names each rank's line, an
error ends the run with its traceback, no thread is left behind, and runs repeat byte for
byte."""

import threading

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import collsim
from collsim.errors import ConfigError, DeadlockError, SimulationLimitError
from collsim.runtime import blocking
from collsim.runtime.ops import ANY, Received, TagPrefix
from collsim.topology import path_alpha_beta


@pytest.fixture(autouse=True)
def no_thread_left_behind():
    before = threading.active_count()
    yield
    assert threading.active_count() == before


def _cluster(k, **kw):
    return collsim.Cluster(collsim.topology.switch(k, "10GB/s", "2us"), **kw)


@given(k=st.integers(1, 12), n=st.integers(1, 40), seed=st.integers(0, 2**16))
def test_blocking_collectives_and_messages_equal_numpy(k, n, seed):
    inputs = np.random.default_rng(seed).integers(-4, 4, (k, n)).astype(np.float64)

    def main():
        rank = blocking.current_rank()
        total = blocking.call(rank.all_reduce(inputs[rank.id].copy()))
        right, left = (rank.id + 1) % k, (rank.id - 1) % k
        if k > 1:
            sent = blocking.call(rank.isend(right, inputs[rank.id]))
            got = blocking.call(rank.recv(left))
            blocking.call(rank.wait(sent))
        else:
            got = inputs[0]
        return total, got

    result = blocking.run(_cluster(k), main)
    for r, (total, got) in enumerate(result.returns):
        np.testing.assert_array_equal(total, inputs.sum(axis=0))
        np.testing.assert_array_equal(got, inputs[(r - 1) % k])


def test_a_blocking_send_takes_the_links_alpha_beta():
    cluster, nbytes = _cluster(2), 1 << 20

    def main():
        rank = blocking.current_rank()
        start = blocking.now()
        if rank.id == 0:
            blocking.call(rank.send(1, np.zeros(nbytes // 8)))
        else:
            blocking.call(rank.recv(0))
        return blocking.now() - start

    alpha, beta = path_alpha_beta(cluster.topology, 0, 1)
    assert blocking.run(cluster, main).returns == [pytest.approx(alpha + nbytes / beta)] * 2


def test_compute_between_calls_is_free_unless_charged():
    def main():
        sum(range(10_000))  # real work, no simulated time
        blocking.compute(seconds=1e-3)
        blocking.compute(flops=2e12)  # at 100 TFLOP/s: 20 ms
        return blocking.now()

    assert blocking.run(_cluster(2), main).returns == [pytest.approx(0.021)] * 2


def test_both_ranks_receiving_first_deadlock_with_their_source_lines():
    def main():
        rank = blocking.current_rank()
        blocking.call(rank.recv(1 - rank.id))  # the line the report names

    with pytest.raises(DeadlockError) as hang:
        blocking.run(_cluster(2), main)
    text = str(hang.value)
    line = main.__code__.co_firstlineno + 2
    for r in (0, 1):
        assert f"rank {r} waits in recv from rank {1 - r}" in text
    assert text.count(f"test_blocking.py:{line} in main") == 2


def test_a_rank_that_skips_a_collective_is_named():
    def main():
        rank = blocking.current_rank()
        if rank.id != 2:
            blocking.call(rank.all_reduce(np.ones(4)))

    with pytest.raises(DeadlockError) as hang:
        blocking.run(_cluster(3), main)
    assert hang.value.stuck[((0, 1, 2), 0, "all_reduce")] == ([0, 1], [2])
    assert "test_blocking.py" in str(hang.value)


def test_an_error_in_one_rank_ends_the_run_with_its_traceback_and_the_others_state():
    def main():
        rank = blocking.current_rank()
        if rank.id == 1:
            raise ValueError("rank 1 fails")
        blocking.call(rank.recv(1))

    with pytest.raises(ValueError, match="rank 1 fails") as failure:
        blocking.run(_cluster(3), main)
    assert failure.value.rank == 1
    notes = "\n".join(failure.value.__notes__)
    assert "rank 0: blocked at test_blocking.py" in notes and "rank 2: not started" in notes
    frames = []
    tb = failure.value.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame.f_code.co_name)
        tb = tb.tb_next
    assert frames[-1] == "main"  # the user's frame raised it


def test_a_refused_call_raises_where_the_user_called_it():
    def main():
        rank = blocking.current_rank()
        try:
            blocking.call(rank.all_reduce(np.ones(4), algorithm="bogus"))
        except ConfigError as exc:
            return str(exc)

    assert all("bogus" in r for r in blocking.run(_cluster(2), main).returns)


def test_calls_outside_a_run_and_non_operations_are_refused():
    with pytest.raises(ConfigError, match="collsim exec"):
        blocking.current_rank()

    def main():
        blocking.call(5)

    with pytest.raises(ConfigError, match="not a int"):
        blocking.run(_cluster(2), main)
    with pytest.raises(ConfigError, match="1025 ranks needs a thread each"):
        blocking.run(collsim.Cluster(collsim.topology.switch(blocking.MAX_THREADS + 1)), main)


def test_a_runaway_blocking_loop_is_stopped_by_the_guard():
    def main():
        while True:
            blocking.compute(seconds=0)

    with pytest.raises(SimulationLimitError):
        blocking.run(_cluster(2, max_ops=2_000), main)


def test_runs_repeat_byte_for_byte():
    def main():
        rank = blocking.current_rank()
        x = np.arange(16.0) * (rank.id + 1)
        blocking.call(rank.all_reduce(x))
        blocking.call(rank.send((rank.id + 1) % 4, x)) if rank.id % 2 else None
        if rank.id % 2 == 0:
            blocking.call(rank.recv((rank.id - 1) % 4))

    first = blocking.run(_cluster(4), main).trace.to_chrome()
    assert blocking.run(_cluster(4), main).trace.to_chrome() == first


def test_any_source_and_tag_prefix_receive_with_their_status():
    def main():
        rank = blocking.current_rank()
        if rank.id == 0:
            got = [
                blocking.call(rank.recv(ANY, TagPrefix(("comm", 1)), status=True)) for _ in range(2)
            ]
            late = blocking.call(rank.recv(ANY, tag=ANY, status=True))
            return got, late
        if rank.id == 3:
            blocking.compute(seconds=1e-3)  # sends last
            blocking.call(rank.send(0, np.ones(1), tag=("other", 0)))
        else:
            blocking.call(rank.send(0, np.full(2, float(rank.id)), tag=("comm", 1, rank.id)))

    got, late = blocking.run(_cluster(4), main).returns[0]
    assert all(isinstance(g, Received) for g in got)
    assert sorted(g.src for g in got) == [1, 2]
    for g in got:
        np.testing.assert_array_equal(g.value, np.full(2, float(g.src)))
        assert g.tag == ("comm", 1, g.src) and g.nbytes == 16
    assert (late.src, late.tag) == (3, ("other", 0))
