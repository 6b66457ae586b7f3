"""Megatron-LM's 784-GPU error: tp=8, pp=4 (784 / 32 = 24.5), and the example that plans it."""

import runpy
from pathlib import Path

import pytest

from collsim.plan import plan
from collsim.plan.config import divisors

GPT3 = dict(layers=96, hidden=12288, heads=96, seq=2048)
CASE = dict(world_size=784, tp=8, pp=4, global_batch=1536, micro_batch=1, **GPT3)


@pytest.fixture(scope="module")
def report():
    return plan(**CASE)


def test_tp8_pp4_fails_on_the_world_size_rule(report):
    assert not report.valid
    rules = [v.rule for v in report.violations]
    assert rules[0] == "world_size"
    v = report.violations[0]
    assert "784" in v.message and "8·4 = 32" in v.message and "24.5" in v.message


def test_hint_lists_the_pp_values_dividing_98_with_their_dp(report):
    hint = report.violations[0].hint
    assert "784/8 = 98" in hint
    for pp in divisors(98):  # 1, 2, 7, 14, 49, 98
        assert f"pp={pp}" in hint
        if pp <= 96:  # pp = 98 would leave stages without a layer
            assert f"pp={pp} (dp={98 // pp}" in hint
    assert "pp=98 would exceed the 96 layers" in hint
    assert "768 GPUs (dp=24)" in hint and "800 GPUs (dp=25)" in hint


def test_report_says_no_configuration_of_784_gpus_works(report):
    (note,) = report.notes
    assert note.startswith("No configuration of 784 GPUs works")
    assert "1536" in note and "49 = 7^2" in note and "2^9·3" in note
    assert "dp ∈ {49, 98, 196, 392, 784}" in note
    assert "change the world size or the global batch" in note
    assert "No configuration of 784 GPUs" in str(report)


def test_suggestions_change_world_size_or_batch_and_are_valid(report):
    assert len(report.suggestions) >= 3
    for s in report.suggestions:
        assert {"world_size", "global_batch"} & set(s.changes), s.describe()
        again = plan(s.config, suggestions=0)
        assert again.valid, again
        assert again.derived["world_size"] * 1 == s.config.world_size
    best = report.suggestions[0]
    assert best.changes["world_size"] == (784, 768)
    changes = [len(s.changes) for s in report.suggestions]
    assert changes == sorted(changes)  # fewest changes first


def test_with_zero_1_the_only_change_needed_is_768_gpus():
    report = plan(**CASE, zero=1)
    assert [v.rule for v in report.violations] == ["world_size"]
    assert report.suggestions[0].describe() == "world_size 784→768"
    fixed = plan(report.suggestions[0].config)
    assert fixed.valid and fixed.derived["dp"] == 24 and fixed.derived["accumulation"] == 64


def test_the_example_script_runs(capsys):
    path = Path(__file__).parents[1] / "examples" / "plan_784_gpus.py"
    runpy.run_path(str(path), run_name="__main__")
    out = capsys.readouterr().out
    assert "world_size" in out and "No configuration of 784 GPUs" in out
    assert "Best suggestion: world_size 784→768" in out
