"""Each planner formula against a case worked by hand."""

import pytest

from collsim.collectives.formulas import closed_form
from collsim.parallel.context.formulas import context_parallel_bytes
from collsim.plan import PlanConfig, plan
from collsim.plan.config import count_params, derive
from collsim.plan.memory import (
    activation_bytes_per_layer,
    in_flight_microbatches,
    model_state_bytes,
)

GiB = 2**30


# ---- model states: 16 bytes per parameter, ZeRO 1/2/3 (Rajbhandari et al. 2020) ----


def test_mixed_precision_adam_keeps_16_bytes_per_parameter():
    p, g, o = model_state_bytes(1e9, zero=0, shard_degree=8)
    assert (p, g, o) == (2e9, 2e9, 12e9)  # bf16 weight, bf16 gradient, fp32 copy + m + v
    assert sum(model_state_bytes(1e9, 0, 1, precision="fp32")) == 16e9  # 4 + 4 + 8


@pytest.mark.parametrize(
    "zero, expected",
    [
        (0, (2e9, 2e9, 12e9)),
        (1, (2e9, 2e9, 12e9 / 8)),  # optimizer states sharded
        (2, (2e9, 2e9 / 8, 12e9 / 8)),  # + gradients
        (3, (2e9 / 8, 2e9 / 8, 12e9 / 8)),  # + parameters: 16/8 = 2 bytes per parameter
    ],
)
def test_zero_stages_shard_over_dp(zero, expected):
    report = plan(params=1e9, world_size=8, zero=zero, suggestions=0)
    m = report.memory
    assert (m["params"], m["grads"], m["optimizer"]) == pytest.approx(expected)


def test_tp_and_pp_divide_the_parameters_and_hsdp_shards_over_dp_shard():
    m = plan(params=1e9, world_size=8, tp=2, pp=2, zero=1, suggestions=0).memory
    assert m["params_per_gpu"] == 0.25e9
    assert (m["params"], m["grads"], m["optimizer"]) == pytest.approx((0.5e9, 0.5e9, 1.5e9))
    hsdp = plan(params=1e9, world_size=8, dp_replicate=2, dp_shard=4, suggestions=0).memory
    assert hsdp["shard_degree"] == 4
    states = hsdp["params"] + hsdp["grads"] + hsdp["optimizer"]
    assert states == pytest.approx(16e9 / 4)
    assert hsdp["total"] == pytest.approx(states + hsdp["activations"])


def test_parameter_count_of_gpt3():
    # 12·h² + 13·h per layer (Narayanan et al. 2021) plus V·h + s·h + 2h
    h, L = 12288, 96
    expected = L * (12 * h * h + 13 * h) + 51200 * h + 2048 * h + 2 * h
    assert count_params(L, h, 4 * h, 51200, 2048) == expected
    assert round(expected / 1e9, 1) == 174.6


# ---- activations: Korthikanti et al. 2022, Table 2 ------------------------------------------

s, b, h, a, t = 2048, 1, 12288, 96, 8
SBH = s * b * h


@pytest.mark.parametrize(
    "kwargs, bytes_",
    [
        (dict(tp=1), SBH * (34 + 5 * a * s / h)),
        (dict(tp=t), SBH * (10 + 24 / t + 5 * a * s / (h * t))),
        (dict(tp=t, sp=True), SBH / t * (34 + 5 * a * s / h)),
        (dict(tp=t, recompute="selective"), SBH * (10 + 24 / t)),
        (dict(tp=t, sp=True, recompute="selective"), 34 * SBH / t),
        (dict(tp=t, recompute="full"), 2 * SBH),
        (dict(tp=t, sp=True, recompute="full"), 2 * SBH / t),
    ],
)
def test_activation_bytes_per_layer(kwargs, bytes_):
    assert activation_bytes_per_layer(s, b, h, a, **kwargs) == pytest.approx(bytes_)


def test_activation_numbers_worked_by_hand():
    assert activation_bytes_per_layer(s, b, h, a) == 25_165_824 * 114  # 34 + 5·96·2048/12288
    assert activation_bytes_per_layer(s, b, h, a, tp=8) == 25_165_824 * 23  # 10 + 3 + 10


def test_in_flight_micro_batches_per_schedule():
    assert in_flight_microbatches("gpipe", pp=4, microbatches=16) == 16
    assert in_flight_microbatches("1f1b", pp=4, microbatches=16) == 4
    assert in_flight_microbatches("1f1b", pp=4, microbatches=2) == 2
    assert in_flight_microbatches("interleaved", pp=4, microbatches=16, vpp=2) == 4 * (1 + 3 / 8)
    assert in_flight_microbatches("interleaved", pp=4, microbatches=4, vpp=2) == 4  # all m·v
    assert in_flight_microbatches("gpipe", pp=1, microbatches=16) == 1


SMALL = dict(layers=2, hidden=64, heads=4, seq=32, vocab=100, micro_batch=2)


def test_activation_total_of_one_stage_by_hand():
    # sbh = 32·2·64 = 4096; per layer 4096·(34 + 5·4·32/64) = 180224
    m = plan(**SMALL, world_size=1, global_batch=2).memory
    assert m["activations_per_layer"] == 180_224
    assert m["activations_embedding"] == 4096  # 1-byte dropout mask
    assert m["activations_logits"] == 4 * 4096 + 4 * 32 * 2 * 100  # 2·2sbh + fp32 logits 4sbv
    assert m["activations"] == 2 * 180_224 + 4096 + 41_984


def test_activation_of_the_first_pipeline_stage_with_1f1b():
    # pp = 2, m = 4 micro-batches: the first stage keeps min(m, p) = 2 in flight of its 1 layer
    m = plan(**SMALL, world_size=2, pp=2, global_batch=8).memory
    assert m["in_flight_microbatches"] == 2 and m["layers_per_stage"] == 1
    assert m["activations"] == 2 * 180_224 + 2 * 4096
    gpipe = plan(**SMALL, world_size=2, pp=2, global_batch=8, schedule="gpipe").memory
    # GPipe keeps all 4 in flight; the last stage's logits then outweigh the first's embedding
    first, last = 4 * 180_224 + 4 * 4096, 4 * 180_224 + 4 * 41_984
    assert gpipe["activations"] == max(first, last) == last


# ---- compute: 6·N·tokens, 8·N with full recompute, the bubble --------------------------------

BASE = dict(params=1e9, world_size=8, global_batch=8, seq=1024, compute_rate="100TFLOP/s")


def test_compute_is_6_n_tokens_over_the_world():
    c = plan(**BASE).compute
    assert c["flops_per_step"] == 6 * 1e9 * 8 * 1024
    assert c["time_s"] == pytest.approx(6 * 1e9 * 8192 / (8 * 1e14))  # 61.44 ms
    full = plan(**BASE, layers=None, recompute="full").compute
    assert full["time_s"] == pytest.approx(8 * 1e9 * 8192 / (8 * 1e14))


def test_the_bubble_stretches_compute_by_p_minus_1_over_m():
    c = plan(**{**BASE, "pp": 2, "global_batch": 16}).compute  # dp 4, m = 4
    assert c["bubble_fraction"] == pytest.approx(1 / 5)  # (p-1)/(m+p-1)
    ideal = 6 * 1e9 * 16 * 1024 / (8 * 1e14)
    assert c["time_s"] == pytest.approx(ideal * (1 + 1 / 4))


# ---- communication: the closed forms of collsim.collectives ----------------------------------


def test_dp_gradient_all_reduce_bytes_and_time():
    comm = plan(**BASE, intra_latency="1us", intra_bandwidth="100GB/s").communication
    op = comm["dp"]["ops"]["gradient_all_reduce"]
    assert comm["dp"]["link"] == "intra-node" and op["ranks"] == 8
    assert op["bytes_per_call"] == 2 * 7 / 8 * 2e9  # 2(K-1)/K · N·2 bytes
    assert op["time_per_call_s"] == pytest.approx(14 * (1e-6 + 2e9 / (8 * 100e9)))
    assert comm["dp"]["bytes_per_rank"] == 3.5e9
    expected = closed_form("all_reduce", "ring", 8, 2e9, 1e-6, 100e9)
    assert op["time_per_call_s"] == expected.time_s


def test_zero_traffic_per_step():
    m = 4  # global 32 over dp 8 with micro 1
    z = {k: plan(**{**BASE, "global_batch": 32, "zero": k}).communication["dp"] for k in (1, 2, 3)}
    part = 7 / 8 * 2e9  # (K-1)/K · S of one reduce-scatter or all-gather
    assert z[1]["bytes_per_rank"] == pytest.approx(2 * part)  # = one all-reduce
    assert z[2]["bytes_per_rank"] == pytest.approx(m * part + part)  # RS every micro-batch
    assert z[3]["bytes_per_rank"] == pytest.approx(3 * m * part)  # AG fwd, AG bwd, RS


TP = dict(layers=2, hidden=64, heads=4, seq=32, micro_batch=2, global_batch=2, world_size=4)


def test_tp_all_reduces_per_layer_and_micro_batch():
    comm = plan(**TP, tp=4).communication["tp"]
    act = 2 * 32 * 64 * 2  # b·s·h·2 bytes = 8192
    mlp = comm["ops"]["mlp_forward"]
    assert (mlp["collective"], mlp["ranks"], mlp["size_bytes"]) == ("all_reduce", 4, act)
    assert mlp["bytes_per_call"] == 2 * 3 / 4 * act  # 12288
    assert mlp["calls"] == 2  # 2 layers × 1 micro-batch
    assert set(comm["ops"]) == {
        "attention_forward",
        "mlp_forward",
        "attention_backward",
        "mlp_backward",
    }
    assert comm["bytes_per_rank"] == 4 * 2 * 12288
    sp = plan(**TP, tp=4, sp=True).communication["tp"]
    assert sp["bytes_per_rank"] == comm["bytes_per_rank"]  # all-gather + reduce-scatter
    full = plan(**TP, tp=4, recompute="full").communication["tp"]
    assert full["bytes_per_rank"] == 6 / 4 * comm["bytes_per_rank"]  # the forward runs twice


def test_pp_sends_and_cp_ring():
    pp = plan(**{**TP, "global_batch": 8}, pp=2).communication["pp"]  # dp 2, m = 8/(2·2) = 2
    send = pp["ops"]["activation_send"]
    assert (send["size_bytes"], send["calls"], send["bytes_per_call"]) == (8192, 2, 8192)
    report = plan(**TP, cp=2)
    cp = report.communication["cp"]  # a K/V block of s/cp tokens: 2·b·(s/2)·h·2 bytes
    kv = cp["ops"]["kv_forward"]
    assert kv["size_bytes"] == kv["bytes_per_call"] == 2 * 2 * 16 * 64 * 2
    runs = report.resolved.layers_per_stage * report.resolved.accumulation
    calls = {name: op["calls"] for name, op in cp["ops"].items()}  # per layer and micro-batch:
    assert calls == {"kv_forward": runs, "kv_backward": runs, "dkv_backward": 2 * runs}  # + home


@pytest.mark.parametrize(
    "sizes",
    [dict(cp=2), dict(cp=4), dict(cp=2, tp=2), dict(cp=2, kv_heads=2), dict(cp=2, pp=2)],
    ids=str,
)
def test_the_planners_cp_bytes_are_the_simulators_closed_form(sizes):
    # one source: the planner charges what verify measures and context_parallel_bytes gives
    world = 2 * sizes["cp"] * sizes.get("tp", 1) * sizes.get("pp", 1)  # dp 2
    report = plan(**{**TP, "world_size": world, "global_batch": 8}, **sizes)
    d = report.resolved
    width = 64 * sizes.get("kv_heads", 4) // 4  # K/V width: the key/value heads' share
    expected = context_parallel_bytes(
        "ring",
        batch=2,
        seq=32,
        hidden=width,
        cp=sizes["cp"],
        bytes_per_element=2,
        tp=sizes.get("tp", 1),
        layers=d.layers_per_stage,
        microbatches=d.accumulation,
    )
    assert report.communication["cp"]["bytes_per_rank"] == expected


# ---- compute / DP communication: 3·D·BW/(P·b) (6·N·D/P over 2·N·b/BW) --------------------------


def test_compute_to_communication_ratio_and_n_cancels():
    cfg = dict(BASE, intra_bandwidth="300GB/s", intra_latency=0)
    r = plan(**cfg).scaling
    # D = 8·1024/8 = 1024 tokens per GPU, BW = 300 GB/s, P = 100 TFLOP/s, b = 2 bytes
    assert r["compute_to_communication"] == pytest.approx(3 * 1024 * 300e9 / (1e14 * 2))
    # the simulated-by-closed-form ratio: 2(K-1)/K instead of 2, so K/(K-1) more
    assert r["compute_to_dp_time"] == pytest.approx(r["compute_to_communication"] * 8 / 7)
    bigger = plan(**{**cfg, "params": 70e9}).scaling
    assert bigger["compute_to_communication"] == pytest.approx(r["compute_to_communication"])
    assert bigger["compute_to_dp_time"] == pytest.approx(r["compute_to_dp_time"])


def test_step_time_and_efficiency():
    report = plan(**BASE)
    s = report.scaling
    total = report.compute["time_s"] + report.communication["total"]["time_s"]
    assert report.step_time_s == s["step_time_s"] == pytest.approx(total)
    assert s["efficiency"] == pytest.approx(report.compute["ideal_time_s"] / total)
    assert s["step_time_overlapped_s"] <= s["step_time_s"]


def test_derived_counts_stay_fractional_when_a_rule_breaks():
    d = derive(PlanConfig(world_size=784, tp=8, pp=4, params=1e9, global_batch=1536))
    assert d.dp == 24.5 and not d.whole["dp"]


# ---- the pipeline formulas are the schedules' own: checked against a real run ---------------

INTERLEAVED = [(2, 4, 2), (2, 2, 2), (4, 8, 2), (2, 4, 4)]


@pytest.mark.parametrize("p, m, v", INTERLEAVED)
def test_planner_bubble_and_in_flight_match_an_interleaved_run(p, m, v):
    from collsim.parallel.pipeline.runner import run_pipeline, toy_batch, toy_model
    from collsim.parallel.pipeline.schedules import build_schedule

    layers = p * v
    report = plan(
        layers=layers,
        hidden=64,
        heads=4,
        seq=64,
        world_size=p,
        pp=p,
        vpp=v,
        micro_batch=1,
        global_batch=m,
        suggestions=0,
    )
    sched = build_schedule("interleaved", p=p, m=m, v=v)
    model = toy_model(layers=layers)
    x, target = toy_batch(batch=2 * m)
    measured = run_pipeline(sched, model, x, target, t_f=1e-3)
    # the bubble the trace shows: (p-1)/(v·m + p-1); without v it would be (p-1)/(m + p-1)
    assert report.compute["bubble_fraction"] == pytest.approx(measured.bubble_fraction, rel=1e-9)
    assert report.compute["bubble_fraction"] == pytest.approx((p - 1) / (v * m + p - 1))
    assert report.compute["bubble_fraction"] != pytest.approx((p - 1) / (m + p - 1))
    # stage 0 holds what the run held, in whole stages' worth (one chunk is 1/v)
    assert report.memory["in_flight_microbatches"] == pytest.approx(measured.peak_inflight[0] / v)


def test_one_f_one_b_bubble_matches_a_run():
    from collsim.parallel.pipeline.runner import run_pipeline, toy_batch, toy_model
    from collsim.parallel.pipeline.schedules import build_schedule

    report = plan(
        layers=4,
        hidden=64,
        heads=4,
        seq=64,
        world_size=4,
        pp=4,
        micro_batch=1,
        global_batch=8,
        suggestions=0,
    )
    measured = run_pipeline(build_schedule("1f1b", p=4, m=8), toy_model(4), *toy_batch(16))
    assert report.compute["bubble_fraction"] == pytest.approx(measured.bubble_fraction)
    assert report.memory["in_flight_microbatches"] == measured.peak_inflight[0]
