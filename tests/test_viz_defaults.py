"""Defaults that make the point (issue 28, item 6): ``collsim viz KIND`` with nothing else
draws a case that shows what the kind is for, says so, and its ``--help`` says it; any
cluster or algorithm flag draws what was asked instead."""

import pytest

from collsim import cli
from collsim.cli import viz as _registers_the_kinds  # noqa: F401
from collsim.viz import output


def drawn(kind, argv, monkeypatch, tmp_path):
    """The figure ``collsim viz KIND argv`` saves."""
    saved = []
    monkeypatch.setattr(output, "save_figure", lambda fig, *a, **k: saved.append(fig))
    assert cli.main(["viz", kind, *argv, "--out", str(tmp_path / "out.png")]) == 0
    (fig,) = saved
    return fig


def texts(fig):
    found = fig.findobj(lambda a: hasattr(a, "get_text") and a.get_text())
    return [t.get_text() for t in found]


def test_memory_shows_a_model_that_needs_zero_against_the_labelled_gpu_line(
    monkeypatch, tmp_path, capsys
):
    fig = drawn("memory", [], monkeypatch, tmp_path)
    verdicts = [t.split("\n")[-1] for t in texts(fig) if t.endswith("fit") or t.endswith("fits")]
    assert verdicts[0] == "does not fit" and verdicts[-1] == "fits", verdicts
    assert any(t.startswith("GPU memory\n80 GiB") for t in texts(fig))  # the limit, labelled
    assert "no model given: drawing Llama 2 13B" in capsys.readouterr().out


def test_sweep_compares_nccl_ring_and_double_tree_where_they_cross(monkeypatch, tmp_path, capsys):
    fig = drawn("sweep", [], monkeypatch, tmp_path)
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert sorted(legend) == ["double-tree", "nccl-ring"]
    assert any("dgx-a100x2" in t for t in texts(fig))
    crossing = [t for t in texts(fig) if "double-tree → nccl-ring" in t]
    assert crossing, texts(fig)  # the small messages go to the tree, the large to the ring
    assert "no cluster or algorithm given: sweeping NCCL's ring" in capsys.readouterr().out


@pytest.mark.parametrize("kind", ["traffic", "utilization"])
def test_traffic_and_utilization_show_one_link_loaded_more_than_the_others(
    kind, monkeypatch, tmp_path, capsys
):
    from collsim.viz.traffic import link_bytes

    runs = []
    module = {"traffic": "collsim.viz.traffic", "utilization": "collsim.viz.utilization"}[kind]
    name = f"{kind}_figure"
    real = getattr(__import__(module, fromlist=[name]), name)

    def keep(topology, result, **kwargs):
        runs.append((topology, result))
        return real(topology, result, **kwargs)

    monkeypatch.setattr(f"{module}.{name}", keep)
    drawn(kind, [], monkeypatch, tmp_path)
    ((topology, result),) = runs
    loads = sorted(link_bytes(result, result.group.size).values())
    assert loads[-1] >= 4 * loads[0] > 0  # the root's link against any other
    assert "naive all-reduce on a switch" in capsys.readouterr().out


def test_compare_sets_the_two_on_a_switch(monkeypatch, tmp_path, capsys):
    fig = drawn("compare", [], monkeypatch, tmp_path)
    assert any("tree" in t for t in texts(fig)) and any("ring" in t for t in texts(fig))
    assert "(--topology switch)" in capsys.readouterr().out


@pytest.mark.parametrize(
    "kind,argv",
    [
        ("sweep", ["--ranks", "4", "--max-bytes", "1KiB"]),
        ("sweep", ["--algorithms", "ring,tree", "--max-bytes", "1KiB"]),
        ("traffic", ["--algorithm", "ring"]),
        ("utilization", ["--ranks", "4", "--bins", "10"]),
        ("compare", ["--ranks", "4"]),
        ("memory", ["--params", "1B", "--world-size", "8"]),
    ],
)
def test_a_flag_given_draws_what_was_asked(kind, argv, monkeypatch, tmp_path, capsys):
    fig = drawn(kind, argv, monkeypatch, tmp_path)
    assert "given:" not in capsys.readouterr().out  # no case of its own was drawn
    if kind in ("traffic", "utilization", "sweep"):
        assert any("ring(" in t for t in texts(fig)), texts(fig)  # the ordinary topology


@pytest.mark.parametrize(
    "kind,says",
    [
        ("memory", "--recompute selective"),
        ("sweep", "nccl_ring,double_tree"),
        ("traffic", "naive all-reduce on a switch"),
        ("utilization", "naive all-reduce on a switch"),
        ("compare", "on a switch of 8"),
    ],
)
def test_help_states_the_default(kind, says, capsys):
    with pytest.raises(SystemExit):
        cli.main(["viz", kind, "--help"])
    assert says in " ".join(capsys.readouterr().out.split())


def test_scaling_says_where_strong_scaling_stops_short_of_max_gpus(monkeypatch, tmp_path):
    # the default job's global batch is 512 sequences: 512 replicas, not --max-gpus 1024
    fig = drawn("scaling", [], monkeypatch, tmp_path)
    title = fig.get_suptitle()
    assert "at most 512 GPUs (one sequence a replica)" in " ".join(title.split())
    assert fig.axes[0].get_xlim()[1] < 1024
    weak = drawn("scaling", ["--weak", "--max-gpus", "64"], monkeypatch, tmp_path)
    assert "at most" not in weak.get_suptitle()
