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
from collsim.runtime.group import DeviceMesh, Group

REL = 1e-12  # simulated time vs closed form: floating-point precision

PAIRS = [(c, a) for c, algs in ALGORITHMS.items() for a in algs]
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
    out = cluster.collective(collective, buffers, algorithm=algorithm, op=op, root=root)
    check_outputs(out, reference(collective, buffers, op, root))


def test_seed004_allreduce_of_gradients_averages():
    # seed 004: four ranks' gradients summed then divided by 4 == the average
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
    pairs = sorted((t.src, t.dst, t.tag[3]) for t in out.trace.transfers)
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
    algorithm=st.sampled_from(["ring", "tree", "halving_doubling", "naive"]),
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
    mesh = DeviceMesh((2, 3), ("dp", "tp"))
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
    with pytest.raises(ConfigError, match="names a rank twice"):
        Group([0, 0])
    with pytest.raises(ConfigError, match=r"ranks \[7\] do not exist"):
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
    with pytest.raises(ConfigError, match="count-only"):
        collsim.Cluster(topology.ring(2)).all_reduce([np.ones(100)] * 2)


def test_count_only_bfloat16_counts_two_bytes():
    out = collsim.Cluster(topology.ring(4)).all_reduce(count=1024, dtype="bfloat16")
    assert out.outputs == [None] * 4
    assert out.stats.bytes_sent == [2 * 3 * 256 * 2] * 4


def test_same_inputs_same_trace():
    def once():
        c = collsim.Cluster(topology.switch(5))
        return c.all_reduce([np.arange(7.0) * r for r in range(5)], algorithm="naive").trace

    assert once().to_chrome() == once().to_chrome()
