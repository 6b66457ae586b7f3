"""The planner's communication figures equal what the simulator counts for the same small
configuration: one cost model (collectives/formulas.py), two ways of getting there."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import collsim
from collsim.nn import MLP
from collsim.parallel.tensor import ParallelMLP
from collsim.plan import plan
from collsim.runtime.group import Group


@given(dp=st.integers(2, 8), blocks=st.integers(1, 64))
def test_dp_gradient_all_reduce_bytes_and_time(dp, blocks):
    params = dp * blocks * 8  # dp divides the gradient, as the closed form assumes
    report = plan(
        params=params,
        world_size=dp,
        global_batch=dp,
        micro_batch=1,
        intra_bandwidth="300GB/s",
        intra_latency="2us",
    )
    op = report.communication["dp"]["ops"]["gradient_all_reduce"]
    # the simulator: the same all-reduce of the bf16 gradients, counted on the wire
    cluster = collsim.Cluster(collsim.topology.fully_connected(dp, "300GB/s", "2us"))
    sim = cluster.all_reduce(count=params, dtype="bfloat16")
    assert sim.stats.bytes_sent == [op["bytes_per_call"]] * dp
    assert sim.stats.steps == op["steps_per_call"]
    assert sim.time == pytest.approx(op["time_per_call_s"], rel=1e-12)


@pytest.mark.parametrize("tp", [2, 4])
def test_tp_mlp_all_reduce_bytes_match_a_real_megatron_mlp(tp):
    batch, seq, hidden = 2, 4, 8
    report = plan(
        layers=1,
        hidden=hidden,
        heads=tp,
        seq=seq,
        micro_batch=batch,
        global_batch=batch,
        world_size=tp,
        tp=tp,
        precision="fp32",
    )
    ops = report.communication["tp"]["ops"]
    rng = np.random.default_rng(0)
    mlp = MLP.init(hidden, rng, dtype=np.float32)
    x = rng.uniform(-1, 1, (batch, seq, hidden)).astype(np.float32)
    dy = rng.uniform(-1, 1, (batch, seq, hidden)).astype(np.float32)
    group = Group(range(tp))

    def program(rank):
        shard = ParallelMLP.from_full(mlp, group, rank.id)
        y, ctx = yield from shard.forward(rank, x)  # g: one all-reduce
        yield from shard.backward(rank, ctx, dy)  # f: one all-reduce of dX
        return y

    result = collsim.Cluster(collsim.topology.fully_connected(tp)).run(program)
    per_rank = result.stats.bytes_sent[0]
    planned = ops["mlp_forward"]["bytes_per_call"] + ops["mlp_backward"]["bytes_per_call"]
    assert per_rank == planned == 2 * 2 * (tp - 1) / tp * batch * seq * hidden * 4
    assert np.allclose(result.returns[0], mlp.forward(x)[0], rtol=1e-5, atol=1e-6)
