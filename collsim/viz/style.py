"""How every figure looks: one place for sizes, fonts, line widths, colours and language.

A figure module never sets a font size in points or a theme colour of its own: it uses
matplotlib's relative sizes (``"small"``, ``"large"``, ...) and the palette below, and the
style in force when it is built decides the rest.  ``paper`` is the default (the sizes the
figures were designed at); ``slides`` is a 16:9 frame of 13.33 x 7.5 inches (1920 x 1080
pixels at 144 dpi, PowerPoint's and Keynote's widescreen slide) with large fonts and thick
lines, readable from the back of a lecture hall.  ``dark`` swaps the ink and paper.

Three ways in, one definition:

* ``collsim viz KIND --style slides --theme dark --aspect 16:9 --title ...`` (the CLI);
* ``with collsim.viz.style.use("slides", theme="dark"): fig = ring_figure(result)``;
* ``ring_figure(result, style="slides", theme="dark")``: every figure function takes the
  same keywords (:func:`styled`).

SVG keeps its text as ``<text>`` elements (``svg.fonttype = "none"``), so a title can be
edited, translated or restyled after the fact.

Examples
--------
>>> from matplotlib.figure import Figure
>>> with use("slides", theme="dark") as slide:
...     fig = Figure(figsize=slide.size((8, 5)))
>>> [round(float(x), 2) for x in fig.get_size_inches()], slide.rc()["font.size"]
([13.33, 7.5], 13.0)
>>> look(style="poster")
Traceback (most recent call last):
    ...
collsim.errors.ConfigError: --style 'poster': choose one of paper, slides (nearest: paper)
"""

import contextlib
import contextvars
import dataclasses
import difflib
import functools
from dataclasses import dataclass

import matplotlib
from matplotlib.colors import to_hex

from ..errors import ConfigError
from .words import JA, cjk_font, font_rc

__all__ = [
    "Look",
    "STYLES",
    "THEMES",
    "PALETTE",
    "CATEGORY_COLOURS",
    "use",
    "styled",
    "current",
    "look",
    "parse_aspect",
    "say",
    "language",
    "themed",
]

# Okabe & Ito (2008), "Color Universal Design": eight colours that stay apart under the
# common colour-vision deficiencies; black is left out (it is the ink), yellow goes last
# (it vanishes on white paper).  tests/test_viz_style.py simulates deuteranopia and
# protanopia on it.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442")
# what a rank's memory holds, the same colour in every figure that stacks it (memory,
# memory-timeline, strategies); Okabe-Ito, so the six stay apart for every reader
CATEGORY_COLOURS = {
    "params": "#0072B2",  # blue
    "grads": "#009E73",  # bluish green
    "optimizer": "#E69F00",  # orange
    "activations": "#CC79A7",  # reddish purple
    "gathered_params": "#56B4E9",  # sky blue
    "comm_buffers": "#D55E00",  # vermillion
}

SLIDE_INCHES = (13 + 1 / 3, 7.5)  # a 16:9 slide; 1920 x 1080 px at 144 dpi
SLIDE_DPI = 144
MAX_INCHES = 60.0  # a wall poster; beyond it the pixel count becomes the problem
MAX_DPI = 600  # print quality; 13.33 in at 600 dpi is already 8,000 px wide

STYLES = {
    # the sizes the figures were drawn at; matplotlib's relative names scale from font.size
    "paper": {"font.size": 10.0, "lines.linewidth": 1.5, "axes.linewidth": 0.8},
    "slides": {
        "font.size": 13.0,  # 26 px at 1080 lines; "small" 22 px, "x-large" (titles) 37 px
        "lines.linewidth": 3.0,
        "lines.markersize": 9.0,
        "axes.linewidth": 1.5,
        "patch.linewidth": 1.5,
        "xtick.major.width": 1.5,
        "ytick.major.width": 1.5,
        "xtick.major.size": 6.0,
        "ytick.major.size": 6.0,
        "grid.linewidth": 1.2,
    },
}
THEMES = {
    "light": {},  # matplotlib's own: black ink on white
    "dark": {
        "figure.facecolor": "#1E1E1E",
        "axes.facecolor": "#1E1E1E",
        "savefig.facecolor": "#1E1E1E",
        "text.color": "#F0F0F0",
        "axes.labelcolor": "#F0F0F0",
        "axes.edgecolor": "#C8C8C8",
        "xtick.color": "#E0E0E0",
        "ytick.color": "#E0E0E0",
        "grid.color": "#5A5A5A",
        "legend.facecolor": "#2A2A2A",
        "legend.edgecolor": "#8A8A8A",
        "hatch.color": "#9A9A9A",
    },
}
COMMON = {
    "svg.fonttype": "none",  # <text> in SVG, not outlines: editable and translatable
    "axes.prop_cycle": matplotlib.cycler(color=PALETTE),
    "image.cmap": "viridis",  # perceptually uniform and colour-blind safe
}


def _choice(value, choices, flag):
    if value in choices:
        return value
    nearest = difflib.get_close_matches(str(value), list(choices), n=1, cutoff=0.0)
    raise ConfigError(
        f"{flag} {value!r}: choose one of {', '.join(choices)}"
        + (f" (nearest: {nearest[0]})" if nearest else "")
    )


def parse_aspect(text, flag="--aspect"):
    """``"16:9"`` (or ``"4:3"``, ``"1.5"``) as width / height, a number > 0.

    >>> parse_aspect("16:9") == 16 / 9, parse_aspect("1.5")
    (True, 1.5)
    """
    parts = str(text).split(":")
    try:
        numbers = [float(p) for p in parts]
    except ValueError:
        numbers = []
    if len(numbers) not in (1, 2) or not all(0 < n < 1e6 for n in numbers):
        raise ConfigError(f"{flag} {text!r}: give width:height, e.g. {flag} 16:9 (or 4:3, 1.5)")
    ratio = numbers[0] / numbers[1] if len(numbers) == 2 else numbers[0]
    if not 0.1 <= ratio <= 10:
        raise ConfigError(f"{flag} {text!r}: a ratio of {ratio:.3g}; keep it in 0.1..10, e.g. 16:9")
    return ratio


def _inches(value, flag):
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = float("nan")
    if not 1.0 <= number <= MAX_INCHES:  # NaN fails too
        raise ConfigError(
            f"{flag} {value!r}: a figure side in inches, 1 to {MAX_INCHES:g} "
            "(a 16:9 slide is --width 13.33 --height 7.5)"
        )
    return number


@dataclass(frozen=True)
class Look:
    """A figure's look: the style, theme, size, resolution, background, title and
    language.  Build one with :func:`look` (which checks every value)."""

    style: str = "paper"  # "paper" or "slides"
    theme: str = "light"  # "light" or "dark"
    dpi: float | None = None  # pixels per inch when saved (default 150; slides 144)
    width: float | None = None  # inches; None: the figure's own (slides: 13.33)
    height: float | None = None  # inches; None: the figure's own, or width / aspect
    aspect: float | None = None  # width / height; slides default to 16/9
    transparent: bool = False  # PNG/SVG with no background, for a coloured slide
    title: str | None = None  # replaces the figure's title
    lang: str = "en"  # "en" or "ja": the figures' words (collsim.viz.words)

    def rc(self):
        """The rcParams this look sets (style, then theme, then what every style shares)."""
        params = {**STYLES[self.style], **THEMES[self.theme], **COMMON}
        params.update(font_rc(self.lang))
        return params

    def size(self, default):
        """The figure's size in inches: what was asked, else the style's, else ``default``."""
        width, height = self.width, self.height
        aspect = self.aspect or (16 / 9 if self.style == "slides" else None)
        if width is None and height is None and self.style == "slides":
            width, height = SLIDE_INCHES if aspect == 16 / 9 else (SLIDE_INCHES[0], None)
        if width is None and height is None and aspect is None:
            return tuple(default)
        if width is None:
            width = height * aspect if height and aspect else default[0]
        if height is None:
            height = width / aspect if aspect else default[1]
        return (width, height)

    @property
    def save_dpi(self):
        return self.dpi or (SLIDE_DPI if self.style == "slides" else 150)


def look(
    style="paper",
    theme="light",
    dpi=None,
    width=None,
    height=None,
    aspect=None,
    transparent=False,
    title=None,
    lang="en",
):
    """A checked :class:`Look`; each refusal names the flag, the value and the choices."""
    if dpi is not None:
        given = dpi
        try:
            dpi = float(dpi)
        except (TypeError, ValueError):
            dpi = float("nan")
        if not 10 <= dpi <= MAX_DPI:  # NaN fails too
            raise ConfigError(
                f"--dpi {given!r}: choose 10 to {MAX_DPI} pixels per inch (screen 100-150, "
                "print 300)"
            )
    if lang not in ("en", "ja"):
        _choice(lang, ("en", "ja"), "--lang")
    return Look(
        style=_choice(style, tuple(STYLES), "--style"),
        theme=_choice(theme, tuple(THEMES), "--theme"),
        dpi=dpi,
        width=_inches(width, "--width"),
        height=_inches(height, "--height"),
        aspect=None if aspect is None else parse_aspect(aspect),
        transparent=bool(transparent),
        title=title,
        lang=lang,
    )


_CURRENT = contextvars.ContextVar("collsim_viz_look", default=None)  # None: the default Look


def current():
    """The :class:`Look` in force (the default outside :func:`use`)."""
    return _CURRENT.get() or Look()


def themed(colour):
    """``colour``, except that black (the palette's ink) becomes the theme's ink, so a black
    series stays visible on a dark slide.

    >>> themed("#000000"), themed("#0072B2")
    ('black', '#0072B2')
    """
    if colour is not None and to_hex(colour) == "#000000":
        return matplotlib.rcParams["text.color"]
    return colour


def language():
    """The language the figures are drawn in: the look's, when its font is installed
    (Japanese without a CJK font stays English, rather than empty boxes)."""
    if current().lang == "ja" and cjk_font() is not None:
        return "ja"
    return "en"


def say(text, **fields):
    """``text`` in the language of the look in force, from :data:`collsim.viz.words.JA`
    (English when no Japanese font is installed), with ``fields`` filled in.

    >>> say("simulated time ({unit})", unit="ms")
    'simulated time (ms)'
    """
    if language() == "ja":
        text = JA.get(text, text)
    return text.format(**fields) if fields else text


@contextlib.contextmanager
def use(style="paper", theme="light", **options):
    """Draw with a look: ``with use("slides", theme="dark"): fig = ...``.

    ``style`` may also be a :class:`Look`.  Inside, matplotlib's rcParams are the look's
    (``matplotlib.rc_context``) and :func:`current` returns it; both are restored after.
    """
    chosen = style if isinstance(style, Look) else look(style, theme, **options)
    token = _CURRENT.set(chosen)
    try:
        with matplotlib.rc_context(chosen.rc()):
            yield chosen
    finally:
        _CURRENT.reset(token)


def finish(fig, chosen=None):
    """Apply what only the whole figure can take: the title asked for, in place of its own."""
    chosen = chosen or current()
    if chosen.title is not None:
        own = getattr(fig, "_suptitle", None)  # matplotlib keeps no public handle on it
        if own is not None:  # the figure's own title, in its place and size, says this
            own.set_text(chosen.title)
        else:
            fig.suptitle(chosen.title, fontweight="bold", fontsize="x-large")
    thin_crowded_ticks(fig)
    return fig


def thin_crowded_ticks(fig, gap_px=2.0):
    """Blank every tick label that would touch the one before it (on every axis of
    ``fig``), so a dense axis reads "8, 32, 128" rather than a smear: the figure is laid
    out once, the labels are measured where they fall, and the survivors are fixed.

    >>> from matplotlib.figure import Figure
    >>> fig = Figure(figsize=(2, 2))
    >>> ax = fig.subplots()
    >>> _ = ax.set_xticks(range(20), [f"label {i}" for i in range(20)])
    >>> thin_crowded_ticks(fig)
    >>> 1 < sum(1 for t in ax.get_xticklabels() if t.get_text()) < 20
    True
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    if not hasattr(fig.canvas, "get_renderer"):
        FigureCanvasAgg(fig)
    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            ticks = [t for t in axis.get_major_ticks() if t.label1.get_visible()]
            labels = [t.label1 for t in ticks if t.label1.get_text()]
            if len(labels) < 3:
                continue
            boxes = [label.get_window_extent(renderer).padded(gap_px) for label in labels]
            every = next(  # the smallest stride whose labels stay apart: evenly spaced
                k
                for k in range(1, len(labels) + 1)
                if not any(a.overlaps(b) for a, b in zip(boxes[::k], boxes[k::k]))
            )
            for index, label in enumerate(labels):
                if index % every:
                    label.set_text("")
            crowded = every > 1
            if crowded:  # fix the survivors, so the next layout keeps the same ticks
                axis.set_ticks([t.get_loc() for t in ticks], [t.label1.get_text() for t in ticks])


LOOK_KEYWORDS = ("style", "theme", "width", "height", "aspect", "title", "lang")


def styled(figure_function):
    """Let a figure function take the look's keywords (``style="slides"``, ``theme=``,
    ``width=``, ``height=``, ``aspect=``, ``title=``, ``lang=``); without any of them it
    draws in the look in force."""

    @functools.wraps(figure_function)
    def draw(*args, **kwargs):
        options = {k: kwargs.pop(k) for k in LOOK_KEYWORDS if k in kwargs}
        if "title" in options and "title" in _parameters(figure_function):
            kwargs["title"] = options["title"]  # the function's own title argument
        if not options:
            return finish(figure_function(*args, **kwargs))
        chosen = look(**{**dataclasses.asdict(current()), **options})
        with use(chosen):
            return finish(figure_function(*args, **kwargs), chosen)

    return draw


def _parameters(function):
    import inspect

    return inspect.signature(function).parameters
