"""Model presets, the shape a bare parameter count gets, and the search that ranks on them."""

import pytest

from collsim import cli
from collsim.errors import ConfigError
from collsim.plan import PlanConfig, plan, search
from collsim.plan.config import GPT3_ROWS, PRESETS, assumed_shape
from collsim.plan.memory import activation_bytes_per_layer
from collsim.plan.report import search_rows, search_table

# published shapes: (layers, hidden, heads, kv heads, ffn, vocab, seq, gated) and the
# parameter count the paper or model card gives (GPT-3 names are rounded: to 1.5 %)
PUBLISHED = {
    "gpt3-125m": ((12, 768, 12, 12, 3072, 50257, 2048, False), 125e6),
    "gpt3-1.3b": ((24, 2048, 24, 24, 8192, 50257, 2048, False), 1.3e9),
    "gpt3-6.7b": ((32, 4096, 32, 32, 16384, 50257, 2048, False), 6.7e9),
    "gpt3-13b": ((40, 5120, 40, 40, 20480, 50257, 2048, False), 13e9),
    "gpt3-175b": ((96, 12288, 96, 96, 49152, 50257, 2048, False), 175e9),
    "llama2-7b": ((32, 4096, 32, 32, 11008, 32000, 4096, True), 6.74e9),
    "llama2-13b": ((40, 5120, 40, 40, 13824, 32000, 4096, True), 13.02e9),
    "llama2-70b": ((80, 8192, 64, 8, 28672, 32000, 4096, True), 68.98e9),
    "llama3-8b": ((32, 4096, 32, 8, 14336, 128256, 8192, True), 8.03e9),
    "llama3-70b": ((80, 8192, 64, 8, 28672, 128256, 8192, True), 70.55e9),
    "llama3-405b": ((126, 16384, 128, 8, 53248, 128256, 8192, True), 405.85e9),
}
FIELDS = ("layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab", "seq", "gated_mlp")


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_preset_has_the_published_shape_and_parameter_count(name):
    shape, count = PUBLISHED[name]
    cfg = PlanConfig(model=name)
    assert tuple(getattr(cfg, f) for f in FIELDS) == shape
    assert PRESETS[name].source  # every preset cites where its numbers come from
    report = plan(cfg, suggestions=0)
    assert report.derived["params"] == pytest.approx(count, rel=0.015)


def test_flags_beside_a_preset_win_and_params_with_a_preset_is_refused():
    cfg = PlanConfig(model="llama2-7b", seq=2048)
    assert (cfg.seq, cfg.layers, cfg.vocab) == (2048, 32, 32000)
    with pytest.raises(ConfigError, match="not both"):
        PlanConfig(model="llama2-7b", params="7B")


def test_unknown_model_lists_every_valid_name_nearest_first():
    with pytest.raises(ConfigError) as info:
        PlanConfig(model="llama-2-70b")
    message = str(info.value)
    assert "'llama-2-70b'" in message
    names = message.split("nearest first: ")[1].split(", ")
    assert names[0] == "llama2-70b" and sorted(names) == sorted(PRESETS)


def test_unknown_model_from_the_cli_names_the_value(capsys):
    assert cli.main(["plan", "--model", "gpt4", "--world-size", "8"]) == 2
    err = capsys.readouterr().err
    assert "gpt4" in err and "gpt3-175b" in err


@pytest.mark.parametrize(
    "params, row", [(1e8, "gpt3-125m"), (7e9, "gpt3-6.7b"), (20e9, "gpt3-13b"), (1e12, "gpt3-175b")]
)
def test_a_bare_parameter_count_gets_the_nearest_gpt3_row(params, row):
    assert assumed_shape(params).name == row
    cfg = PlanConfig(params=params)
    assert cfg.assumed_shape == row
    assert (cfg.layers, cfg.hidden, cfg.heads) == (
        PRESETS[row].layers,
        PRESETS[row].hidden,
        PRESETS[row].heads,
    )
    # the row follows the count when the count changes
    assert cfg.replace(params=GPT3_ROWS[0].nominal_params).assumed_shape == "gpt3-125m"


def test_bare_params_report_and_search_say_which_shape_was_assumed():
    report = plan(params="7B", world_size=8, tp=2, global_batch=8, suggestions=0)
    assert report.memory["activations"] > 0 and report.communication["tp"]["time_s"] > 0
    assert "gpt3-6.7b" in str(report)
    cfg = PlanConfig(params="7B", world_size=8, global_batch=8)
    table = search_table(cfg, search(cfg, top=5), 5)
    assert "assumed" in table and "gpt3-6.7b" in table and "Table 2.1" in table


def test_grouped_query_attention_and_a_gated_mlp_change_the_activations():
    base = dict(seq=4096, micro=1, hidden=8192, heads=64)
    mha = activation_bytes_per_layer(**base, ffn_hidden=4 * 8192)
    gqa = activation_bytes_per_layer(**base, ffn_hidden=4 * 8192, kv_heads=8)
    # K and V shrink from 2+2 to 2·(8/64)+2·(8/64) bytes per s·b·h: 3.5 s·b·h less
    assert mha - gqa == pytest.approx(3.5 * 4096 * 8192)
    plain = activation_bytes_per_layer(**base, ffn_hidden=28672)
    gated = activation_bytes_per_layer(**base, ffn_hidden=28672, gated_mlp=True)
    assert gated - plain == pytest.approx(2 * 4096 * 28672)  # the extra s·b·f output, 2 bytes
    # Korthikanti et al.'s 34 + 5as/h is the special case g = a, f = 4h, not gated
    assert mha == pytest.approx(4096 * 8192 * (34 + 5 * 64 * 4096 / 8192))


def test_kv_heads_must_divide_heads_and_tp_must_divide_kv_heads():
    with pytest.raises(ConfigError, match="kv_heads = 3 must divide heads = 32.*nearest valid"):
        PlanConfig(layers=2, hidden=256, heads=32, kv_heads=3)
    report = plan(model="llama3-8b", world_size=16, tp=16, global_batch=16, suggestions=0)
    assert "kv_heads_tp" in [v.rule for v in report.violations]  # 8 kv heads over 16 ranks
    cfg = PlanConfig(model="llama3-8b", world_size=64, global_batch=64, gpus_per_node=16)
    assert max(c.config.tp for c in search(cfg, recommended=False)) <= 8


MUST_SHOW = "--world-size 64 --model llama2-7b --seq 4096 --global-batch 512".split()


def test_must_show_llama2_7b_search_counts_activations_and_tp_traffic(capsys):
    cfg = PlanConfig(model="llama2-7b", world_size=64, seq=4096, global_batch=512)
    found = search(cfg)
    assert found
    for k in found:
        report = plan(k.config, suggestions=0)
        assert report.memory["activations"] > 0
        assert k.activation_bytes == report.memory["activations"]
        assert k.memory_total == pytest.approx(
            sum(report.memory[p] for p in ("params", "grads", "optimizer", "activations"))
        )
        assert (k.tp_communication_time_s > 0) == (k.config.tp > 1)
    assert any(k.config.tp > 1 for k in found[:20])
    # the same through the command line: the printed table carries both columns
    assert cli.main(["plan", "--search", *MUST_SHOW]) == 0
    out = capsys.readouterr().out
    assert "llama2-7b" in out and "activ." in out and "TP comm" in out
    rows = [r.split() for r in out.splitlines() if r.startswith(" ") and r[:4].strip().isdigit()]
    assert len(rows) == 20
    for row in rows:
        tp, activ_value, tp_comm = int(row[1]), float(row[10]), float(row[14])
        assert activ_value > 0
        assert (tp_comm > 0) == (tp > 1)


def test_rows_identical_in_every_printed_column_are_merged():
    cfg = PlanConfig(model="gpt3-125m", world_size=4, global_batch=8, seq=512)
    found = search(cfg, top=3)
    rows, merged = search_rows([found[0], found[0], found[1]])
    assert merged == 1 and [rank for rank, _ in rows] == [1, 3]
    table = search_table(cfg, [found[0], found[0]], 2)
    assert "1 configuration(s) identical in every column" in table


@pytest.mark.parametrize("partial", [dict(layers=32), dict(heads=32), dict(layers=32, heads=32)])
def test_a_partial_shape_is_refused_rather_than_estimated_as_zero(partial):
    with pytest.raises(ConfigError) as info:
        PlanConfig(params="7B", **partial)
    message = str(info.value)
    assert "cannot be estimated" in message
    assert all(f"{k} = {v}" in message for k, v in partial.items())
