"""The HTML animation as a lecture page: it fits the window with its controls on screen,
steps with the keys a presentation clicker sends, and shows each step's caption as text.

The script and the style are checked statically, and the page is driven in a headless
Chromium when Debian's ``chromium`` is installed (skipped otherwise, with the command)."""

import os
import re

import pytest
from browser import CHROMIUM, INSTALL, Browser

from collsim.cli import main
from collsim.viz.lecture_page import CAPTION_ID, KEYS

needs_chromium = pytest.mark.skipif(
    not os.access(CHROMIUM, os.X_OK), reason=f"needs Chromium: {INSTALL}"
)


@pytest.fixture(scope="module")
def ring_page(tmp_path_factory):
    path = tmp_path_factory.mktemp("page") / "ring.html"
    assert main(["viz", "ring", "--ranks", "4", "--out", str(path)]) == 0
    return path


def test_the_page_script_has_the_clicker_keys_and_the_fit_to_window_style(ring_page):
    page = ring_page.read_text(encoding="utf-8")
    # the keys a clicker or a keyboard sends, each calling the player's own method
    for key, method in (
        ("ArrowRight", "next_frame"),
        ("PageDown", "next_frame"),
        (" ", "next_frame"),
        ("ArrowLeft", "previous_frame"),
        ("PageUp", "previous_frame"),
    ):
        assert KEYS[key] == method
        assert f'"{key}": "{method}"' in page
    assert 'document.addEventListener("keydown"' in page and "preventDefault" in page
    # the picture takes what the caption and the controls leave of the window's height
    assert re.search(r"\.animation \{[^}]*height: 100vh", page)
    assert re.search(r"\.animation img \{[^}]*min-height: 0;[^}]*object-fit: contain", page)
    # every frame's caption, the first one already on the page
    assert f'<p id="{CAPTION_ID}" aria-live="polite">initial state</p>' in page
    assert '"step 1: reduce-scatter 1/3  (step 1 of 6)"' in page


@needs_chromium
@pytest.mark.parametrize("width, height", [(1920, 1080), (1280, 720)])
def test_the_page_fits_the_window_and_keys_step_it(ring_page, width, height):
    caption = f"document.getElementById('{CAPTION_ID}').textContent"
    frame = "animcollsim.current_frame"
    with Browser(ring_page.as_uri(), width, height) as page:
        # everything on screen: picture scaled down, controls inside the window
        box = page.evaluate(
            "(() => { const img = document.querySelector('.animation img');"
            " const r = img.getBoundingClientRect();"
            " const c = document.querySelector('.anim-controls').getBoundingClientRect();"
            " return {bottom: r.bottom, right: r.right, natural: img.naturalWidth,"
            " width: r.width, controls: c.bottom, scroll: document.documentElement.scrollHeight,"
            " w: innerWidth, h: innerHeight}; })()"
        )
        assert box["w"] == width and box["h"] == height
        assert box["bottom"] <= height and box["right"] <= width
        assert box["controls"] <= height and box["scroll"] <= height
        assert box["width"] < box["natural"]  # scaled down to fit, not cropped
        assert page.evaluate(caption) == "initial state"
        steps = [
            ("PageDown", False, 1),
            ("ArrowRight", False, 2),
            (" ", False, 3),
            ("PageUp", False, 2),
            ("ArrowLeft", False, 1),
            (" ", True, 0),
        ]
        for key, shift, expected in steps:
            page.press(key, shift=shift)
            assert page.evaluate(frame) == expected, key
        page.press("PageDown")
        assert page.evaluate(caption) == "step 1: reduce-scatter 1/3  (step 1 of 6)"
        slider = "document.getElementById('_anim_slidercollsim').value"
        assert page.evaluate(slider) == "1"


def test_frames_writes_each_step_as_its_own_png_the_same_bytes_twice(tmp_path, capsys):
    from PIL import Image

    folders = [tmp_path / "a", tmp_path / "b"]
    for folder in folders:
        assert main(["viz", "ring", "--ranks", "4", "--frames", str(folder)]) == 0
    names = sorted(p.name for p in folders[0].iterdir())
    assert names == [f"frame-{i:03d}.png" for i in range(7)]  # the initial state + 6 steps
    for name in names:
        assert (folders[0] / name).read_bytes() == (folders[1] / name).read_bytes()
        with Image.open(folders[0] / name) as image:
            assert image.width >= 1920  # a slide's width
    assert (folders[0] / names[1]).read_bytes() != (folders[0] / names[2]).read_bytes()
    assert not (tmp_path / "ring.png").exists()  # --frames alone writes only the frames
    assert "wrote 7 frames" in capsys.readouterr().out


def test_frames_is_refused_before_the_run_when_it_names_a_file(tmp_path, capsys):
    blocker = tmp_path / "taken"
    blocker.write_text("x")
    assert main(["viz", "ring", "--frames", str(blocker)]) == 2
    assert f"--frames {blocker}: is a file" in capsys.readouterr().err


TIMED = {  # the kinds that change over time besides the step-throughs: a playhead sweeps them
    "utilization": ["all-reduce", "--ranks", "4", "--size", "1KiB", "--bins", "20"],
    "timeline": ["--stages", "2", "--microbatches", "2"],
    "memory-timeline": ["--dp", "2", "--layers", "1", "--hidden", "4"],
}


@pytest.mark.parametrize("kind", list(TIMED))
def test_every_kind_that_changes_over_time_has_a_page_a_gif_and_frames(kind, tmp_path, capsys):
    argv = ["viz", kind, *TIMED[kind]]
    assert main([*argv, "--out", str(tmp_path / "a.html")]) == 0
    page = (tmp_path / "a.html").read_text(encoding="utf-8")
    assert '"PageDown": "next_frame"' in page and "height: 100vh" in page
    captions = re.findall(r'"t = [^"]* of [^"]*"', page)
    assert len(captions) == 25 and captions[0].startswith('"t = 0 s of')  # 24 steps + start
    assert main([*argv, "--out", str(tmp_path / "a.gif")]) == 0
    from PIL import Image

    with Image.open(tmp_path / "a.gif") as gif:
        assert gif.n_frames == 25
    assert main([*argv, "--frames", str(tmp_path / "f")]) == 0
    frames = sorted((tmp_path / "f").iterdir())
    assert len(frames) == 25 and frames[0].read_bytes() != frames[-1].read_bytes()
    assert "wrote 25 frames" in capsys.readouterr().out


def test_the_playhead_moves_across_the_time_axis_and_greys_what_is_to_come():
    from matplotlib.figure import Figure

    from collsim.viz.animation import playhead

    fig = Figure()
    ax = fig.subplots()
    ax.set_xlim(0, 10)  # 10 ms of a run from 0 to 10 ms, as the axis shows it
    movie = playhead(fig, [ax], 0.0, 10e-3, frames=4, title="t")
    places = []
    for index in range(len(movie)):
        movie.show(index)
        line = next(artist for artist in ax.lines if artist.get_gid() == "playhead")
        shade = next(p for p in ax.patches if p.get_gid() == "not yet")
        places.append(line.get_xdata()[0])
        assert shade.get_x() == places[-1] and shade.get_x() + shade.get_width() == 10
    assert places == [0, 2.5, 5, 7.5, 10] and ax.get_xlim() == (0, 10)
    assert movie.captions[2] == "t = 5 ms of 10 ms"
