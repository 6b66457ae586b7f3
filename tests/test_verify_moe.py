"""``collsim verify moe`` through the command line: the verdict, the per-rank report, the
refusals (exit 2, naming the value, the rule and the nearest valid choice) and a bug."""

import functools
import json

import pytest

from collsim.cli import main
from collsim.parallel.experts.formulas import dispatch_bytes
from collsim.parallel.experts.step import expert_parallel_step
from collsim.parallel.experts.sync import EXPERT_KEYS


@pytest.mark.parametrize("ep", [1, 2, 4, 8])
@pytest.mark.parametrize("routing", ["uniform", "zipf", "lognormal", "hot", "adversarial"])
def test_match_for_every_ep_and_routing(ep, routing, capsys):
    status = main(
        [
            "verify",
            "moe",
            "--ep",
            str(ep),
            "--experts",
            "8",
            "--routing",
            routing,
            "--capacity-factor",
            "1.25",
            "--drop-policy",
            "position",
        ]
    )
    out = capsys.readouterr().out
    assert status == 0, out
    assert out.startswith("MATCH") and f"routing {routing}" in out
    assert "capacity: 5 tokens per expert per rank" in out  # ceil(16·2/8·1.25)


def run_json(*flags, capsys):
    status = main(["verify", "moe", *flags, "--json"])
    return status, json.loads(capsys.readouterr().out)


def test_json_report_counts_every_token_and_byte(capsys):
    status, report = run_json("--ep", "4", "--experts", "8", "--top-k", "2", capsys=capsys)
    assert status == 0 and report["match"] and report["bytes_match_closed_form"]
    ranks = report["ranks"]
    assert sum(r["tokens_received"] for r in ranks) == 64 * 2  # dropless: T·k rows
    assert sum(r["dispatch_sent_bytes"] for r in ranks) == sum(
        r["combine_received_bytes"] for r in ranks
    )
    assert report["counts_bytes_per_rank"] == 3 * 2 * 8  # (ep-1)·E/ep int64 counts
    # the all-gather dispatcher: (ep-1)·T·(d + 2E)·b, the tokens and their routing maps
    assert report["other_dispatcher_dispatch_bytes"] == 3 * 16 * (16 + 2 * 8) * 8


def test_the_allgather_dispatcher_moves_every_token(capsys):
    status, report = run_json(
        "--dispatcher", "allgather", "--routing", "adversarial", capsys=capsys
    )
    assert status == 0 and report["match"] and report["dispatcher"] == "allgather"
    for rank in report["ranks"]:  # whatever the routing: every rank's 16 tokens to 3 others
        assert rank["dispatch_sent_bytes"] == 3 * 16 * (16 + 2 * 8) * 8
        assert rank["combine_sent_bytes"] == 3 * 16 * 16 * 8
    assert [r["tokens_received"] for r in report["ranks"]] == [128, 0, 0, 0]


def test_adversarial_routing_leaves_ranks_without_tokens(capsys):
    status, report = run_json("--routing", "adversarial", capsys=capsys)
    assert status == 0
    received = [r["tokens_received"] for r in report["ranks"]]
    assert received == [128, 0, 0, 0]
    compute = [r["expert_compute_s"] for r in report["ranks"]]
    assert compute[0] > 0 and compute[1:] == [0, 0, 0]


def test_dropped_tokens_are_counted(capsys):
    status, report = run_json(
        "--routing", "hot", "--capacity-factor", "0.5", "--top-k", "1", capsys=capsys
    )
    assert status == 0
    dropped = sum(r["dropped"] for r in report["ranks"])
    received = sum(r["tokens_received"] for r in report["ranks"])
    assert dropped > 0 and received + dropped == 64  # top-1: each token kept or dropped


@pytest.mark.parametrize("dispatcher", ["alltoall", "allgather", "hierarchical"])
def test_two_nodes(dispatcher, capsys):
    status = main(
        [
            "verify",
            "moe",
            "--ep",
            "8",
            "--experts",
            "16",
            "--top-k",
            "4",
            "--gpus-per-node",
            "4",
            "--dispatcher",
            dispatcher,
        ]
    )
    out = capsys.readouterr().out
    assert status == 0 and out.startswith("MATCH"), out
    assert f"2 node(s) of 4 GPUs, {dispatcher} dispatcher" in out
    assert f"equal the {dispatcher} dispatcher's closed form" in out and ": yes" in out


def test_closed_form_by_hand():
    # rank 0 sends 3 rows to its own expert 0 and 1 row to rank 1's expert 2: 1 row of 8 B
    assert dispatch_bytes([[3, 0, 1, 0], [0, 2, 0, 0]], ep=2, row_bytes=8).sent == (8, 16)


def doubled(rank, layer, grads):
    router = yield from rank.all_reduce(grads["router"], group=layer.group, op="avg")
    return {"router": router} | {key: grads[key] for key in EXPERT_KEYS}


def test_a_broken_reduction_is_a_mismatch(monkeypatch, capsys):
    broken = functools.partial(expert_parallel_step, sync=doubled)
    monkeypatch.setattr("collsim.verify.moe.expert_parallel_step", broken)
    assert main(["verify", "moe", "--ep", "2", "--experts", "4"]) == 1
    assert capsys.readouterr().out.startswith("MISMATCH")


@pytest.mark.parametrize(
    "flags, words",
    [
        (["--ep", "3"], ["--experts 8 is not divisible by --ep 3", "nearest valid --ep 2"]),
        (["--top-k", "9"], ["--top-k 9", "nearest valid --top-k 8"]),
        (["--batch", "6"], ["--batch 6", "nearest valid --batch 8"]),
        (["--routing", "zipff"], ["--routing 'zipff'", "nearest valid 'zipf'"]),
        (["--drop-policy", "prob"], ["--drop-policy 'prob'", "nearest valid 'probs'"]),
        (["--router-score", "tanh"], ["'tanh'", "softmax, sigmoid"]),
        (
            ["--dispatcher", "all-gather"],
            ["--dispatcher 'all-gather'", "nearest valid 'allgather'"],
        ),
        (["--capacity-factor", "0"], ["--capacity-factor 0.0", "> 0"]),
        (["--capacity-factor", "inf"], ["--capacity-factor inf"]),
        (["--ep", "0"], ["--ep 0", "--ep 2"]),
        (["--tp", "2"], ["--tp 2", "does not apply to scheme 'moe'"]),
        (["--seed", "-1"], ["--seed -1", "nearest valid --seed 0"]),
        (["--hidden", "4096", "--seq", "4096"], ["--hidden 4096", "FLOPs"]),
    ],
)
def test_refusals_exit_2_naming_the_value(flags, words, capsys):
    assert main(["verify", "moe", *flags]) == 2
    err = capsys.readouterr().err
    for word in words:
        assert word in err, err


def test_moe_options_are_refused_on_other_schemes(capsys):
    assert main(["verify", "dp", "--experts", "8"]) == 2
    assert "--experts 8 applies to scheme moe" in capsys.readouterr().err
