"""Saving figures and animations so that the same picture gives the same bytes.

PNG and GIF are deterministic as matplotlib writes them; SVG and PDF carry a creation
date, and SVG random ids for its clip paths, unless told otherwise.  :func:`save_figure`
removes both (``metadata`` without a date, a fixed ``svg.hashsalt``), so a picture in a
repository changes only when what it shows changes.  Animations are written by
:mod:`collsim.viz.animation` (their HTML page by :mod:`collsim.viz.lecture_page`).

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

import matplotlib

from ..errors import ConfigError

__all__ = ["save_figure", "FORMATS", "METADATA", "HASH_SALT"]

FORMATS = ("png", "svg", "pdf")
HASH_SALT = "collsim"  # SVG element ids are hashes of this and the content
METADATA = {
    "png": {},  # matplotlib's PNG carries only its version: already the same each run
    "svg": {"Date": None, "Creator": "collsim (matplotlib)"},
    "pdf": {"CreationDate": None, "Creator": "collsim (matplotlib)"},
}


def save_figure(fig, out, fmt, dpi=150, **kwargs):
    """``fig.savefig`` in format ``fmt`` ("png", "svg" or "pdf"), byte-identical run to run.

    ``out`` is a path or a binary file object; ``kwargs`` go to ``savefig``.
    """
    fmt = str(fmt).lower().lstrip(".")
    if fmt not in FORMATS:
        raise ConfigError(f"format {fmt!r}: choose one of {', '.join(FORMATS)}")
    with matplotlib.rc_context({"svg.hashsalt": HASH_SALT}):
        fig.savefig(out, format=fmt, dpi=dpi, metadata=METADATA[fmt], **kwargs)
