"""One step numbering everywhere a person reads it (issue 11, item 16): steps count from 1
("step 3 of 6"), 0 is the initial state, and ``ring_figure(step=s)``, ``collsim viz ring
--step s``, the picture's title, the step-through frames, ``collsim step`` and the
utilisation map's step marks all mean the same step s."""

import re

import pytest

import collsim
from collsim import cli
from collsim.viz import output
from collsim.viz.ring import ring_figure, ring_frames
from collsim.viz.utilization import utilization_figure

K = 4  # a ring all-reduce of 2(K-1) = 6 steps
N_STEPS = 2 * (K - 1)


@pytest.fixture(scope="module")
def result():
    return collsim.Cluster(collsim.topology.ring(K)).all_reduce(count=64, dtype="float32")


def title_of(step):
    return "initial state" if step == 0 else f"(step {step} of {N_STEPS})"


@pytest.mark.parametrize("step", [0, 1, 3, N_STEPS])
def test_api_frames_and_step_views_share_the_number(result, step):
    assert title_of(step) in ring_figure(result, step=step).get_suptitle()
    frame = ring_frames(result)[step]
    assert frame.step == step and title_of(step) in frame.title
    view = list(result.steps(include_initial=True))[step]
    assert view.number == step
    # the picture draws exactly the moves the step view lists for that number
    assert sorted((m.src, m.dst) for m, _, _, _ in frame.moves) == sorted(
        (t.src, t.dst) for t in view.transfers
    )
    if step:
        assert title_of(step) in str(view)


@pytest.mark.parametrize("step", [0, 1, 3, N_STEPS])
def test_cli_step_draws_the_step_its_number_names(step, tmp_path, monkeypatch, capsys):
    drawn = []

    def keep(fig, out, fmt, **kwargs):
        drawn.append(fig.get_suptitle())

    monkeypatch.setattr(output, "save_figure", keep)
    argv = ["viz", "ring", "--ranks", K, "--size", "256", "--step", step]
    assert cli.main([str(a) for a in [*argv, "--out", tmp_path / "r.png"]]) == 0
    assert len(drawn) == 1 and title_of(step) in drawn[0]


def test_cli_step_out_of_range_names_the_valid_numbers(tmp_path, capsys):
    out = str(tmp_path / "r.png")
    assert cli.main(["viz", "ring", "--ranks", "4", "--step", "7", "--out", out]) == 2
    assert "--step 7" in (err := capsys.readouterr().err)
    assert "choose 1..6, or 0 for the initial state" in err
    assert not (tmp_path / "r.png").exists()


def test_collsim_step_prints_the_same_numbers(capsys):
    assert cli.main(["step", "all-reduce", "--ranks", str(K), "--no-pause"]) == 0
    printed = re.findall(r"step (\d+) of (\d+)", capsys.readouterr().out)
    assert [int(s) for s, _ in printed] == list(range(1, N_STEPS + 1))
    assert {int(n) for _, n in printed} == {N_STEPS}


def test_utilization_marks_step_s_where_step_s_ends(result):
    fig = utilization_figure(collsim.topology.ring(K), result, bins=20)
    (top,) = [a for a in fig.axes[0].child_axes]  # the secondary x axis of step marks
    labels = [t.get_text() for t in top.get_xticklabels()]
    assert labels == [f"s{n}" for n in range(1, N_STEPS + 1)]
    ends = [max(t.end for t in view.transfers) for view in result.steps()]
    scale = 1e6  # the map's time axis is in us for this run
    assert list(top.get_xticks()) == pytest.approx([e * scale for e in ends])
