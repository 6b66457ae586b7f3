"""`collsim infer`'s serving side through the command line: the roofline and vLLM's metrics
of a run, --requests with --disaggregate, --plan's KV cache per GPU, and refusals by name
with exit 2."""

import json

import pytest
from fuzzkit import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from collsim.cli import main

SMALL = ["--layers", "2", "--hidden", "16", "--heads", "2", "--vocab", "32"]
SERVE = [
    "infer",
    *SMALL,
    "--requests",
    "6",
    "--prompt-len",
    "6",
    "--new-tokens",
    "4",
    "--batch",
    "2",
    "--disaggregate",
    "1:2",
]
# Llama-2-7B's shape (32 layers, d_model 4096, 32 heads, vocab 32000)
LLAMA_7B = ["--layers", "32", "--hidden", "4096", "--heads", "32", "--vocab", "32000"]


def figures(argv, capsys, status=0):
    assert main([*argv, "--json"]) == status
    return json.loads(capsys.readouterr().out)


def test_a_run_reports_the_roofline_and_vllms_metrics(capsys):
    argv = ["infer", "--tp", "2", *SMALL, "--prompt-len", "8", "--new-tokens", "5"]
    f = figures([*argv, "--preset", "dgx-h100"], capsys)
    m = f["metrics"]
    assert m["vllm:time_to_first_token_seconds"]["mean"] == f["prefill_s"]
    tpot = m["vllm:request_time_per_output_token_seconds"]["mean"]
    assert tpot == pytest.approx(sum(f["decode_step_s"]) / 4)
    assert m["vllm:generation_tokens_total"] == 5
    assert f["roofline"]["hbm_bandwidth"] == 3.35e12
    assert f["decode_step_roofline"]["bound"] == "memory"  # batch 1: far below B_crit
    assert main([*argv, "--preset", "dgx-h100"]) == 0
    out = capsys.readouterr().out
    assert "B_crit = 295 tokens a step" in out and "vllm:time_to_first_token_seconds" in out


def test_requests_compare_colocated_and_disaggregated_on_the_same_gpus(capsys):
    f = figures(SERVE, capsys)
    assert f["match"] is True
    colocated, split = f["deployments"]
    assert (colocated["deployment"], split["deployment"]) == ("colocated x3", "disaggregated 1:2")
    assert colocated["kv_transfers"] == 0
    many = [n for n in f["workload"]["output_tokens"] if n > 1]
    assert split["kv_transfers"] == len(many)
    assert split["kv_bytes"] == len(many) * 2 * 2 * 6 * 16 * 8  # K,V x layers x prompt x d x 8
    for d in (colocated, split):
        assert d["metrics"]["vllm:generation_tokens_total"] == sum(f["workload"]["output_tokens"])
    assert main(SERVE) == 0
    out = capsys.readouterr().out
    assert "disaggregated / colocated: TTFT x" in out and "MATCH" in out


def test_plan_prints_the_kv_cache_per_gpu_and_whether_it_fits(capsys):
    argv = [
        "infer",
        "--plan",
        *LLAMA_7B,
        "--tp",
        "2",
        "--batch",
        "16",
        "--prompt-len",
        "4000",
        "--new-tokens",
        "96",
        "--preset",
        "dgx-h100",
    ]
    f = figures(argv, capsys)
    # 512 KiB a token in bf16 for the whole model, half of it on each of 2 TP ranks
    assert f["kv_bytes_per_sequence"] == 4096 * 512 * 1024 // 2
    assert f["kv_cache_bytes"] == 16 * f["kv_bytes_per_sequence"] and f["fits"] is True
    assert f["decode"]["bound"] == "memory" and f["prefill"]["bound"] == "compute"
    assert main(argv) == 0
    assert "KV cache per GPU: 16 GiB" in capsys.readouterr().out
    too_many = [*argv[:-2], "--batch", "80", "--tp", "1", "--preset", "dgx-h100"]
    assert main(too_many) == 1  # a negative verdict
    assert "DOES NOT FIT" in capsys.readouterr().out


@pytest.mark.parametrize(
    "extra, bad, rule",
    [
        (["--disaggregate", "0:3"], "0:3", "nearest valid --disaggregate 1:3"),
        (["--disaggregate", "3"], "3", "write P:D"),
        (["--requests", "0"], "0", "nearest valid --requests 1"),
        (["--dtype", "fp9"], "fp9", "choose one of fp8, bf16"),
        (["--tp", "2"], "--tp 2", "nearest valid: --tp 1"),
        (["--hbm", "0GB/s"], "0GB/s", "must be > 0"),
        (["--hbm", "inf"], "inf", "HBM bandwidth > 0"),
    ],
)
def test_bad_serving_input_is_refused_by_name(extra, bad, rule):
    outcome = run_cli([*SERVE, *extra], bad=bad)
    assert outcome.status == 2 and rule in outcome.stderr


def test_requests_without_pools_and_a_bad_gpu_memory_are_refused():
    outcome = run_cli(["infer", *SMALL, "--requests", "4"], bad="--disaggregate")
    assert outcome.status == 2 and "e.g. --disaggregate 1:3" in outcome.stderr
    outcome = run_cli(["infer", "--plan", *SMALL, "--gpu-memory", "lots"], bad="lots")
    assert outcome.status == 2


BAD = ["-1", "0", "1:0", "nan", "inf", str(2**62), "1.5", "abc", "", "9:99", "bf16"]


@settings(max_examples=12, deadline=None)
@given(
    flag=st.sampled_from(["--requests", "--disaggregate", "--dtype", "--hbm", "--batch"]),
    value=st.sampled_from(BAD),
)
def test_serving_flags_take_bad_values_without_a_traceback(flag, value):
    outcome = run_cli([*SERVE, flag, value], bad=value or None, timeout=60)
    assert outcome.status in (0, 2)


@settings(max_examples=12, deadline=None)
@given(
    flag=st.sampled_from(["--gpu-memory", "--hidden", "--batch", "--prompt-len", "--tp"]),
    value=st.sampled_from(BAD),
)
def test_plan_flags_take_bad_values_without_a_traceback(flag, value):
    outcome = run_cli(["infer", "--plan", *LLAMA_7B, flag, value], bad=value or None)
    assert outcome.status in (0, 1, 2)
