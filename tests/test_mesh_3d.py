"""3-D parallelism (dp x pp x tp on a device mesh, the mesh trainer): one step against one device.

The oracle is one device running the whole batch; the mesh layout, the pipeline messages
(each TP rank its share) and the bubble of every pipeline are checked from the trace.
"""

import math
import warnings
from collections import Counter

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from collsim import Cluster, topology
from collsim.errors import ConfigError
from collsim.nn import SGD, Adam, LayerNorm, Sequential
from collsim.parallel.config import ParallelConfig
from collsim.parallel.mesh import train
from collsim.parallel.pipeline.runner import single_device_step, toy_batch, toy_model
from collsim.parallel.pipeline.stage import PipelineMessage

H, HEADS, S = 8, 4, 4  # hidden, heads (tp = 1, 2 or 4 divides both, and ffn = 2H), sequence


def step_3d(
    model,
    x,
    target,
    *,
    cluster=None,
    optimizer=None,
    check=None,
    bandwidth="inf",
    latency=0,
    virtual=1,
    **fields,
):
    """One step of the mesh trainer; ``fields`` are ParallelConfig's (``virtual`` is vpp)."""
    config = ParallelConfig(vpp=virtual, **fields)
    return train(
        model,
        [(x, target)],
        config,
        cluster=cluster,
        optimizer=optimizer,
        check=check,
        bandwidth=bandwidth,
        latency=latency,
    )


def model_and_batch(layers, rows, seed=0):
    model = toy_model(layers, hidden=H, heads=HEADS, seed=seed)
    x, target = toy_batch(rows, seq=S, hidden=H, seed=seed + 1)
    return model, x, target


@st.composite
def meshes(draw):
    tp = draw(st.sampled_from([1, 2, 4]))
    pp = draw(st.integers(1, 4))
    dp = draw(st.integers(1, max(1, 16 // (tp * pp))))
    names = ["gpipe", "1f1b", "zb-h1"] + (["interleaved"] if pp >= 2 else [])
    name = draw(st.sampled_from(names))
    v = draw(st.integers(2, 3)) if name == "interleaved" else 1
    if name == "interleaved":
        m = pp * draw(st.integers(1, 2))
    else:
        m = draw(st.integers(pp if name == "zb-h1" else 1, pp + 2))
    layers = pp * v if name == "interleaved" else draw(st.integers(pp, 2 * pp))
    return dp, pp, tp, name, m, v, layers


@given(meshes(), st.sampled_from(["sgd", "adam"]))
def test_one_step_matches_one_device(config, opt):
    dp, pp, tp, name, m, v, layers = config
    assert dp * pp * tp <= 16
    mb_size = 2
    model, x, target = model_and_batch(layers, dp * m * mb_size, seed=dp + pp + tp)
    reference, _, _ = model_and_batch(layers, 1, seed=dp + pp + tp)
    # eps=1e-6: Adam divides the key bias's exactly-zero gradient's rounding noise by eps
    make = (lambda: SGD(lr=0.1, momentum=0.9)) if opt == "sgd" else (lambda: Adam(1e-2, eps=1e-6))
    ref_loss, ref_grads = single_device_step(reference, x, target, optimizer=make())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # uneven layer splits warn
        result = step_3d(
            model,
            x,
            target,
            dp=dp,
            pp=pp,
            tp=tp,
            schedule=name,
            microbatches=m,
            virtual=v,
            optimizer=make(),
        )
    assert result.match is True and result.max_error < 1e-10
    assert result.dp_replica_diff == 0.0  # the dp replicas stay bitwise in sync
    assert result.loss == pytest.approx(ref_loss, rel=1e-12)
    assert set(result.grads) == set(ref_grads) == set(result.params)
    for key, grad in ref_grads.items():
        np.testing.assert_allclose(result.grads[key], grad, rtol=1e-10, atol=1e-12)
        # Adam turns the exactly-zero key-bias gradient's rounding (~1e-17, in a different
        # order on every layout) into lr·1e-17/eps ~ 1e-13 steps: allow 1e-11 there
        np.testing.assert_allclose(
            result.params[key],
            reference.params[key],
            rtol=1e-10,
            atol=1e-12 if opt == "sgd" else 1e-11,
        )


@pytest.mark.parametrize("dp, pp, tp", [(2, 2, 4), (2, 4, 2), (1, 4, 4), (4, 2, 2)])
def test_sixteen_ranks_train_a_transformer(dp, pp, tp):
    model, x, target = model_and_batch(pp, dp * 4 * 2)
    result = step_3d(
        model,
        x,
        target,
        dp=dp,
        pp=pp,
        tp=tp,
        schedule="1f1b",
        microbatches=4,
        optimizer=SGD(lr=0.1),
    )
    assert result.mesh.size == 16 and result.match and result.dp_replica_diff == 0.0


def test_mesh_order_is_tp_innermost_then_dp_then_pp():
    model, x, target = model_and_batch(2, 2 * 2 * 2)
    result = step_3d(model, x, target, dp=2, pp=2, tp=2, microbatches=2, check=False)
    mesh = result.mesh
    assert mesh.names == ("pp", "dp", "tp") and mesh.shape == (2, 2, 2)
    assert [g.ranks for g in mesh.groups("tp")] == [(0, 1), (2, 3), (4, 5), (6, 7)]
    assert [g.ranks for g in mesh.groups("dp")] == [(0, 2), (1, 3), (4, 6), (5, 7)]
    assert [g.ranks for g in mesh.groups("pp")] == [(0, 4), (1, 5), (2, 6), (3, 7)]
    assert result.pipelines[(1, 0)].stage_ranks == (2, 6)


@pytest.mark.parametrize(
    "dp, pp, tp, name, v",
    [(2, 2, 2, "1f1b", 1), (1, 3, 4, "zb-h1", 1), (1, 2, 2, "interleaved", 2)],
)
def test_each_tp_rank_sends_its_share_to_its_pipeline_neighbour(dp, pp, tp, name, v):
    m, B, b = pp * 2, 2, 8  # micro-batches, sequences per micro-batch, bytes per float64
    model, x, target = model_and_batch(pp * v, dp * m * B)
    result = step_3d(
        model,
        x,
        target,
        dp=dp,
        pp=pp,
        tp=tp,
        schedule=name,
        microbatches=m,
        virtual=v,
        bandwidth="50GB/s",
        latency="1us",
    )
    assert result.match
    mesh = result.mesh
    pipe = [t for t in result.trace.transfers if isinstance(t.tag, PipelineMessage)]
    assert {t.nbytes for t in pipe} == {B * S * H * b // tp}  # each TP rank: 1/tp of B·S·H·b
    per_boundary = Counter()
    for t in pipe:
        src, dst = mesh.coords(t.src), mesh.coords(t.dst)
        assert (src["dp"], src["tp"]) == (dst["dp"], dst["tp"])  # same pipeline, same shard
        hop = (dst["pp"] - src["pp"]) % pp
        assert hop in (1, pp - 1)  # neighbours (interleaved: last <-> first too)
        if v == 1:
            assert abs(dst["pp"] - src["pp"]) == 1
        tag = t.tag
        per_boundary[(tag.kind, tag.microbatch, tag.virtual_stage, src["dp"])] += t.nbytes
    # every micro-batch crosses each of the p*v - 1 virtual boundaries once each way, in full
    assert len(per_boundary) == dp * 2 * m * (pp * v - 1)
    assert set(per_boundary.values()) == {B * S * H * b}


@pytest.mark.parametrize("name, v", [("1f1b", 1), ("interleaved", 2), ("zb-h1", 1)])
def test_every_pipeline_has_the_formula_bubble_with_free_links(name, v):
    dp, pp, tp, m = 2, 2, 2, 4
    model, x, target = model_and_batch(pp * v, dp * m)
    times = {"t_f": 1.0, "t_b": 1.0, "t_w": 0.5}
    result = step_3d(
        model,
        x,
        target,
        dp=dp,
        pp=pp,
        tp=tp,
        schedule=name,
        microbatches=m,
        virtual=v,
        check=False,
        **times,
    )
    expected = result.schedule.formula_bubble_time(**times)
    assert len(result.pipelines) == dp * tp
    for pipeline in result.pipelines.values():
        assert math.isclose(pipeline.bubble_time, expected, rel_tol=1e-12)
        assert pipeline.peak_inflight == result.schedule.formula_peak_inflight()


def test_replicated_layers_are_copies_and_stay_in_sync():
    rng = np.random.default_rng(0)
    blocks = toy_model(2, hidden=H, heads=HEADS)
    model = Sequential(LayerNorm.init(H), blocks[0], LayerNorm.init(H), blocks[1])
    x, target = rng.normal(size=(4, S, H)), rng.normal(size=(4, S, H))
    before = {k: a.copy() for k, a in model.params.items()}
    result = step_3d(model, x, target, dp=2, pp=2, tp=2, microbatches=2, optimizer=SGD(lr=0.5))
    assert result.match and result.dp_replica_diff == 0.0
    assert all(np.array_equal(model.params[k], a) for k, a in before.items())  # untouched


def test_errors_are_clear():
    model, x, target = model_and_batch(2, 8)
    with pytest.raises(ConfigError, match="tp=3 must divide hidden=8"):
        step_3d(model, x, target, tp=3)
    with pytest.raises(ConfigError, match="exactly 4 ranks"):
        step_3d(model, x, target, dp=2, tp=2, cluster=Cluster(topology.switch(8)))
    with pytest.raises(ConfigError, match="does not split into m=3 equal micro-batches"):
        step_3d(model, x, target, dp=2, microbatches=3)
    with pytest.raises(ConfigError, match="dp must be an integer >= 1"):
        step_3d(model, x, target, dp=0)
    with pytest.raises(ConfigError, match="fewer than p\\*v"):
        step_3d(model, x, target, pp=4, schedule="gpipe")
    with pytest.raises(ConfigError, match="m=1 < p=2"):
        step_3d(model, x, target, pp=2, schedule="zb-h1", microbatches=1)
