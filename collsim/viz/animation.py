"""Any picture that changes over time as a GIF, a lecture page or one PNG per frame.

An :class:`Animation` is a figure, one caption per frame and ``show(i)``, which puts the
figure in frame i's state (redraws a step of a collective, or moves a playhead over a
timeline).  :func:`write_animation` writes it as a GIF (``PillowWriter``) or as a
self-contained HTML page (``HTMLWriter``, made lecture-ready by
:mod:`collsim.viz.lecture_page`); :func:`write_frames` writes each frame as its own PNG,
for slides.  :func:`playhead` animates a finished timeline (utilization, pipeline, memory)
by sweeping a line across its time axes and greying what has not happened yet.  Every
output is the same bytes every run.

Examples
--------
>>> from matplotlib.figure import Figure
>>> fig = Figure(figsize=(4, 2))
>>> ax = fig.subplots()
>>> _ = ax.plot([0, 1], [0, 1]); _ = ax.set_xlim(0, 1)
>>> movie = playhead(fig, [ax], 0.0, 1e-3, frames=4, title="demo")
>>> movie.captions
('t = 0 s of 1 ms', 't = 250 µs of 1 ms', 't = 500 µs of 1 ms', 't = 750 µs of 1 ms', \
't = 1 ms of 1 ms')
"""

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError
from .lecture_page import lecture_html
from .limits import MAX_FPS, check_rate
from .style import current, finish, language, say
from .times import time_tick

__all__ = ["Animation", "write_animation", "write_frames", "playhead", "ANIMATIONS"]

ANIMATIONS = (".gif", ".html")  # what write_animation writes, by the path's suffix
MIN_FRAME_WIDTH = 1200  # pixels: an animation frame stays sharp on a projected slide
SLIDE_WIDTH = 1920  # pixels: a --frames PNG fills a 1920×1080 slide without scaling up
PLAYHEAD_FRAMES = 24  # frames of a playhead sweep (plus the end)
FUTURE_SHADE = {"color": "#808080", "alpha": 0.35, "lw": 0, "zorder": 20}


@dataclass(frozen=True)
class Animation:
    """A figure and how to show each of its frames (``len(captions)`` of them)."""

    figure: object  # the matplotlib Figure every frame is drawn into
    captions: tuple  # one per frame: what the page shows as text ("step 2 of 6: ...")
    show: Callable  # show(i): put the figure in frame i's state
    title: str  # the page's title

    def __len__(self):
        return len(self.captions)


def _show_frame(animation, index):
    """Put ``animation`` in frame ``index``'s state, in the look in force: its ``--title``
    in place of the frame's own (a frame that redraws itself would lose it), crowded tick
    labels thinned, as a still picture gets them (:func:`collsim.viz.style.finish`)."""
    animation.show(index)
    finish(animation.figure)


def _page_title(animation):
    """The lecture page's title: the look's ``--title`` when one was asked for."""
    asked = current().title
    return animation.title if asked is None else asked


def _dpi(animation, dpi, width=MIN_FRAME_WIDTH):
    """``dpi``, or what makes a frame at least ``width`` pixels wide."""
    if dpi is None:
        return math.ceil(width / animation.figure.get_figwidth())
    return dpi


def write_animation(animation, path, fps=1.0, dpi=None):
    """Write ``animation`` to ``path``: ``.gif`` (frames 1,200 pixels wide), or ``.html``
    for the lecture page (play, pause, step buttons, slider, keys, captions; frames
    embedded as PNG, 1,920 pixels wide).  Returns the number of frames."""
    from matplotlib.animation import HTMLWriter, PillowWriter

    suffix = Path(path).suffix.lower()
    if suffix not in ANIMATIONS:
        raise ConfigError(f"animation {str(path)!r}: end the file name in .gif or .html")
    fps = check_rate(fps, "fps", MAX_FPS)
    if suffix == ".gif":
        writer = PillowWriter(fps=fps)
    else:  # no size cap: a capped writer drops the last frames silently
        writer = HTMLWriter(fps=fps, embed_frames=True, default_mode="once", embed_limit=2048)
    # a page is shown full screen on a projector: frames as wide as a 1920-pixel slide
    width = MIN_FRAME_WIDTH if suffix == ".gif" else SLIDE_WIDTH
    with writer.saving(animation.figure, str(path), _dpi(animation, dpi, width)):
        for index in range(len(animation)):
            _show_frame(animation, index)
            writer.grab_frame()
    if suffix == ".html":
        page = Path(path).read_text(encoding="utf-8")
        text = lecture_html(page, _page_title(animation), animation.captions, language())
        Path(path).write_text(text, encoding="utf-8")
    return len(animation)


def write_frames(animation, folder, dpi=None):
    """Write every frame of ``animation`` as ``folder/frame-NNN.png`` (numbered from 0, the
    first frame), at least 1,920 pixels wide unless ``dpi`` says; returns the paths.
    ``folder`` is made if missing."""
    from .output import save_figure

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    digits = max(3, len(str(len(animation) - 1)))
    paths = []
    for index in range(len(animation)):
        _show_frame(animation, index)
        path = folder / f"frame-{index:0{digits}d}.png"
        save_figure(animation.figure, path, "png", dpi=_dpi(animation, dpi, SLIDE_WIDTH))
        paths.append(path)
    return paths


def playhead(figure, axes, start, end, frames=PLAYHEAD_FRAMES, title=""):
    """Animate a finished timeline: a line at simulated time t on each of ``axes`` (whose
    x-axis shows ``start``..``end`` seconds across its limits), what comes after t greyed;
    ``frames`` + 1 frames from t = start to t = end."""
    if not end > start:
        raise ConfigError(f"a playhead needs time to sweep: the run spans {start} .. {end} s")
    marks = []
    for ax in axes:
        low, high = ax.get_xlim()
        line = ax.axvline(low, color="black", lw=2, zorder=21, gid="playhead")
        shade = ax.axvspan(low, high, **FUTURE_SHADE, gid="not yet")
        marks.append((ax, low, high, line, shade))
    times = [start + (end - start) * i / frames for i in range(frames + 1)]

    def show(index):
        fraction = (times[index] - start) / (end - start)
        for ax, low, high, line, shade in marks:
            x = low + (high - low) * fraction
            line.set_xdata([x, x])
            shade.set_x(x)
            shade.set_width(high - x)
            ax.set_xlim(low, high)  # the span must not widen the axis

    total = time_tick(end - start)  # µs, as the time axes say it
    captions = tuple(
        say("t = {time} of {total}", time=time_tick(t - start), total=total) for t in times
    )
    return Animation(figure, captions, show, title)
