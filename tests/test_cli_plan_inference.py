"""`collsim plan --inference`: the KV cache and weights per GPU of a real model, what fits,
the roofline's B_crit, and refusals by name with exit 2.  The figures are checked against
the models' published configs (Hugging Face config.json of meta-llama/Llama-2-7b-hf and
-70b-hf: layers, key/value heads, head size; Touvron et al. 2023's parameter counts), not
against the formulas under test."""

import json

import pytest
from fuzzkit import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from collsim.cli import main

LLAMA_70B_TP8 = ["plan", "--inference", "--model", "llama2-70b", "--tp", "8"]
H100 = ["--machine", "dgx-h100"]


def figures(argv, capsys, status=0):
    assert main([*argv, "--json"]) == status
    return json.loads(capsys.readouterr().out)


def test_grouped_query_attention_shrinks_the_kv_cache_by_the_groups(capsys):
    # Llama-2-70B: 80 layers, 8 key/value heads of 128 (config.json), bf16
    published = 2 * 80 * 8 * 128 * 2  # bytes a token: K and V, every layer, every KV head
    f = figures([*LLAMA_70B_TP8, *H100, "--batch", "16", "--prompt-len", "4000"], capsys)
    assert f["kv_bytes_per_token"] * 8 == published == 320 * 1024
    assert f["kv_bytes_per_sequence"] == published // 8 * 4000
    assert f["kv_cache_bytes"] == 16 * f["kv_bytes_per_sequence"]
    # 16 TP ranks share 8 KV heads: each caches one (replicated, as vLLM does), not half
    f16 = figures([*LLAMA_70B_TP8[:-1], "16", *H100, "--prompt-len", "4000"], capsys)
    assert f16["kv_bytes_per_token"] == published // 8


def test_weights_per_gpu_are_the_published_parameter_count_split_over_tp(capsys):
    llama_7b = 6_738_415_616  # Touvron et al. 2023; the sum of the HF checkpoint's tensors
    for tp in (1, 2, 4):
        argv = ["plan", "--inference", "--model", "llama2-7b", "--tp", str(tp)]
        f = figures([*argv, "--prompt-len", "512"], capsys)
        assert f["weight_bytes"] == pytest.approx(2 * llama_7b / tp, abs=1)


def test_what_fits_on_the_gpu_preset_and_b_crit(capsys):
    argv = ["plan", "--inference", "--model", "llama2-7b", *H100, "--prompt-len", "4096"]
    f = figures([*argv, "--batch", "64"], capsys, status=1)  # 64 x 2 GiB of cache: no
    assert f["fits"] is False and f["gpu_memory"] == 80 * 2**30
    free = 80 * 2**30 - 2 * 6_738_415_616
    assert f["max_batch"] == free // (512 * 1024 * 4096)  # 512 KiB a token (Llama 2 7B)
    assert f["max_tokens"] == free // (512 * 1024 * 64)
    assert f["critical_batch"] == pytest.approx(989e12 / 3.35e12)  # bf16: peak / HBM
    assert f["decode"]["bound"] == "memory"
    assert main([*argv, "--batch", str(f["max_batch"])]) == 0
    out = capsys.readouterr().out
    assert "FITS" in out and "B_crit = peak / HBM · 2 B / 2 = 295 tokens a step" in out
    assert "KV cache per GPU: 66 GiB (512 KiB a token, 2 GiB a sequence" in out


def test_infer_plan_is_the_same_plan(capsys):
    shape = ["--layers", "40", "--hidden", "5120", "--heads", "40", "--vocab", "50272"]
    sizes = ["--batch", "32", "--prompt-len", "700", "--new-tokens", "300"]
    old = figures(["infer", "--plan", *shape, *sizes, "--preset", "dgx-a100"], capsys)
    new = figures(
        ["plan", "--inference", *shape, *sizes, "--machine", "dgx-a100", "--seq", "1000"]
        + ["--gpu-memory", "80GB"],
        capsys,
    )
    assert old == new


@pytest.mark.parametrize(
    "extra, bad, rule",
    [
        (["--tp", "3"], "tp=3", "nearest first: 2, 4"),
        (["--model", "mixtral-8x7b"], "mixtral-8x7b", "a dense model such as llama2-70b"),
        (["--cp", "3", "--prompt-len", "4000"], "cp=3", "nearest first: 2, 4"),
        (["--dtype", "fp9"], "fp9", "choose one of fp8, bf16"),
        (["--machine", "dgx-h200"], "dgx-h200", "dgx-h100"),
        (["--batch", "0"], "0", "--batch"),
    ],
)
def test_bad_input_is_refused_by_name(extra, bad, rule):
    outcome = run_cli([*LLAMA_70B_TP8, *extra], bad=bad)
    assert outcome.status == 2 and rule in outcome.stderr


def test_a_tp_that_splits_the_key_value_heads_unevenly_is_refused():
    shape = ["--layers", "4", "--hidden", "96", "--heads", "12", "--kv-heads", "3"]
    outcome = run_cli(["plan", "--inference", *shape, "--tp", "2"], bad="--tp 2")
    assert outcome.status == 2 and "nearest valid tp: 1, 3" in outcome.stderr
    assert main(["plan", "--inference", *shape, "--tp", "6"]) == 0  # one KV head, replicated


def test_serving_flags_without_inference_are_refused():
    outcome = run_cli(["plan", "--model", "llama2-7b", "--batch", "8"], bad="--batch 8")
    assert outcome.status == 2 and "add --inference" in outcome.stderr


BAD = ["-1", "0", "nan", "inf", str(2**62), "1.5", "abc", "", "bf16", "7B"]


@settings(max_examples=15, deadline=None)
@given(
    flag=st.sampled_from(["--batch", "--prompt-len", "--new-tokens", "--tp", "--hbm", "--dtype"]),
    value=st.sampled_from(BAD),
)
def test_inference_flags_take_bad_values_without_a_traceback(flag, value):
    outcome = run_cli([*LLAMA_70B_TP8, "--prompt-len", "64", flag, value], bad=value or None)
    assert outcome.status in (0, 1, 2)


def test_the_help_s_serving_example_runs(capsys):
    from collsim.cli.plan import EPILOG

    text = EPILOG.replace("\\\n", " ")
    (line,) = [x for x in text.splitlines() if "--inference" in x]
    argv = line[line.index("collsim plan") :].split()[1:]
    assert main(argv) == 0
    assert "KV cache per GPU: 2.5 GiB (40 KiB a token" in capsys.readouterr().out
