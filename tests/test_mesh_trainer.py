"""The one mesh trainer (`collsim.parallel.mesh.train`) and its `ParallelConfig`.

Three layers, as everywhere: every schedule and mesh shape equals one device (values);
the pipeline messages are the schedule's own dependencies and each gradient is handed to
the data-parallel buckets exactly once (structure); and the config refuses bad values by
name before anything runs.
"""

import copy
import math
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from collsim import Cluster, topology
from collsim.collectives.records import is_collective
from collsim.errors import ConfigError
from collsim.nn import SGD, Adam, mse_loss
from collsim.parallel.config import MESH_ORDER, ParallelConfig
from collsim.parallel.data import train_data_parallel
from collsim.parallel.mesh import train
from collsim.parallel.modules import units_of
from collsim.parallel.pipeline.runner import toy_batch, toy_model
from collsim.parallel.pipeline.schedules import SCHEDULE_NAMES, build_schedule
from collsim.parallel.pipeline.stage import PipelineMessage, pipeline_messages

H, HEADS, S = 8, 2, 4


def problem(layers, rows, seed=0):
    model = toy_model(layers, hidden=H, heads=HEADS, seed=seed)
    x, target = toy_batch(rows, seq=S, hidden=H, seed=seed + 1)
    return model, x, target


def schedule_shape(name, pp):
    """(microbatches, vpp, layers) that every schedule accepts at ``pp`` stages."""
    if name == "interleaved":
        return 2 * pp, 2, 2 * pp
    return max(pp, 2), 1, pp


# -- values: every schedule x mesh shape equals one device, over several steps -------------


MESHES = [(1, 1, 1), (2, 1, 1), (1, 2, 1), (1, 1, 2), (2, 2, 1), (2, 1, 2), (1, 2, 2), (2, 2, 2)]


# interleaving needs pp >= 2 (build_schedule refuses pp = 1: tested below)
CASES = [(n, *mesh) for n in SCHEDULE_NAMES for mesh in MESHES if n != "interleaved" or mesh[2] > 1]


@pytest.mark.parametrize("name, dp, tp, pp", CASES)
def test_every_schedule_and_mesh_trains_like_one_device_for_two_steps(name, dp, tp, pp):
    m, v, layers = schedule_shape(name, pp)
    model, x, target = problem(layers, dp * m * 2)
    _, x2, target2 = problem(layers, dp * m * 2, seed=5)
    config = ParallelConfig(dp=dp, tp=tp, pp=pp, microbatches=m, vpp=v, schedule=name)
    run = train(model, [(x, target), (x2, target2)], config, optimizer=SGD(lr=0.1, momentum=0.9))
    assert run.match is True and run.max_error < 1e-10
    assert run.dp_replica_diff == 0.0 and run.tp_replica_diff == 0.0
    assert len(run.steps) == 2
    first, second = run.steps[0].params, run.steps[1].params
    assert any(not np.array_equal(first[k], second[k]) for k in first)  # it stepped twice
    # the trainer gathered the whole batch's output and input gradient from the shards
    y, ctx = model.forward(x)
    value, dy = mse_loss(y, target)
    dx, _ = model.backward(ctx, dy)
    np.testing.assert_allclose(run.steps[0].output, y, rtol=0, atol=1e-12)
    np.testing.assert_allclose(run.steps[0].input_grad, dx, rtol=0, atol=1e-12)
    assert run.steps[0].loss == pytest.approx(float(value), rel=1e-12)


def test_interleaving_without_pipeline_stages_is_refused_by_name():
    model, x, target = problem(2, 4)
    with pytest.raises(ConfigError, match="interleaved"):
        train(model, [(x, target)], ParallelConfig(microbatches=2, vpp=2, schedule="interleaved"))


@given(
    dp=st.integers(1, 2),
    tp=st.sampled_from([1, 2]),
    pp=st.integers(1, 3),
    m=st.integers(1, 3),
    adam=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_property_random_meshes_match_one_device(dp, tp, pp, m, adam, seed):
    name = "1f1b" if m < pp else "zb-h1"
    model, x, target = problem(pp, dp * m, seed=seed)
    optimizer = Adam(1e-2, eps=1e-6) if adam else SGD(lr=0.1)
    config = ParallelConfig(dp=dp, tp=tp, pp=pp, microbatches=m, schedule=name)
    run = train(model, [(x, target)], config, optimizer=optimizer)
    assert run.match, (run.max_error, config)


# -- one trainer: the data-parallel trainer and the mesh trainer agree ----------------------


@pytest.mark.parametrize("dp, accumulation", [(2, 1), (4, 2), (1, 3)])
def test_pp1_mesh_trainer_is_ddp_with_gradient_accumulation(dp, accumulation):
    model, x, target = problem(2, dp * accumulation * 2)
    cluster = Cluster(topology.switch(dp), compute_rate="1TFLOP/s")
    ddp = train_data_parallel(cluster, model, [(x, target)], accumulation=accumulation)
    config = ParallelConfig(dp=dp, microbatches=accumulation, t_f=0)
    mesh = train(
        model,
        [(x, target)],
        config,
        cluster=Cluster(topology.switch(dp), compute_rate="1TFLOP/s"),
        optimizer=SGD(lr=0.1),
    )
    for key, grad in ddp.steps[0]["grads"].items():
        np.testing.assert_allclose(mesh.grads[key], grad, rtol=0, atol=1e-13)
    assert mesh.buckets == ddp.buckets
    dp_bytes = mesh.bytes_by_group.get(("dp", "all_reduce"), [0] * dp)
    assert dp_bytes == ddp.bytes_by_collective.get("all_reduce", [0] * dp)


def test_a_callable_model_is_cut_into_stages_like_a_sequential():
    model, x, target = problem(4, 8)
    config = ParallelConfig(dp=2, pp=2, microbatches=2)
    whole = train(model, [(x, target)], config)
    units = train(lambda group, j: units_of(copy.deepcopy(model)), [(x, target)], config)
    assert units.match is None  # no one-device twin to check a callable against
    for key, grad in whole.grads.items():
        np.testing.assert_array_equal(units.grads[key], grad)


# -- structure: messages from the schedule's dependencies, one hand-off per gradient -------


@pytest.mark.parametrize(
    "name, p", [(n, p) for n in SCHEDULE_NAMES for p in (1, 2, 3) if n != "interleaved" or p > 1]
)
def test_pipeline_messages_are_the_schedules_cross_stage_dependencies(name, p):
    m, v, _ = schedule_shape(name, p)
    sched = build_schedule(name, p, m, v)
    links = pipeline_messages(sched)
    sent = [(s, dst, tag) for (s, _), (_, out) in links.items() for dst, tag in out]
    received = [(src, s, tag) for (s, _), (inbox, _) in links.items() for src, tag in inbox]
    assert sorted(sent) == sorted(received)  # every message has one sender, one receiver
    assert len(sent) == 2 * m * (p * v - 1)  # each micro-batch crosses every boundary twice
    for (stage, op), (inbox, out) in links.items():
        here = op.chunk * p + stage
        assert len(inbox) == (
            0
            if (op.kind == "F" and here == 0) or op.kind == "W"
            else 0
            if op.kind != "F" and here == p * v - 1
            else 1
        )
        for _, tag in inbox + out:
            assert isinstance(tag, PipelineMessage) and tag.microbatch == op.microbatch
            assert tag.kind == ("act" if op.kind == "F" else "grad")


@pytest.mark.parametrize("name", SCHEDULE_NAMES)
def test_every_gradient_is_handed_to_the_buckets_once_and_overlaps_the_pipeline(name):
    pp = 2
    m, v, layers = schedule_shape(name, pp)
    model, x, target = problem(layers, 2 * m)
    # one bucket per parameter: each all-reduce starts the moment its gradient is final
    config = ParallelConfig(dp=2, pp=pp, microbatches=m, vpp=v, schedule=name, bucket_bytes=1)
    run = train(model, [(x, target)], config)
    assert run.match
    for rank in range(run.mesh.size):
        shards = run.run.returns[rank][0].shards  # step 1's: DDP keeps them whole
        held = sum(g.size for g in shards.grads.values())
        assert sum(shards.buckets) == held and len(shards.buckets) == len(shards.grads)
    # the first gradient all-reduce starts before the stage's last pass is done (DDP overlap)
    dp_transfers = [t for t in run.trace.transfers if is_collective(t.tag) and t.tag.dim == "dp"]
    assert dp_transfers
    last_pass = max(c.end for c in run.trace.computes if c.rank == 0)
    assert min(t.start for t in dp_transfers if t.src == 0) < last_pass


def test_mesh_layout_is_megatrons_pp_dp_tp():
    config = ParallelConfig(dp=2, tp=2, pp=2)
    mesh = config.mesh()
    assert mesh.names == ("pp", "dp", "tp") and MESH_ORDER == ("pp", "dp", "cp", "tp")
    with_cp = ParallelConfig(dp=2, cp=2).mesh()  # Accelerate's order: cp inside dp
    assert with_cp.names == ("pp", "dp", "cp", "tp")
    assert [g.ranks for g in with_cp.groups("cp")] == [(0, 1), (2, 3)]
    assert [g.ranks for g in mesh.groups("tp")] == [(0, 1), (2, 3), (4, 5), (6, 7)]
    assert [g.ranks for g in mesh.groups("pp")] == [(0, 4), (1, 5), (2, 6), (3, 7)]
    assert config.world_size == 8


def test_pass_times_are_charged_per_pass():
    model, x, target = problem(2, 4)
    run = train(
        model, [(x, target)], ParallelConfig(pp=2, microbatches=2, t_f=1.0, t_b=2.0, t_w=0.5)
    )
    pipeline = run.pipelines[(0, 0)]
    assert pipeline.times == {"t_f": 1.0, "t_b": 2.0, "t_w": 0.5}
    assert math.isclose(pipeline.bubble_time, run.schedule.formula_bubble_time(1.0, 2.0, 0.5))


# -- the config: checked up front, every refusal names the value -------------------------


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"dp": 0}, "dp must be an integer >= 1, got 0"),
        ({"tp": True}, "tp must be an integer >= 1, got True"),
        ({"pp": 2.0}, "pp must be an integer >= 1, got 2.0"),
        ({"microbatches": -1}, "microbatches must be an integer >= 1, got -1"),
        ({"vpp": 0}, "vpp must be an integer >= 1, got 0"),
        ({"sp": "yes"}, "sp must be True or False, got 'yes'"),
        ({"sp": True}, "sp=True .* needs tp > 1, got tp=1"),
        ({"schedule": "pipedream"}, "schedule 'pipedream' is not one of gpipe, 1f1b"),
        ({"t_f": -1.0}, r"t_f=-1.0 must be a finite number of seconds >= 0"),
        ({"t_b": math.nan}, r"t_b=nan must be a finite number of seconds >= 0"),
        ({"t_w": "1ms"}, r"t_w='1ms' must be a number of seconds"),
        ({"pp": 2, "t_f": 0}, "t_f, t_b and t_w are all 0"),
        ({"bucket_bytes": 0}, "bucket_bytes=0 must be at least 1 byte"),
        ({"bucket_bytes": 1.5}, r"bucket_bytes=1.5 must be a whole number"),
        ({"pp": 2, "schedule": build_schedule("1f1b", 2, 3)}, "m=3, v=1 but .* microbatches=1"),
    ],
)
def test_config_refuses_bad_values_by_name(fields, message):
    with pytest.raises(ConfigError, match=message):
        ParallelConfig(**fields)


def test_config_replace_checks_and_names_unknown_fields():
    config = ParallelConfig(dp=2)
    assert config.replace(tp=2).dims == {"pp": 1, "dp": 2, "tp": 2}
    with pytest.raises(ConfigError, match="no field 'tp_size'"):
        config.replace(tp_size=2)
    assert (
        ParallelConfig(pp=2, schedule=build_schedule("zb-h1", 2, 2), microbatches=2).to_dict()[
            "schedule"
        ]
        == "zb-h1"
    )


def test_train_refuses_before_running():
    model, x, target = problem(2, 4)
    with pytest.raises(ConfigError, match="config must be a ParallelConfig, got dict"):
        train(model, [(x, target)], {"dp": 2})
    with pytest.raises(ConfigError, match="batches must be a non-empty list"):
        train(model, [], ParallelConfig())
    with pytest.raises(ConfigError, match=r"batches\[0\] must be an \(x, target\) pair"):
        train(model, [x], ParallelConfig())
    with pytest.raises(ConfigError, match="in_layout must be one of"):
        train(model, [(x, target)], ParallelConfig(), in_layout="rows")
    with pytest.raises(ConfigError, match="Sequential or a callable"):
        train(object(), [(x, target)], ParallelConfig())
    with pytest.raises(ConfigError, match="does not split into m=3"):
        train(model, [(x, target)], ParallelConfig(microbatches=3))
    with pytest.raises(ConfigError, match="check=True needs a Sequential"):
        train(lambda g, j: units_of(model), [(x, target)], ParallelConfig(), check=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing ran, nothing warned
        with pytest.raises(ConfigError, match="exactly 2 ranks"):
            train(model, [(x, target)], ParallelConfig(dp=2), cluster=Cluster(topology.ring(3)))


@pytest.mark.parametrize("dp, tp, pp", [(1, 2, 1), (2, 2, 1), (1, 2, 2), (2, 2, 2)])
@pytest.mark.parametrize("name", ["1f1b", "zb-h1"])
def test_sequence_parallel_meshes_train_like_one_device(name, dp, tp, pp):
    model, x, target = problem(pp, dp * 2 * 2)
    config = ParallelConfig(dp=dp, tp=tp, pp=pp, microbatches=2, schedule=name, sp=True)
    run = train(model, [(x, target)], config, optimizer=SGD(lr=0.1))
    assert run.match is True and run.max_error < 1e-10
    assert run.tp_replica_diff == 0.0  # the LayerNorms every TP rank holds stay equal
    y, _ = model.forward(x)
    np.testing.assert_allclose(run.steps[0].output, y, rtol=0, atol=1e-12)  # tokens reassembled
    # activations cross the stage boundary already split by tokens: no TP all-gather of them
    assert ("tp", "all_gather") in run.bytes_by_group  # SP's own gathers, inside the layers
    sends = [t for t in run.trace.transfers if isinstance(t.tag, PipelineMessage)]
    assert {t.nbytes for t in sends} <= {2 * (S // tp) * H * 8}


def test_every_rank_module_follows_the_protocol():
    from collsim.nn import MLP, Linear, MultiHeadAttention, TransformerBlock
    from collsim.parallel.modules import Local, RankModule
    from collsim.parallel.tensor import (
        ColumnParallelLinear,
        ParallelAttention,
        ParallelMLP,
        ParallelTransformerBlock,
        RowParallelLinear,
    )
    from collsim.runtime.group import Group

    rng, group = np.random.default_rng(0), Group([0, 1])
    made = [
        Local(Linear.init(4, 4, rng)),
        ColumnParallelLinear.from_full(Linear.init(4, 4, rng), group, 0),
        RowParallelLinear.from_full(Linear.init(4, 4, rng), group, 1),
        ParallelMLP.from_full(MLP.init(4, rng, hidden=8), group, 0),
        ParallelAttention.from_full(MultiHeadAttention.init(4, 2, rng), group, 1),
        ParallelTransformerBlock.from_full(TransformerBlock.init(4, 2, rng), group, 0),
    ]
    assert all(isinstance(m, RankModule) for m in made)
    assert not isinstance(Linear.init(4, 4, rng), RankModule)  # an nn module is not one
