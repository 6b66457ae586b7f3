"""Each planner rule broken alone, several broken together, and the warnings."""

import pytest

from collsim.errors import ConfigError
from collsim.plan import PlanConfig, plan
from collsim.plan.config import load_config
from collsim.plan.rules import RULES, check

# a small GPT that passes every rule on 8 GPUs: dp = 8 / (2·2) = 2, accumulation = 16/(2·2) = 4
OK = dict(
    world_size=8,
    tp=2,
    pp=2,
    layers=4,
    hidden=64,
    heads=4,
    seq=64,
    global_batch=16,
    micro_batch=2,
    gpu_memory="80GiB",
)


def rules_of(**changes):
    errors, warnings = check(PlanConfig(**{**OK, **changes}))
    return [f.rule for f in errors], [f.rule for f in warnings]


def test_the_base_configuration_is_valid():
    report = plan(**OK)
    assert report.valid and report.violations == [] and report.warnings == []
    assert report.derived["dp"] == 2 and report.derived["accumulation"] == 4
    assert report.suggestions == []


@pytest.mark.parametrize(
    "changes, rule",
    [
        (dict(world_size=10), "world_size"),  # 10 / 4 = 2.5
        (dict(dp=4), "world_size"),  # 2·2·4 = 16 ≠ 8
        (dict(global_batch=18), "global_batch"),  # 18 / (2·2) = 4.5
        (dict(accumulation=3), "global_batch"),  # 2·2·3 = 12 ≠ 16
        (dict(hidden=65), "hidden_tp"),  # ffn 260 still divides,
        (dict(heads=3), "heads_tp"),
        (dict(ffn_hidden=255), "ffn_tp"),
        (dict(pp=8, tp=1, world_size=8, layers=4, global_batch=16, micro_batch=2), "pp_layers"),
        (dict(vpp=3), "layers_vpp"),  # 4 layers, pp·v = 6
        (dict(vpp=2, pp=1, tp=4), "vpp_pp"),
        (dict(vpp=2, global_batch=12, micro_batch=2), "vpp_microbatches"),  # m = 3, pp = 2
        (dict(sp=True, tp=1, pp=4), "sp_tp"),
        (dict(sp=True, seq=63, cp=1), "sp_seq"),
        (dict(cp=2, pp=1, seq=66), "cp_seq"),  # 66 % 4
        (dict(gpu_memory="1MiB"), "memory"),
    ],
)
def test_each_rule_alone(changes, rule):
    errors, _ = rules_of(**changes)
    assert errors == [rule]


def test_every_rule_has_an_identifier_in_the_table():
    assert len(RULES) == len(set(RULES))
    for rule in ("world_size", "global_batch", "hidden_tp", "heads_tp", "tp_node", "memory"):
        assert rule in RULES


def test_rules_broken_together_are_all_reported():
    errors, _ = rules_of(
        world_size=10, hidden=65, heads=3, ffn_hidden=255, sp=True, seq=63, cp=1, gpu_memory="1MiB"
    )
    assert set(errors) == {"world_size", "hidden_tp", "heads_tp", "ffn_tp", "sp_seq", "memory"}


def test_violations_carry_rule_message_and_hint_with_numbers():
    report = plan(**{**OK, "world_size": 10})
    (v,) = report.violations
    assert v.rule == "world_size"
    assert "10" in v.message and "2·2 = 4" in v.message and "2.5" in v.message
    assert "pp=1 (dp=5)" in v.hint  # keep tp=2: pp must divide 10/2 = 5
    assert "8 GPUs (dp=2)" in v.hint and "12 GPUs (dp=3)" in v.hint
    assert v.to_dict() == {"rule": v.rule, "message": v.message, "hint": v.hint}


def test_batch_hint_names_global_batches_and_micro_batches_that_work():
    (v,) = plan(**{**OK, "global_batch": 18}).violations
    assert "accumulation = 18/(2·2) = 4.5" in v.message
    assert "16 (accumulation 4)" in v.hint and "20 (accumulation 5)" in v.hint
    assert "micro-batch 1 (accumulation 9)" in v.hint


def test_tp_hint_lists_the_tp_values_that_divide_everything():
    errors, _ = check(PlanConfig(**{**OK, "tp": 3, "world_size": 12}))
    hidden = next(f for f in errors if f.rule == "hidden_tp")
    assert "64/3 = 21.33" in hidden.message
    assert "tp=1, tp=2, tp=4" in hidden.hint


def test_layers_not_divisible_by_pp_is_only_a_warning():
    errors, warnings = rules_of(layers=5)
    assert errors == [] and warnings == ["layers_pp"]
    report = plan(**{**OK, "layers": 5})
    assert report.valid
    assert "3 stages" not in report.warnings[0].message  # 5 over 2: 1 stage gets 3, 1 gets 2
    assert "1 stages get 3 layers and 1 get 2" in report.warnings[0].message


def test_with_virtual_stages_layers_must_divide_pp_times_v():
    errors, _ = rules_of(layers=6, vpp=2)  # 6 % 4
    assert "layers_vpp" in errors
    errors, _ = rules_of(layers=8, vpp=2)
    assert errors == []


def test_tp_beyond_a_node_is_a_warning_that_explains_why():
    _, warnings = rules_of(tp=2, gpus_per_node=1)
    assert warnings == ["tp_node"]
    (w,) = plan(**{**OK, "gpus_per_node": 1}).warnings
    assert "inter-node" in w.message and "25 GB/s" in w.message and "300 GB/s" in w.message


def test_bubble_and_unsharded_zero_warnings():
    assert rules_of(global_batch=4, micro_batch=2, pp=4, tp=1)[1] == ["bubble"]
    assert rules_of(zero=1, world_size=4)[1] == ["zero_unsharded"]


def test_params_alone_assumes_the_nearest_gpt3_shape_and_says_so():
    report = plan(params="7B", world_size=8, zero=3, tp=2, global_batch=4)
    assert report.valid
    assert report.config.assumed_shape == "gpt3-6.7b"
    assert (report.config.layers, report.config.hidden, report.config.heads) == (32, 4096, 32)
    assert any("nearest row of GPT-3's Table 2.1" in n for n in report.notes)
    assert report.memory["activations"] > 0  # no longer silently zero
    assert report.communication["tp"]["time_s"] > 0
    states = report.memory["params"] + report.memory["grads"] + report.memory["optimizer"]
    assert states == pytest.approx(16 * 7e9 / 8)  # N stays the count the user gave


def test_accelerate_sizes_define_dp_as_replicate_times_shard():
    # Accelerate: world = dp_replicate·dp_shard·tp·cp (ParallelismConfig.total_size)
    report = plan(
        world_size=16,
        tp=2,
        dp_replicate=2,
        dp_shard=4,
        layers=4,
        hidden=64,
        heads=4,
        global_batch=16,
    )
    assert report.valid
    d = report.derived
    assert (d["dp"], d["dp_shard"], d["dp_replicate"], d["zero"]) == (8, 4, 2, 3)
    assert d["shard_degree"] == 4
    assert "replica_all_reduce" in report.communication["dp"]["ops"]
    wrong = plan(
        world_size=16,
        tp=2,
        dp_replicate=2,
        dp_shard=4,
        dp=4,
        layers=4,
        hidden=64,
        heads=4,
        global_batch=16,
        suggestions=0,
    )
    assert [v.rule for v in wrong.violations] == ["dp_replicate_shard"]


def test_bad_inputs_raise_config_errors_that_name_the_value():
    with pytest.raises(ConfigError, match="tp = 0"):
        PlanConfig(tp=0, params=1e9)
    with pytest.raises(ConfigError, match="zero = 5"):
        PlanConfig(zero=5, params=1e9)
    with pytest.raises(ConfigError, match="recompute = 'some'"):
        PlanConfig(recompute="some", params=1e9)
    with pytest.raises(ConfigError, match="model is not described"):
        PlanConfig(tp=2)
    with pytest.raises(ConfigError, match="gpu_memory"):
        PlanConfig(params=1e9, gpu_memory="lots")


def test_config_files_toml_and_json_with_aliases(tmp_path):
    toml = tmp_path / "job.toml"
    toml.write_text(
        "[model]\nnum_layers = 4\nhidden_size = 64\nnum_attention_heads = 4\n"
        '[cluster]\nworld_size = 8\ngpu_memory = "40GiB"\n'
        "[parallel]\ntensor_model_parallel_size = 2\npp = 2\n"
        "[batch]\nglobal_batch_size = 16\nmicro_batch_size = 2\n"
    )
    cfg = load_config(toml, zero=1)
    assert (cfg.layers, cfg.tp, cfg.pp, cfg.gpu_memory, cfg.zero) == (4, 2, 2, 40 * 2**30, 1)
    js = tmp_path / "job.json"
    js.write_text('{"params": "1.3B", "world_size": 4, "tp_size": 2}')
    assert plan(js).derived["dp"] == 2
    bad = tmp_path / "bad.toml"
    bad.write_text("tensor_paralel_size = 2\n")
    with pytest.raises(ConfigError, match="did you mean 'tensor_parallel_size'"):
        load_config(bad)
    with pytest.raises(ConfigError, match=r"\.toml or \.json"):
        load_config(tmp_path / "job.yaml")


ACCELERATE = dict(layers=4, hidden=64, heads=4, seq=64, global_batch=16, suggestions=0)


@pytest.mark.parametrize(
    "sizes, broken",
    [
        (dict(dp_replicate=4, dp_shard=1, tp=2), True),  # DDP + TP: Accelerate raises
        (dict(dp_replicate=4, tp=2), True),  # dp_shard left at Accelerate's default 1
        (dict(dp_replicate=4, dp_shard=1, cp=2), True),  # DDP + CP
        (dict(dp_replicate=2, dp_shard=1, tp=2, cp=2), True),
        (dict(dp_replicate=2, dp_shard=2, tp=2), False),  # HSDP + TP composes
        (dict(dp_replicate=1, dp_shard=4, tp=2), False),  # FSDP + TP composes
        (dict(dp_replicate=8, dp_shard=1), False),  # pure DDP is fine
    ],
)
def test_accelerate_rejects_tp_or_cp_with_pure_replication(sizes, broken):
    world = sizes.get("dp_replicate", 1) * sizes.get("dp_shard", 1)
    world *= sizes.get("tp", 1) * sizes.get("cp", 1)
    report = plan(world_size=world, **ACCELERATE, **sizes)
    found = [v for v in report.violations if v.rule == "accelerate_replicate"]
    assert bool(found) == broken
    if broken:
        assert "ParallelismConfig" in found[0].message
        assert f"dp_replicate={sizes['dp_replicate']}" in found[0].message
        assert "dp_shard" in found[0].hint and "dp_replicate=1" in found[0].hint
    # Megatron-style sizes (no dp_replicate/dp_shard given) are not held to Accelerate's rule
    megatron = plan(world_size=world, tp=sizes.get("tp", 1), cp=sizes.get("cp", 1), **ACCELERATE)
    assert "accelerate_replicate" not in [v.rule for v in megatron.violations]


BOUNDED = [
    ("world_size", 2**62, "world_size = 4611686018427387904 is above the planner's limit"),
    ("layers", 2**62, "layers = 4611686018427387904 is above"),
    ("tp", 2**62, "tp = 4611686018427387904 is above"),
    ("world_size", 1e18, "world_size = 1e+18 is above"),
    ("global_batch", float("nan"), "global_batch = nan must be a whole number"),
    ("seq", float("inf"), "seq = inf must be a whole number"),
]


@pytest.mark.parametrize("name, value, message", BOUNDED)
def test_huge_counts_are_refused_up_front_naming_the_bound(name, value, message):
    with pytest.raises(ConfigError) as info:
        PlanConfig(**{"layers": 4, "hidden": 64, "heads": 4, name: value})
    assert message in str(info.value)


def test_config_files_are_regular_bounded_and_shallow(tmp_path):
    import os

    fifo = tmp_path / "job.json"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="not a regular file"):
        load_config(fifo)  # would block forever on open()
    deep = tmp_path / "deep.json"
    deep.write_text("{" + '"a": {' * 5000 + "}" * 5001)
    with pytest.raises(ConfigError, match="nests tables deeper"):
        load_config(deep)
    nested = tmp_path / "nested.json"
    nested.write_text('{"a": {"b": {"c": {"d": {"e": {"tp": 2}}}}}}')
    with pytest.raises(ConfigError, match="deeper than the 4 levels"):
        load_config(nested)
    digits = tmp_path / "digits.json"
    digits.write_text('{"params": "7B", "world_size": ' + "9" * 5000 + "}")
    with pytest.raises(ConfigError, match="holds a number it cannot read"):
        load_config(digits)
    big = tmp_path / "big.json"
    big.write_text('{"params": "7B", "world_size": 1e18}')
    with pytest.raises(ConfigError, match="world_size = 1e\\+18 is above"):
        load_config(big)
    huge = tmp_path / "huge.json"
    huge.write_bytes(b" " * (2 << 20) + b"{}")
    with pytest.raises(ConfigError, match="more than the 1048576"):
        load_config(huge)


def test_suggestions_for_accelerate_sizes_obey_accelerate_and_offer_sharding():
    report = plan(
        world_size=8,
        dp_replicate=4,
        dp_shard=1,
        tp=2,
        model="gpt3-125m",
        global_batch=16,
        suggestions=5,
    )
    assert [v.rule for v in report.violations] == ["accelerate_replicate"]
    assert report.suggestions
    for s in report.suggestions:
        again = plan(s.config, suggestions=0)
        assert again.valid, (s.describe(), [v.rule for v in again.violations])
    shards = [s.changes.get("dp_shard") for s in report.suggestions]
    assert (1, 4) in shards and (1, 2) in shards  # FSDP + TP, and HSDP 2 × 2
    assert any(s.changes.get("dp_replicate") == (4, 1) for s in report.suggestions)
