"""``collsim viz memory``: stacked memory bars for ZeRO stages 0-3."""

import pytest
from matplotlib.figure import Figure

from collsim import cli
from collsim.plan import plan
from collsim.viz.memory import PARTS, memory_figure

GPT = dict(
    world_size=8,
    tp=2,
    layers=8,
    hidden=1024,
    heads=16,
    seq=1024,
    global_batch=32,
    gpu_memory="16GiB",
)


@pytest.fixture(scope="module")
def fig():
    return memory_figure(**GPT)


def test_returns_a_figure_with_four_stacked_parts_for_four_stages(fig):
    assert isinstance(fig, Figure)
    (ax,) = fig.axes
    assert len(ax.containers) == len(PARTS) == 4  # parameters, gradients, optimizer, activations
    assert all(len(c) == 4 for c in ax.containers)  # ZeRO-0 .. ZeRO-3
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels[0] == "parameters" and labels[-1] == "activations"
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert [t.split("\n")[0] for t in ticks] == ["ZeRO-0", "ZeRO-1", "ZeRO-2", "ZeRO-3 / FSDP"]


def test_axis_has_units_and_the_bars_are_the_planner_numbers(fig):
    ax = fig.axes[0]
    assert "GiB" in ax.get_ylabel()
    for zero in range(4):
        memory = plan(**GPT, zero=zero, suggestions=0).memory
        heights = [c[zero].get_height() for c in ax.containers]
        expected = [memory[k] / 2**30 for k, _, _ in PARTS]
        assert heights == pytest.approx(expected)
    totals = [sum(c[z].get_height() for c in ax.containers) for z in range(4)]
    assert totals == sorted(totals, reverse=True)  # each stage shards more away
    capacity = [line for line in ax.get_lines() if line.get_linestyle() == "--"]
    assert capacity and capacity[0].get_ydata()[0] == pytest.approx(16)


def test_cli_writes_png_and_svg_by_extension(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(cli, "COMMAND_MODULES", ("plan", "viz"))
    flags = "--params 7B --world-size 8".split()
    png, svg = tmp_path / "m.png", tmp_path / "m.svg"
    assert cli.main(["viz", "memory", *flags, "--out", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert cli.main(["viz", "memory", *flags, "--out", str(svg)]) == 0
    assert b"<svg" in svg.read_bytes()[:500]
    assert "wrote" in capsys.readouterr().out
    assert cli.main(["viz", "memory", *flags, "--out", str(tmp_path / "m.txt")]) == 2
    assert ".png" in capsys.readouterr().err


def test_viz_help_lists_memory_and_teaches(capsys, monkeypatch):
    monkeypatch.setattr(cli, "COMMAND_MODULES", ("plan", "viz"))
    with pytest.raises(SystemExit):
        cli.main(["viz", "--help"])
    assert "memory" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        cli.main(["viz", "memory", "--help"])
    out = capsys.readouterr().out
    assert "16 bytes per parameter" in out and "--out" in out and "ZeRO-1" in out
