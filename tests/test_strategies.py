"""The strategy table of Accelerate's ND-parallelism guide (``collsim strategies``), measured.

Every strategy of the guide is a row in order; every one the trainer runs matches one device;
the one it refuses carries the trainer's own reason; the numbers show HSDP's fewer inter-node
bytes and TP's traffic staying inside a node; the claim verdicts are computed from the
numbers (change a row and the verdict flips); the JSON has the documented keys and types; and
``collsim viz strategies`` writes a PNG.
"""

import dataclasses
import json

import pytest
from fuzzkit import run_cli

from collsim.cli import main
from collsim.parallel.experts.sync import EXPERT_KEYS as EXPERTS
from collsim.parallel.runs.pipeline import toy_model
from collsim.verify import strategies as measured

NAMES = [
    "DP",
    "FSDP",
    "TP",
    "CP",
    "HSDP",
    "FSDP+TP",
    "FSDP+CP",
    "HSDP+TP",
    "HSDP+TP+CP",
    "EP",
    "DP+EP",
]
MEMORY = ["params", "grads", "optimizer", "activations", "gathered_params", "comm_buffers", "total"]


@pytest.fixture(scope="module")
def rows():
    return measured.strategy_table()


@pytest.fixture(scope="module")
def json_out():
    import contextlib
    import io

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert main(["strategies", "--json"]) == 0
    return json.loads(buffer.getvalue())


def by_name(rows):
    return {r.name: r for r in rows}


def test_every_strategy_of_the_guide_is_a_row_in_order(rows):
    assert [r.name for r in rows] == NAMES
    for r in rows:
        assert r.sizes["dp_replicate"] * r.sizes["dp_shard"] * r.sizes["cp"] * r.sizes["tp"] == 8


@pytest.mark.parametrize("name", NAMES)
def test_every_strategy_trains_like_one_device(rows, name):
    row = by_name(rows)[name]
    assert row.not_run is None
    assert row.match is True and row.max_error < 1e-10
    assert row.peak_memory_bytes["total"] > 0 and row.step_time_s > 0


def test_a_strategy_the_trainer_refuses_is_a_row_with_its_reason():
    strategy = next(s for s in measured.STRATEGIES if s.name == "HSDP+TP+CP")
    bad = dataclasses.replace(strategy, dp_shard=3)  # 2 x 3 x 2 x 2 = 24 ranks, not 8
    row = measured.run_strategy(bad)
    assert row.not_run is not None and "needs 24" in row.not_run  # the trainer's own words
    assert row.match is None and row.peak_memory_bytes is None and row.step_time_s is None


def test_hsdp_sends_fewer_bytes_between_nodes_than_fsdp(rows):
    r = by_name(rows)
    assert r["HSDP"].inter_node_bytes < r["FSDP"].inter_node_bytes
    assert r["HSDP"].inter_node_messages < r["FSDP"].inter_node_messages
    # HSDP's price: each node keeps a whole copy of the sharded state (4 shards, not 8)
    assert r["HSDP"].peak_memory_bytes["total"] > r["FSDP"].peak_memory_bytes["total"]


@pytest.mark.parametrize("name", ["TP", "FSDP+TP", "HSDP+TP"])
def test_tensor_parallel_traffic_stays_inside_a_node(rows, name):
    tp = by_name(rows)[name].bytes_by_dim["tp"]
    assert tp["inter_node"] == 0 and tp["intra_node"] > 0


def test_expert_parallel_tokens_cross_nodes_only_when_ep_spans_them(rows):
    r = by_name(rows)
    wide, in_node = r["EP"].bytes_by_dim, r["DP+EP"].bytes_by_dim
    assert wide["ep"]["inter_node"] > 0  # ep = 8: half of every token's experts are away
    assert in_node["ep"]["inter_node"] == 0 and in_node["ep"]["intra_node"] > 0  # ep = 4
    # DP+EP's price: each expert has a copy on the other node, whose gradients cross
    assert in_node["edp"]["inter_node"] > 0 and "edp" not in wide
    assert r["EP"].sizes["ep"] == 8 and r["DP+EP"].config["ep"] == 4
    # along dp only the dense gradients' ring all-reduce: 2(K-1)/K of them, float64, K = 8
    shape = measured.SHAPE
    twin = measured.moe_twin(toy_model(shape.layers, shape.hidden, shape.heads), experts=8)
    dense = sum(a.size for k, a in twin.params.items() if k.rsplit(".", 1)[-1] not in EXPERTS)
    dp = wide["dp"]
    assert dp["intra_node"] + dp["inter_node"] == 2 * 7 / 8 * dense * 8


def test_fsdp_shards_model_state_and_cp_shrinks_activations(rows):
    r = by_name(rows)
    state = {
        n: sum(r[n].peak_memory_bytes[k] for k in ("params", "grads", "optimizer"))
        for n in ("DP", "FSDP")
    }
    assert state["FSDP"] * 8 == state["DP"]  # 8 shards of the same state
    assert r["CP"].peak_memory_bytes["activations"] < r["DP"].peak_memory_bytes["activations"]


def test_the_guides_claims_all_agree_with_the_measured_rows(rows):
    verdicts = measured.claims(rows)
    assert len(verdicts) == 4
    assert [c.verdict for c in verdicts] == ["agrees"] * 4, verdicts


def _change(rows, name, **changes):
    """The rows as dicts with ``changes`` made to row ``name`` (memory keys go into its
    peak_memory_bytes, ``tp_inter`` into its tp bytes between nodes)."""
    out = []
    for row in rows:
        d = json.loads(json.dumps(row.to_dict()))  # a deep copy
        if d["name"] == name:
            for key, value in changes.items():
                if key in MEMORY:
                    d["peak_memory_bytes"][key] = value
                elif key == "tp_inter":
                    d["bytes_by_dim"]["tp"]["inter_node"] = value
                else:
                    d[key] = value
        out.append(d)
    return out


FLIPS = {  # claim index -> (row, change) that contradicts it
    0: ("FSDP", dict(optimizer=10**9)),  # FSDP holding more state than DP
    1: ("HSDP", dict(inter_node_bytes=10**9)),  # HSDP sending more between nodes
    2: ("FSDP+TP", dict(tp_inter=1)),  # a TP byte crossing nodes
    3: ("CP", dict(activations=10**9)),  # CP holding more activations
}


@pytest.mark.parametrize("index", sorted(FLIPS))
def test_each_verdict_follows_the_numbers(rows, index):
    name, change = FLIPS[index]
    before = measured.claims([r.to_dict() for r in rows])[index]
    after = measured.claims(_change(rows, name, **change))[index]
    assert before.verdict == "agrees" and after.verdict == "disagrees"
    assert before.claim == after.claim and before.evidence != after.evidence


def test_hsdp_claim_needs_both_halves_of_the_trade(rows):
    # fewer inter-node bytes but no more memory than FSDP: not the trade the guide describes
    changed = _change(rows, "HSDP", total=1)
    assert measured.claims(changed)[1].verdict == "disagrees"


def test_a_claim_whose_row_did_not_run_is_not_measured(rows):
    changed = _change(rows, "HSDP", not_run="refused for the test")
    assert measured.claims(changed)[1].verdict == "not measured"


def test_json_rows_have_the_keys_with_units_and_types(json_out):
    assert [r["name"] for r in json_out["rows"]] == NAMES
    assert "Accelerate" in json_out["source"] and "2 nodes x 4 GPUs" in json_out["cluster"]
    for r in json_out["rows"]:
        assert isinstance(r["config"], dict) and isinstance(r["sizes"], dict)
        if r["not_run"] is not None:
            assert isinstance(r["not_run"], str)
            assert r["match"] is None and r["peak_memory_bytes"] is None
            continue
        assert r["match"] is True
        assert set(r["peak_memory_bytes"]) == set(MEMORY)
        assert all(type(v) is int for v in r["peak_memory_bytes"].values())
        for key in ("intra_node_bytes", "inter_node_bytes", "inter_node_messages"):
            assert type(r[key]) is int and r[key] >= 0
        for key in ("step_time_s", "exposed_comm_s"):
            assert isinstance(r[key], float) and 0 <= r[key] <= r["step_time_s"]
    assert [c["verdict"] for c in json_out["claims"]] == ["agrees"] * 4


def test_json_is_the_same_rows_as_the_api(rows, json_out):
    assert json_out["rows"] == json.loads(json.dumps([r.to_dict() for r in rows]))


def test_the_table_prints_every_row_and_the_claims(rows, capsys):
    from collsim.cli.strategies import table_lines

    text = "\n".join(table_lines(rows, measured.claims(rows)))
    lines = text.splitlines()
    for name in NAMES:
        assert any(line.startswith(name + " ") for line in lines), name
    assert "not run" not in text  # every strategy of the guide runs
    assert "KiB" in text and "[agrees] HSDP trades memory" in text
    assert "Accelerate ND-Parallel" in text  # the primary source is cited


def test_help_teaches_the_terms(capsys):
    with pytest.raises(SystemExit):
        main(["strategies", "--help"])
    text = capsys.readouterr().out
    for term in ("DP", "FSDP", "TP", "CP", "HSDP", "dp_replicate", "dp_shard", "exposed"):
        assert term in text


def test_viz_strategies_writes_a_png(tmp_path, capsys):
    out = tmp_path / "strategies.png"
    assert main(["viz", "strategies", "--out", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "strategies figure" in capsys.readouterr().out


def test_the_figure_draws_every_row(rows):
    from collsim.viz.strategies import strategies_figure

    fig = strategies_figure([r.to_dict() for r in rows])
    mem_ax, link_ax = fig.axes[:2]
    assert len(mem_ax.get_yticklabels()) == len(NAMES)  # one row a strategy
    assert not any("not run" in t.get_text() for t in mem_ax.texts)


def test_bad_out_paths_are_refused_before_any_strategy_runs(tmp_path, monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("a strategy ran before --out was checked")

    monkeypatch.setattr(measured, "strategy_table", never)
    (tmp_path / "file").write_text("x")
    (tmp_path / "folder.png").mkdir()
    bad = [
        tmp_path / "no" / "such" / "s.png",  # a missing folder
        tmp_path / "file" / "s.png",  # a path under a regular file
        tmp_path / "folder.png",  # a folder
        tmp_path / "s.txt",  # an unknown suffix
        "/dev/full",  # a device, no suffix
        "",
    ]
    for path in bad:
        outcome = run_cli(["viz", "strategies", "--out", str(path)], bad=str(path), timeout=10)
        assert outcome.status == 2 and outcome.stdout == ""


def test_strategies_takes_no_positional_arguments(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["strategies", "DP"])
    assert exit_.value.code == 2 and "DP" in capsys.readouterr().err
