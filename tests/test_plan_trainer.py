"""``PlanConfig.parallel()``: a plan becomes the mesh trainer's ParallelConfig.

The values map by name (dp, tp, pp, vpp, sp), the accumulation becomes Megatron's
num_microbatches, the schedule is the one the planner's closed forms take; what the trainer
cannot run yet (cp, ZeRO) and counts that are not whole are refused with the value named.
"""

import dataclasses

import pytest
from fuzzkit import check_api
from hypothesis import given
from hypothesis import strategies as st

from collsim.errors import ConfigError
from collsim.parallel.config import ParallelConfig
from collsim.plan import PlanConfig, plan

MODEL = dict(layers=8, hidden=256, heads=8, seq=512, vocab=1024)

# settings -> the ParallelConfig fields they must give
MAPPINGS = {
    "defaults": (
        dict(world_size=1),
        dict(dp=1, tp=1, pp=1, vpp=1, sp=False, microbatches=1, schedule="1f1b"),
    ),
    "dp, tp, pp, accumulation": (
        dict(world_size=16, tp=2, pp=2, global_batch=32, micro_batch=2),
        dict(dp=4, tp=2, pp=2, microbatches=4, schedule="1f1b"),
    ),
    "interleaved when vpp > 1": (
        dict(world_size=8, pp=4, vpp=2, global_batch=16),
        dict(dp=2, pp=4, vpp=2, microbatches=8, schedule="interleaved"),
    ),
    "gpipe": (
        dict(world_size=4, pp=4, global_batch=8, schedule="gpipe"),
        dict(dp=1, pp=4, microbatches=8, schedule="gpipe"),
    ),
    "interleaved with vpp 1 is 1f1b": (
        dict(world_size=2, pp=2, global_batch=4, schedule="interleaved"),
        dict(pp=2, vpp=1, schedule="1f1b"),
    ),
    "sequence parallel": (
        dict(world_size=4, tp=4, sp=True, global_batch=4),
        dict(tp=4, sp=True, dp=1, microbatches=4),
    ),
    "accumulation without pp": (
        dict(world_size=2, accumulation=3, micro_batch=2),
        dict(dp=2, pp=1, microbatches=3),
    ),
    "accelerate sizes, ZeRO-0": (
        dict(world_size=8, tp=2, dp_replicate=2, dp_shard=2, zero=0, global_batch=8),
        dict(dp=4, tp=2, microbatches=2, zero=0, dp_replicate=4),  # 4 plain replicas
    ),
    "zero 1": (dict(world_size=4, zero=1, global_batch=4), dict(dp=4, zero=1, dp_replicate=1)),
    "fsdp": (dict(world_size=4, zero="fsdp", global_batch=4), dict(dp=4, zero=3)),
    "dp_shard implies zero 3": (dict(world_size=4, dp_shard=4, global_batch=4), dict(zero=3)),
    "hsdp": (
        dict(world_size=8, dp_replicate=2, dp_shard=4, global_batch=8),
        dict(dp=8, zero=3, dp_replicate=2),
    ),
    "full recomputation": (dict(world_size=2, recompute="full"), dict(recompute="full")),
    "context parallel": (dict(world_size=4, cp=2, global_batch=2), dict(dp=2, cp=2)),
    "cp with tp and sp": (dict(world_size=4, cp=2, tp=2, sp=True), dict(cp=2, tp=2, sp=True)),
}


@pytest.mark.parametrize("case", MAPPINGS, ids=str)
def test_the_plan_maps_onto_the_trainers_fields(case):
    settings, expected = MAPPINGS[case]
    cfg = PlanConfig(**MODEL, **settings)
    config = cfg.parallel()
    assert isinstance(config, ParallelConfig)
    assert {k: getattr(config, k) for k in expected} == expected
    derived = plan(cfg).derived
    assert config.world_size == derived["world_size"]
    assert config.microbatches == derived["accumulation"]


@pytest.mark.parametrize("case", MAPPINGS, ids=str)
def test_every_field_both_configs_name_means_the_same(case):
    cfg = PlanConfig(**MODEL, **MAPPINGS[case][0])
    config, derived = cfg.parallel(), plan(cfg).derived
    shared = {f.name for f in dataclasses.fields(PlanConfig)} & {
        f.name for f in dataclasses.fields(ParallelConfig)
    }
    assert shared >= {"dp", "tp", "pp", "vpp", "sp", "schedule"}
    for name in shared - {"schedule"}:
        value = derived[name] if name in derived else getattr(cfg, name)
        if name == "dp_replicate" and derived["zero"] == 0:
            value = derived["dp"]  # without sharding every data-parallel rank is a replica
        assert getattr(config, name) == value, name


def test_overrides_set_the_trainers_own_fields():
    cfg = PlanConfig(**MODEL, world_size=4, pp=4, global_batch=8)
    config = cfg.parallel(t_f=0.002, t_b=0.004, t_w=0.001, bucket_bytes=2**20, schedule="zb-h1")
    assert config.pass_times == (0.002, 0.004, 0.001)
    assert (config.bucket_bytes, config.schedule, config.microbatches) == (2**20, "zb-h1", 8)


def test_an_unknown_override_is_named():
    with pytest.raises(ConfigError, match="'microbatch'"):
        PlanConfig(**MODEL).parallel(microbatch=4)


# settings -> what the refusal must say (the value as given, and the way out)
REFUSALS = {
    "selective recomputation": (
        dict(world_size=4, recompute="selective"),
        ["recompute = 'selective'", "recompute='full'"],
    ),
    "fractional dp": (
        dict(world_size=784, tp=8, pp=4, global_batch=1536),
        ["dp = 24.5", "784", "768 or 800"],
    ),
    "world not tp x pp x dp": (dict(world_size=8, dp=2, tp=2), ["world_size = 8", "4"]),
    "fractional accumulation": (
        dict(world_size=8, global_batch=12),
        ["accumulation = 1.5", "global_batch 12", "8 or 16"],
    ),
    "fractional micro-batch": (
        dict(world_size=2, global_batch=6, accumulation=2),
        ["micro_batch = 1.5", "global_batch 6", "4 or 8"],
    ),
    "vpp without interleaving": (
        dict(world_size=4, pp=4, vpp=2, schedule="1f1b", global_batch=8),
        ["vpp = 2", "'1f1b'", "interleaved"],
    ),
}


@pytest.mark.parametrize("case", REFUSALS, ids=str)
def test_what_the_trainer_cannot_run_is_refused_with_its_value(case):
    settings, words = REFUSALS[case]
    with pytest.raises(ConfigError) as caught:
        PlanConfig(**MODEL, **settings).parallel()
    for word in words:
        assert word in str(caught.value), (word, str(caught.value))


@given(
    world=st.sampled_from([1, 2, 4, 6, 8, 16, 784]),
    tp=st.sampled_from([1, 2, 4, 8]),
    pp=st.sampled_from([1, 2, 4]),
    cp=st.sampled_from([1, 2]),
    vpp=st.sampled_from([1, 2]),
    sp=st.booleans(),
    zero=st.sampled_from([None, 0, 1, 3]),
    schedule=st.sampled_from([None, "gpipe", "1f1b", "interleaved"]),
    global_batch=st.sampled_from([None, 1, 6, 16, 1536]),
    micro_batch=st.sampled_from([None, 1, 2]),
)
def test_any_plan_converts_or_is_refused_with_a_collsim_error(world, **settings):
    def convert():
        cfg = PlanConfig(**MODEL, world_size=world, **settings)
        return cfg, cfg.parallel(t_f=1e-3)

    outcome = check_api(convert)
    if outcome.error is None:
        cfg, config = outcome.value
        derived = plan(cfg, suggestions=0).derived
        assert config.world_size == derived["world_size"] == world
        assert config.microbatches == derived["accumulation"]
