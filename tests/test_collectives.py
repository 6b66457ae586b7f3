"""Collectives: values equal numpy, schedules have the right structure, time and bytes
equal the closed forms where their assumptions hold."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import collsim
from collsim import topology
from collsim.collectives import ALGORITHMS, analytical, build, contributions, reference
from collsim.collectives.executor import integer_inputs
from collsim.errors import CollectiveMismatchError, ConfigError, DeadlockError
from collsim.runtime.group import Group, RankGrid

REL = 1e-12  # simulated time vs closed form: floating-point precision

PAIRS = [(c, a) for c, algs in ALGORITHMS.items() for a in algs]
POWER_OF_TWO_ONLY = {("reduce_scatter", "halving_doubling"), ("all_gather", "halving_doubling")}
NUMERIC_DTYPES = ["float64", "float32", "float16", "int32", "int64"]


def check_outputs(out, expected):
    for rank, (got, want) in enumerate(zip(out.outputs, expected)):
        if want is None:
            assert got is None, f"rank {rank} should get nothing"
        else:
            np.testing.assert_array_equal(got, want, err_msg=f"rank {rank}")


# -- layer 1: values equal the numpy reference -------------------------------------------


@given(
    pair=st.sampled_from(PAIRS),
    k=st.integers(1, 9),
    n=st.integers(0, 40),
    dtype=st.sampled_from(NUMERIC_DTYPES),
    op=st.sampled_from(["sum", "avg", "prod", "max", "min"]),
    seed=st.integers(0, 2**16),
    topo=st.sampled_from(["ring", "switch", "fully_connected", "bidirectional_ring"]),
)
def test_every_algorithm_equals_numpy(pair, k, n, dtype, op, seed, topo):
    collective, algorithm = pair
    if collective == "all_to_all":
        n = n - n % k
    if collective in ("all_gather", "broadcast", "all_to_all"):
        op = "sum"
    root = seed % k if collective in ("broadcast", "reduce") else 0
    cluster = collsim.Cluster(getattr(topology, topo)(k, "10GB/s", "1us"))
    buffers = integer_inputs(k, n, dtype, op, seed)
    if pair in POWER_OF_TWO_ONLY and k & (k - 1):  # refused, naming K, before any work
        with pytest.raises(ConfigError, match=f"on {k} ranks: partners are r XOR 2"):
            cluster.collective(collective, buffers, algorithm=algorithm, op=op, root=root)
        return
    out = cluster.collective(collective, buffers, algorithm=algorithm, op=op, root=root)
    check_outputs(out, reference(collective, buffers, op, root))


def test_allreduce_of_gradients_averages():
    # data parallelism (PyTorch DDP): four ranks' gradients summed then divided by 4
    grads = [np.full(6, float(g)) for g in (1, 2, 3, 6)]
    out = collsim.Cluster(topology.ring(4)).all_reduce(grads, op="avg")
    for o in out.outputs:
        np.testing.assert_array_equal(o, np.full(6, 3.0))


def test_outputs_are_copies_not_shared():
    cluster = collsim.Cluster(topology.ring(3))
    out = cluster.all_reduce([np.ones(3) for _ in range(3)])
    out.outputs[0][0] = 99
    assert out.outputs[1][0] == 3


# -- layer 2: structure ------------------------------------------------------------------


@pytest.mark.parametrize("k", [2, 3, 4, 5, 8])
def test_ring_all_reduce_structure(k):
    s = build("all_reduce", "ring", k)
    assert s.n_steps == 2 * (k - 1)
    assert s.chunk_count() == 2 * k * (k - 1)  # tinygrad's check: 2K(K-1) chunk copies
    for step in s.steps:  # the transfers of every step form the ring r -> r+1
        assert sorted((m.src, m.dst) for m in step) == [(r, (r + 1) % k) for r in range(k)]
    final = list(contributions(s))[-1]
    assert all(chunk == frozenset(range(k)) for row in final for chunk in row)


@pytest.mark.parametrize("k", [2, 4, 8])
def test_halving_doubling_pairs_and_bytes(k):
    s = build("all_reduce", "hd", k)
    assert s.n_steps == 2 * int(np.log2(k))
    for i, step in enumerate(s.steps[: s.n_steps // 2]):
        mask = k >> (i + 1)
        assert all(m.dst == m.src ^ mask for m in step)


def test_trace_shows_every_transfer_of_the_schedule():
    k = 5
    out = collsim.Cluster(topology.ring(k)).all_reduce([np.arange(10.0)] * k)
    pairs = sorted((t.src, t.dst, t.tag.step) for t in out.trace.transfers)
    expected = sorted((m.src, m.dst, s) for s, m in out.schedule.moves())
    assert pairs == expected


@given(k=st.integers(2, 12), n=st.integers(0, 50), dtype=st.sampled_from(["float32", "int64"]))
def test_ring_bytes_per_rank_are_the_chunk_sizes(k, n, dtype):
    # with uneven chunks each rank sends its own chunk sizes; all ranks' totals add up
    cluster = collsim.Cluster(topology.ring(k))
    out = cluster.all_reduce(count=n, dtype=dtype)
    itemsize = np.dtype(dtype).itemsize
    assert sum(out.stats.bytes_sent) == 2 * (k - 1) * n * itemsize
    assert sum(out.stats.bytes_received) == sum(out.stats.bytes_sent)
    if n % k == 0:
        assert out.stats.bytes_sent == [2 * (k - 1) * n // k * itemsize] * k


def test_step_view_labels_accumulate_then_spread():
    out = collsim.Cluster(topology.ring(3)).all_reduce([np.ones(3)] * 3)
    views = list(out.steps(include_initial=True))
    assert len(views) == 2 * 2 + 1
    assert views[0].labels()[0] == ["r0", "r0", "r0"]
    after_rs = views[2].labels()
    assert [row[r] for r, row in enumerate(after_rs)] == ["r0+r1+r2"] * 3
    assert "reduce-scatter 2/2" in str(views[2]) and "all-gather 1/2" in str(views[3])


# -- closed forms ------------------------------------------------------------------------


@given(
    k=st.integers(2, 10),
    chunk=st.integers(1, 4096),
    algorithm=st.sampled_from(
        ["ring", "tree", "halving_doubling", "naive", "one_shot", "two_shot"]
    ),
)
def test_all_reduce_time_equals_closed_form_on_a_switch(k, chunk, algorithm):
    cluster = collsim.Cluster(topology.switch(k, "25GB/s", "3us"))
    n = chunk * k * 4  # K divides N, and halving-doubling's 2^m core too
    out = cluster.all_reduce(count=n, dtype="float64", algorithm=algorithm)
    form = analytical(cluster, "all_reduce", n * 8, algorithm)
    assert out.stats.steps == form.steps
    assert out.time == pytest.approx(form.time_s, rel=REL)
    assert max(out.stats.bytes_sent) == pytest.approx(form.bytes_per_rank, rel=REL)


@pytest.mark.parametrize(
    "collective,algorithm",
    [
        ("reduce_scatter", "ring"),
        ("all_gather", "ring"),
        ("all_to_all", "direct"),
        ("broadcast", "tree"),
        ("broadcast", "ring"),
        ("reduce", "tree"),
        ("reduce", "ring"),
    ],
)
@pytest.mark.parametrize("k", [2, 4, 7])
def test_other_collectives_match_closed_forms_on_a_switch(collective, algorithm, k):
    cluster = collsim.Cluster(topology.switch(k, "10GB/s", "2us"))
    size = 64 * k * k * 8  # bytes, divisible everywhere
    count = size // 8 // (k if collective == "all_gather" else 1)
    out = cluster.collective(collective, count=count, dtype="float64", algorithm=algorithm)
    form = analytical(cluster, collective, size, algorithm)
    assert (out.stats.steps, out.time) == (form.steps, pytest.approx(form.time_s, rel=REL))


def test_ring_on_a_ring_topology_equals_formula_and_hd_does_not():
    cluster = collsim.Cluster(topology.ring(8, "100GB/s", "5us"))
    n = 8 * 2**16
    ring = cluster.all_reduce(count=n, dtype="float32", algorithm="ring")
    assert ring.time == pytest.approx(analytical(cluster, "all_reduce", 4 * n).time_s, rel=REL)
    # halving-doubling partners are 4 hops apart on a one-way ring: multi-hop paths and
    # shared links make it slower than its closed form, which assumes one hop
    hd = cluster.all_reduce(count=n, dtype="float32", algorithm="halving_doubling")
    assert hd.time > analytical(cluster, "all_reduce", 4 * n, "halving_doubling").time_s


def test_ring_beats_naive_by_the_predicted_factor_for_large_buffers():
    k, size = 16, 256 * 2**20
    cluster = collsim.Cluster(topology.switch(k, "100GB/s", "5us"))
    ring = cluster.all_reduce(count=size // 4, dtype="float32", algorithm="ring")
    naive = cluster.all_reduce(count=size // 4, dtype="float32", algorithm="naive")
    # bandwidth terms: naive 2(K-1)S/β against ring 2(K-1)/K·S/β, a factor of ~K
    predicted = (
        analytical(cluster, "all_reduce", size, "naive").time_s
        / analytical(cluster, "all_reduce", size, "ring").time_s
    )
    assert naive.time / ring.time == pytest.approx(predicted, rel=1e-9)
    assert naive.time / ring.time > 0.8 * k


def test_latency_bound_crossover_exists():
    # tiny buffers on many ranks: the log-step algorithms beat ring; big buffers: ring wins
    k = 64
    cluster = collsim.Cluster(topology.switch(k, "100GB/s", "5us"))
    small, big = k * 4, k * 2**20
    times = {}
    for alg in ("ring", "tree", "halving_doubling"):
        times[alg] = [
            cluster.all_reduce(count=c, dtype="float32", algorithm=alg).time
            for c in (small // 4, big // 4)
        ]
    assert times["tree"][0] < times["ring"][0] and times["halving_doubling"][0] < times["ring"][0]
    assert times["ring"][1] < times["tree"][1]


# -- groups, mesh, rank programs ---------------------------------------------------------


def test_collectives_on_mesh_groups_inside_rank_programs():
    mesh = RankGrid((2, 3), ("dp", "tp"))
    cluster = collsim.Cluster(topology.switch(6))

    def program(rank):
        x = np.full(3, float(rank.id))
        tp = yield from rank.all_reduce(x, group=mesh.group("tp", rank.id))
        dp = yield from rank.all_reduce(x, group=mesh.group("dp", rank.id))
        return tp[0], dp[0]

    got = cluster.run(program).returns
    assert got[4] == (3 + 4 + 5, 1 + 4)
    assert got[0] == (0 + 1 + 2, 0 + 3)


def test_non_blocking_collective_overlaps_compute():
    cluster = collsim.Cluster(topology.ring(4, "1GB/s", "0"))
    n = 2**20

    def program(rank, overlap):
        x = np.ones(n)
        if overlap:
            h = yield rank.start(rank.all_reduce(x))
            yield rank.compute(seconds=5e-3)
            total = yield rank.wait(h)
        else:
            total = yield from rank.all_reduce(x)
            yield rank.compute(seconds=5e-3)
        return total[0]

    serial, overlapped = cluster.run(program, False), cluster.run(program, True)
    assert serial.returns == overlapped.returns == [4.0] * 4
    comm = 2 * 3 * (n * 8 / 4) / 1e9
    assert serial.time == pytest.approx(comm + 5e-3, rel=1e-9)
    assert overlapped.time == pytest.approx(max(comm, 5e-3), rel=1e-9)


def test_group_validation():
    with pytest.raises(ConfigError, match=r"names rank 0 twice"):
        Group([0, 0])
    with pytest.raises(ConfigError, match=r"ranks \[7\] that do not exist"):
        collsim.Cluster(topology.ring(4)).all_reduce([np.ones(2)] * 2, group=[0, 7])


# -- misuse ------------------------------------------------------------------------------


def test_mismatched_collectives_name_each_rank_and_call():
    def program(rank):
        x = np.ones(4)
        if rank.id == 2:
            yield from rank.all_gather(x)
        else:
            yield from rank.all_reduce(x)

    with pytest.raises(CollectiveMismatchError) as info:
        collsim.Cluster(topology.ring(3)).run(program)
    text = str(info.value)
    assert "rank 2: all_gather" in text and "rank 0: all_reduce" in text and "#0" in text


def test_mismatched_sizes_are_reported():
    def program(rank):
        yield from rank.all_reduce(np.ones(4 + rank.id))

    with pytest.raises(CollectiveMismatchError, match="count=5"):
        collsim.Cluster(topology.ring(2)).run(program)


def test_rank_that_never_joins_is_named_like_a_flight_recorder():
    def program(rank):
        if rank.id != 3:
            yield from rank.all_reduce(np.ones(8))

    with pytest.raises(DeadlockError) as info:
        collsim.Cluster(topology.ring(4)).run(program)
    text = str(info.value)
    assert "all_reduce #0" in text and "ranks [3] never joined" in text
    assert info.value.stuck == {((0, 1, 2, 3), 0, "all_reduce"): ([0, 1, 2], [3])}
    assert sorted(info.value.waiting) == [0, 1, 2] and info.value.trace is not None


def test_buffers_must_match():
    cluster = collsim.Cluster(topology.ring(2))
    with pytest.raises(ConfigError, match="rank 1 has a float32 buffer"):
        cluster.all_reduce([np.ones(3), np.ones(3, dtype="float32")])
    with pytest.raises(ConfigError, match="unknown reduce op"):
        cluster.all_reduce([np.ones(3)] * 2, op="mean")
    with pytest.raises(ConfigError, match="did you mean"):
        cluster.collective("all_reduse", [np.ones(3)] * 2)
    with pytest.raises(ConfigError, match="choose one of ring"):
        cluster.all_reduce([np.ones(3)] * 2, algorithm="butterfly")


def test_numeric_run_too_big_is_refused_with_a_pointer_to_count_only(monkeypatch):
    from collsim.collectives import api

    monkeypatch.setattr(api, "_available_memory", lambda: 1000)
    with pytest.raises(ConfigError, match="count-only"):  # 4 MiB a rank: 24 MiB needed
        collsim.Cluster(topology.ring(2)).all_reduce([np.ones(2**19)] * 2)
    collsim.Cluster(topology.ring(2)).all_reduce([np.ones(100)] * 2)  # too small to ask


def test_a_small_numeric_call_does_not_ask_the_system_for_its_memory(monkeypatch):
    from collsim.collectives import api

    def asked():
        raise AssertionError("a 4 KiB all-reduce read the system's free memory")

    monkeypatch.setattr(api, "_available_memory", asked)
    out = collsim.Cluster(topology.ring(2), fast=False).all_reduce([np.ones(512)] * 2)
    assert out.outputs[0].tolist() == [2.0] * 512


def test_count_only_bfloat16_counts_two_bytes():
    out = collsim.Cluster(topology.ring(4)).all_reduce(count=1024, dtype="bfloat16")
    assert out.outputs == [None] * 4
    assert out.stats.bytes_sent == [2 * 3 * 256 * 2] * 4


def test_same_inputs_same_trace():
    def once():
        c = collsim.Cluster(topology.switch(5))
        return c.all_reduce([np.arange(7.0) * r for r in range(5)], algorithm="naive").trace

    assert once().to_chrome() == once().to_chrome()


# -- integer average (issue 11, item 6) ----------------------------------------------------

INT_LIMITS = [("int32", -(2**31), 2**31 - 1), ("int64", -(2**63), 2**63 - 1)]


def truncated_avg(values, bits):
    """Sum wrapped to ``bits`` bits, divided by K and truncated toward zero: Python ints."""
    total = (sum(values) + 2 ** (bits - 1)) % 2**bits - 2 ** (bits - 1)
    q = abs(total) // len(values)
    return q if total >= 0 else -q


@pytest.mark.parametrize("dtype,lowest,highest", INT_LIMITS)
@pytest.mark.parametrize(
    "collective,algorithm",
    [("all_reduce", a) for a in ALGORITHMS["all_reduce"]]
    + [("reduce_scatter", "ring"), ("reduce", "tree"), ("reduce", "ring")],
)
def test_integer_avg_at_the_most_negative_sum_keeps_its_sign(
    collective, algorithm, dtype, lowest, highest
):
    # all_reduce([-2**30] * 2, op="avg") in int32 gave +2**30: np.abs(-2**31) overflows
    bits = np.dtype(dtype).itemsize * 8
    rows = [[lowest // 2] * 2, [lowest // 2 + 1, lowest // 2 - 1], [-3, -4], [highest, 1]]
    cluster = collsim.Cluster(topology.switch(2))
    for values in rows:
        buffers = [np.array([v, v], dtype) for v in values]
        out = cluster.collective(collective, buffers, algorithm=algorithm, op="avg")
        want = truncated_avg(values, bits)
        for got in out.outputs:
            if got is not None:
                assert [int(v) for v in got.reshape(-1)] == [want] * got.size, values
        assert [int(v) for v in reference(collective, buffers, "avg")[0].reshape(-1)][0] == want


def test_reference_is_not_the_executor():
    # the #wrong oracle must not share the executor's arithmetic
    import importlib
    import inspect

    from collsim.collectives import executor

    reference_module = importlib.import_module("collsim.collectives.reference")
    source = inspect.getsource(reference_module)
    assert "executor" not in source.split('"""', 2)[2]
    assert executor.reference is reference_module.reference


# -- shapes follow torch (issue 11, item 18) -----------------------------------------------


def test_all_gather_keeps_trailing_shape_and_reduce_scatter_splits_the_first_axis():
    cluster = collsim.Cluster(topology.ring(4))
    gathered = cluster.all_gather([np.full((3, 5), r) for r in range(4)])
    assert gathered.outputs[0].shape == (12, 5)
    assert gathered.outputs[2][:, 0].tolist() == [0] * 3 + [1] * 3 + [2] * 3 + [3] * 3
    scattered = cluster.reduce_scatter([np.arange(60).reshape(12, 5)] * 4)
    assert [o.shape for o in scattered.outputs] == [(3, 5)] * 4
    np.testing.assert_array_equal(scattered.outputs[1], 4 * np.arange(15, 30).reshape(3, 5))
    scalar = cluster.all_gather([np.array(float(r)) for r in range(4)])
    assert scalar.outputs[0].tolist() == [0.0, 1.0, 2.0, 3.0]


@pytest.mark.parametrize("collective", ["reduce_scatter", "all_to_all"])
def test_splitting_an_indivisible_first_axis_is_refused(collective):
    cluster = collsim.Cluster(topology.ring(4))
    with pytest.raises(ConfigError, match=r"\(13, 5\).*13 must be a multiple of 4.*12 or 16"):
        cluster.collective(collective, [np.ones((13, 5))] * 4)


def test_rank_programs_get_torch_shapes_too():
    def program(rank):
        return (yield from rank.all_gather(np.zeros((2, 3))))

    assert collsim.Cluster(topology.ring(3)).run(program).returns[0].shape == (6, 3)


# -- steps count from 1 (issue 11, item 16) ------------------------------------------------


def test_step_views_number_from_one_and_keep_their_index():
    out = collsim.Cluster(topology.ring(3)).all_reduce([np.ones(3)] * 3)
    views = list(out.steps(include_initial=True))
    assert [v.number for v in views] == [0, 1, 2, 3, 4]
    assert [v.index for v in views] == [-1, 0, 1, 2, 3]
    assert str(views[1]).startswith("reduce-scatter 1/2 (step 1 of 4)")
    first = views[1].transfers[0]
    assert (first.src, first.dst, first.nbytes) == (0, 1, 8) and first[4] == 8  # named, indexable
    # the display text counts steps from 1, as the tag's number does
    assert {t.tag.number for t in out.trace.transfers} == {1, 2, 3, 4}
    for t in out.trace.transfers:
        assert t.label == f"all_reduce step {t.tag.number} chunk {t.meta.chunks.start}"


def test_a_step_is_asked_for_by_its_number():
    out = collsim.Cluster(topology.ring(4)).all_reduce([np.ones(4)] * 4)
    assert [out.step(n).index for n in range(7)] == [-1, 0, 1, 2, 3, 4, 5]
    assert str(out.step(6)).startswith("all-gather 3/3 (step 6 of 6)")
    assert out.schedule.chunk_count(1) == 4 and out.schedule.chunk_count() == 24
    for bad in (7, -1, "2", 1.0):
        with pytest.raises(ConfigError, match=f"step {bad!r} is not .*1..6"):
            out.step(bad)
    with pytest.raises(ConfigError, match="step 0 is not a step"):
        out.schedule.chunk_count(0)


# -- Trace: len, repr, iteration in time order (issue 11, item 18) ------------------------


def test_trace_reads_like_a_record_of_the_run():
    from collsim.network.trace import Compute, Transfer

    def program(rank):
        if rank.id == 0:
            yield rank.compute(seconds=1e-6, label="work")
            yield rank.send(1, np.ones(4))
        elif rank.id == 1:
            yield rank.recv(0)

    trace = collsim.Cluster(topology.ring(2, "1GB/s", "1us")).run(program).trace
    records = list(trace)
    assert len(trace) == len(records) == 2
    assert [type(r) for r in records] == [Compute, Transfer]
    assert [r.start for r in records] == sorted(r.start for r in records)
    assert repr(trace) == "Trace(1 transfer, 1 compute span, 32 B sent, 0 s .. 2.032 us)"
    assert repr(collsim.network.trace.Trace()) == "Trace(0 transfers, 0 compute spans)"


# -- arguments are checked before anything moves (issue 11, item 11) -----------------------


@pytest.mark.parametrize(
    "options,named",
    [
        ({"root": "1"}, "root='1'"),
        ({"root": 1.5}, "root=1.5"),
        ({"root": 99}, "root=99"),
        ({"root": True}, "root=True"),
        ({"count": "8"}, "count='8'"),
        ({"count": "64MiB"}, "count='64MiB'"),
        ({"count": -4}, "count=-4"),
        ({"count": 2.5}, "count=2.5"),
        ({"op": "mean"}, "'mean'"),
        ({"algorithm": "butterfly"}, "'butterfly'"),
        ({"dtype": "float8"}, "'float8'"),
        ({"dtype": []}, "[]"),
    ],
)
def test_bad_arguments_are_named(options, named):
    cluster = collsim.Cluster(topology.ring(4))
    call = {"count": 8, **options}
    name = "reduce" if "op" in options else "broadcast"
    with pytest.raises(ConfigError) as info:
        cluster.collective(name, **call)
    assert named in str(info.value)


def test_count_is_elements_and_the_message_says_how_many_a_size_would_be():
    with pytest.raises(ConfigError, match="64 MiB of float32 is count=16777216"):
        collsim.Cluster(topology.ring(2)).all_reduce(count="64MiB")


@pytest.mark.parametrize(
    "buffers,named",
    [
        (5, "buffers=5"),
        (np.ones((4, 3)), "array of shape (4, 3)"),
        ([np.ones(3)] * 3, "needs 4 buffers, got 3"),
        ([np.ones(3)] * 3 + [np.ones(4)], "shape (4,)"),
        ([np.ones(3)] * 3 + [np.ones(3, "float32")], "float32"),
        (["a"] * 4, "<U1"),
        ([[1, [2]]] * 4, "[1, [2]]"),
    ],
)
def test_bad_buffers_are_named(buffers, named):
    with pytest.raises(ConfigError) as info:
        collsim.Cluster(topology.ring(4)).all_reduce(buffers)
    assert named in str(info.value)


def test_root_is_checked_inside_rank_programs_too():
    def program(rank):
        yield from rank.broadcast(np.ones(2), root="0")

    with pytest.raises(ConfigError, match="root='0'"):
        collsim.Cluster(topology.ring(2)).run(program)


def test_integer_inputs_are_cheap_exact_and_differ_per_rank():
    buffers = integer_inputs(4, 1000, "float16", seed=3)
    assert all(b.dtype == np.float16 and np.all(np.abs(b) <= 4) for b in buffers)
    assert all(np.array_equal(b, np.round(b)) for b in buffers)
    assert len({b.tobytes() for b in buffers}) == 4
    assert {float(v) for v in integer_inputs(2, 500, "int32", "prod")[1]} == {-1.0, 1.0}
    again = integer_inputs(4, 1000, "float16", seed=3)
    assert all(np.array_equal(a, b) for a, b in zip(buffers, again))


# -- a schedule describes itself: the executor reads layouts and spec, never the name ------


def gather_schedule(k, root):
    """A gather to ``root``, which collsim does not offer: written here as data only."""
    from collsim.collectives.schedule import ChunkMove, Schedule
    from collsim.collectives.spec import CONCAT_FIRST_AXIS, CollectiveSpec

    spec = CollectiveSpec("gather", rooted=True, output_shape_rule=CONCAT_FIRST_AXIS)
    moves = tuple(ChunkMove(r, root, range(r, r + 1), False) for r in range(k) if r != root)
    return Schedule(
        "gather", "direct", k, k, (moves,) if moves else (), (), "own_chunk", "root", root, spec
    )


@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_the_executor_runs_a_new_collective_from_its_data_alone(k):
    from collsim.collectives.executor import run_schedule

    root = k - 1
    schedule = gather_schedule(k, root)
    xs = [np.arange(6.0).reshape(2, 3) + 10 * r for r in range(k)]

    def program(rank):
        return (yield from run_schedule(rank, schedule, xs[rank.id], op="sum"))

    out = collsim.Cluster(topology.switch(k)).run(program).returns
    assert all(o is None for r, o in enumerate(out) if r != root)
    np.testing.assert_array_equal(out[root], np.concatenate(xs))


RUNS_SCHEDULES = ("run_schedule", "_prepare", "_result")


def test_the_executor_never_names_a_collective():
    import ast
    import pathlib

    from collsim.collectives import executor

    tree = ast.parse(pathlib.Path(executor.__file__).read_text())
    named = [
        (node.lineno, node.value)
        for func in tree.body
        if isinstance(func, ast.FunctionDef)
        and func.name in ("run_schedule", "_prepare", "_result")
        for node in ast.walk(func)
        if isinstance(node, ast.Constant) and node.value in ALGORITHMS
    ]
    assert named == []
