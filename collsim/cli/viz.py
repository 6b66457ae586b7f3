"""``collsim viz KIND``: draw a figure and save it (PNG, SVG or PDF, by the --out extension).

The kinds live in :mod:`.viz_training` (memory, timeline, scaling) and
:mod:`.viz_collectives` (ring, traffic, utilization, sweep), registered in
:mod:`.viz_kinds`.  ``--out`` is checked before anything runs, and each kind checks its
own numbers before it simulates, so a bad flag costs nothing.  Every format is written
the same, byte for byte, each run (:mod:`collsim.viz.output`).
"""

import argparse
import textwrap

from . import viz_collectives, viz_mesh, viz_strategies, viz_training  # noqa: F401  (registers kinds)
from .paths import check_output_path
from .viz_kinds import ANIMATED, FORMATS, KINDS
from .viz_look import add_look_arguments, look_from_args

__all__ = ["register", "run"]


def register(subparsers):
    parser = subparsers.add_parser(
        "viz",
        help="draw a figure (ring, traffic, timeline, sweep, scaling, ...) as PNG, SVG or GIF",
        description="Draw a figure and save it to --out; the format follows the extension "
        f"({', '.join('.' + f for f in FORMATS)}; ring also .gif or .html, animated).  The "
        "same input gives the same file, byte for byte.  Each KIND has its own --help.",
    )
    kinds = parser.add_subparsers(title="kinds", metavar="KIND")
    for k in KINDS.values():
        sub = kinds.add_parser(
            k.name,
            help=k.help,
            description=textwrap.fill(k.description, 88),
            epilog=f"example:\n  collsim viz {k.name} {k.example}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        if k.arguments:
            k.arguments(sub)
        sub.add_argument(
            "--out",
            default=f"{k.name}.png",
            metavar="FILE",
            help=f"where to save; .png, .svg or .pdf"
            f"{', or .gif / .html (animated)' if k.animate else ''} (default {k.name}.png)",
        )
        add_look_arguments(sub)
        sub.set_defaults(func=run, kind=k)
    parser.set_defaults(func=lambda args: parser.print_help())


def _suffixes(k):
    return tuple("." + f for f in FORMATS + (ANIMATED if k.animate else ()))


def run(args):
    """Check ``--out``, draw ``args.kind`` and save it there; returns 0."""
    from ..viz import style
    from ..viz.output import save_figure

    out = check_output_path(args.out, "--out", suffixes=_suffixes(args.kind))
    look = look_from_args(args)
    fmt = out.suffix.lower().lstrip(".")
    with style.use(look):  # the figure is built and saved in its look
        if fmt in ANIMATED:
            frames = args.kind.animate(args, out)
            print(f"wrote {out} ({args.kind.name} animation, {frames} frames, {fmt.upper()})")
            return 0
        fig = style.finish(args.kind.draw(args), look)
        save_figure(fig, out, fmt, dpi=look.save_dpi, transparent=look.transparent)
    print(f"wrote {out} ({args.kind.name} figure, {fmt.upper()})")
    return 0
