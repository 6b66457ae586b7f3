"""The pipeline timeline as a teacher draws it (issue 28, item 5): micro-batches counted from
1 (as GPipe, Megatron and collsim's steps count), the bubble labelled with the share the run
measured and the closed form's fraction, the warm-up / steady / cool-down phases marked, and
an interleaved schedule's chunks told apart by pattern as well as shade."""

import pytest

from collsim import cli
from collsim.parallel.runs.pipeline import pipeline_step
from collsim.viz.timeline import timeline_figure


def texts(fig, prefix):
    return [t for t in fig.axes[0].texts if (t.get_gid() or "").startswith(prefix)]


def test_micro_batches_are_numbered_from_one():
    fig = timeline_figure(pipeline_step("1f1b", stages=4, microbatches=8))
    numbers = {t.get_text() for t in texts(fig, "microbatch")}
    assert numbers == {str(i) for i in range(1, 9)}  # never "0"


@pytest.mark.parametrize(
    "schedule,p,m,v,closed_form", [("1f1b", 4, 8, 1, "3/11"), ("gpipe", 4, 4, 1, "3/7")]
)
def test_the_bubble_is_labelled_with_what_the_run_measured(schedule, p, m, v, closed_form):
    result = pipeline_step(schedule, stages=p, microbatches=m, virtual=v)
    (label,) = texts(timeline_figure(result), "bubble label")
    assert f"bubble {result.bubble_fraction:.1%} idle" in label.get_text()
    assert f"closed form {closed_form}" in label.get_text()  # (p-1)/(m+p-1), the planner's


def test_warm_up_steady_and_cool_down_are_marked_where_the_passes_change():
    result = pipeline_step("1f1b", stages=4, microbatches=8)
    fig = timeline_figure(result)
    phases = [t.get_text() for t in texts(fig, "phase")]
    assert phases == ["warm-up", "steady", "cool-down"]
    # the warm-up ends where the first backward pass starts: on the last stage, after the
    # p forward passes that fill the pipeline (t_f = t_b = 1 ms, links nearly free)
    warm_up = next(t for t in texts(fig, "phase") if t.get_text() == "warm-up")
    assert 1.5 < 2 * warm_up.get_position()[0] < 4.5  # ms: about p·t_f = 4


def test_interleaved_chunks_differ_by_pattern_not_only_shade():
    result = pipeline_step("interleaved", stages=2, microbatches=4, virtual=2)
    blocks = [p for p in timeline_figure(result).axes[0].patches if p.get_gid().startswith("op")]
    hatches = {p.get_gid().split()[-1][-1]: p.get_hatch() for p in blocks}
    assert len(set(hatches.values())) == 2, hatches  # chunk 1 plain, chunk 2 patterned


def test_the_cli_writes_the_labels_as_svg_text(tmp_path):
    out = tmp_path / "timeline.svg"
    assert cli.main(["viz", "timeline", "--out", str(out)]) == 0
    svg = out.read_text(encoding="utf-8")
    assert "warm-up" in svg and "closed form 3/11" in svg
