"""Mixture of experts in `collsim plan`: the presets' parameter counts against the totals
their authors published, the memory of experts sharded over ep·etp (one formula, read by
the planner and the report), and Megatron-Core's MoE rules, each broken on purpose through
the command a user runs."""

import json

import pytest
from fuzzkit import run_cli
from hypothesis import given
from hypothesis import strategies as st

from collsim.cli import main
from collsim.plan import PlanConfig, plan
from collsim.plan.config import derive
from collsim.plan.config.experts import params_per_gpu
from collsim.plan.memory import estimate, model_state_bytes

# totals the model cards and papers state (not computed by collsim), and how close a shape
# count must come: DeepSeek-V3's MLA is counted as plain attention of its 128 heads
PUBLISHED = [
    ("mixtral-8x7b", 46.7e9, 0.002),  # Mixtral of Experts (Jiang et al. 2024): 47B; card 46.7B
    ("deepseek-v3", 671e9, 0.005),  # DeepSeek-V3 Technical Report: 671B total
    ("qwen3-30b-a3b", 30.5e9, 0.005),  # Qwen3 Technical Report: 30.5B total
    ("qwen3-235b-a22b", 235e9, 0.005),  # 235B total
]


@pytest.mark.parametrize("model, total, tolerance", PUBLISHED)
def test_moe_presets_count_their_published_parameters(model, total, tolerance):
    d = derive(PlanConfig(model=model, world_size=8, global_batch=8))
    assert abs(d.params - total) / total < tolerance, d.params
    assert 0.9 * d.params < d.routed_params < d.params  # nearly all of an MoE is experts


def test_a_dense_model_is_unchanged_and_has_no_experts():
    d = derive(PlanConfig(model="llama2-7b", world_size=8, global_batch=8))
    assert d.params == 6738415616 and d.routed_params == 0.0


@pytest.mark.parametrize(
    "ep, etp, tp, pp", [(1, 1, 1, 1), (8, 1, 1, 1), (4, 2, 2, 2), (2, 1, 2, 1)]
)
def test_memory_shards_the_experts_over_ep_etp_and_the_rest_over_tp_pp(ep, etp, tp, pp):
    cfg = PlanConfig(
        model="mixtral-8x7b",
        world_size=16,
        ep=ep,
        etp=etp,
        tp=tp,
        pp=pp,
        sp=tp > 1,
        global_batch=16,
    )
    d = derive(cfg)
    mem = estimate(cfg, d)
    routed = d.routed_params
    by_hand = (d.params - routed) / (tp * pp) + routed / (ep * etp * pp)
    assert mem["params_per_gpu"] == pytest.approx(by_hand, rel=1e-12)
    assert mem["params"] == pytest.approx(2 * by_hand, rel=1e-12)  # bf16, not sharded: zero 0
    assert params_per_gpu(d.params - routed, routed, tp, pp, ep, etp) == mem["params_per_gpu"]


def test_zero_shards_the_experts_state_over_their_expert_data_parallel_group():
    cfg = PlanConfig(model="mixtral-8x7b", world_size=16, ep=8, zero=1, global_batch=16)
    d = derive(cfg)
    mem = estimate(cfg, d)
    dense, experts = d.params - d.routed_params, d.routed_params / 8
    # dense Adam state over all 16 dp ranks; each expert's over the 16/8 = 2 ranks holding it
    want = model_state_bytes(dense, 1, 16)[2] + model_state_bytes(experts, 1, 2)[2]
    assert mem["optimizer"] == pytest.approx(want, rel=1e-12)


def test_the_report_prints_the_formula_and_its_numbers(capsys):
    status = main(
        [
            "plan",
            "--model",
            "mixtral-8x7b",
            "--world-size",
            "16",
            "--ep",
            "8",
            "--global-batch",
            "16",
            "--zero",
            "1",
            "--recompute",
            "full",
        ]
    )
    out = capsys.readouterr().out
    assert status == 0 and "VALID" in out
    assert "dense/(tp·pp) + routed experts/(ep·etp·pp)" in out
    assert "8 routed per MoE layer, top-2" in out and "ep=8 etp=1" in out
    report = plan(
        model="mixtral-8x7b", world_size=16, ep=8, global_batch=16, zero=1, recompute="full"
    )
    assert f"{report.memory['params_per_gpu'] / 1e9:.4g} B parameters each" in out


def plan_json(argv, capsys):
    status = main(["plan", *argv, "--json"])
    return status, json.loads(capsys.readouterr().out)


BROKEN = [
    (
        ["--model", "mixtral-8x7b", "--ep", "3"],
        "moe_experts_ep",
        ["experts = 8", "ep = 3", "num_moe_experts"],
        "nearest valid ep = 2",
    ),
    (
        ["--model", "qwen3-30b-a3b", "--ep", "32"],
        "moe_folding",
        ["ep · etp = 32·1 = 32", "dp · cp · tp = 16·1·1 = 16"],
        "nearest valid ep = 16",
    ),
    (
        ["--model", "mixtral-8x7b", "--ep", "2", "--tp", "2"],
        "moe_sp",
        ["ep = 2 with tp = 2", "sequence parallelism"],
        "set sp",
    ),
    (
        ["--model", "llama2-7b", "--ep", "2"],
        "moe_ep_dense",
        ["ep = 2", "dense"],
        "nearest valid ep = 1",
    ),
    (
        ["--model", "mixtral-8x7b", "--etp", "3"],
        "moe_ffn_etp",
        ["14336", "etp = 3"],
        "nearest valid etp = 2",
    ),
]


@pytest.mark.parametrize("argv, rule, words, hint", BROKEN, ids=lambda v: str(v)[:40])
def test_each_moe_rule_broken_names_value_rule_and_nearest(argv, rule, words, hint, capsys):
    status, report = plan_json([*argv, "--world-size", "16", "--global-batch", "16"], capsys)
    assert status == 1 and report["valid"] is False
    found = [v for v in report["violations"] if v["rule"] == rule]
    assert found, report["violations"]
    for word in words:
        assert word in found[0]["message"]
    assert hint in found[0]["hint"]


def test_ep_times_tp_past_the_node_is_a_warning_not_an_error(capsys):
    argv = [
        "--model",
        "deepseek-v3",
        "--ep",
        "8",
        "--tp",
        "2",
        "--sp",
        "--pp",
        "16",
        "--world-size",
        "256",
        "--global-batch",
        "256",
    ]
    status, report = plan_json(argv, capsys)
    warned = [w for w in report["warnings"] if w["rule"] == "moe_node"]
    assert warned and "ep · tp = 8·2 = 16 > 8 GPUs per node" in warned[0]["message"]
    assert all(v["rule"] != "moe_node" for v in report["violations"])


@pytest.mark.parametrize(
    "argv, bad, phrase",
    [
        (["--model", "mixtral-8x7b", "--top-k", "9"], "top_k = 9", "nearest valid top_k = 8"),
        (["--model", "llama2-7b", "--top-k", "2"], "top_k = 2", "experts is not given"),
        (
            ["--model", "deepseek-v3", "--dense-layers", "61"],
            "dense_layers = 61",
            "nearest valid dense_layers = 60",
        ),
        (["--experts", "0", "--params", "7B"], "experts = 0", "whole number >= 1"),
        (["--model", "mixtral-8x7b", "--ep", "0"], "ep = 0", "whole number >= 1"),
        (["--model", "mixtral-8x7b", "--shared-experts", "-1"], "-1", ">= 0"),
    ],
)
def test_bad_moe_values_exit_2_naming_them(argv, bad, phrase):
    outcome = run_cli(["plan", *argv, "--world-size", "8"], bad=bad, timeout=10)
    assert outcome.status == 2 and outcome.stdout == "", outcome
    assert phrase in outcome.stderr


def test_megatron_flag_names_are_accepted(capsys):
    argv = [
        "--model",
        "mixtral-8x7b",
        "--expert-model-parallel-size",
        "4",
        "--num-experts",
        "8",
        "--moe-router-topk",
        "1",
        "--world-size",
        "8",
        "--global-batch",
        "8",
    ]
    _, report = plan_json(argv, capsys)
    assert report["config"]["ep"] == 4 and report["config"]["top_k"] == 1


@given(
    ep=st.sampled_from([0, 1, 2, 3, 8, 64, 2**21]),
    etp=st.sampled_from([None, 1, 2, 3]),
    tp=st.sampled_from([1, 2]),
    experts=st.sampled_from([None, 1, 8, 256]),
    top_k=st.sampled_from([None, 1, 9]),
)
def test_fuzz_moe_flags_give_a_verdict_or_name_the_bad_value(ep, etp, tp, experts, top_k):
    argv = ["plan", "--params", "7B", "--world-size", "64", "--ep", ep, "--tp", tp]
    for flag, value in (("--etp", etp), ("--experts", experts), ("--top-k", top_k)):
        argv += [flag, value] if value is not None else []
    bad = None
    if ep in (0, 2**21):
        bad = str(ep)
    elif top_k == 9 and experts is not None and experts < 9:
        bad = "top_k = 9"
    elif top_k is not None and experts is None:
        bad = "top_k"
    outcome = run_cli(argv, bad=bad, timeout=30)  # a plan takes ~0.1 s; the 2 cores are shared
    assert outcome.status in (0, 1, 2)
    assert (outcome.status == 2) == (bad is not None), outcome


def test_a_plans_ep_and_etp_run_on_the_trainer():
    import numpy as np

    from collsim.nn import MoE, MoEMLP, RouterConfig, Sequential, TransformerBlock
    from collsim.parallel.mesh import train

    cfg = PlanConfig(layers=2, hidden=8, heads=2, experts=4, world_size=4, ep=2, global_batch=4)
    config = cfg.parallel()
    assert (config.ep, config.dp) == (2, 4)
    rng = np.random.default_rng(0)
    blocks = []
    for _ in range(2):
        dense = TransformerBlock.init(8, 2, rng)
        moe = MoEMLP(MoE.init(8, 16, RouterConfig(4, top_k=2), rng))
        blocks.append(TransformerBlock(dense.ln1, dense.attn, dense.ln2, moe))
    x, target = rng.normal(size=(4, 2, 8)), rng.normal(size=(4, 2, 8))
    assert train(Sequential(*blocks), [(x, target)], config).match is True
    folded = cfg.replace(etp=2).parallel()  # ep 2 x etp 2 folded over the 4 dp ranks
    assert (folded.ep, folded.expert_tp) == (2, 2)
    assert train(Sequential(*blocks), [(x, target)], folded).match is True


def test_one_expert_defaults_to_top_1_not_a_refusal_of_a_value_never_given():
    assert PlanConfig(params="7B", experts=1).top_k == 1  # found by the fuzz test above
    assert PlanConfig(params="7B", experts=8).top_k == 2


ACTIVE = [  # parameters a token passes through, as the model cards state them
    ("mixtral-8x7b", 12.9e9, 0.01),  # Mixtral of Experts: 13B active (card: 12.9B)
    ("deepseek-v3", 37e9, 0.05),  # DeepSeek-V3: 37B activated; MLA counted as plain attention
    ("qwen3-30b-a3b", 3.3e9, 0.03),  # "A3B": 3.3B activated
    ("qwen3-235b-a22b", 22e9, 0.01),  # "A22B": 22B activated
]


@pytest.mark.parametrize("model, active, tolerance", ACTIVE)
def test_compute_counts_the_parameters_a_token_passes_through(model, active, tolerance):
    report = plan(model=model, world_size=8, global_batch=8)
    n = report.compute["active_params"]
    assert abs(n - active) / active < tolerance, n
    tokens = report.resolved.tokens_per_step
    assert report.compute["flops_per_step"] == pytest.approx(6 * n * tokens, rel=1e-12)


def test_ep_all_to_all_and_the_experts_gradient_sync_are_charged_to_their_groups():
    report = plan(model="mixtral-8x7b", world_size=16, ep=8, global_batch=16, zero=0)
    ep, dp = report.communication["ep"], report.communication["dp"]
    tokens = report.config.seq * report.resolved.micro_batch  # one micro-batch of a rank
    size = tokens * 2 * 4096 * 2  # top-2 copies of each token's hidden state, bf16
    op = ep["ops"]["token_all_to_all"]
    assert (op["size_bytes"], op["ranks"], op["calls"]) == (size, 8, 4 * 32)  # 4 per layer
    assert op["bytes_per_call"] == pytest.approx(size * 7 / 8)  # (ep-1)/ep leave the rank
    experts = report.memory["expert_params_per_gpu"] * 2  # bf16 gradients
    sync = dp["ops"]["expert_gradient_all_reduce"]
    assert sync["ranks"] == 2 and sync["size_bytes"] == pytest.approx(experts)  # 16/8 copies
    dense = (report.resolved.params - report.resolved.routed_params) * 2
    assert dp["ops"]["gradient_all_reduce"]["size_bytes"] == pytest.approx(dense)


def test_a_head_size_other_than_hidden_over_heads_counts_its_projections():
    base = dict(layers=1, hidden=64, heads=4, vocab=10, seq=8, architecture="llama")
    plain, wide = (derive(PlanConfig(**base, head_dim=h)).params for h in (None, 32))
    assert wide - plain == 2 * 64 * (4 * 32 - 64) * 2  # q, o and k, v each twice as wide
