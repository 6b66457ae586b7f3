"""Rank programs on a cluster: operations, rendezvous, matching, copies, errors, trace.

Times are checked against the α–β closed form with a relative tolerance of 1e-12.
"""

import json
import math
import re

import numpy as np
import pytest

import collsim
from collsim import CountOnly, topology
from collsim.errors import CollsimError, ConfigError, DeadlockError, UnyieldedOperationError
from collsim.network import SimulationLimitError
from collsim.runtime.group import Group, RankGrid

REL = 1e-12
ALPHA, BETA = 5e-6, 100e9  # the "5us", "100GB/s" links used below


def approx(x):
    return pytest.approx(x, rel=REL)


def ring4(**kwargs):
    return collsim.Cluster(topology.ring(4, bandwidth="100GB/s", latency="5us"), **kwargs)


def full(k=4, **kwargs):
    return collsim.Cluster(topology.fully_connected(k, "100GB/s", "5us"), **kwargs)


# --------------------------------------------------------------------------- the issue's example


def test_the_issue_example_verbatim():
    def program(rank):  # runs once per rank, as a generator
        x = np.full(4, float(rank.id))
        if rank.id == 0:
            yield rank.send(1, x)  # completes when the data has arrived
        elif rank.id == 1:
            y = yield rank.recv(0)  # resumes with the array that rank 0 sent
            yield rank.compute(seconds=1e-3)
            return y.sum()

    cluster = collsim.Cluster(collsim.topology.ring(4, bandwidth="100GB/s", latency="5us"))
    result = cluster.run(program)

    assert result.returns == [None, 0.0, None, None]
    arrival = ALPHA + 32 / BETA  # 4 float64 = 32 bytes over one link
    assert result.time == approx(arrival + 1e-3)
    stats = result.stats
    assert stats.bytes_sent == [32, 0, 0, 0]
    assert stats.bytes_received == [0, 32, 0, 0]
    assert stats.messages_sent == [1, 0, 0, 0]
    assert stats.link_bytes == {(0, 1): 32}
    assert stats.total_bytes == 32
    assert stats.compute_time == [0.0, pytest.approx(1e-3, rel=REL), 0.0, 0.0]
    (t,) = result.trace.transfers
    assert (t.src, t.dst, t.tag, t.nbytes, t.links) == (0, 1, 0, 32, ((0, 1),))
    assert t.start == 0.0 and t.end == approx(arrival)
    (c,) = result.trace.computes
    assert (c.rank, c.label) == (1, "compute")
    assert c.start == approx(arrival) and c.end == approx(arrival + 1e-3)
    assert len(result.trace) == 2
    assert "32" in str(stats)


def test_the_public_names_exist():
    for name in ("Cluster", "CollsimError", "DeadlockError", "ConfigError", "topology"):
        assert hasattr(collsim, name)
    assert issubclass(DeadlockError, CollsimError) and issubclass(ConfigError, CollsimError)
    assert issubclass(SimulationLimitError, CollsimError)


def test_a_plain_function_program_returns_at_once():
    result = ring4().run(lambda rank, k: rank.id * k, 10)
    assert result.returns == [0, 10, 20, 30]
    assert result.time == 0.0 and len(result.trace) == 0


# --------------------------------------------------------------------------- non-blocking


def test_isend_irecv_and_wait_on_two_handles():
    a, b = np.arange(1000.0), np.arange(10.0)

    def program(rank):
        if rank.id == 0:
            h1 = yield rank.isend(1, a, tag=1)
            h2 = yield rank.isend(2, b, tag=2)
            assert isinstance(h1, collsim.runtime.Handle) and not h1.done
            t_posted = rank.now
            done = yield rank.wait(h1, h2)
            return t_posted, done, rank.now
        if rank.id == 1:
            h = yield rank.irecv(0, tag=1)
            return (yield rank.wait(h))
        if rank.id == 2:
            h = yield rank.irecv(0, tag=2)
            return (yield rank.wait(h))

    result = full(3).run(program)
    t_posted, done, t_done = result.returns[0]
    assert t_posted == 0.0 and done == [None, None]
    assert t_done == approx(ALPHA + a.nbytes / BETA)  # the larger of two disjoint links
    np.testing.assert_array_equal(result.returns[1], a)
    np.testing.assert_array_equal(result.returns[2], b)


def test_wait_on_one_receiver_handle_pair_returns_a_list():
    def program(rank):
        if rank.id == 0:
            yield rank.send(1, np.ones(2), tag="a")
            yield rank.send(1, np.zeros(3), tag="b")
        elif rank.id == 1:
            ha = yield rank.irecv(0, tag="a")
            hb = yield rank.irecv(0, tag="b")
            return (yield rank.wait(ha, hb))

    got = full(2).run(program).returns[1]
    assert [g.tolist() for g in got] == [[1.0, 1.0], [0.0, 0.0, 0.0]]


def test_exchange_posts_sends_and_receives_together():
    def program(rank):
        right, left = (rank.id + 1) % 4, (rank.id - 1) % 4
        got = yield rank.exchange(
            sends=[(right, np.full(2, rank.id)), (left, np.full(2, 10 + rank.id))],
            recvs=[(left,), (right,)],
        )
        return [int(g[0]) for g in got]

    result = collsim.Cluster(topology.bidirectional_ring(4, "100GB/s", "5us")).run(program)
    assert result.returns == [[3, 11], [0, 12], [1, 13], [2, 10]]
    assert result.time == approx(ALPHA + 16 / BETA)  # all eight messages at once


def test_compute_overlaps_communication():
    n = 10**9 // 8  # 1 GB: 10 ms on the wire
    wire = ALPHA + 8 * n / BETA

    def program(rank, work):
        if rank.id == 0:
            h = yield rank.isend(1, CountOnly(8 * n))
            yield rank.compute(seconds=work, label="backward")
            yield rank.wait(h)
            return rank.now
        if rank.id == 1:
            yield rank.recv(0)

    for work in (wire / 2, 2 * wire):
        result = ring4().run(program, work)
        assert result.returns[0] == approx(max(work, wire))  # max, not sum
        (t,) = result.trace.transfers
        (c,) = result.trace.computes
        assert c.label == "backward" and c.start == 0.0 and c.end == approx(work)
        assert t.start == 0.0 and t.end == approx(wire)  # the two spans overlap


def test_computes_on_one_rank_queue_on_its_compute_stream():
    def program(rank):
        yield rank.compute(seconds=1.0)
        yield rank.compute(flops=2e12)  # 2 TFLOP at 1 TFLOP/s
        yield rank.compute(seconds=0)  # free, but it ran: a zero-length span
        return rank.now

    result = ring4(compute_rate=1e12).run(program)
    assert result.returns == [3.0] * 4
    spans = [(c.start, c.end) for c in result.trace.computes if c.rank == 0]
    assert spans == [(0, 1), (1, 3), (3, 3)]


# --------------------------------------------------------------------------- rendezvous


def test_a_send_posted_early_waits_for_the_recv():
    late = 2e-3

    def program(rank):
        if rank.id == 0:
            yield rank.send(1, np.ones(100))  # posted at t=0
            return rank.now
        if rank.id == 1:
            yield rank.compute(seconds=late)
            yield rank.recv(0)  # posted at t=late

    result = ring4().run(program)
    (t,) = result.trace.transfers
    assert t.start == late  # the transfer starts when both sides are posted
    assert t.end == approx(late + ALPHA + 800 / BETA)
    assert result.returns[0] == t.end  # a blocking send completes when the data arrives


def test_a_recv_posted_early_waits_for_the_send():
    def program(rank):
        if rank.id == 0:
            yield rank.compute(seconds=1e-3)
            yield rank.send(1, np.ones(1))
        if rank.id == 1:
            yield rank.recv(0)
            return rank.now

    result = ring4().run(program)
    assert result.trace.transfers[0].start == 1e-3
    assert result.returns[1] == approx(1e-3 + ALPHA + 8 / BETA)


def test_matching_is_by_source_and_tag_in_posting_order():
    def program(rank):
        if rank.id in (0, 2):
            base = 100 * rank.id
            yield rank.isend(1, np.array([base + 1.0]), tag=1)
            yield rank.isend(1, np.array([base + 2.0]), tag=2)
            yield rank.isend(1, np.array([base + 3.0]), tag=1)
            yield rank.compute(seconds=1.0)  # long enough for everything to arrive
        elif rank.id == 1:
            order = [(2, 1), (0, 2), (0, 1), (2, 2), (0, 1), (2, 1)]
            got = []
            for src, tag in order:
                got.append(float((yield rank.recv(src, tag=tag))[0]))
            return got

    result = full(3).run(program)
    # within one (source, tag), messages arrive in the order they were posted
    assert result.returns[1] == [201.0, 2.0, 1.0, 202.0, 3.0, 203.0]


def test_the_receiver_gets_a_copy():
    def program(rank):
        if rank.id == 0:
            x = np.arange(4.0)
            yield rank.send(1, x)
            yield rank.recv(1)  # wait until rank 1 has mutated its copy
            return x
        if rank.id == 1:
            y = yield rank.recv(0)
            y[:] = -1.0
            yield rank.send(0, np.zeros(1))
            return y

    x, y = full(2).run(program).returns
    np.testing.assert_array_equal(x, [0.0, 1.0, 2.0, 3.0])
    np.testing.assert_array_equal(y, [-1.0] * 4)
    assert not np.shares_memory(x, y)


def test_recv_into_out_and_reduce():
    def program(rank):
        if rank.id == 0:
            yield rank.send(1, np.full(3, 2.0), tag="copy")
            yield rank.send(1, np.full(3, 5.0), tag="add")
        if rank.id == 1:
            buf = np.ones(3)
            got = yield rank.recv(0, tag="copy", out=buf)
            assert got is buf
            np.testing.assert_array_equal(buf, 2.0)
            got = yield rank.recv(0, tag="add", out=buf, reduce=np.add)
            assert got is buf
            return buf

    np.testing.assert_array_equal(full(2).run(program).returns[1], [7.0, 7.0, 7.0])


def test_recv_into_a_buffer_of_the_wrong_shape_raises():
    def program(rank):
        if rank.id == 0:
            yield rank.send(1, np.ones(3))
        if rank.id == 1:
            yield rank.recv(0, out=np.ones(4))

    with pytest.raises(ConfigError, match=r"shape \(3,\).*shape \(4,\)"):
        full(2).run(program)


def test_recv_out_must_be_an_array():
    def program(rank):
        yield rank.recv(0, out=[0.0])

    with pytest.raises(ConfigError, match="numpy array"):
        full(2).run(program)


# --------------------------------------------------------------------------- deadlock


def test_a_recv_with_no_send_is_a_deadlock():
    def program(rank):
        if rank.id == 1:
            yield rank.recv(0, tag=3)

    with pytest.raises(DeadlockError) as info:
        ring4().run(program)
    message = str(info.value)
    assert "rank 1" in message and "recv from rank 0" in message and "tag 3" in message
    assert set(info.value.waiting) == {1}


def test_a_cyclic_blocking_exchange_is_a_deadlock_naming_every_rank():
    def program(rank):
        right, left = (rank.id + 1) % rank.size, (rank.id - 1) % rank.size
        yield rank.send(right, np.zeros(2))  # everyone sends first: rendezvous never happens
        yield rank.recv(left)

    with pytest.raises(DeadlockError) as info:
        ring4().run(program)
    assert set(info.value.waiting) == {0, 1, 2, 3}
    message = str(info.value)
    assert "4 rank(s)" in message
    for r in range(4):
        assert f"rank {r} waits in send to rank {(r + 1) % 4} (tag 0)" in message
        assert info.value.waiting[r] == [f"send to rank {(r + 1) % 4} (tag 0): " + _never(r)]


def _never(r):
    return f"rank {(r + 1) % 4} never posted the recv"


def test_a_wait_on_pending_handles_names_them():
    def program(rank):
        if rank.id == 2:
            h1 = yield rank.irecv(0, tag="grad")
            h2 = yield rank.irecv(3)
            yield rank.wait(h1, h2)

    with pytest.raises(DeadlockError) as info:
        ring4().run(program)
    (what,) = info.value.waiting[2]
    assert "recv from rank 0 tag 'grad'" in what and "recv from rank 3 tag 0" in what


def test_unmatched_isend_is_reported_at_the_end():
    def program(rank):
        if rank.id == 0:
            yield rank.isend(3, np.zeros(1), tag=7)  # never waited on, never received

    with pytest.raises(CollsimError, match="unmatched") as info:
        ring4().run(program)
    assert not isinstance(info.value, DeadlockError)
    assert "rank 0 sent to rank 3 with tag 7" in str(info.value)


def test_unmatched_irecv_is_reported_at_the_end():
    def program(rank):
        if rank.id == 2:
            yield rank.irecv(1, tag="x")

    with pytest.raises(CollsimError, match="rank 2 posted a recv from rank 1 with tag 'x'"):
        ring4().run(program)


# --------------------------------------------------------------------------- misuse


def test_a_program_exception_is_reraised_with_the_rank():
    def program(rank):
        yield rank.compute(seconds=1e-3)
        if rank.id == 2:
            raise ValueError("boom")

    with pytest.raises(ValueError, match="boom") as info:
        ring4().run(program)
    assert info.value.rank == 2
    assert any("rank 2" in note and "t=0.001" in note for note in info.value.__notes__)


@pytest.mark.parametrize("dst", [4, -1, 1.0, "1", None])
def test_send_to_a_nonexistent_rank_raises(dst):
    def program(rank):
        if rank.id == 0:
            yield rank.send(dst, np.zeros(1))

    with pytest.raises(ConfigError, match="ranks are 0..3") as info:
        ring4().run(program)
    assert info.value.rank == 0


def test_recv_from_a_nonexistent_rank_raises():
    def program(rank):
        yield rank.recv(17)

    with pytest.raises(ConfigError, match="recv from rank 17"):
        ring4().run(program)


@pytest.mark.parametrize("payload", [[1.0, 2.0], 3.0, "data", np.float64(1.0), None])
def test_sending_a_non_array_raises(payload):
    def program(rank):
        if rank.id == 0:
            yield rank.send(1, payload)

    with pytest.raises(ConfigError, match="only numpy arrays"):
        ring4().run(program)


def test_yielding_a_non_operation_raises():
    def program(rank):
        yield 42

    with pytest.raises(CollsimError, match="not an operation") as info:
        ring4().run(program)
    assert info.value.rank == 0


def test_bad_compute_and_wait_calls_raise():
    with pytest.raises(ConfigError, match="exactly one"):
        ring4().run(lambda rank: (yield rank.compute()))
    with pytest.raises(ConfigError, match=">= 0"):
        ring4().run(lambda rank: (yield rank.compute(seconds=-1)))
    with pytest.raises(ConfigError, match="at least one handle"):
        ring4().run(lambda rank: (yield rank.wait()))


# --------------------------------------------------------------------------- guards


def test_max_time_guard_stops_an_endless_program():
    def program(rank):
        while True:
            yield rank.compute(seconds=1.0)

    with pytest.raises(SimulationLimitError, match="max_time=100"):
        ring4(max_time=100.0).run(program)


def test_max_events_guard_stops_an_endless_ping_pong():
    def program(rank):
        if rank.id < 2:
            while True:
                if rank.id == 0:
                    yield rank.send(1, np.zeros(1))
                    yield rank.recv(1)
                else:
                    yield rank.send(0, (yield rank.recv(0)))

    with pytest.raises(SimulationLimitError, match="max_events=1000"):
        full(2, max_events=1000).run(program)


@pytest.mark.parametrize(
    "step",
    [
        lambda rank, h: rank.compute(seconds=0),  # costs no time: never reaches the engine
        lambda rank, h: rank.wait(h),  # a handle that is already done
        lambda rank, h: rank.isend(rank.id, np.zeros(1)),  # the mailbox grows forever
    ],
)
def test_the_ops_guard_also_stops_a_loop_that_never_lets_time_pass(step):
    def program(rank):
        h = yield rank.start(_empty())
        while True:
            yield step(rank, h)

    with pytest.raises(SimulationLimitError, match="max_ops=500"):
        full(2, max_ops=500).run(program)


def _empty():
    return
    yield


# --------------------------------------------------------------------------- trace


def busy_program(rank):
    """Neighbour exchanges of different sizes on shared links, with some compute."""
    k = rank.size
    for step in range(3):
        n = 100 * (rank.id + 1) * (step + 1)
        h = yield rank.isend((rank.id + step + 1) % k, np.full(n, float(rank.id)), tag=step)
        yield rank.compute(seconds=1e-6 * (rank.id + 1), label=f"layer {step}")
        got = yield rank.recv((rank.id - step - 1) % k, tag=step)
        yield rank.wait(h)
        assert got[0] == (rank.id - step - 1) % k
    return rank.now


def test_two_runs_give_identical_traces():
    cluster = collsim.Cluster(topology.switch(5, "10GB/s", "1us"))
    first, second = cluster.run(busy_program), cluster.run(busy_program)
    assert first.trace.to_chrome() == second.trace.to_chrome()
    assert first.trace.transfers == second.trace.transfers
    assert first.returns == second.returns and first.time == second.time
    assert first.events == second.events


def test_chrome_export_has_one_process_per_rank_and_named_streams(tmp_path):
    result = collsim.Cluster(topology.switch(5, "10GB/s", "1us")).run(busy_program)
    path = tmp_path / "trace.json"
    text = result.trace.to_chrome(path)
    assert path.read_text(encoding="utf-8") == text
    events = json.loads(text)["traceEvents"]
    processes = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert processes == {r: f"rank {r}" for r in range(5)}
    threads = {}
    for e in events:
        if e["name"] == "thread_name":
            threads.setdefault(e["pid"], {})[e["tid"]] = e["args"]["name"]
    for r in range(5):
        names = threads[r]
        assert "compute" in names.values()
        assert any("comm" in name for name in names.values())
    spans = [e for e in events if e["ph"] == "X"]
    compute_tid = {r: next(t for t, n in threads[r].items() if n == "compute") for r in range(5)}
    computes = [e for e in spans if e["tid"] == compute_tid[e["pid"]]]
    comms = [e for e in spans if e["tid"] != compute_tid[e["pid"]]]
    assert len(computes) == len(result.trace.computes) == 15
    assert len(comms) == 2 * len(result.trace.transfers) == 30  # a send and a recv track
    for e in spans:
        assert e["dur"] >= 0 and math.isfinite(e["ts"])
    sample = next(e for e in comms if e["args"]["bytes"] == 800)
    assert sample["args"]["src"] == 0


def test_the_trace_records_labels_tags_and_paths():
    def program(rank):
        if rank.id == 0:
            yield rank.send(2, np.zeros(8), tag=("grad", 1), label="bucket 1")
        if rank.id == 2:
            yield rank.recv(0, tag=("grad", 1))

    (t,) = ring4().run(program).trace.transfers
    assert t.label == "bucket 1" and t.tag == ("grad", 1)
    assert t.links == ((0, 1), (1, 2))
    assert t.end == approx(2 * ALPHA + 64 / BETA)


# --------------------------------------------------------------------------- argument checks
# (issue 11, item 11) every public entry point names the bad value in a collsim error


def _first_op(make_op, k=2):
    """Build one operation with ``make_op(rank)`` inside a run on rank 0 and return it
    (never yielded, on purpose: the run says so)."""
    built = []

    def program(rank):
        if rank.id == 0:
            built.append(make_op(rank))
        return None
        yield

    try:
        full(k).run(program)
    except UnyieldedOperationError:
        pass  # any other error: the method refused its arguments (_refused reads it)
    else:
        raise AssertionError("an operation made and never yielded must stop the run")
    return built[0]


def _refused(make_op, shown):
    with pytest.raises(ConfigError) as info:
        _first_op(make_op)
    assert shown in str(info.value)
    return str(info.value)


@pytest.mark.parametrize("peer", [True, False, np.True_, 1.0, "1", None, -1, 2, 2**62, (1,)])
def test_a_peer_must_be_an_int_rank_that_exists(peer):
    x = np.zeros(2)
    for make in (
        lambda r: r.send(peer, x),
        lambda r: r.isend(peer, x),
        lambda r: r.recv(peer),
        lambda r: r.irecv(peer),
    ):
        assert "ranks are 0..1" in _refused(make, repr(peer))


def test_numpy_integer_peers_are_ranks():
    op = _first_op(lambda r: r.send(np.int64(1), np.zeros(1)))
    assert op.dst == 1 and type(op.dst) is int


@pytest.mark.parametrize("tag", [[1], {"a": 1}, {1}, np.zeros(2), (1, [2])])
def test_an_unhashable_tag_is_refused(tag):
    _refused(lambda r: r.send(1, np.zeros(1), tag=tag), "cannot be a message tag")
    _refused(lambda r: r.irecv(1, tag=tag), "cannot be a message tag")


@pytest.mark.parametrize("seconds", ["1ms", "5 us", 0.25, 0, np.float64(2e-3)])
def test_compute_takes_seconds_as_a_number_or_a_time_string(seconds):
    op = _first_op(lambda r: r.compute(seconds=seconds))
    assert op.seconds == collsim.units.parse_time(seconds)


@pytest.mark.parametrize("seconds", [-1, -1e-9, math.nan, math.inf, "abc", "", "-1ms", True, [1]])
def test_compute_refuses_bad_seconds_naming_them(seconds):
    _refused(lambda r: r.compute(seconds=seconds), f"compute(seconds={seconds!r})")


@pytest.mark.parametrize("flops", [-1, math.nan, math.inf, "1e12", True])
def test_compute_refuses_bad_flops_naming_them(flops):
    _refused(lambda r: r.compute(flops=flops), f"compute(flops={flops!r})")


@pytest.mark.parametrize("handle", [3, None, "h", np.zeros(1)])
def test_wait_takes_only_handles(handle):
    _refused(lambda r: r.wait(handle), "wait() takes the handles")


def test_start_takes_only_a_generator():
    _refused(lambda r: r.start(lambda: None), "give a generator")


def test_recv_out_must_be_a_writeable_array():
    frozen = np.zeros(2)
    frozen.flags.writeable = False
    assert "read-only" in _refused(lambda r: r.recv(1, out=frozen), "shape (2,)")
    _refused(lambda r: r.recv(1, out=[0.0, 0.0]), "[0.0, 0.0]")
    _refused(lambda r: r.recv(1, reduce=np.add), "pass out= as well")
    _refused(lambda r: r.recv(1, out=np.zeros(2), reduce=sum), "binary numpy ufunc")


@pytest.mark.parametrize(
    "out, shown", [(np.zeros(3), "shape (3,)"), (np.zeros(2, np.int32), "into a int32 buffer")]
)
def test_recv_into_a_buffer_of_the_wrong_shape_or_dtype_is_refused(out, shown):
    def program(rank):
        if rank.id == 0:
            yield rank.send(1, np.ones(2))
        elif rank.id == 1:
            yield rank.recv(0, out=out)

    with pytest.raises(ConfigError, match=re.escape(shown)):
        full(2).run(program)


@pytest.mark.parametrize("entry", [(1,), 1, (1, np.zeros(1), 0, "label", "extra")])
def test_a_malformed_exchange_entry_is_refused(entry):
    _refused(lambda r: r.exchange(sends=[entry]), f"got {entry!r}")


@pytest.mark.parametrize("topo", [None, "ring", 4, topology.ring(2).to_undirected()])
def test_a_cluster_needs_a_collsim_topology(topo):
    with pytest.raises(ConfigError, match="needs a topology from collsim.topology"):
        collsim.Cluster(topo)


@pytest.mark.parametrize("model", ["fast", None, ["maxmin"]])
def test_a_cluster_refuses_an_unknown_model(model):
    with pytest.raises(ConfigError, match=re.escape(repr(model))):
        collsim.Cluster(topology.ring(2), model=model)


def test_run_needs_a_function():
    with pytest.raises(ConfigError, match="Cluster.run"):
        ring4().run(None)


# --------------------------------------------------------------------------- groups and meshes


@pytest.mark.parametrize(
    "ranks, shown",
    [
        ("ab", "'ab'"),
        ([1.5, 0], "1.5"),
        ([1.0, 0], "1.0"),
        ([True, 0], "True"),
        ([0, 1, 0], "rank 0 twice"),
        ([], "empty"),
        ([-1, 0], "rank -1"),
        (3, "group 3"),
        ({0, 1}, "{0, 1}"),
        (np.zeros((2, 2), int), "array"),
    ],
)
def test_a_group_is_a_list_of_distinct_int_ranks(ranks, shown):
    with pytest.raises(ConfigError) as info:
        Group(ranks)
    assert shown in str(info.value)


def test_a_group_takes_ranges_arrays_and_numpy_ints():
    assert Group(range(3)).ranks == Group(np.arange(3)).ranks == Group([np.int32(0), 1, 2]).ranks
    assert all(type(r) is int for r in Group(np.arange(3)).ranks)


def test_a_group_of_ranks_the_cluster_lacks_is_refused():
    with pytest.raises(ConfigError, match=r"group \[0, 7\] names ranks \[7\].*0\.\.3"):
        Group.of([0, 7], 4)


@pytest.mark.parametrize(
    "shape, names, shown",
    [
        ((2, 2.5), ("a", "b"), "2.5"),
        ((2, 0), ("a", "b"), "(2, 0)"),
        ((2, 2), ("a", "a"), "('a', 'a')"),
        ((2, 2), "ab", "'ab'"),
        ((2, 2), ("a",), "differ in length"),
        ((2**40, 2), ("a", "b"), "131,072"),
        ("22", ("a", "b"), "'22'"),
    ],
)
def test_a_mesh_refuses_bad_shapes_and_names(shape, names, shown):
    with pytest.raises(ConfigError) as info:
        RankGrid(shape, names)
    assert shown in str(info.value)


@pytest.mark.parametrize("rank", [9, -1, 1.0, "1", True])
def test_a_mesh_names_a_rank_it_lacks(rank):
    mesh = RankGrid((2, 2), ("dp", "tp"))
    for call in (lambda: mesh.coords(rank), lambda: mesh.group("tp", rank)):
        with pytest.raises(ConfigError, match=re.escape(f"rank {rank!r} is not in this mesh")):
            call()
    with pytest.raises(ConfigError, match="'pp'"):
        mesh.groups("pp")


@pytest.mark.parametrize("nbytes", [-4, 2.5, "8", True, None])
def test_a_size_only_payload_is_a_whole_number_of_bytes(nbytes):
    with pytest.raises(ConfigError, match=re.escape(f"CountOnly({nbytes!r})")):
        CountOnly(nbytes)
