"""The MoE pictures (issue 30, item 7): `collsim viz moe-routing`, `moe-traffic`, `moe-load`
and `moe-timeline` draw what one `collsim verify moe` step did, read from its routing and
its trace, and every number on them agrees with the check's own report and closed forms.

Their text stays inside and apart in every style and theme through
tests/test_viz_layout.py, which draws every registered kind; here, what they show."""

import numpy as np
import pytest
from matplotlib.collections import PathCollection
from matplotlib.patches import Rectangle

from collsim import cli
from collsim.cli import viz as _registers_the_kinds  # noqa: F401
from collsim.cli.viz_kinds import KINDS
from collsim.viz import moe as moe_viz
from collsim.viz import style, words
from collsim.viz.moe_timeline import COMPUTE, EXCHANGES
from tests.test_viz_layout import draw
from tests.test_viz_style import MIN_DELTA_E, closest_pair

MOE_KINDS = ("moe-routing", "moe-traffic", "moe-load", "moe-timeline")
ZIPF = ["--ep", "4", "--experts", "8", "--top-k", "2", "--capacity-factor", "1.25"]


def the_step(argv=()):
    """The MoEStep the kinds draw, from the same flags (through the CLI's parser)."""
    import argparse

    from collsim.cli.viz_moe import _arguments, moe_step

    parser = argparse.ArgumentParser()
    _arguments(parser)
    return moe_step(parser.parse_args(list(argv)))


def test_the_four_kinds_are_registered_with_the_look_flags():
    assert set(MOE_KINDS) <= set(KINDS)


@pytest.mark.parametrize("kind", MOE_KINDS)
def test_each_kind_writes_the_same_png_twice(kind, tmp_path):
    first, second = tmp_path / "a.png", tmp_path / "b.png"
    assert cli.main(["viz", kind, *ZIPF, "--out", str(first)]) == 0
    assert cli.main(["viz", kind, *ZIPF, "--out", str(second)]) == 0
    assert first.read_bytes() == second.read_bytes() and first.stat().st_size > 10_000


def test_the_routing_matrix_crosses_out_exactly_the_dropped_choices(monkeypatch, tmp_path):
    step = the_step(ZIPF)
    fig = draw("moe-routing", ZIPF, monkeypatch, tmp_path)
    (crosses,) = [c for c in fig.axes[0].collections if isinstance(c, PathCollection)]
    at = {(int(x), int(y)) for x, y in crosses.get_offsets()}
    token, choice = np.nonzero(~step.routing.kept)
    assert at == set(zip(token.tolist(), step.routing.selected[token, choice].tolist()))
    # the same count as the ranks' own: each rank counted the choices it dropped
    assert len(at) == sum(load.dropped for load in step.report.loads) > 0
    image = fig.axes[0].images[0].get_array()
    assert np.count_nonzero(~np.isnan(image)) == step.routing.selected.size  # T·k cells


def test_the_traffic_matrix_from_the_trace_is_the_closed_form_per_rank():
    step = the_step(ZIPF)
    report = step.report
    dispatch = moe_viz.traffic_matrix(report.trace, 4, "dispatch")
    combine = moe_viz.traffic_matrix(report.trace, 4, "combine")
    assert dispatch.sum(axis=1).tolist() == list(report.dispatch.sent)  # who sent how much
    assert dispatch.sum(axis=0).tolist() == list(report.dispatch.received)
    assert (combine == dispatch.T).all() and np.diag(dispatch).sum() == 0
    # row bytes of 16 float64 values: every cell is whole rows
    assert (dispatch % (16 * 8) == 0).all()


def test_the_traffic_matrix_sums_both_levels_of_the_hierarchical_dispatcher():
    step = the_step([*ZIPF, "--ep", "8", "--experts", "16", "--dispatcher", "hierarchical",
                     "--gpus-per-node", "4"])  # fmt: skip
    dispatch = moe_viz.traffic_matrix(step.report.trace, 8, "dispatch")
    assert dispatch.sum(axis=1).tolist() == list(step.report.dispatch.sent)


def test_the_load_bars_are_the_runs_loads_with_capacity_marked(monkeypatch, tmp_path):
    step = the_step(ZIPF)
    fig = draw("moe-load", ZIPF, monkeypatch, tmp_path)
    by_expert, by_rank = fig.axes[:2]
    heights = [p.get_height() for p in by_rank.patches if isinstance(p, Rectangle)]
    assert heights == [load.rows_received for load in step.report.loads]
    capacity = [line.get_ydata()[0] for line in by_expert.get_lines()]
    assert capacity == [step.routing.capacity * 4] == [step.report.capacity * 4]
    labels = [t.get_text() for t in by_rank.texts]
    assert labels == [f"{load.dropped} dropped" for load in step.report.loads]
    dropped = int((~step.routing.kept).sum())
    assert f"{dropped} of 128 choices dropped" in fig._suptitle.get_text()


def test_dropless_has_no_capacity_line_and_nothing_crossed(monkeypatch, tmp_path):
    argv = [*ZIPF, "--capacity-factor", "none"]
    fig = draw("moe-load", argv, monkeypatch, tmp_path)
    assert fig.axes[0].get_lines() == []
    routing = draw("moe-routing", argv, monkeypatch, tmp_path)
    assert (
        not [c for c in routing.axes[0].collections if isinstance(c, PathCollection)][0]
        .get_offsets()
        .size
    )


def test_the_timeline_names_the_rank_whose_experts_computed_longest(monkeypatch, tmp_path):
    step = the_step(ZIPF)
    fig = draw("moe-timeline", ZIPF, monkeypatch, tmp_path)
    ax = fig.axes[0]
    bold = [t.get_text() for t in ax.get_yticklabels() if t.get_fontweight() == "bold"]
    assert bold == [f"rank {step.report.straggler.rank}"]
    # the dashed line is where the last forward combine message arrived
    combine_end = max(t.end for t in step.report.trace.transfers
                      if getattr(t.meta, "call", None) == "combine")  # fmt: skip
    assert ax.get_lines()[0].get_xdata()[0] == pytest.approx(combine_end * 1e6)


def test_the_moe_colours_stay_apart_for_colour_blind_readers():
    shown_together = [c for _, c in COMPUTE.values()] + [c for _, c in EXCHANGES.values()]
    assert closest_pair(shown_together)[0] >= MIN_DELTA_E, closest_pair(shown_together)
    assert closest_pair([moe_viz.KEPT, moe_viz.DROP])[0] >= MIN_DELTA_E


@pytest.mark.parametrize("kind", MOE_KINDS)
def test_japanese_words_on_every_moe_picture(kind, monkeypatch, tmp_path):
    monkeypatch.setattr(style, "cjk_font", lambda: "DejaVu Sans")  # any installed font
    monkeypatch.setattr(words, "cjk_font", lambda: "DejaVu Sans")
    out = tmp_path / "ja.svg"
    assert cli.main(["viz", kind, *ZIPF, "--lang", "ja", "--out", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert {"moe-routing": "エキスパート", "moe-traffic": "送信側ランク",
            "moe-load": "ドロップ", "moe-timeline": "ディスパッチ"}[kind] in text  # fmt: skip


@pytest.mark.parametrize(
    "argv,named",
    [
        (["--ep", "3"], "--ep 3"),
        (["--experts", "6"], "--experts 6"),
        (["--routing", "zipff"], "zipf"),
        (["--dispatcher", "allgather"], "alltoall"),
        (["--capacity-factor", "lots"], "--capacity-factor 'lots'"),
        (["--top-k", "two"], "--top-k 'two'"),
        (["--compute-rate", "1.5"], "--compute-rate 1.5"),  # would outlast the run's clock
    ],
)
def test_bad_flags_are_refused_with_exit_2_naming_them(argv, named, capsys, tmp_path):
    out = tmp_path / "x.png"
    assert cli.main(["viz", "moe-load", *argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert named in err and ("nearest" in err or "like" in err), err
    assert not out.exists()
