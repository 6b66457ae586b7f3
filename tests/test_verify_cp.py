"""`collsim verify cp` and `collsim verify nd` (issue 14, item 5).

Both train causal transformer blocks with Adam against one device.  cp sets each rank's
context-parallel bytes next to the closed form (ring attention or all-to-all) and its
attention FLOPs: balanced even, contiguous causal ring the last rank nearly (2·cp−1)/cp × the
mean (exactly the (query, key) pairs the causal mask keeps).
nd runs Accelerate's dp_replicate × dp_shard × cp × tp (× pp) mesh.
"""

import json

import pytest
from fuzzkit import run_cli
from hypothesis import given
from hypothesis import strategies as st

from collsim.errors import ConfigError
from collsim.parallel.context.formulas import causal_attention_flops
from collsim.verify.context import verify_context

SMALL = dict(hidden=8, heads=4, seq=16, layers=2, steps=2, batch=2)
VARIANTS, LAYOUTS = ("ring", "all-to-all"), ("balanced", "contiguous")


@pytest.mark.parametrize("cp", [2, 4])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("variant", VARIANTS)
def test_cp_matches_one_device_and_its_bytes_and_flops_their_closed_forms(variant, layout, cp):
    report = verify_context("cp", cp=cp, variant=variant, layout=layout, **SMALL)
    f = report.context
    assert report.match is True and report.max_rel_diff < 1e-9
    collective = "send" if variant == "ring" else "all_to_all"
    assert f.cp_collective == collective
    assert f.cp_bytes_per_rank == report.bytes_by_group[("cp", collective)]
    assert min(f.cp_bytes_per_rank) > 0 and f.cp_bytes_per_rank == f.formula_cp_bytes
    flops = f.attention_flops_per_rank
    assert len(flops) == cp and min(flops) > 0
    if variant == "ring":  # every pass of every layer and step, by the closed form
        hd = SMALL["hidden"] // SMALL["heads"]
        closed = [
            sum(
                causal_attention_flops(16, cp, layout, batch=2, heads=4, head_dim=hd, pass_=p)[i]
                for p in ("forward", "backward")
            )
            * SMALL["layers"]
            * SMALL["steps"]
            for i in range(cp)
        ]
        assert flops == closed
    if variant == "ring" and layout == "contiguous":  # the causal imbalance
        tile = 16 // cp  # rank i keeps i·tile² + tile(tile+1)/2 (query, key) pairs
        kept = [i * tile * tile + tile * (tile + 1) / 2 for i in range(cp)]
        assert f.flops_max_over_mean == pytest.approx(kept[-1] * cp / sum(kept), rel=1e-12)
        assert f.flops_max_over_mean < (2 * cp - 1) / cp  # the large-tile limit
        assert flops.index(max(flops)) == cp - 1
    else:  # balanced ring; all-to-all's dense kernel on H/cp heads in either layout
        assert len(set(flops)) == 1 and f.flops_max_over_mean == 1.0


def test_without_a_causal_mask_even_the_contiguous_layout_is_balanced():
    report = verify_context("cp", cp=4, layout="contiguous", causal=False, **SMALL)
    assert report.match and len(set(report.context.attention_flops_per_rank)) == 1
    assert "causal" not in report.description


@pytest.mark.parametrize(
    "replicate, shard, cp, tp, pp",
    [(1, 2, 2, 1, 1), (2, 2, 2, 1, 1), (1, 1, 2, 1, 2), (2, 2, 1, 2, 1)],
)
def test_nd_meshes_train_like_one_device(replicate, shard, cp, tp, pp):
    report = verify_context(
        "nd",
        dp_replicate=replicate,
        dp_shard=shard,
        cp=cp,
        tp=tp,
        pp=pp,
        hidden=8,
        heads=4,
        seq=8,
        layers=2,
        steps=2,
    )
    f = report.context
    assert report.match is True
    assert f.mesh == dict(dp_replicate=replicate, dp_shard=shard, cp=cp, tp=tp, pp=pp)
    assert f.zero == (3 if shard > 1 else 0)
    assert len(report.bytes_sent) == replicate * shard * cp * tp * pp
    assert f.cp_bytes_per_rank == f.formula_cp_bytes
    if cp > 1:
        assert min(f.cp_bytes_per_rank) > 0
    if shard > 1:  # FSDP gathers its units
        assert any(name == "all_gather" for _, name in report.bytes_by_group)


def refused(argv, bad, phrase):
    """Exit 2 before any work (nothing on stdout), naming ``bad`` and the rule."""
    outcome = run_cli(["verify", *argv], bad=bad, timeout=10)
    assert outcome.status == 2 and outcome.stdout == "", outcome
    assert phrase in outcome.stderr, outcome.stderr
    return outcome.stderr


REFUSALS = [
    (
        ["cp", "--cp", "4", "--variant", "all-to-all", "--heads", "2", "--hidden", "8"],
        "heads=2",
        "DeepSpeed-Ulysses needs heads divisible by cp",
    ),
    (["cp", "--cp", "4", "--seq", "12"], "--seq 12", "nearest valid --seq 8 or 16"),
    (
        ["cp", "--cp", "4", "--seq", "6", "--layout", "contiguous"],
        "--seq 6",
        "nearest valid --seq 4 or 8",
    ),
    (["cp", "--variant", "ulysses"], "ulysses", "nearest valid choice 'all-to-all'"),
    (["cp", "--layout", "zigzag"], "zigzag", "not one of contiguous, balanced"),
    (["cp", "--cp", "0"], "--cp 0", "whole number >= 1"),
    (["nd", "--pp", "x"], "'x'", "whole number"),
    (["cp", "--tp", "2"], "--tp", "applies to scheme 'nd'"),
    (["nd", "--dp", "2"], "--dp 2", "--dp-replicate × --dp-shard"),
    (["cp", "--heads", "3"], "--heads 3", "must divide --hidden 16"),
    (["dp", "--cp", "2"], "--cp", "applies to schemes cp and nd"),
    (["nd", "--pp", "3"], "--pp 3", "a layer per stage"),
    (["nd", "--dp-shard", "100"], "100", "more than the 64"),
    (["nd", "--sp"], "--sp", "needs --tp >= 2"),
    (["cp", "--lr", "inf"], "inf", "learning rate"),
    (["cp", "--stage", "2"], "--stage", "does not apply"),
    (["cp", "--gpus-per-node", "3"], "--gpus-per-node 3", "nearest valid --gpus-per-node 2"),
]


@pytest.mark.parametrize("argv, bad, phrase", REFUSALS, ids=lambda v: str(v)[:40])
def test_bad_flags_are_refused_by_name_before_any_work(argv, bad, phrase):
    refused(argv, bad, phrase)


BAD_NUMBERS = ["-1", "0", "nan", "inf", "-inf", str(2**62), "1e300", "abc", "2.5"]
SIZE_FLAGS = [
    "--cp",
    "--pp",
    "--dp-replicate",
    "--dp-shard",
    "--tp",
    "--seq",
    "--heads",
    "--hidden",
    "--layers",
    "--steps",
    "--batch",
    "--gpus-per-node",
    "--lr",
]


@given(
    scheme=st.sampled_from(["cp", "nd"]),
    flag=st.sampled_from(SIZE_FLAGS),
    bad=st.sampled_from(BAD_NUMBERS),
)
def test_fuzz_bad_numbers_are_refused_by_value_without_a_traceback(scheme, flag, bad):
    if flag == "--lr" and bad in (str(2**62), "1e300", "2.5"):
        return  # a finite learning rate > 0 is valid, however large: not a refusal
    quick = [] if flag == "--steps" else ["--steps", "1"]  # a later flag would win
    outcome = run_cli(["verify", scheme, flag, bad, *quick], bad=bad, timeout=10)
    assert outcome.status in (1, 2) and outcome.stdout == ""


def test_the_api_refuses_what_the_trainer_would_refuse_before_training():
    with pytest.raises(ConfigError, match="unknown scheme 'xx'"):
        verify_context("xx")


KEYS = {
    "match": bool,
    "bytes_per_rank": list,
    "bytes_by_collective": dict,
    "bytes_by_link_class": dict,
    "peak_memory": dict,
    "time_s": float,
    "exposed_comm_s": list,
    "attention_flops_per_rank": list,
    "formula_bytes": list,
    "cp_bytes_per_rank": list,
}


@pytest.mark.parametrize(
    "scheme, flags",
    [("cp", ["--cp", "2", "--layout", "contiguous"]), ("nd", ["--dp-shard", "2", "--cp", "2"])],
)
def test_json_has_the_verify_keys_and_the_cp_ones(scheme, flags):
    outcome = run_cli(["verify", scheme, *flags, "--steps", "1", "--json"])
    assert outcome.status == 0
    report = json.loads(outcome.stdout)
    for key, kind in KEYS.items():
        assert isinstance(report[key], kind), key
    n = len(report["bytes_per_rank"])
    assert report["match"] is True and n == len(report["attention_flops_per_rank"])
    assert report["cp_bytes_per_rank"] == report["formula_bytes"]
    assert set(report["bytes_by_link_class"]) == {"intra_node", "inter_node"}
    assert report["peak_memory"]["total"] > 0 and len(report["exposed_comm_s"]) == n


def test_human_report_states_units_closed_forms_and_the_imbalance():
    outcome = run_cli(["verify", "cp", "--cp", "4", "--layout", "contiguous", "--steps", "1"])
    assert outcome.status == 0
    text = outcome.stdout
    assert "MATCH" in text and "dp_replicate 1 × dp_shard 1 × cp 4 × tp 1 × pp 1" in text
    assert "formula" in text and "KiB" in text and ": equal" in text and "DIFFERENT" not in text
    assert "2(cp−1)/cp·B·S·D·b" in text
    # seq 8 over cp 4: 2-token tiles keep 3, 7, 11, 15 (query, key) pairs, mean 9
    assert "KFLOP" in text and "max/mean 1.6667, min/mean 0.3333" in text
    assert "diagonal included: max/mean 1.6667, min/mean 0.3333" in text
    assert "(2·cp−1)/cp = 1.75 and 1/(2·cp) = 0.125" in text
    assert " us" in text and "peak memory" in text and "intra-node" in text


def test_help_lists_cp_and_nd_and_keeps_each_example_on_its_own_lines():
    text = run_cli(["verify", "--help"]).stdout
    assert "cp, nd: context parallelism" in text and "verify cp --cp 4 --variant all-to-all" in text
    # a backslash that continues an example is printed, not swallowed by the string
    assert "collsim verify fsdp --dp 4 \\\n" in text
    assert "collsim verify nd --dp-replicate 2 \\\n" in text
