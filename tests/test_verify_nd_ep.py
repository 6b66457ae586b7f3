"""`collsim verify nd --ep N` through the entry point a user runs: every mesh and MoE
variant trains like one device, reports the experts and their traffic, catches the injected
doubled expert gradient, and refuses bad values by flag, rule and nearest valid choice."""

import json

import pytest
from fuzzkit import run_cli

from collsim.cli import main
from collsim.parallel.data import expert_grads

QUICK = ["--hidden", "8", "--heads", "2", "--seq", "4", "--steps", "2"]

VARIANTS = [
    ["--dp-replicate", "2", "--ep", "2"],
    ["--dp-replicate", "4", "--ep", "4", "--experts", "8", "--top-k", "1"],
    ["--dp-replicate", "4", "--ep", "2", "--pp", "2"],
    ["--dp-replicate", "2", "--cp", "2", "--ep", "4"],
    ["--dp-replicate", "2", "--cp", "2", "--ep", "2", "--variant", "all-to-all"],
    ["--dp-replicate", "2", "--ep", "2", "--capacity-factor", "1.0"],
    ["--dp-replicate", "2", "--ep", "2", "--capacity-factor", "0.5", "--drop-policy", "position"],
    ["--dp-replicate", "2", "--ep", "2", "--capacity-factor", "1.0", "--pad-to-capacity"],
    ["--dp-replicate", "2", "--ep", "2", "--routing", "adversarial", "--top-k", "1"],
    ["--dp-replicate", "2", "--ep", "2", "--routing", "zipf", "--router-score", "sigmoid"],
    ["--dp-replicate", "2", "--experts", "4"],  # MoE blocks, experts whole on every rank
    ["--dp-replicate", "2", "--ep", "2", "--gpus-per-node", "1"],
    ["--dp-replicate", "2", "--ep", "2", "--tp", "2"],  # the MoE on every tp rank's tokens
    ["--dp-replicate", "2", "--ep", "2", "--tp", "2", "--sp"],  # each tp rank routes its own
    ["--dp-replicate", "2", "--cp", "2", "--ep", "4", "--tp", "2", "--sp", "--pp", "2"],
]


def verify_json(argv, capsys):
    status = main(["verify", "nd", *argv, *QUICK, "--json"])
    return status, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("argv", VARIANTS, ids=" ".join)
def test_every_variant_matches_one_device_through_the_cli(argv, capsys):
    status, report = verify_json(argv, capsys)
    assert status == 0 and report["match"] is True, report["max_abs_diff"]
    config = report["config"]
    ep = int(argv[argv.index("--ep") + 1]) if "--ep" in argv else 1
    assert config["ep"] == ep and config["experts"] >= ep
    if ep > 1:  # the tokens crossed the ep group, counted as its own traffic
        assert "ep all_to_allv" in report["bytes_by_group"] or any(
            "all_to_allv" in key for key in report["bytes_by_group"]
        )


def test_the_human_report_names_the_experts_and_their_gradient_group(capsys):
    status = main(["verify", "nd", "--dp-replicate", "2", "--cp", "2", "--ep", "4", *QUICK])
    out = capsys.readouterr().out
    assert status == 0 and "MATCH" in out
    assert "experts: 8 per MoE layer over ep 4 (folded over dp × cp × tp)" in out
    assert "expert-data-parallel group (dp·cp·tp/(ep·etp) = 1 ranks)" in out
    assert "ep all_to_allv" in out
    # the MoE traffic is not counted as context-parallel sends: those equal their formula
    assert "DIFFERENT" not in out


def test_the_cli_catches_a_doubled_expert_gradient(monkeypatch, capsys):
    monkeypatch.setattr(expert_grads, "expert_grad_share", lambda grad, shards: grad)
    status, report = verify_json(["--dp-replicate", "2", "--ep", "2"], capsys)
    assert status == 1 and report["match"] is False


def refused(argv, bad, phrase):
    """Exit 2 before any work (nothing on stdout), naming ``bad`` and the rule."""
    outcome = run_cli(["verify", "nd", *argv], bad=bad, timeout=10)
    assert outcome.status == 2 and outcome.stdout == "", outcome
    assert phrase in outcome.stderr, outcome.stderr


REFUSALS = [
    (["--dp-replicate", "2", "--ep", "3"], "--ep 3", "moe_folding); nearest valid --ep 2"),
    (
        ["--dp-replicate", "4", "--ep", "2", "--experts", "3"],
        "--experts 3",
        "is not divisible by ep = 2",
    ),
    (
        ["--dp-replicate", "2", "--tp", "2", "--sp", "--ep", "2", "--capacity-factor", "1.0"],
        "--capacity-factor 1.0",
        "one block of the batch",
    ),
    (
        ["--cp", "2", "--ep", "2", "--capacity-factor", "1.5"],
        "--capacity-factor 1.5",
        "one block of the batch",
    ),
    (
        ["--dp-replicate", "2", "--ep", "2", "--dispatcher", "allgather"],
        "--dispatcher",
        "applies to scheme moe",
    ),
    (["--dp-replicate", "2", "--ep", "2", "--top-k", "5"], "--top-k 5", "nearest valid --top-k 4"),
    (["--dp-replicate", "2", "--ep", "0"], "--ep 0", "whole number >= 1"),
    (["--dp-replicate", "2", "--ep", "2", "--routing", "zipff"], "zipff", "zipf"),
    (["--dp-replicate", "2", "--ep", "2", "--capacity-factor", "-1"], "-1", "> 0"),
]


@pytest.mark.parametrize("argv, bad, phrase", REFUSALS, ids=lambda v: str(v)[:50])
def test_bad_moe_flags_are_refused_by_name_before_any_work(argv, bad, phrase):
    refused(argv, bad, phrase)


def test_cp_still_refuses_the_moe_flags():
    outcome = run_cli(["verify", "cp", "--ep", "2"], bad="--ep", timeout=10)
    assert outcome.status == 2 and "applies to scheme moe" in outcome.stderr
