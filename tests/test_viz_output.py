"""Picture files: the same input gives the same bytes in every format, and the ring's HTML
animation is one self-contained page (issue 11, items 12 and 19)."""

import base64
import io
import re

import pytest
from PIL import Image

import collsim
from collsim import cli
from collsim.viz.ring import MIN_FRAME_WIDTH, ring_animation

FRAME = re.compile(r'frames\[(\d+)\] = "data:image/png;base64,([^"]*)"')


def ring_result(k):
    return collsim.Cluster(collsim.topology.ring(k)).all_reduce(count=64, dtype="float32")


FIGURES = {
    "memory": ["memory", "--params", "1B", "--world-size", "8"],
    "ring": ["ring", "--ranks", "4", "--size", "1KiB"],
    "memory-timeline": ["memory-timeline", "--dp", "2", "--layers", "2"],
}


@pytest.mark.parametrize("kind", list(FIGURES))
@pytest.mark.parametrize("suffix", [".png", ".svg", ".pdf"])
def test_a_figure_is_the_same_bytes_every_run(tmp_path, kind, suffix, capsys):
    # matplotlib writes a date into SVG and PDF, and random clip-path ids into SVG
    paths = [tmp_path / f"m{i}{suffix}" for i in range(2)]
    for path in paths:
        assert cli.main(["viz", *FIGURES[kind], "--out", str(path)]) == 0
    first, second = (p.read_bytes() for p in paths)
    assert len(first) > 1000 and first == second
    if suffix == ".svg":
        assert b"<dc:date>" not in first and b'id="p' in first  # clip paths have ids
    if suffix == ".pdf":
        assert b"/CreationDate" not in first


@pytest.mark.parametrize("suffix", [".gif", ".html"])
def test_an_animation_is_the_same_bytes_every_run(tmp_path, suffix, capsys):
    paths = [tmp_path / f"r{i}{suffix}" for i in range(2)]
    for path in paths:
        assert cli.main(["viz", "ring", "--ranks", "2", "--out", str(path)]) == 0
    assert paths[0].read_bytes() == paths[1].read_bytes()
    assert "3 frames" in capsys.readouterr().out


def test_html_animation_is_one_page_with_every_frame_embedded(tmp_path):
    k = 3
    path = tmp_path / "ring.html"
    assert ring_animation(ring_result(k), path, fps=2) == 2 * (k - 1) + 1
    page = path.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    frames = FRAME.findall(page.replace("\\\n", ""))
    assert [int(i) for i, _ in frames] == list(range(2 * (k - 1) + 1))
    for _, data in frames:  # each frame a real PNG, wide enough for a projector
        with Image.open(io.BytesIO(base64.b64decode(data))) as image:
            assert image.format == "PNG" and image.width >= MIN_FRAME_WIDTH
    # nothing fetched from elsewhere: no stylesheet, script or image by URL, no frame folder
    assert not re.search(r'(?:href|src)="(?!#)[^"]*"', page)
    assert "font-awesome" not in page and "fa fa-" not in page
    assert list(tmp_path.iterdir()) == [path]
    for control in ("play_animation", "pause_animation", "next_frame", "previous_frame"):
        assert f"animcollsim.{control}()" in page
    assert "&#9654;" in page  # the play button has a visible label without a web font
    assert "new Animation(frames, img_id, slider_id, 500.0," in page  # 2 frames per second


def test_gif_frames_are_wide_enough_for_slides(tmp_path):
    path = tmp_path / "ring.gif"
    ring_animation(ring_result(2), path)
    with Image.open(path) as gif:
        assert gif.n_frames == 3 and gif.width >= MIN_FRAME_WIDTH >= 1200


@pytest.mark.parametrize("suffix", [".svg", ".pdf", ".png"])
def test_collsim_pipeline_out_is_byte_identical_run_to_run(suffix, tmp_path):
    from collsim.cli import main

    paths = [tmp_path / f"t{i}{suffix}" for i in range(2)]
    for path in paths:
        argv = ["pipeline", "--stages", "2", "--microbatches", "2", "--out", str(path)]
        assert main(argv) == 0
    assert paths[0].read_bytes() == paths[1].read_bytes()
