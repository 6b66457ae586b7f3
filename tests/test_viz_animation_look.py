"""Animations take the same look as still pictures (issue 28, item 1): ``--title`` replaces
the title of every frame of every kind that animates, in its GIF, its lecture page and its
``--frames`` PNGs, and names the page."""

import pytest
from matplotlib.animation import PillowWriter

from collsim import cli
from collsim.cli import viz as _registers_the_kinds  # noqa: F401
from collsim.cli.viz_kinds import KINDS
from collsim.viz import output

TITLE = "Lecture 3: what the ring does"

# small runs: what is drawn does not change, only how long it takes
SMALL = {
    "ring": ["--ranks", "3"],
    "compare": ["--ranks", "4"],
    "utilization": ["--ranks", "4", "--bins", "20"],
    "timeline": ["--stages", "2", "--microbatches", "2"],
    "memory-timeline": ["--dp", "2", "--layers", "1"],
}


def figure_texts(fig):
    return [t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text")) if t.get_text()]


def test_every_animated_kind_is_listed_here():
    assert sorted(SMALL) == sorted(name for name, k in KINDS.items() if k.movie)


@pytest.mark.parametrize("kind", sorted(SMALL))
def test_title_is_on_every_frame_png(kind, tmp_path, monkeypatch, capsys):
    titles = []
    save = output.save_figure

    def keep(fig, out, fmt, **kwargs):
        titles.append(TITLE in figure_texts(fig))
        return save(fig, out, fmt, **kwargs)

    monkeypatch.setattr(output, "save_figure", keep)
    argv = ["viz", kind, *SMALL[kind], "--title", TITLE, "--frames", str(tmp_path / "f")]
    assert cli.main(argv) == 0
    assert len(titles) >= 2 and all(titles), titles


@pytest.mark.parametrize("kind", ["ring", "timeline"])
def test_title_is_on_every_gif_frame(kind, tmp_path, monkeypatch, capsys):
    titles = []
    grab = PillowWriter.grab_frame

    def keep(writer, **kwargs):
        titles.append(TITLE in figure_texts(writer.fig))
        return grab(writer, **kwargs)

    monkeypatch.setattr(PillowWriter, "grab_frame", keep)
    argv = ["viz", kind, *SMALL[kind], "--title", TITLE, "--out", str(tmp_path / "a.gif")]
    assert cli.main(argv) == 0
    assert len(titles) >= 2 and all(titles), titles


def test_title_names_the_lecture_page(tmp_path, capsys):
    out = tmp_path / "ring.html"
    assert cli.main(["viz", "ring", "--ranks", "3", "--title", TITLE, "--out", str(out)]) == 0
    assert f"<title>{TITLE}</title>" in out.read_text(encoding="utf-8")


def test_a_still_beside_the_frames_keeps_its_look(tmp_path, monkeypatch, capsys):
    saved = []
    save = output.save_figure

    def keep(fig, out, fmt, **kwargs):
        saved.append((str(out), TITLE in figure_texts(fig), kwargs.get("dpi")))
        return save(fig, out, fmt, **kwargs)

    monkeypatch.setattr(output, "save_figure", keep)
    still = tmp_path / "still.png"
    argv = ["viz", "ring", "--ranks", "3", "--title", TITLE, "--dpi", "40"]
    assert cli.main([*argv, "--frames", str(tmp_path / "f"), "--out", str(still)]) == 0
    assert (str(still), True, 40) in saved
