"""Data parallelism on the virtual cluster against one device (the batch-64, dp=4 example,
and Megatron-LM's batch rule).

Hypothesis draws degrees, micro-batch and accumulation, layer sizes, bucket size and a
seed; values come from ``np.random.default_rng(seed).uniform(-1, 1)``.  Gradients and
parameters must equal single-device numpy to rtol 1e-10; replicas must be bitwise equal;
bytes must equal the ring all-reduce's closed form 2(K-1)/K·P·b per rank per step.
"""

import copy
import runpy
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from collsim import Cluster, topology
from collsim.errors import ConfigError
from collsim.nn import GELU, SGD, Adam, LayerNorm, Linear, Sequential, mse_loss
from collsim.parallel.data import GradientBuckets, resolve_batch, train_data_parallel
from collsim.parallel.modules import LayerPass
from collsim.runtime.group import Group
from collsim.verify import single_device, verify

RTOL, ATOL = 1e-10, 1e-12
seeds = st.integers(0, 2**32 - 1)


def close(a, b):
    np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL)


def mlp(rng, features, hidden, layernorm=True):
    layers = [Linear.init(features, hidden, rng), GELU()]
    layers += [LayerNorm(rng.uniform(0.5, 1.5, hidden), rng.uniform(-0.5, 0.5, hidden))]
    layers = layers if layernorm else layers[:2]
    return Sequential(*layers, Linear.init(hidden, features, rng))


def batches(rng, steps, rows, features):
    return [
        (rng.uniform(-1, 1, (rows, features)), rng.uniform(-1, 1, (rows, features)))
        for _ in range(steps)
    ]


def cluster(k, compute_rate=100e12, latency="5us"):
    return Cluster(topology.switch(k, "100GB/s", latency), compute_rate=compute_rate)


# ---- the batch-64, dp=4 example --------------------------------------------------------


FIRST = LayerPass("forward", "0 Linear")  # the record of the first layer's forward pass


def test_batch64_on_dp4_takes_16_samples_per_rank_and_averages_the_gradient():
    rng = np.random.default_rng(4)
    model = mlp(rng, 8, 32)
    ((x, target),) = batches(rng, 1, 64, 8)
    run = train_data_parallel(cluster(4, compute_rate=1e12), model, [(x, target)], dp=4)
    assert (run.micro_batch, run.accumulation) == (16, 1)
    # each rank's first matmul is 2·16·8·32 FLOPs: it really saw 16 rows
    for r in range(4):
        span = next(c for c in run.result.trace.computes if c.rank == r and c.meta == FIRST)
        assert (span.end - span.start) * 1e12 == pytest.approx(2 * 16 * 8 * 32)
    # g_global = g0 + g1 + g2 + g3, g_avg = g_global / 4, by hand on the same rows
    local = []
    for r in range(4):
        rows = slice(16 * r, 16 * (r + 1))
        y, ctx = model.forward(x[rows])
        local.append(model.backward(ctx, mse_loss(y, target[rows])[1])[1])
    y, ctx = model.forward(x)
    full = model.backward(ctx, mse_loss(y, target)[1])[1]
    for name in full:
        g_avg = sum(g[name] for g in local) / 4
        close(g_avg, full[name])
        for rank_grads in run.steps[0]["rank_grads"]:
            close(rank_grads[name], g_avg)
    close(run.steps[0]["output"], y)


def test_dp_batch64_example_runs():
    runpy.run_path(str(Path(__file__).parents[1] / "examples" / "dp_batch64.py"))


# ---- equal to one device ------------------------------------------------------------------


@st.composite
def dp_configs(draw):
    dp = draw(st.integers(1, 4))
    micro = draw(st.integers(1, 3))
    accumulation = draw(st.integers(1, 3))
    return dp, micro, accumulation


@given(
    dp_configs(),
    st.integers(1, 4),
    st.integers(1, 6),
    st.sampled_from([64, 512, 2**25]),
    st.booleans(),
    seeds,
)
def test_training_equals_one_device_and_replicas_stay_identical(
    config, features, hidden, bucket_bytes, adam, seed
):
    dp, micro, accumulation = config
    rng = np.random.default_rng(seed)
    model = mlp(rng, features, hidden)
    data = batches(rng, 3, micro * dp * accumulation, features)
    optimizer = Adam(lr=1e-2) if adam else SGD(lr=0.1, momentum=0.5)
    run = train_data_parallel(
        cluster(dp),
        model,
        data,
        dp=dp,
        micro_batch=micro,
        optimizer=optimizer,
        bucket_bytes=bucket_bytes,
    )
    assert run.accumulation == accumulation
    oracle = single_device(model, data, optimizer)
    for mine, ref in zip(run.steps, oracle):
        close(mine["loss"], ref["loss"])
        close(mine["output"], ref["output"])
        for name, grad in ref["grads"].items():
            close(mine["grads"][name], grad)
    for name, value in oracle[-1]["params"].items():
        for replica in run.replicas:
            close(replica[name], value)
            assert np.array_equal(replica[name], run.replicas[0][name])  # bitwise
    assert model.params["0.weight"] is not run.replicas[0]["0.weight"]  # the input is untouched


@given(st.integers(1, 4), st.integers(1, 2), st.integers(1, 2), seeds)
def test_transformer_blocks_through_verify(dp, layers, accumulation, seed):
    report = verify(
        "dp",
        dp=dp,
        batch=2 * dp * accumulation,
        micro_batch=2,
        hidden=4,
        heads=2,
        seq=3,
        layers=layers,
        steps=2,
        seed=seed,
    )
    assert report.match, report
    assert report.dp_replica_diff == 0.0
    assert report.config["accumulation"] == accumulation


# ---- Megatron-LM's batch rule ---------------------------------------------------------


@given(st.integers(1, 8), st.integers(1, 8), st.integers(1, 8), st.integers(-3, 3))
def test_batch_rule(dp, micro, accumulation, off_by):
    global_batch = max(1, micro * dp * accumulation + off_by)
    if micro * dp * accumulation == global_batch:
        assert resolve_batch(global_batch, dp, micro, accumulation) == (micro, accumulation)
        assert resolve_batch(global_batch, dp, micro_batch=micro) == (micro, accumulation)
        assert resolve_batch(global_batch, dp, accumulation=accumulation) == (micro, accumulation)
        return
    with pytest.raises(ConfigError) as err:
        resolve_batch(global_batch, dp, micro, accumulation)
    message = str(err.value)
    for number in (
        f"global batch {global_batch}",
        f"micro batch {micro}",
        f"dp {dp}",
        f"accumulation {accumulation}",
    ):
        assert number in message
    assert "global_batch = micro_batch · dp · accumulation" in message


def test_batch_rule_names_the_choices_that_work():
    with pytest.raises(ConfigError, match=r"micro batch 1 \(accumulation 16\), 2 \(8\)"):
        resolve_batch(64, 4, micro_batch=5)
    with pytest.raises(ConfigError, match=r"dp 3 does not divide global batch 64"):
        resolve_batch(64, 3)
    model = mlp(np.random.default_rng(0), 2, 2)
    with pytest.raises(ConfigError, match="global batch 10"):
        train_data_parallel(cluster(4), model, batches(np.random.default_rng(0), 1, 10, 2))


# ---- bytes: 2(K-1)/K·P·b per rank per step ------------------------------------------------------


@given(st.integers(2, 5), st.integers(1, 5), st.integers(1, 3), st.sampled_from([64, 2**25]), seeds)
def test_all_reduce_bytes_equal_the_formula(dp, hidden, steps, bucket_bytes, seed):
    rng = np.random.default_rng(seed)
    model = mlp(rng, 3, hidden)
    run = train_data_parallel(
        cluster(dp), model, batches(rng, steps, dp, 3), bucket_bytes=bucket_bytes
    )
    P = sum(v.size for v in model.params.values())
    assert sum(run.buckets) == P
    sent = run.bytes_by_collective["all_reduce"]
    assert set(run.bytes_by_collective) == {"all_reduce"}  # nothing else moves
    formula = 2 * (dp - 1) / dp * P * 8 * steps
    assert sum(sent) / dp == pytest.approx(formula, rel=1e-15)
    if all(n % dp == 0 for n in run.buckets):  # chunks even: every rank sends the same
        assert sent == [formula] * dp
    # 2(K-1) ring steps per bucket, one message per step per rank
    assert run.result.stats.messages_sent == [2 * (dp - 1) * len(run.buckets) * steps] * dp


# ---- bucketing and overlap -----------------------------------------------------------------------


def _overlap_run(bucket_bytes):
    rng = np.random.default_rng(1)
    model = Sequential(*(Linear.init(16, 16, rng) for _ in range(4)))
    data = batches(rng, 1, 64, 16)
    slow = Cluster(topology.switch(4, "1GB/s", "1us"), compute_rate=1e9)
    return train_data_parallel(slow, model, data, bucket_bytes=bucket_bytes)


def test_buckets_overlap_backward_and_shrink_the_exposed_time():
    whole, bucketed = _overlap_run("25MiB"), _overlap_run(2048)
    assert whole.buckets == [4 * (16 * 16 + 16)]
    assert bucketed.buckets == [272] * 4  # one Linear each, last layer first
    for r in range(4):
        w, b = whole.overlap[r], bucketed.overlap[r]
        assert w.overlapped_s == 0 and w.exposed_s == w.comm_s  # issued after backward
        # the step is compute, then the exposed all-reduce
        assert whole.time == pytest.approx(w.compute_s + w.exposed_s, rel=1e-12)
        assert b.overlapped_s > 0 and b.exposed_s < w.exposed_s
    # the trace shows it: a bucket's transfer runs while the same rank computes
    computes = [c for c in bucketed.result.trace.computes if c.rank == 0]
    early = [t for t in bucketed.result.trace.transfers if t.src == 0 and t.end < computes[-1].end]
    assert early and all(t.tag.collective == "all_reduce" for t in early)
    assert any(c.start < t.end and t.start < c.end for t in early for c in computes)
    for name in whole.steps[0]["grads"]:
        close(bucketed.steps[0]["grads"][name], whole.steps[0]["grads"][name])


def test_gradient_buckets_inside_a_hand_written_program():
    group = Group([0, 1, 2])

    def program(rank):
        buckets = GradientBuckets(rank, group, bucket_bytes=16)
        yield from buckets.add("a", np.full(2, float(rank.id)))  # 16 B: launched now
        yield from buckets.add("b", np.full((1, 3), 3.0 * rank.id))
        grads = yield from buckets.wait()
        return grads["a"].tolist(), grads["b"].tolist(), buckets.sizes

    returns = cluster(3).run(program).returns
    assert returns == [([1.0, 1.0], [[3.0, 3.0, 3.0]], [2, 3])] * 3


def test_model_and_optimizer_passed_in_are_not_changed():
    rng = np.random.default_rng(0)
    model = mlp(rng, 2, 3)
    before = copy.deepcopy(model.params)
    optimizer = Adam(lr=0.1)
    train_data_parallel(cluster(2), model, batches(rng, 2, 4, 2), optimizer=optimizer)
    assert optimizer.state == {}
    for name, value in before.items():
        assert np.array_equal(model.params[name], value)


def test_comm_stream_collectives_keep_the_order_they_were_issued_in():
    """A bucket waiting behind another on the comm stream still takes its place in the
    group's sequence when issued (as NCCL orders collectives), so a main-stream
    collective issued after it on the same group matches on every rank."""
    group = Group([0, 1])

    def program(rank):
        first = yield rank.start(rank.all_reduce(np.ones(1000), group=group))
        second = yield rank.start(rank.all_reduce(np.ones(4), group=group))  # queued
        if rank.id == 0:
            yield rank.compute(seconds=1.0)  # rank 1 reaches the next line much earlier
        third = yield from rank.all_reduce(np.full(2, 5.0), group=group)
        a, b = yield rank.wait(first, second)
        return a.size, b.size, third.tolist()

    assert cluster(2).run(program).returns == [(1000, 4, [10.0, 10.0])] * 2
