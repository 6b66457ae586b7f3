"""The batched path gives what the per-transfer path gives: outputs, time, trace, counts.

`cluster.all_reduce(...)` and its siblings run a whole step at once where nothing else
moves (collsim.fast, behind one seam); a cluster with `fast=False` sends every
transfer through the engine one by one.  Every collective x algorithm runs both ways on
every kind of topology, numeric (random floats, so a reduction in another order would
show in the last bit) and count-only, and must agree exactly.  Other tests prove the
batched path is really taken where it should be, and left where max-min sharing, faults,
in-switch reduction or a guard must decide.
"""

import tracemalloc

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import collsim
from collsim import hardware, topology
from collsim.collectives.api import collective, run_collective
from collsim.collectives.registry import BUILDERS, HARDWARE_BUILDERS, POWER_OF_TWO_ONLY, build
from collsim.errors import ConfigError, SimulationLimitError
from collsim.fast.batched import Unbatched, run_batched
from collsim.runtime.faults import Faults
from collsim.runtime.group import Group

K = 8
GENERIC = {
    "ring": lambda: topology.ring(K, "100GB/s", "5us"),
    "bidirectional_ring": lambda: topology.bidirectional_ring(K, "50GB/s", "2us"),
    "switch": lambda: topology.switch(K, "25GB/s", "1us"),
    "fully_connected": lambda: topology.fully_connected(K, "10GB/s", "3us"),
    "torus2d": lambda: topology.torus2d(2, K // 2, "40GB/s", "2us"),
    "hierarchical": lambda: topology.hierarchical(2, K // 2),
}
PRESETS = {
    "dgx-a100": lambda: hardware.topology("dgx-a100"),
    "dgx-h100": lambda: hardware.topology("dgx-h100"),
    "dgx-h100 x2": lambda: hardware.topology("dgx-h100", nodes=2),
    "pcie-8gpu": lambda: hardware.topology("pcie-8gpu"),
}
CASES = [(name, algo, topo) for (name, algo) in BUILDERS for topo in {**GENERIC, **PRESETS}]
RUNS_ON = {"nvls": "dgx-h100", "nvls_tree": "dgx-h100 x2"}  # NVLink SHARP: H100 only
# CollNet where the network's switches reduce (InfiniBand SHARP): only its cases run there
RUNS_ON.update(collnet_direct="dgx-a100 x2 sharp", collnet_chain="dgx-a100 x2 sharp")
PRESETS["dgx-a100 x2 sharp"] = lambda: hardware.topology("dgx-a100", nodes=2, sharp=True)
CASES += [
    (name, algo, topo)
    for (name, algo) in HARDWARE_BUILDERS
    for topo in PRESETS
    if RUNS_ON.get(algo, topo) == topo
]


def _inputs(name, k, count, dtype="float64", seed=0):
    rng = np.random.default_rng(seed)
    shape = (k * count,) if name == "all_to_all" else (count,)
    return [rng.uniform(-1, 1, shape).astype(dtype) for _ in range(k)]


def _both(cluster, name, buffers=None, **options):
    batched = run_collective(cluster, name, buffers, **options)
    cluster.fast = False  # the switch: the reference path alone, on the same cluster
    try:
        general = run_collective(cluster, name, buffers, **options)
    finally:
        cluster.fast = True
    return batched, general


def _assert_same(batched, general):
    assert batched.time == general.time
    assert batched.trace.transfers == general.trace.transfers  # tags, links, labels, moves
    assert batched.stats == general.stats
    assert batched.algorithm == general.algorithm and batched.protocol == general.protocol
    for a, b in zip(batched.outputs, general.outputs, strict=True):
        if a is None or b is None:
            assert a is None and b is None
        else:
            assert a.dtype == b.dtype and a.shape == b.shape
            assert np.array_equal(a, b)  # bit for bit: the same additions in the same order


@pytest.mark.parametrize("mode", ["numeric", "numeric, equal chunks", "count-only"])
@pytest.mark.parametrize("name, algorithm, topo", CASES, ids=lambda v: str(v))
def test_every_algorithm_and_topology_gives_the_same_result_either_way(name, algorithm, topo, mode):
    cluster = collsim.Cluster({**GENERIC, **PRESETS}[topo]())
    k = cluster.size
    options = dict(algorithm=algorithm, op="sum", root=3 % k)
    # uneven chunks (moved as views), or equal small ones (moved as one indexed operation)
    count = 3 if name == "all_to_all" else 2 * k + 3
    if mode == "numeric, equal chunks":
        count = 4 if name == "all_to_all" else 4 * k
    if mode.startswith("numeric"):
        batched, general = _both(cluster, name, _inputs(name, k, count), **options)
    else:
        count *= k if name == "all_to_all" else 1  # a block of 3 for every rank
        batched, general = _both(cluster, name, count=count, dtype="float32", **options)
    _assert_same(batched, general)


# -- the batched path is taken, and left, where it should be -------------------------------


def _batched(cluster, name, algorithm, count=64, buffers=None, group=None):
    group = Group.of(group, cluster.size)
    schedule = build(name, algorithm, group.size)
    return run_batched(cluster, schedule, group, buffers, count, "float32", "sum", None)


@pytest.mark.parametrize("name, algorithm", sorted(BUILDERS))
def test_on_a_switch_every_generic_algorithm_without_contention_is_batched(name, algorithm):
    # a switch gives every rank its own up and down link; only a step in which one rank
    # receives (or sends) twice makes two flows share a link
    cluster = collsim.Cluster(topology.switch(K))
    schedule = build(name, algorithm, K)
    shared = any(
        len(set(m.dst for m in step)) < len(step) or len(set(m.src for m in step)) < len(step)
        for step in schedule.steps
    )
    run = _batched(cluster, name, algorithm)
    assert isinstance(run, Unbatched) == shared, (name, algorithm)


def test_a_ring_all_reduce_on_a_ring_is_batched_and_naive_on_a_switch_is_not():
    assert not isinstance(
        _batched(collsim.Cluster(topology.ring(K)), "all_reduce", "ring"), Unbatched
    )
    # naive: every rank sends to the root at once, sharing its down link (max-min decides)
    assert isinstance(
        _batched(collsim.Cluster(topology.switch(K)), "all_reduce", "naive"), Unbatched
    )
    # on the ideal model nothing is shared, so even naive is batched
    ideal = collsim.Cluster(topology.switch(K), model="ideal")
    assert not isinstance(_batched(ideal, "all_reduce", "naive"), Unbatched)


def test_faults_in_switch_reduction_and_guards_take_the_per_transfer_path():
    faulty = collsim.Cluster(topology.ring(K), faults=Faults.parse(slow_link=["2-3:0.5"]))
    assert "faults" in _batched(faulty, "all_reduce", "ring").reason
    h100 = collsim.Cluster(hardware.topology("dgx-h100"))
    out = run_collective(h100, "all_reduce", count=1 << 12, algorithm="nvls")
    why = run_batched(
        h100, out.schedule, Group.of(None, 8), None, 1 << 12, "float32", "sum", out.protocol
    )
    assert "step 1 is reduced in the switch (NVLS)" == why.reason
    tight = collsim.Cluster(topology.ring(K), max_time=1e-6)
    assert "max_time" in _batched(tight, "all_reduce", "ring").reason
    with pytest.raises(SimulationLimitError):  # and the per-transfer path reports it
        tight.all_reduce(count=1 << 20, dtype="float32")
    shared = _batched(collsim.Cluster(topology.switch(K)), "all_reduce", "naive")
    assert shared.reason == "flows of step 1 would share a link, which max-min sharing decides"


def test_a_per_transfer_run_too_big_for_the_engine_is_refused_before_it_starts(monkeypatch):
    from collsim.collectives import executor

    monkeypatch.setattr(executor, "MAX_ENGINE_TRANSFERS", 29)
    cluster = collsim.Cluster(topology.switch(16))
    with pytest.raises(ConfigError) as err:  # 15 sends into the root, 15 out: 30 transfers
        cluster.all_reduce(count=64, algorithm="naive")
    assert str(err.value).startswith(
        "all-reduce (naive) on 16 ranks: 30 transfers would go "
        "through the engine one at a time, because flows of "
        "step 1 would share a link"
    )
    assert "2,048 ranks and 29 transfers" in str(err.value) and "--analytical" in str(err.value)
    # the batched path has no such limit: a contention-free ring of the same size runs
    assert cluster.all_reduce(count=64, algorithm="ring").trace.transfer_count == 2 * 16 * 15


def test_a_step_whose_result_depends_on_delivery_order_is_not_batched():
    # the tree's root reduces two children's chunks in one step: float addition in the
    # order deliveries arrive in, which only the engine knows
    cluster = collsim.Cluster(topology.switch(K), model="ideal")
    buffers = _inputs("all_reduce", K, 16)
    schedule = build("all_reduce", "naive", K)
    group = Group.of(None, K)
    assert isinstance(
        run_batched(cluster, schedule, group, buffers, 16, "float64", "sum", None), Unbatched
    )
    assert not isinstance(
        run_batched(cluster, schedule, group, None, 16, "float64", "sum", None), Unbatched
    )


def test_events_and_time_equal_the_engines():
    cluster = collsim.Cluster(topology.bidirectional_ring(6, "10GB/s", "1us"))
    # empty chunks too (count 1 and 5 on 6 ranks): a transfer of 0 bytes is one event; a
    # call of count 0 runs no steps on either path (tests/test_zero_bytes.py)
    for count in (1, 5, 600):
        run = _batched(cluster, "all_reduce", "ring", count=count)

        def program(rank, count=count):
            return (
                yield from collective(
                    rank, "all_reduce", None, None, "ring", "sum", 0, count, "float32"
                )
            )

        general = cluster.run(program)
        assert (run.time, run.events, run.trace.transfers) == (
            general.time,
            general.events,
            general.trace.transfers,
        )


def test_a_group_of_some_ranks_and_every_protocol_agree():
    cluster = collsim.Cluster(topology.ring(K))
    group = [1, 4, 6, 7]
    batched, general = _both(cluster, "all_reduce", _inputs("all_reduce", 4, 40), group=group)
    _assert_same(batched, general)
    assert {t.src for t in batched.trace.transfers} == set(group)
    h100 = collsim.Cluster(hardware.topology("dgx-h100"))
    for protocol in ("simple", "ll128", "ll"):
        batched, general = _both(
            h100, "all_reduce", count=1 << 10, algorithm="ring", protocol=protocol
        )
        _assert_same(batched, general)
        assert str(batched.protocol) == protocol


def test_the_trace_lists_transfers_by_end_then_start_sender_receiver():
    out = collsim.Cluster(topology.ring(5)).all_reduce(count=1000, dtype="float32")
    keys = [(t.end, t.start, t.src, t.dst) for t in out.trace.transfers]
    assert keys == sorted(keys)
    assert [t.src for t in out.trace.transfers[:5]] == [0, 1, 2, 3, 4]


def test_a_uniform_ring_keeps_a_few_bytes_per_transfer():
    # each step of a ring all-reduce on a uniform ring starts and ends at one instant and
    # moves equal chunks: its times and sizes are kept once, not once per transfer
    cluster = collsim.Cluster(topology.ring(256))
    tracemalloc.start()
    try:
        out = cluster.all_reduce(count=1 << 16, dtype="float32")
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    transfers = out.trace.transfer_count
    assert transfers == 2 * 256 * 255
    assert held / transfers < 32  # bytes per transfer: schedule, trace and result together
    assert out.time == pytest.approx(2 * 255 * (5e-6 + (1 << 18) / 256 / 100e9), rel=1e-12)


# -- properties ---------------------------------------------------------------------------

SMALL = ["ring", "switch", "bidirectional_ring"]


@given(
    pick=st.sampled_from(sorted(BUILDERS)),
    k=st.integers(2, 12),
    count=st.integers(0, 40),
    dtype=st.sampled_from(["float64", "float32", "float16", "int64", "int32"]),
    op=st.sampled_from(["sum", "prod", "max", "min", "avg"]),
    topo=st.sampled_from(SMALL),
    seed=st.integers(0, 2**16),
)
def test_property_batched_equals_per_transfer(pick, k, count, dtype, op, topo, seed):
    name, algorithm = pick
    if (name, algorithm) in POWER_OF_TWO_ONLY:
        k = 1 << (k.bit_length() - 1)
    graph = getattr(topology, topo)(k)
    cluster = collsim.Cluster(graph)
    if name in ("reduce_scatter",):
        count = k * max(1, count // k)
    values = _inputs(name, k, count, "float64", seed)
    buffers = [np.round(v * 3).astype(dtype) for v in values]
    batched, general = _both(cluster, name, buffers, algorithm=algorithm, op=op, root=seed % k)
    _assert_same(batched, general)


def test_moves_into_other_chunks_than_they_read_agree():
    # no built-in schedule copies chunk c into another chunk c' without reading the input
    # (all-to-all does, from the input): this one does, both ways, on equal small chunks
    from collsim.collectives.executor import run_schedule
    from collsim.collectives.schedule import ChunkMove, Schedule

    k = 4
    steps = tuple(
        tuple(
            ChunkMove(
                r, (r + 1) % k, range(c, c + 1), reduce, to=range((c + 2) % k, (c + 2) % k + 1)
            )
            for r in range(k)
            for c in [(r + s) % k]
        )
        for s, reduce in enumerate([True, False, True])
    )
    schedule = Schedule("all_reduce", "shifted", k, k, steps)
    cluster = collsim.Cluster(topology.ring(k))
    buffers = _inputs("all_reduce", k, 4 * k, seed=5)
    run = run_batched(cluster, schedule, Group.of(None, k), buffers, 4 * k, "float64", "sum", None)

    def program(rank):
        return (yield from run_schedule(rank, schedule, buffers[rank.id], op="sum"))

    general = cluster.run(program)
    assert run.time == general.time and run.trace.transfers == general.trace.transfers
    for a, b in zip(run.returns, general.returns, strict=True):
        assert np.array_equal(a, b)


def test_the_cli_runs_a_4096_rank_count_only_ring_all_reduce(capsys):
    from collsim.cli import main

    assert main(["run", "all-reduce", "--ranks", "4096", "--count-only", "--size", "1MiB"]) == 0
    row = capsys.readouterr().out.strip().splitlines()[-1].split()
    assert row[:6] == ["1048576", "262144", "float32", "sum", "8190", "40970.97"]  # us
    closed = 2 * 4095 * (5e-6 + (1 << 20) / 4096 / 100e9)
    assert float(row[5]) == pytest.approx(closed * 1e6, abs=0.005)


def test_building_more_records_than_memory_holds_is_refused(monkeypatch):
    from collsim.network import trace as trace_module

    out = collsim.Cluster(topology.ring(1024)).all_reduce(count=1024, dtype="float32")
    assert out.trace.transfer_count == 2 * 1024 * 1023  # counted from the columns
    monkeypatch.setattr(trace_module, "available_memory", lambda: 1 << 30)
    with pytest.raises(ConfigError) as err:
        len(out.trace.transfers)
    assert "2,095,104 transfer records need about 1.561 GiB" in str(err.value)
    assert "trace.stats" in str(err.value)
    assert out.stats.messages == [2 * 1023] * 1024  # the figures need no records


def test_the_cli_refuses_a_chrome_trace_too_big_for_memory(monkeypatch, tmp_path, capsys):
    from collsim.cli import main
    from collsim.network import trace as trace_module

    monkeypatch.setattr(trace_module, "available_memory", lambda: 1 << 30)
    out = tmp_path / "t.json"
    code = main(["run", "all-reduce", "--ranks", "1024", "--count-only", "--trace", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and not out.exists()  # refused: --trace cannot be written
    assert f"--trace {out}: the run's 2,095,104 transfers are too many to write one by one" in err
    assert "drop --trace, or pass a smaller --ranks" in err
