"""``collsim verify zero | fsdp | hsdp`` (issue 13, item 7): ZeRO stages, FSDP and HSDP trained
with Adam against one device, with the memory each rank holds and the bytes each link class
carries set next to the ZeRO paper's formulas (Rajbhandari et al. 2020) and the closed forms.

The formulas are written out again here, independently of :mod:`collsim.verify.expected`:
mixed-precision Adam holds 2 B of bf16 parameter, 2 B of gradient and 12 B of fp32 state
per parameter; the float64 arrays the check compares move b = 8 B per element.
"""

import json

import pytest
from fuzzkit import run_cli
from hypothesis import given
from hypothesis import strategies as st

from collsim import topology
from collsim.errors import ConfigError
from collsim.network.trace import Trace
from collsim.parallel.accounting import bytes_by_link_class
from collsim.parallel.config import PREFETCH
from collsim.plan.memory import model_state_bytes
from collsim.runtime import Cluster
from collsim.verify import verify
from collsim.verify.sharding import padded_params

# two transformer blocks of hidden 8 (ffn 32): weights 4·8² + 2·8·32 = 768, biases
# 3·8 + 8 + 32 + 8 = 72, two LayerNorms 4·8 = 32: 872 per block, a multiple of 8
UNIT = 872
PSI = 2 * UNIT
SMALL = dict(hidden=8, heads=2, seq=4, layers=2, steps=2)
STEPS = SMALL["steps"]
B = 8  # bytes per element on the wire: float64


def _per_rank(report, collective):
    """Bytes each rank sent in ``collective`` (0 for every rank when it never ran)."""
    world = len(report.bytes_sent)
    return report.bytes_by_collective.get(collective, [0] * world)


def _zero_state(stage, n, psi=PSI):
    """(params, grads, optimizer) bytes of one rank: the ZeRO paper's table."""
    return {
        1: (2 * psi, 2 * psi, 12 * psi // n),  # 4Ψ + 12Ψ/N
        2: (2 * psi, 2 * psi // n, 12 * psi // n),  # 2Ψ + 14Ψ/N
        3: (2 * psi // n, 2 * psi // n, 12 * psi // n),  # 16Ψ/N
    }[stage]


@pytest.mark.parametrize("dp", [1, 2, 4, 8])
@pytest.mark.parametrize("stage", [1, 2, 3])
def test_every_zero_stage_matches_one_device_with_the_papers_memory_and_bytes(stage, dp):
    report = verify("zero", stage=stage, dp=dp, **SMALL)
    assert report.match and report.dp_replica_diff == 0.0
    s = report.sharding
    assert report.config["optimizer"] == "Adam" and s.params == PSI
    # bytes per rank: stages 1-2 reduce-scatter + all-gather = 2Ψ(N-1)/N·b a step,
    # stage 3 all-gathers twice (forward, backward) and reduce-scatters once: 3Ψ(N-1)/N·b
    share = STEPS * (dp - 1) * PSI * B // dp
    gathers = 2 if stage == 3 else 1
    assert _per_rank(report, "reduce_scatter") == [share] * dp
    assert _per_rank(report, "all_gather") == [gathers * share] * dp
    assert report.bytes_sent == [(gathers + 1) * share] * dp
    assert s.formula_bytes == {"reduce_scatter": share, "all_gather": gathers * share}
    # memory: every rank's model state is the paper's, and what the planner estimates
    params, grads, optimizer = _zero_state(stage, dp)
    for peak in s.peak_per_rank:
        assert (peak["params"], peak["grads"], peak["optimizer"]) == (params, grads, optimizer)
    assert s.model_state == params + grads + optimizer == s.formula.total
    assert s.model_state == sum(model_state_bytes(PSI, zero=stage, shard_degree=dp))
    # stage 3 holds one gathered unit at a time (bf16), stages 1-2 none
    assert s.peak["gathered_params"] == (2 * UNIT if stage == 3 else 0)
    assert s.bytes_by_link_class == {"intra_node": sum(report.bytes_sent), "inter_node": 0}


@given(
    stage=st.sampled_from([1, 2, 3]),
    dp=st.integers(1, 8),
    seed=st.integers(0, 2**32),
    hidden=st.sampled_from([4, 8]),
    layers=st.integers(1, 2),
)
def test_drawn_shard_counts_shapes_and_seeds_match_with_identical_replicas(
    stage, dp, seed, hidden, layers
):
    """Any dp from 1 to 8, including ones that do not divide Ψ (the shards are zero-padded
    as FSDP pads its flat parameters): Adam steps equal one device's, replicas agree, and
    the bytes equal the closed forms on the padded buffers."""
    report = verify(
        "zero", stage=stage, dp=dp, hidden=hidden, heads=2, seq=4, layers=layers, steps=2, seed=seed
    )
    assert report.match and report.dp_replica_diff == 0.0
    s = report.sharding
    padded = padded_params(s.unit_params, stage, dp)
    assert padded % dp == 0 and 0 <= padded - s.params < dp * layers
    share = 2 * (dp - 1) * padded * B // dp
    assert _per_rank(report, "reduce_scatter") == [share] * dp
    assert _per_rank(report, "all_gather") == [(2 if stage == 3 else 1) * share] * dp
    assert all(p["optimizer"] == 12 * padded // dp for p in s.peak_per_rank)


@pytest.mark.parametrize("reshard", [True, False])
@pytest.mark.parametrize("prefetch", PREFETCH)
def test_fsdp_with_every_prefetch_and_reshard_matches_and_gathers_as_scheduled(prefetch, reshard):
    layers = 3  # so that one, two and all units gathered differ
    report = verify(
        "fsdp",
        dp=4,
        prefetch=prefetch,
        reshard_after_forward=reshard,
        **{**SMALL, "layers": layers},
    )
    assert report.match
    assert report.config["prefetch"] == prefetch
    assert report.config["reshard_after_forward"] is reshard
    share = STEPS * 3 * layers * UNIT * B // 4
    # SHARD_GRAD_OP (no reshard) keeps the forward's gather for the backward: one fewer
    assert _per_rank(report, "all_gather") == [(2 if reshard else 1) * share] * 4
    assert _per_rank(report, "reduce_scatter") == [share] * 4
    held = layers if not reshard else (1 if prefetch == "none" else 2)
    assert report.sharding.peak["gathered_params"] == 2 * UNIT * held
    assert report.sharding.model_state == 16 * layers * UNIT // 4
    data = report.to_dict()
    for key in (
        "match",
        "bytes_per_rank",
        "bytes_by_collective",
        "bytes_by_link_class",
        "peak_memory",
        "peak_memory_per_rank",
    ):
        assert key in data


@pytest.mark.parametrize(("replicate", "shard"), [(2, 2), (2, 4)])
def test_hsdp_sends_only_the_replica_all_reduce_between_nodes(replicate, shard):
    report = verify("hsdp", dp_replicate=replicate, dp_shard=shard, **SMALL)
    assert report.match and report.dp_replica_diff == 0.0
    world = replicate * shard
    assert report.config["dp"] == world and report.config["gpus_per_node"] == shard
    # the replica group all-reduces this rank's Ψ/S shard: 2(R-1)/R·(Ψ/S)·b per step
    all_reduce = STEPS * 2 * (replicate - 1) * (PSI // shard) * B // replicate
    assert _per_rank(report, "all_reduce") == [all_reduce] * world
    gather = STEPS * (shard - 1) * PSI * B // shard
    assert _per_rank(report, "all_gather") == [2 * gather] * world
    links = report.sharding.bytes_by_link_class
    assert links["inter_node"] == world * all_reduce == STEPS * 2 * (replicate - 1) * PSI * B
    assert links["inter_node"] == report.sharding.formula_inter_node
    assert links["intra_node"] + links["inter_node"] == sum(report.bytes_sent)
    assert report.sharding.model_state == 16 * PSI // shard  # sharded over S, not R·S


def test_hsdp_on_one_node_sends_nothing_between_nodes():
    report = verify("hsdp", dp_replicate=2, dp_shard=2, gpus_per_node=4, **SMALL)
    assert report.match
    assert report.sharding.bytes_by_link_class["inter_node"] == 0


def test_sgd_is_kept_and_its_state_is_the_master_weights_alone():
    report = verify("zero", stage=1, dp=4, optimizer="sgd", **SMALL)
    assert report.match and report.config["optimizer"] == "SGD"
    assert report.sharding.peak["optimizer"] == 4 * PSI // 4  # fp32 master shard
    assert report.sharding.formula.text == "4Ψ + 4Ψ/N"


# ---- bytes by link class ---------------------------------------------------------------------


def test_bytes_by_link_class_reads_each_transfers_two_nodes():
    trace = Trace()
    for src, dst, nbytes in [(0, 1, 10), (1, 0, 20), (1, 2, 300), (3, 2, 4000), (0, 3, 50000)]:
        trace.add_transfer(src, dst, None, nbytes, 0.0, 1.0, (), "")
    assert bytes_by_link_class(trace, 2) == {"intra_node": 4030, "inter_node": 50300}
    assert bytes_by_link_class(trace, 4) == {"intra_node": 54330, "inter_node": 0}
    assert bytes_by_link_class(trace, 1) == {"intra_node": 0, "inter_node": 54330}


def test_bytes_by_link_class_on_a_real_two_level_run():
    cluster = Cluster(topology.hierarchical(2, 2))
    run = cluster.all_reduce([[1.0] * 8] * 4)  # a ring 0 -> 1 -> 2 -> 3 -> 0 of 64 B buffers
    # each rank sends 2(K-1)/K·S = 96 B to its ring neighbour: 0 -> 1 and 2 -> 3 stay in a
    # node, 1 -> 2 and 3 -> 0 cross between the nodes
    assert bytes_by_link_class(run.trace, 2) == {"intra_node": 192, "inter_node": 192}


@pytest.mark.parametrize("bad", [0, -1, True, 2.0, "2"])
def test_bytes_by_link_class_refuses_a_node_that_is_not_a_whole_number(bad):
    with pytest.raises(ConfigError, match=f"gpus_per_node={bad!r}"):
        bytes_by_link_class(Trace(), bad)


# ---- refusals, by name, before any training -------------------------------------------------


@pytest.fixture
def no_training(monkeypatch):
    """Fail the test if verify reaches its trainer: a refusal comes first."""
    import collsim.verify.run as run

    def refuse(*args, **kwargs):
        raise AssertionError("trained before refusing")

    monkeypatch.setattr(run, "train_on_cluster", refuse)


REFUSED = [
    (["zero", "--stage", "4"], "--stage 4", "nearest valid --stage 3"),
    (["zero", "--stage", "0"], "--stage 0", "nearest valid --stage 1"),
    (["zero", "--stage", "x"], "--stage 'x'", "whole number"),
    (
        ["hsdp", "--dp-replicate", "3", "--dp-shard", "0"],
        "--dp-shard 0",
        "nearest valid --dp-shard 1",
    ),
    (["fsdp", "--prefetch", "sideways"], "--prefetch sideways", "nearest valid --prefetch"),
    (["fsdp", "--prefetch", "backwards"], "backwards", "nearest valid --prefetch backward"),
    (["zero", "--optimizer", "adamw"], "adamw", "nearest valid --optimizer adam"),
    (["dp", "--stage", "2"], "--stage", "applies to zero"),
    (["zero", "--prefetch", "forward"], "--prefetch", "applies to fsdp and hsdp"),
    (["zero", "--no-reshard-after-forward"], "--no-reshard-after-forward", "fsdp and hsdp"),
    (["fsdp", "--dp-shard", "2"], "--dp-shard", "applies to hsdp"),
    (["hsdp", "--gpus-per-node", "3"], "--gpus-per-node 3", "nearest valid --gpus-per-node 2"),
    (["hsdp", "--dp", "8"], "--dp 8", "2 × 2 = 4"),
    (["hsdp", "--dp-replicate", "16", "--dp-shard", "8"], "--dp-shard 8", "more than the 64"),
    (["zero", "--tp", "2"], "tp=2", "data parallel only"),
]


@pytest.mark.parametrize(("argv", "bad", "rule"), REFUSED, ids=[" ".join(a) for a, _, _ in REFUSED])
def test_bad_sharding_flags_are_refused_by_name_before_training(argv, bad, rule, no_training):
    outcome = run_cli(["verify", *argv], bad=bad)
    assert outcome.status == 2 and rule in outcome.stderr


@pytest.mark.parametrize(
    ("scheme", "options", "bad"),
    [
        ("zero", dict(stage=4), "stage=4"),
        ("fsdp", dict(prefetch="sideways"), "prefetch='sideways'"),
        ("hsdp", dict(dp_replicate=3, dp_shard=0), "dp_shard=0"),
        ("zero", dict(optimizer="lamb"), "optimizer='lamb'"),
        ("tp-mlp", dict(optimizer="adam"), "optimizer"),
    ],
)
def test_the_api_refuses_by_keyword(scheme, options, bad, no_training):
    with pytest.raises(ConfigError) as error:
        verify(scheme, **options)
    assert bad in str(error.value)


BAD_VALUES = ["-1", "0", "nan", "inf", "-inf", str(2**62), "1e300", "abc", "", "2.5", "NaN"]
FLAG_SCHEME = {
    "--stage": "zero",
    "--dp-replicate": "hsdp",
    "--dp-shard": "hsdp",
    "--gpus-per-node": "hsdp",
    "--prefetch": "fsdp",
    "--optimizer": "zero",
}


@given(
    flag=st.sampled_from(sorted(FLAG_SCHEME)),
    value=st.sampled_from(BAD_VALUES),
    joined=st.booleans(),
)
def test_fuzz_sharding_flags_name_the_bad_value(flag, value, joined):
    argv = [
        "verify",
        FLAG_SCHEME[flag],
        "--hidden",
        "8",
        "--heads",
        "2",
        "--seq",
        "4",
        "--layers",
        "1",
        "--steps",
        "1",
    ]
    argv += [f"{flag}={value}"] if joined else [flag, value]
    outcome = run_cli(argv, bad=value, timeout=10)
    assert outcome.status in (1, 2)


# ---- --json and the human report ------------------------------------------------------------

SCHEME_ARGV = {
    "zero": ["zero", "--stage", "3", "--dp", "2"],
    "fsdp": ["fsdp", "--dp", "2", "--prefetch", "both"],
    "hsdp": ["hsdp", "--dp-replicate", "2", "--dp-shard", "2"],
}
SMALL_ARGV = ["--hidden", "8", "--heads", "2", "--seq", "4", "--layers", "2", "--steps", "2"]
CATEGORIES = {
    "params",
    "grads",
    "optimizer",
    "activations",
    "gathered_params",
    "comm_buffers",
    "total",
}


@pytest.mark.parametrize("scheme", sorted(SCHEME_ARGV))
def test_json_has_the_sharding_keys_with_their_types(scheme):
    outcome = run_cli(["verify", *SCHEME_ARGV[scheme], *SMALL_ARGV, "--json"])
    assert outcome.status == 0
    data = json.loads(outcome.stdout)
    world = data["config"]["dp"]
    assert data["match"] is True and data["scheme"] == scheme
    assert len(data["bytes_per_rank"]) == world
    assert all(isinstance(b, int) and b > 0 for b in data["bytes_per_rank"])
    assert all(len(v) == world for v in data["bytes_by_collective"].values())
    assert set(data["bytes_by_link_class"]) == {"intra_node", "inter_node"}
    assert sum(data["bytes_by_link_class"].values()) == sum(data["bytes_per_rank"])
    assert set(data["peak_memory"]) == CATEGORIES
    assert all(isinstance(v, int) for v in data["peak_memory"].values())
    assert len(data["peak_memory_per_rank"]) == world
    assert all(set(p) == CATEGORIES for p in data["peak_memory_per_rank"])
    assert data["model_state_bytes"] == data["formula_model_state"]["total"]


def test_the_human_report_shows_units_and_the_formulas():
    outcome = run_cli(["verify", "zero", "--stage", "2", *SMALL_ARGV])
    out = outcome.stdout
    assert outcome.status == 0 and "MATCH" in out and "Adam step(s)" in out
    assert "KiB" in out and " us" in out
    assert "formula 2Ψ + 14Ψ/N = 9.367 KiB (9,592 B): equal" in out
    assert "unsharded model state: 16Ψ = 27.25 KiB (27,904 B)" in out
    assert "2Ψ(N-1)/N·b per step" in out
    hsdp = run_cli(["verify", "hsdp", "--dp-replicate", "2", "--dp-shard", "2", *SMALL_ARGV])
    assert "formula 16Ψ/N" in hsdp.stdout and "gathered parameters" in hsdp.stdout
    assert "inter-node formula: the replica all-reduce alone" in hsdp.stdout
    assert hsdp.stdout.count(": equal") == 2


def test_the_help_teaches_what_each_stage_shards():
    outcome = run_cli(["verify", "--help"])
    text = " ".join(outcome.stdout.split())
    for phrase in (
        "16 bytes per parameter",
        "4Ψ + 12Ψ/N",
        "2Ψ + 14Ψ/N",
        "16Ψ/N",
        "--dp-replicate",
        "--no-reshard-after-forward",
    ):
        assert phrase in text
