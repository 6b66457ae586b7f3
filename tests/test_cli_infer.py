"""`collsim infer`: the tokens it prints are one device's, the collectives and times it
reports are the run's, and bad input is refused by name with exit 2."""

import json

import numpy as np
import pytest
from fuzzkit import run_cli

from collsim.cli import main
from collsim.nn import Decoder, DecoderConfig

BASE = [
    "infer",
    "--tp",
    "2",
    "--pp",
    "2",
    "--layers",
    "4",
    "--hidden",
    "64",
    "--heads",
    "4",
    "--prompt-len",
    "8",
    "--new-tokens",
    "8",
]


def figures(argv, capsys):
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_printed_tokens_are_what_one_device_generates(capsys):
    assert main(BASE) == 0
    out = capsys.readouterr().out
    model = Decoder.init(DecoderConfig(vocab=128, hidden=64, heads=4, layers=4, max_len=16))
    prompt = np.random.default_rng(0).integers(0, 128, (1, 8))
    tokens = model.generate(prompt, 8).tokens[0]
    assert f"tokens 0: {' '.join(map(str, tokens))}" in out
    assert "MATCH: the tokens equal one device's" in out
    assert "decode step:" in out and " us" in out and "KV cache: 16 KiB per rank" in out


def test_the_report_counts_two_all_reduces_a_layer_a_token(capsys):
    f = figures([*BASE, "--batch", "3"], capsys)
    prefill, decode = f["all_reduces"]
    assert (prefill["phase"], prefill["message_bytes"]) == ("prefill", 3 * 8 * 64 * 8)
    assert (decode["phase"], decode["message_bytes"]) == ("decode", 3 * 64 * 8)
    assert prefill["calls"] == 2 * 4  # 2 a layer, 4 layers over the 2 stages' groups
    assert decode["calls"] == 2 * 4 * 7  # and again for each of the 7 decode steps
    assert len(f["decode_step_s"]) == 7 and f["tokens"] == f["expected_tokens"]


def test_one_shot_on_a_dgx_h100_makes_decode_latency_bound_and_faster(capsys):
    argv = ["infer", "--tp", "8", "--heads", "8", "--preset", "dgx-h100", "--new-tokens", "4"]
    ring = figures([*argv, "-a", "ring"], capsys)
    one = figures([*argv, "-a", "one_shot"], capsys)
    (_, ring_decode), (_, one_decode) = ring["all_reduces"], one["all_reduces"]
    assert one_decode["received_bytes"] == 7 * 512  # every peer's whole buffer
    assert ring_decode["received_bytes"] == 2 * 7 * 512 // 8
    assert one_decode["mean_seconds"] * 5 < ring_decode["mean_seconds"]  # 1 step, not 14
    assert max(one["decode_step_s"]) < min(ring["decode_step_s"])
    assert one["tokens"] == ring["tokens"] == one["expected_tokens"]


@pytest.mark.parametrize(
    "flags, bad, words",
    [
        (["--tp", "3"], "tp=3", "nearest first: 2, 4, 1"),
        (["--pp", "3"], "pp=3", "nearest first: 2, 4, 1"),
        (["--heads", "5"], "heads=5", "the nearest valid heads is 4"),
        (["--new-tokens", "0"], "--new-tokens 0", "nearest valid --new-tokens 1"),
        (["--tp", "16", "--pp", "8", "--heads", "16", "--layers", "8"], "128 ranks", "at most 64"),
        (["--cp", "3"], "cp=3", "nearest first: 2, 4, 1, 8"),
        (["--preset", "dgx-h200"], "dgx-h200", "did you mean 'dgx-h100'"),
        (["-a", "two_shoot"], "two_shoot", "did you mean 'two_shot'"),
        (["--latency", "-1us"], "-1us", "--latency"),
        # 8.3 million messages: refused before the run, not stopped by a guard after it
        (
            ["--tp", "64", "--pp", "1", "--heads", "64", "--hidden", "128", "--new-tokens", "64"],
            "--tp 64",
            "more than the 60 s a run may take",
        ),
    ],
)
def test_bad_input_exits_2_naming_the_value_the_rule_and_the_nearest_choice(flags, bad, words):
    outcome = run_cli([*BASE, *flags], bad=bad)
    assert outcome.status == 2 and words in outcome.stderr


def test_crossovers_print_the_models_table(capsys):
    assert main(["infer", "--crossovers", "--preset", "dgx-h100"]) == 0
    out = capsys.readouterr().out
    assert "| dgx-h100 | 8 | 34.49 KiB | 5.388 MiB (nvls) |" in out
    assert "α = 500 ns, β = 370.8 GB/s" in out


def test_the_same_run_twice_gives_the_same_trace_byte_for_byte():
    import collsim
    from collsim.parallel.inference import InferenceSplit, generate_on_cluster

    model = Decoder.init(DecoderConfig(vocab=32, hidden=16, heads=4, layers=2))
    runs = [
        generate_on_cluster(
            model,
            np.array([[1, 2, 3]]),
            3,
            InferenceSplit(tp=2, pp=2, algorithm="one_shot"),
            collsim.Cluster(collsim.hardware.topology("dgx-h100")),  # 4 of its 8 GPUs serve
        )
        for _ in range(2)
    ]
    first, second = (run.result.trace for run in runs)
    assert repr(first.transfers) == repr(second.transfers) and len(first.transfers) > 0
    assert repr(first.computes) == repr(second.computes)
    assert runs[0].token_times == runs[1].token_times


def test_every_example_in_the_help_runs():
    from collsim.cli.infer import EPILOG

    for line in EPILOG.splitlines():
        if "collsim infer" in line:
            argv = line[line.index("collsim infer") :].split()[1:]
            assert run_cli(argv).status == 0, line


def test_context_parallel_reports_its_groups_collectives(capsys):
    argv = ["infer", "--tp", "2", "--cp", "4", "--layers", "4", "--prompt-len", "64"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    # 2 CP groups (one a TP rank): K and V gathered in each of 4 layers at the prefill, the
    # softmax's max and sums in each layer of the 7 decode steps, the token every step
    assert "context parallel (the CP groups): 16 all-gathers, 112 all-reduces, 16 broadcasts" in out
    assert "MATCH" in out
