"""FSDP's knobs and HSDP on the mesh trainer (ZeRO-3 underneath).

Values: every knob and every replicate x shard layout equals one device over Adam steps.
Structure and memory: prefetching holds two gathered units at once and starts the next
gather while the current unit computes, so less communication is exposed;
``reshard_after_forward=False`` gathers once and holds every unit; HSDP gathers and
reduce-scatters inside the shard group and sends only the shard's all-reduce between nodes.
"""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collsim import Cluster, topology
from collsim.collectives.formulas import closed_form
from collsim.collectives.records import is_collective
from collsim.errors import ConfigError
from collsim.network.memory import busiest, memory_peaks
from collsim.nn import Adam
from collsim.parallel.config import PREFETCH, ParallelConfig
from collsim.parallel.mesh import train
from collsim.parallel.pipeline.runner import toy_batch, toy_model

LAYERS, B = 3, 8  # transformer blocks (the FSDP units); bytes per float64 element


def problem(rows, layers=LAYERS, seed=0):
    model = toy_model(layers, hidden=8, heads=2, seed=seed)
    return model, [toy_batch(rows, seed=seed + 1), toy_batch(rows, seed=seed + 2)]


def unit_bytes(model):
    return 2 * sum(a.size for a in model[0].params.values())  # bf16, one block


def slow_cluster(n, per_node=None):
    """Finite links and compute, so overlap shows in simulated time."""
    if per_node is None:
        graph = topology.switch(n, "10GB/s", "5us")
    else:
        graph = topology.hierarchical(n // per_node, per_node)
    return Cluster(graph, compute_rate="1GFLOP/s")


def run_fsdp(n=4, m=1, steps=2, cluster=None, **knobs):
    model, batches = problem(n * m)
    config = ParallelConfig(dp=n, microbatches=m, zero=3, **knobs)
    cluster = cluster or slow_cluster(config.world_size)
    return model, train(
        model, batches[:steps], config, cluster=cluster, optimizer=Adam(1e-2, eps=1e-6)
    )


@pytest.mark.parametrize("reshard", [True, False])
@pytest.mark.parametrize("prefetch", PREFETCH)
def test_every_knob_trains_like_one_device(prefetch, reshard):
    _, run = run_fsdp(m=2, prefetch=prefetch, reshard_after_forward=reshard)
    assert run.match is True and run.max_error < 1e-10
    assert run.dp_replica_diff == 0.0


@pytest.mark.parametrize(
    "prefetch, units", [("none", 1), ("forward", 2), ("backward", 2), ("both", 2)]
)
def test_prefetch_holds_the_next_unit_too(prefetch, units):
    model, run = run_fsdp(prefetch=prefetch)
    peak = busiest(memory_peaks(run.trace, run.mesh.size))
    assert peak.by_category["gathered_params"] == units * unit_bytes(model)


def test_the_inflight_limit_of_one_turns_prefetch_off():
    model, run = run_fsdp(prefetch="both", max_inflight_gathers=1)
    peak = busiest(memory_peaks(run.trace, run.mesh.size))
    assert peak.by_category["gathered_params"] == unit_bytes(model)


def test_prefetch_overlaps_the_gathers_with_compute():
    _, plain = run_fsdp(prefetch="none")
    _, ahead = run_fsdp(prefetch="both")
    assert ahead.overlap[0].exposed_s < plain.overlap[0].exposed_s  # simulated seconds
    assert ahead.time < plain.time
    # a prefetched gather runs while the rank computes: some all-gather overlaps compute
    gathers = [
        t
        for t in ahead.trace.transfers
        if is_collective(t.tag) and t.tag.collective == "all_gather" and t.src == 0
    ]
    spans = [c for c in ahead.trace.computes if c.rank == 0 and c.end > c.start]
    assert any(c.start < t.start < c.end for t in gathers for c in spans)


def test_no_reshard_after_forward_gathers_once_and_holds_every_unit():
    model, resharded = run_fsdp(steps=1)
    _, kept = run_fsdp(steps=1, reshard_after_forward=False)
    gathered = [run.bytes_by_group[("dp", "all_gather")][0] for run in (resharded, kept)]
    assert gathered[1] * 2 == gathered[0]  # SHARD_GRAD_OP: no second gather
    peak = busiest(memory_peaks(kept.trace, kept.mesh.size))
    assert peak.by_category["gathered_params"] == LAYERS * unit_bytes(model)


@given(n=st.integers(1, 8), prefetch=st.sampled_from(PREFETCH), seed=st.integers(0, 999))
def test_property_any_shard_count_and_prefetch_matches_one_device(n, prefetch, seed):
    model, batches = problem(n, layers=2, seed=seed)
    config = ParallelConfig(dp=n, zero=3, prefetch=prefetch)
    run = train(model, batches, config, optimizer=Adam(1e-2, eps=1e-6))
    assert run.match, (n, prefetch, run.max_error)


# -- HSDP -----------------------------------------------------------------------------------


@pytest.mark.parametrize("replicas, shards", [(2, 2), (2, 4), (4, 2), (3, 2)])
def test_hsdp_matches_one_device_and_sends_only_the_shard_all_reduce_between_nodes(
    replicas, shards
):
    n = replicas * shards
    model, batches = problem(n)
    config = ParallelConfig(dp=n, zero=3, dp_replicate=replicas)
    run = train(
        model,
        batches[:1],
        config,
        cluster=slow_cluster(n, per_node=shards),
        optimizer=Adam(1e-2, eps=1e-6),
    )
    assert run.match is True and run.dp_replica_diff == 0.0  # every replica of a shard agrees
    sent = {key: per_rank[0] for key, per_rank in run.bytes_by_group.items()}
    per_unit = sum(a.size for a in model[0].params.values())
    shard = -(-per_unit // shards)  # elements of one unit's shard (padded)

    def ring(collective, k, elements):
        return closed_form(collective, "ring", k, elements * B, 0.0, 1.0).bytes_per_rank

    assert sent[("dp_shard", "all_gather")] == 2 * LAYERS * ring(
        "all_gather", shards, shard * shards
    )
    assert sent[("dp_shard", "reduce_scatter")] == LAYERS * ring(
        "reduce_scatter", shards, shard * shards
    )
    assert sent[("dp_replicate", "all_reduce")] == LAYERS * ring("all_reduce", replicas, shard)
    # the shard group sits inside a node: only the replica all-reduce crosses nodes
    between = sum(t.nbytes for t in run.trace.transfers if t.src // shards != t.dst // shards)
    replica_bytes = sum(run.bytes_by_group[("dp_replicate", "all_reduce")])
    assert between == replica_bytes > 0


def test_hsdp_refusals_name_the_value():
    with pytest.raises(ConfigError, match="dp_replicate=3 does not divide dp=4"):
        ParallelConfig(dp=4, zero=3, dp_replicate=3)
    with pytest.raises(ConfigError, match="dp_replicate=2 .* needs zero=3, got zero=1"):
        ParallelConfig(dp=4, zero=1, dp_replicate=2)
    with pytest.raises(ConfigError, match="prefetch='sideways' is not one of none, forward"):
        ParallelConfig(dp=2, zero=3, prefetch="sideways")
    with pytest.raises(ConfigError, match="prefetch='both' is an FSDP option: it needs zero=3"):
        ParallelConfig(dp=2, prefetch="both")
    with pytest.raises(ConfigError, match="reshard_after_forward=False is an FSDP option"):
        ParallelConfig(dp=2, zero=2, reshard_after_forward=False)
    with pytest.raises(ConfigError, match="max_inflight_gathers must be an integer >= 1, got 0"):
        ParallelConfig(max_inflight_gathers=0)
    assert ParallelConfig(dp=8, zero=3, dp_replicate=2).dp_shard == 4
    assert ParallelConfig(dp=4, dp_replicate=4).dp_shard == 1  # Accelerate's sizes of DDP


@given(
    replicas=st.integers(1, 4),
    shards=st.integers(1, 4),
    layers=st.integers(1, 2),
    seed=st.integers(0, 999),
)
def test_property_any_hsdp_layout_matches_one_device(replicas, shards, layers, seed):
    n = replicas * shards
    model, batches = problem(n, layers=layers, seed=seed)
    config = ParallelConfig(dp=n, zero=3, dp_replicate=replicas)
    run = train(model, batches, config, optimizer=Adam(1e-2, eps=1e-6))
    assert run.match and run.dp_replica_diff == 0.0, (replicas, shards, run.max_error)
