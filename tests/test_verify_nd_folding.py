"""`collsim verify nd` with ZeRO/FSDP/HSDP beside expert parallelism and with expert tensor
parallelism (--etp), through what a user runs.

Every combination of (dp-replicate, dp-shard, tp, pp, cp, ep, etp) up to 16 ranks that the
rules allow (each with and without --sp where tp > 1) trains like the dense single-device
MoE, swept through the function the CLI calls with the config it builds
(``verify(VerifyConfig("nd", ...))``; ``slow``), and a representative set runs in the
default suite through ``collsim.cli.main``.  What the rules refuse is refused with exit 2,
naming the flag, the planner's rule and the nearest valid choice.
"""

import itertools

import pytest
from fuzzkit import run_cli
from test_verify_nd_ep import QUICK, verify_json

from collsim.cli import main
from collsim.errors import ConfigError
from collsim.parallel.data import expert_grads
from collsim.parallel.experts.generators import ROUTINGS
from collsim.verify import verify
from collsim.verify.config import VerifyConfig

VARIANTS = [
    ["--dp-shard", "2", "--ep", "2"],  # FSDP beside ep: the experts' edp group is one rank
    ["--dp-shard", "4", "--ep", "2"],  # ... and two: experts sharded over edp
    ["--dp-replicate", "2", "--dp-shard", "4", "--ep", "2"],  # HSDP: edp_shard x edp_replicate
    ["--dp-shard", "2", "--cp", "2", "--ep", "2", "--pp", "2"],
    ["--dp-shard", "4", "--ep", "2", "--etp", "2"],  # etp folded over dp ranks (gather/scatter)
    ["--dp-replicate", "2", "--ep", "1", "--etp", "2"],  # Megatron-LM issue 1628's shape
    ["--dp-replicate", "2", "--tp", "2", "--ep", "2"],  # etp = tp, tokens shared: all-reduce
    ["--dp-shard", "2", "--tp", "2", "--sp", "--ep", "4", "--etp", "1"],  # ep across tp
    ["--dp-shard", "2", "--tp", "2", "--sp", "--ep", "2", "--etp", "2", "--cp", "2", "--pp", "2"],
    ["--dp-shard", "4", "--ep", "2", "--etp", "2", "--routing", "adversarial", "--top-k", "1"],
    ["--dp-shard", "4", "--ep", "4", "--capacity-factor", "0.5", "--drop-policy", "position"],
]


@pytest.mark.parametrize("argv", VARIANTS, ids=" ".join)
def test_sharded_and_expert_tensor_parallel_variants_match_one_device(argv, capsys):
    status, report = verify_json(argv, capsys)
    assert status == 0 and report["match"] is True, report["max_abs_diff"]
    tp = argv[argv.index("--tp") + 1] if "--tp" in argv else 1
    etp = argv[argv.index("--etp") + 1] if "--etp" in argv else tp  # Megatron's default: tp
    assert report["config"]["etp"] == int(etp)


def test_the_report_names_each_gradient_group(capsys):
    argv = ["--dp-replicate", "2", "--dp-shard", "4", "--ep", "2", "--etp", "2", *QUICK]
    status = main(["verify", "nd", *argv])
    out = capsys.readouterr().out
    assert status == 0 and "MATCH" in out
    assert "over ep 2, each expert's MLP over etp 2 (columns and rows)" in out
    assert "expert-data-parallel group (dp·cp·tp/(ep·etp) = 2 ranks), sharded" in out
    for group in ("dp_shard reduce_scatter", "edp_replicate all_reduce", "etp all_to_allv"):
        assert group in out


@pytest.mark.parametrize(
    "bug, argv",
    [
        ("expert_grad_share", ["--dp-shard", "4", "--ep", "2"]),
        ("expert_grad_share", ["--dp-replicate", "2", "--dp-shard", "4", "--ep", "2"]),
        ("is_expert_gradient", ["--dp-replicate", "2", "--ep", "1", "--etp", "2"]),
        ("is_expert_gradient", ["--dp-shard", "4", "--ep", "1", "--etp", "2"]),
    ],
    ids=str,
)
def test_the_cli_catches_the_injected_gradient_bugs_with_fsdp_on(monkeypatch, capsys, bug, argv):
    """The doubled expert gradient, and Megatron-LM's etp > 1 with ep = 1 (experts synced as
    dense parameters when ep is 1: their different columns averaged together)."""
    wrong = {
        "expert_grad_share": lambda grad, shards: grad,
        "is_expert_gradient": lambda name, me: name in me.expert_names and me.experts.ep.size > 1,
    }
    monkeypatch.setattr(expert_grads, bug, wrong[bug])
    status, report = verify_json(argv, capsys)
    assert status == 1 and report["match"] is False


REFUSALS = [
    (
        ["--dp-shard", "2", "--ep", "2", "--etp", "2"],
        "--ep 2",
        "moe_folding); nearest valid --ep 1",
    ),
    (["--dp-shard", "4", "--ep", "2", "--etp", "3"], "--etp 3", "moe_folding"),
    (
        ["--dp-shard", "4", "--ep", "1", "--etp", "4", "--ffn-hidden", "6"],
        "--etp 4",
        "moe_ffn_etp); nearest valid --etp",
    ),
    (["--dp-shard", "2", "--tp", "2", "--ep", "2", "--etp", "1"], "--etp 1", "or sp=True"),
    (
        ["--dp-replicate", "2", "--dp-shard", "2", "--ep", "4"],
        "--ep 4",
        "must divide dp_shard x cp x tp = 2",
    ),
    (["--dp-shard", "2", "--ep", "2", "--etp", "0"], "--etp 0", "whole number >= 1"),
]


@pytest.mark.parametrize("argv, bad, phrase", REFUSALS, ids=lambda v: str(v)[:60])
def test_bad_folding_is_refused_by_name_rule_and_nearest_choice(argv, bad, phrase):
    outcome = run_cli(["verify", "nd", *argv, *QUICK], bad=bad, timeout=10)
    assert outcome.status == 2 and outcome.stdout == "", outcome
    assert phrase in outcome.stderr, outcome.stderr


@pytest.mark.parametrize(
    "argv, phrase",
    [(["moe", "--etp", "2"], "does not apply to scheme 'moe'"), (["dp", "--etp", "2"], "nd")],
)
def test_other_schemes_refuse_etp(argv, phrase):
    outcome = run_cli(["verify", *argv], bad="--etp 2", timeout=10)
    assert outcome.status == 2 and phrase in outcome.stderr, outcome.stderr


# --- every combination up to 16 ranks ----------------------------------------------------------

POWERS = (1, 2, 4, 8, 16)


def every_combination():
    """``(allowed, refused)``: VerifyConfig keywords of every (dp_replicate, dp_shard, tp, pp,
    cp, ep, etp) of powers of two up to 16 ranks (ep x etp up to 16; --sp both ways under
    tp), with the model sized to fit each (heads by tp, sequence by 2·cp·tp), the routing,
    top-k and capacity varied along the sweep; refused: the ConfigError of each other one."""
    allowed, refused = [], []
    meshes = itertools.product(POWERS, repeat=5)
    for n, (r, s, t, p, c) in enumerate(m for m in meshes if _ranks(m) <= 16):
        for ep, etp in itertools.product(POWERS, repeat=2):
            for sp in (False, True) if t > 1 else (False,):
                if ep * etp > 16:
                    continue
                i = len(allowed) + len(refused)
                one_block = c == 1 and not sp  # capacity where a rank's tokens are one block
                keywords = dict(
                    dp_replicate=r,
                    dp_shard=s,
                    tp=t,
                    pp=p,
                    cp=c,
                    ep=ep,
                    etp=etp,
                    sequence_parallel=sp,
                    hidden=max(8, 2 * t),
                    heads=max(2, t),
                    seq=2 * c * t,
                    layers=p,
                    steps=1,
                    seed=n,
                    routing=ROUTINGS[i % len(ROUTINGS)],
                    top_k=1 + i % 2,
                    capacity_factor=(None, 1.0, 0.5)[i % 3] if one_block else None,
                    drop_policy=("probs", "position")[i % 2],
                )
                try:
                    _ = VerifyConfig("nd", **keywords).resolved
                except ConfigError as exc:
                    refused.append((keywords, str(exc)))
                else:
                    allowed.append(keywords)
    return allowed, refused


def _ranks(mesh):
    r, s, t, p, c = mesh
    return r * s * t * p * c


def test_the_sweep_covers_what_the_rules_allow_and_refuses_the_rest_by_name():
    allowed, refused = every_combination()
    assert len(allowed) == 1259 and len(refused) == 1471  # pinned: a new rule shows here
    for keywords, message in refused:
        named = f"ep={keywords['ep']}" in message or f"etp={keywords['etp']}" in message
        assert named and "nearest valid" in message, message


MESH = ("dp_replicate", "dp_shard", "tp", "pp", "cp", "ep", "etp", "sequence_parallel")


def one_of_each_kind(allowed):
    """The first allowed combination of each kind of mesh: which of the eight sizes are
    above 1 (ep = etp apart from ep > etp), and sequence parallelism on or off."""
    kinds = {}
    for keywords in allowed:
        kind = tuple(keywords[name] > 1 for name in MESH[:-1])
        kind += (keywords["ep"] == keywords["etp"], keywords["sequence_parallel"])
        kinds.setdefault(kind, keywords)
    return list(kinds.values())


def test_every_kind_of_folded_mesh_trains_like_one_device():
    # the default run: one mesh of each kind the rules allow (the sweep below runs all)
    allowed, _ = every_combination()
    chosen = one_of_each_kind(allowed)
    assert 60 < len(chosen) < len(allowed) / 4
    failed = [k for k in chosen if verify(VerifyConfig("nd", **k)).match is not True]
    assert not failed, failed[:5]


@pytest.mark.sweep
def test_every_allowed_combination_up_to_16_ranks_trains_like_one_device():
    allowed, _ = every_combination()
    failed = []
    for keywords in allowed:
        report = verify(VerifyConfig("nd", **keywords))
        if report.match is not True:
            failed.append((keywords, report.max_abs_diff))
    assert not failed, failed[:5]
