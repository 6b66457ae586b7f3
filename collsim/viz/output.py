"""Saving figures and animations so that the same picture gives the same bytes.

PNG and GIF are deterministic as matplotlib writes them; SVG and PDF carry a creation
date, and SVG random ids for its clip paths, unless told otherwise.  :func:`save_figure`
removes both (``metadata`` without a date, a fixed ``svg.hashsalt``), so a picture in a
repository changes only when what it shows changes.  :func:`standalone_html` turns the
page matplotlib's HTML animation writer produces into one self-contained file: a fixed
id instead of a random one, and text buttons instead of icons from a web font.

Examples
--------
>>> import io
>>> from matplotlib.figure import Figure
>>> fig = Figure(figsize=(2, 1))
>>> _ = fig.subplots().plot([0, 1], [1, 0])
>>> first, second = io.BytesIO(), io.BytesIO()
>>> save_figure(fig, first, "svg"); save_figure(fig, second, "svg")
>>> first.getvalue() == second.getvalue()
True
"""

import html
import re

import matplotlib

from ..errors import ConfigError

__all__ = ["save_figure", "standalone_html", "FORMATS", "METADATA", "HASH_SALT"]

FORMATS = ("png", "svg", "pdf")
HASH_SALT = "collsim"  # SVG element ids are hashes of this and the content
METADATA = {
    "png": {},  # matplotlib's PNG carries only its version: already the same each run
    "svg": {"Date": None, "Creator": "collsim (matplotlib)"},
    "pdf": {"CreationDate": None, "Creator": "collsim (matplotlib)"},
}
# matplotlib's page asks a web font (Font Awesome, from a CDN) for its button icons:
# offline, the buttons would be blank, so each icon becomes a character every font has
BUTTON_TEXT = {
    "fa fa-minus": "&minus;",
    "fa fa-fast-backward": "|&#9664;&#9664;",
    "fa fa-step-backward": "&#9664;|",
    "fa fa-play fa-flip-horizontal": "&#9664;",
    "fa fa-pause": "&#10074;&#10074;",
    "fa fa-play": "&#9654;",
    "fa fa-step-forward": "|&#9654;",
    "fa fa-fast-forward": "&#9654;&#9654;|",
    "fa fa-plus": "+",
}


def save_figure(fig, out, fmt, dpi=150, **kwargs):
    """``fig.savefig`` in format ``fmt`` ("png", "svg" or "pdf"), byte-identical run to run.

    ``out`` is a path or a binary file object; ``kwargs`` go to ``savefig``.
    """
    fmt = str(fmt).lower().lstrip(".")
    if fmt not in FORMATS:
        raise ConfigError(f"format {fmt!r}: choose one of {', '.join(FORMATS)}")
    # text stays <text> in SVG (editable, translatable), whatever look drew the figure
    with matplotlib.rc_context({"svg.hashsalt": HASH_SALT, "svg.fonttype": "none"}):
        fig.savefig(out, format=fmt, dpi=dpi, metadata=METADATA[fmt], **kwargs)


def standalone_html(page, title):
    """A complete HTML document around ``page``, what ``HTMLWriter`` wrote.

    The random element id becomes ``collsim``, the web-font link goes, and every icon
    becomes plain text, so the file opens the same in any browser, online or not, and
    is the same bytes each time.

    >>> page = '<link rel="stylesheet"\\nhref="https://x/font-awesome.css">' \\
    ...        '<img id="_anim_img0123abcd"><i class="fa fa-play"></i>'
    >>> html = standalone_html(page, "demo")
    >>> "https" in html, "_anim_imgcollsim" in html, "&#9654;" in html
    (False, True, True)
    """
    ids = set(re.findall(r"_anim_img([0-9a-f]+)", page))
    for random_id in ids:  # one animation per page: one id
        page = page.replace(random_id, "collsim")
    page = re.sub(r'<link rel="stylesheet"\s+href="[^"]*font-awesome[^"]*">\s*', "", page)
    for icon, text in BUTTON_TEXT.items():
        page = page.replace(f'<i class="{icon}"></i>', text)
    leftover = re.findall(r'(?:href|src)="(?:https?:)?//[^"]*"', page)
    if leftover:  # a newer matplotlib added a resource: fail here, not in a browser
        raise ConfigError(f"the HTML animation still refers to {leftover[0]}; cannot embed it")
    head = (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(title)}</title>\n"
        "<style>body { font-family: sans-serif; margin: 1em; }"
        " .anim-buttons button { min-width: 2.6em; }</style>\n</head>\n<body>\n"
    )
    return head + page + "\n</body>\n</html>\n"
