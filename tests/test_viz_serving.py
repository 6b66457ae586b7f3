"""The serving pictures (issue 31, item 6): `collsim viz decode-step`, one decode step rank by
rank from a real run's trace, and `collsim viz all-reduce-choice`, the fastest small-message
all-reduce by size and GPU count.  Their text stays inside and apart in every look
(tests/test_viz_layout.py takes every kind by itself); here: what they show is the run's
and the model's, their colours stay apart for colour-blind readers, Japanese, determinism
and refusals."""

import math

import numpy as np
import pytest
from fuzzkit import check_api, run_cli
from hypothesis import given, settings
from hypothesis import strategies as st
from test_viz_style import MIN_DELTA_E, closest_pair

import collsim
from collsim.cli import main
from collsim.collectives.small_messages import choice_grid, crossovers, vllm_choice
from collsim.nn import Decoder, DecoderConfig
from collsim.parallel.inference import InferenceSplit, generate_on_cluster
from collsim.viz import decode_step, style, words
from collsim.viz.all_reduce_choice import ALGORITHM_COLOURS, all_reduce_choice_figure
from collsim.viz.decode_step import decode_step_figure, decode_step_lanes


def decode(tp=4, pp=1, algorithm="one_shot", new_tokens=3):
    model = Decoder.init(DecoderConfig(vocab=32, hidden=32, heads=4, layers=2))
    cluster = collsim.Cluster(collsim.topology.switch(tp * pp, "100GB/s", "1us"))
    split = InferenceSplit(tp=tp, pp=pp, algorithm=algorithm)
    return generate_on_cluster(model, np.array([[3, 1, 4, 1]]), new_tokens, split, cluster)


@pytest.mark.parametrize("tp, pp", [(4, 1), (2, 2), (1, 2)])
def test_each_rank_s_lane_tiles_the_step_with_the_trace_s_spans(tp, pp):
    run = decode(tp, pp)
    start, end = run.token_times[1], run.token_times[2]  # step 3: token 2 to token 3
    lanes = decode_step_lanes(run, step=3)
    assert len(lanes) == tp * pp
    for rank, lane in enumerate(lanes):
        assert lane[0].start == start and lane[-1].end == end
        assert all(a.end == pytest.approx(b.start) for a, b in zip(lane, lane[1:]))
        computes = [c for c in run.result.trace.computes if c.rank == rank and c.meta.step == 3]
        drawn = [s for s in lane if s.kind == "compute"]
        assert [(s.start, s.end) for s in drawn] == [(c.start, c.end) for c in computes]
        reduces = [s for s in lane if s.kind == "all-reduce"]
        assert len(reduces) == (2 * 2 // pp if tp > 1 else 0)  # 2 a layer, its stage's layers
        if pp > 1:  # the token comes in, the activations (or the token) go out
            assert len([s for s in lane if s.kind == "stage hand-off"]) == 2
        if pp > 1 and tp > 1:  # a stage idles through the other stage's all-reduces
            idle = sum(s.end - s.start for s in lane if s.kind == "idle")
            assert idle > 0.3 * (end - start), (rank, idle)


def test_the_all_reduce_spans_are_the_run_s_calls():
    run = decode(tp=4)
    start, end = run.token_times[1], run.token_times[2]
    calls = [c for c in run.all_reduces if start <= c.start and c.end <= end]
    drawn = [s for s in decode_step_lanes(run, step=3)[0] if s.kind == "all-reduce"]
    # one-shot on a switch: every rank takes part in every transfer's step at once
    assert [(s.start, s.end) for s in drawn] == [(c.start, c.end) for c in calls]


def test_one_shot_makes_the_drawn_step_shorter_than_the_ring():
    steps = {a: decode(tp=4, algorithm=a) for a in ("ring", "one_shot")}
    share = {}
    for algorithm, run in steps.items():
        lane = decode_step_lanes(run, step=3)[0]
        busy = sum(s.end - s.start for s in lane if s.kind == "all-reduce")
        share[algorithm] = busy / (lane[-1].end - lane[0].start)
    # ring: 2(K-1) = 6 latency steps an all-reduce, one-shot 1
    assert share["one_shot"] < share["ring"]
    title = decode_step_figure(steps["ring"], step=3).get_suptitle()
    assert "4 all-reduces of 256 B" in title and f"{share['ring']:.0%}" in title


def test_the_choice_map_turns_where_the_closed_forms_cross(monkeypatch):
    sizes = [2.0**e for e in range(8, 27)]
    for machine in ("dgx-h100", "dgx-a100"):
        rows = choice_grid(machine, ranks=(2, 4, 8), sizes=sizes)
        for row, cross in zip(rows, crossovers(machine, ranks=(2, 4, 8))):
            a, b, k = cross.alpha, cross.beta, row.ranks
            for cell in row.cells:
                s = cell.size
                one = a + (k - 1) * s / b  # every peer's whole buffer, one step
                two = 2 * a + 2 * (k - 1) / k * s / b
                ring = 2 * (k - 1) * (a + s / (k * b))
                assert (cell.one_shot, cell.two_shot) == (pytest.approx(one), pytest.approx(two))
                assert cell.ring == pytest.approx(ring)
                expect_one = s < cross.one_to_two_shot
                assert (cell.fastest == "one_shot") == expect_one, (machine, k, s)
                if cell.fastest != "one_shot":
                    nvls = not math.isinf(cross.two_shot_to_nccl) and s > cross.two_shot_to_nccl
                    assert cell.fastest == ("nvls" if nvls else "two_shot"), (machine, k, s)


def test_vllm_s_published_thresholds():
    # custom_all_reduce.cuh: world size 2, or <= 4 GPUs under 512 KiB, or <= 8 under
    # 256 KiB: one-shot; else two-shot; custom_all_reduce.py: 8 MiB and up go to NCCL
    expected = {
        (2, 6 * 2**20): "one_shot",
        (4, 500 * 2**10): "one_shot",
        (4, 512 * 2**10): "two_shot",
        (8, 255 * 2**10): "one_shot",
        (6, 300 * 2**10): "two_shot",
        (8, 8 * 2**20): "nccl",
        (2, 8 * 2**20): "nccl",
    }
    for (k, size), choice in expected.items():
        assert vllm_choice(k, size) == choice, (k, size)


def test_the_picture_marks_vllm_s_boundaries_and_names_the_slower_ring():
    rows = choice_grid("dgx-h100", ranks=(2, 4, 8), sizes=[2**10, 2**18, 2**20, 2**24])
    fig = all_reduce_choice_figure(rows)
    dashed = [line for line in fig.axes[0].lines if line.get_linestyle() == "--"]
    # 1 KiB, 256 KiB, 1 MiB, 16 MiB: with 2 GPUs NCCL from 16 MiB; with 4 two-shot from
    # 1 MiB, then NCCL; with 8 two-shot already at 256 KiB, then NCCL
    assert sorted(line.get_xdata()[0] for line in dashed) == [0.5, 1.5, 2.5, 2.5, 2.5]
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert texts[-4].startswith("one-shot\nring ×") and texts[-1].startswith("NVLS\nring ×")


def test_the_colours_stay_apart_for_colour_blind_readers():
    assert closest_pair(list(ALGORITHM_COLOURS.values()))[0] >= MIN_DELTA_E
    shown = [*decode_step.KIND_COLOURS.values(), decode_step.IDLE]
    assert closest_pair(shown)[0] >= MIN_DELTA_E, closest_pair(shown)


@pytest.mark.filterwarnings("ignore:Glyph")  # DejaVu stands in for a CJK font here
def test_the_words_are_japanese_with_lang_ja(monkeypatch):
    monkeypatch.setattr(style, "cjk_font", lambda: "DejaVu Sans")
    monkeypatch.setattr(words, "cjk_font", lambda: "DejaVu Sans")
    with style.use(lang="ja"):
        fig = decode_step_figure(decode(tp=2), step=3)
        choice = all_reduce_choice_figure(choice_grid("dgx-h100", ranks=(8,), sizes=[512]))
    assert fig.get_suptitle().startswith("デコードステップ 3")
    assert "ランク 0" in [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert choice.get_suptitle().startswith("dgx-h100 1 ノードで最速")
    assert choice.axes[0].texts[0].get_text() == "one-shot\nリング ×13.7"


@pytest.mark.parametrize(
    "argv",
    [
        ["decode-step", "--tp", "2", "--hidden", "64", "--layers", "1", "--new-tokens", "2"],
        ["all-reduce-choice", "--machine", "dgx-a100", "--max-gpus", "4"],
    ],
)
def test_the_same_file_byte_for_byte(argv, tmp_path):
    files = [tmp_path / "a.png", tmp_path / "b.png"]
    for out in files:
        assert main(["viz", *argv, "--out", str(out)]) == 0
    assert files[0].read_bytes() == files[1].read_bytes()


@pytest.mark.parametrize(
    "argv, bad, rule",
    [
        (["decode-step", "--step", "9"], "--step 9", "nearest valid --step 4"),
        (["decode-step", "--new-tokens", "1"], "--new-tokens 1", "nearest valid --new-tokens 2"),
        (["decode-step", "--tp", "3"], "tp=3", "nearest first: 2, 4"),
        (["decode-step", "--preset", "dgx-h200"], "dgx-h200", "dgx-h100"),
        (["all-reduce-choice", "--machine", "dgx-b200"], "dgx-b200", "dgx-"),
        (["all-reduce-choice", "--max-gpus", "9"], "9", "8"),
    ],
)
def test_bad_input_is_refused_by_name(argv, bad, rule, tmp_path):
    outcome = run_cli(["viz", *argv, "--out", str(tmp_path / "x.png")], bad=bad, timeout=60)
    assert outcome.status == 2 and rule in outcome.stderr, outcome.stderr


BAD = ["-1", "0", "1", "9", "nan", str(2**62), "1.5", "abc", "", "dgx-h200"]


@settings(max_examples=12, deadline=None)
@given(
    argv=st.sampled_from(
        [
            ["decode-step", "--tp"],
            ["decode-step", "--step"],
            ["decode-step", "--new-tokens"],
            ["decode-step", "--pp"],
            ["decode-step", "--preset"],
            ["all-reduce-choice", "--max-gpus"],
            ["all-reduce-choice", "--machine"],
        ]
    ),
    value=st.sampled_from(BAD),
)
def test_the_serving_pictures_take_bad_values_without_a_traceback(argv, value, tmp_path_factory):
    out = tmp_path_factory.mktemp("fuzz") / "x.png"
    outcome = run_cli(["viz", *argv, value, "--out", str(out)], bad=value or None, timeout=60)
    assert outcome.status in (0, 2)


@settings(max_examples=20, deadline=None)
@given(
    machine=st.sampled_from(["dgx-h100", "dgx-a100", "pcie-8gpu", "dgx-h200", "", 3]),
    ranks=st.sampled_from([(2,), (8,), (0,), (9,), (-1,), ()]),
    size=st.sampled_from([1, 512, 2**30, 0, -5, math.nan]),
)
def test_the_choice_grid_and_vllm_s_rule_take_bad_input(machine, ranks, size):
    check_api(choice_grid, machine, ranks=ranks, sizes=[size], bad=None, timeout=30)
    check_api(vllm_choice, ranks[0] if ranks else 0, size, bad=None, timeout=5)
