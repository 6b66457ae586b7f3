"""ZeRO stages 0-3 on the mesh trainer: values, bytes and measured memory.

Values: several Adam (and SGD) steps equal one device for every stage and mesh. Bytes: each
stage sends its closed form (DDP and stages 1-2 2Ψ(N-1)/N·b, stage 3 3Ψ(N-1)/N·b per
micro-batch step), read from the trace. Memory: the busiest rank's model state, measured by
the run's tracker, is the ZeRO paper's 16Ψ, 4Ψ + 12Ψ/N, 2Ψ + 14Ψ/N, 16Ψ/N, and equals the
planner's estimate (`collsim.plan.memory.model_state_bytes`).
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from collsim.collectives.formulas import closed_form
from collsim.errors import ConfigError
from collsim.network.memory import busiest, memory_peaks
from collsim.nn import SGD, Adam
from collsim.parallel.config import ParallelConfig
from collsim.parallel.data.sharded import FlatLayout, optimizer_bytes_per_param
from collsim.parallel.mesh import train
from collsim.parallel.pipeline.runner import toy_batch, toy_model
from collsim.plan.memory import model_state_bytes

STAGES = (0, 1, 2, 3)
MESHES = [(2, 1, 1, 1), (4, 1, 1, 1), (2, 1, 1, 2), (2, 2, 1, 1), (2, 1, 2, 2), (3, 1, 1, 1)]
B = 8  # bytes per element of the float64 numerics


def problem(layers=2, rows=12, hidden=8, seed=0):
    model = toy_model(layers, hidden=hidden, heads=2, seed=seed)
    (x, target), (x2, target2) = (
        toy_batch(rows, hidden=hidden, seed=seed + 1),
        toy_batch(rows, hidden=hidden, seed=seed + 2),
    )
    return model, [(x, target), (x2, target2)]


def local_params(model, config):
    """Ψ of one rank: parameters of its stage's layers (tp = 1)."""
    per_stage = len(model) // config.pp
    return sum(a.size for i in range(per_stage) for a in model[i].params.values())


@pytest.mark.parametrize("dp, tp, pp, m", MESHES)
@pytest.mark.parametrize("zero", STAGES)
def test_every_stage_trains_like_one_device_with_adam(zero, dp, tp, pp, m):
    model, batches = problem(rows=dp * m * 2)
    config = ParallelConfig(dp=dp, tp=tp, pp=pp, microbatches=m, zero=zero)
    run = train(model, batches, config, optimizer=Adam(1e-2, eps=1e-6))
    assert run.match is True and run.max_error < 1e-10  # two Adam steps, float64
    assert run.dp_replica_diff == 0.0  # every replica of a shard holds the same numbers


@pytest.mark.parametrize("zero", STAGES)
def test_sgd_with_momentum_too(zero):
    model, batches = problem(rows=4)
    run = train(model, batches, ParallelConfig(dp=2, zero=zero), optimizer=SGD(0.1, 0.9))
    assert run.match


@given(
    zero=st.sampled_from(STAGES),
    dp=st.integers(1, 8),
    layers=st.integers(1, 3),
    hidden=st.sampled_from([4, 8]),
    seed=st.integers(0, 2**16),
)
def test_property_any_shard_count_matches_one_device(zero, dp, layers, hidden, seed):
    model, batches = problem(layers, rows=dp, hidden=hidden, seed=seed)
    run = train(model, batches, ParallelConfig(dp=dp, zero=zero), optimizer=Adam(1e-2, eps=1e-6))
    assert run.match, (zero, dp, run.max_error)


# -- bytes: the closed forms, from the trace ----------------------------------------------


@pytest.mark.parametrize("zero", STAGES)
@pytest.mark.parametrize("n", [2, 4])
def test_bytes_per_rank_are_the_closed_forms(zero, n):
    model, batches = problem(rows=n)
    run = train(model, batches[:1], ParallelConfig(dp=n, zero=zero), optimizer=Adam(1e-2))
    psi = local_params(model, run.config)
    padded = FlatLayout.of({"p": np.zeros(psi)}, n).padded if zero < 3 else None
    sent = {c: per_rank for (dim, c), per_rank in run.bytes_by_group.items() if dim == "dp"}

    def ring(collective, elements):
        return closed_form(collective, "ring", n, elements * B, 0.0, 1.0).bytes_per_rank

    if zero == 0:
        assert sent == {"all_reduce": [ring("all_reduce", psi)] * n}
    elif zero in (1, 2):
        assert sent == {
            "reduce_scatter": [ring("reduce_scatter", padded)] * n,
            "all_gather": [ring("all_gather", padded)] * n,
        }
    else:  # every unit gathered twice (forward, backward), reduce-scattered once
        units = [sum(a.size for a in block.params.values()) for block in model]
        units = [FlatLayout.of({"p": np.zeros(u)}, n).padded for u in units]
        assert sent == {
            "all_gather": [2 * sum(ring("all_gather", u) for u in units)] * n,
            "reduce_scatter": [sum(ring("reduce_scatter", u) for u in units)] * n,
        }
    # 2Ψ(N-1)/N·b for stages 0-2, 3Ψ(N-1)/N·b for stage 3 (Ψ divides by N here)
    total = sum(v[0] for v in sent.values())
    assert total == pytest.approx((3 if zero == 3 else 2) * psi * (n - 1) / n * B, rel=0.02)


def test_stage_2_reduce_scatters_every_micro_batch():
    model, batches = problem(rows=8)
    stage1 = train(model, batches[:1], ParallelConfig(dp=2, microbatches=4, zero=1))
    stage2 = train(model, batches[:1], ParallelConfig(dp=2, microbatches=4, zero=2))
    rs1 = stage1.bytes_by_group[("dp", "reduce_scatter")][0]
    assert stage2.bytes_by_group[("dp", "reduce_scatter")][0] == 4 * rs1


# -- memory: the ZeRO paper's formulas, measured -------------------------------------------


@pytest.mark.parametrize("zero", STAGES)
@pytest.mark.parametrize("n", [1, 2, 4])
@pytest.mark.parametrize("optimizer", [Adam(1e-2), SGD(0.1, 0.9), SGD(0.1)], ids=repr)
def test_measured_model_state_is_the_zero_formula_and_the_planners(zero, n, optimizer):
    model, batches = problem(rows=4)  # Ψ = 1200: every N here divides it
    run = train(model, batches, ParallelConfig(dp=n, zero=zero), optimizer=optimizer)
    psi = local_params(model, run.config)
    peak = busiest(memory_peaks(run.trace, run.mesh.size)).to_dict()
    k = optimizer_bytes_per_param(optimizer)
    shard = {0: (1, 1, 1), 1: (1, 1, n), 2: (1, n, n), 3: (n, n, n)}[zero]
    assert peak["params"] == 2 * psi / shard[0]
    assert peak["grads"] == 2 * psi / shard[1]
    assert peak["optimizer"] == k * psi / shard[2]
    if k == 12:  # mixed-precision Adam: 16Ψ, 4Ψ + 12Ψ/N, 2Ψ + 14Ψ/N, 16Ψ/N
        state = peak["params"] + peak["grads"] + peak["optimizer"]
        assert (
            state
            == {0: 16 * psi, 1: 4 * psi + 12 * psi / n, 2: 2 * psi + 14 * psi / n, 3: 16 * psi / n}[
                zero
            ]
        )
        assert (peak["params"], peak["grads"], peak["optimizer"]) == model_state_bytes(psi, zero, n)
    block = sum(a.size for a in model[0].params.values())
    assert peak["gathered_params"] == (2 * block if zero == 3 else 0)  # one unit, gathered


def test_zero_3_holds_one_gathered_unit_at_a_time():
    model, batches = problem(layers=3, rows=4)
    run = train(model, batches[:1], ParallelConfig(dp=4, zero=3), optimizer=Adam(1e-2))
    events = [e for e in run.trace.memory if e.category == "gathered_params" and e.rank == 0]
    held, most = 0, 0
    for event in events:
        held += event.nbytes
        most = max(most, held)
    unit = 2 * sum(a.size for a in model[0].params.values())
    assert most == unit and held == 0  # gathered, used, freed: one unit at a time
    assert len(events) == 2 * 2 * 3  # (gather, free) x (forward, backward) x 3 units


def test_config_refuses_a_stage_that_does_not_exist():
    with pytest.raises(ConfigError, match="zero=4 is not a ZeRO stage: choose one of 0, 1, 2, 3"):
        ParallelConfig(zero=4)
    with pytest.raises(ConfigError, match="zero=True is not a ZeRO stage"):
        ParallelConfig(zero=True)


@pytest.mark.parametrize("n", [2, 4])
def test_stage_1_can_all_reduce_its_gradients_instead(n):
    model, batches = problem(rows=n)
    scattered = train(model, batches, ParallelConfig(dp=n, zero=1), optimizer=Adam(1e-2))
    reduced = train(
        model,
        batches,
        ParallelConfig(dp=n, zero=1, zero1_gradients="all_reduce"),
        optimizer=Adam(1e-2),
    )
    assert reduced.match and scattered.match
    for key, value in scattered.params.items():
        np.testing.assert_allclose(reduced.params[key], value, rtol=0, atol=1e-13)
    sent = reduced.bytes_by_group
    assert ("dp", "reduce_scatter") not in sent
    rs = scattered.bytes_by_group[("dp", "reduce_scatter")][0]
    assert sent[("dp", "all_reduce")][0] == 2 * rs  # twice the gradient bytes
    with pytest.raises(ConfigError, match="zero1_gradients='all_reduce' is a ZeRO-1 option"):
        ParallelConfig(dp=2, zero=2, zero1_gradients="all_reduce")
