"""``collsim viz KIND``: draw a figure and save it (PNG, SVG or PDF, by the --out extension).

The kinds live in :mod:`.viz_training` (memory, timeline, scaling) and
:mod:`.viz_collectives` (ring, traffic, utilization, sweep), registered in
:mod:`.viz_kinds`.  ``--out`` is checked before anything runs, and each kind checks its
own numbers before it simulates, so a bad flag costs nothing.  Every format is written
the same, byte for byte, each run (:mod:`collsim.viz.output`).
"""

import argparse
import textwrap

from . import (  # noqa: F401
    viz_collectives,
    viz_compare,
    viz_mesh,
    viz_moe,
    viz_serving,
    viz_strategies,
    viz_training,
)
from .paths import check_output_path
from .viz_kinds import ANIMATED, FORMATS, KINDS
from .viz_look import add_look_arguments, look_from_args

__all__ = ["register", "run"]


def register(subparsers):
    parser = subparsers.add_parser(
        "viz",
        help="draw a figure (ring, traffic, timeline, sweep, scaling, ...) as PNG, SVG or GIF",
        description="Draw a figure and save it to --out; the format follows the extension "
        f"({', '.join('.' + f for f in FORMATS)}; the kinds that change over time also .gif "
        "or .html, animated, and --frames DIR, one PNG a step).  The "
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
            default=None,
            metavar="FILE",
            help=f"where to save; .png, .svg or .pdf"
            f"{', or .gif / .html (animated)' if k.movie else ''} (default {k.name}.png)",
        )
        if k.movie:
            _animation_arguments(sub)
        add_look_arguments(sub)
        sub.set_defaults(func=run, kind=k)
    parser.set_defaults(func=lambda args: parser.print_help())


def _animation_arguments(parser):
    parser.add_argument(
        "--fps", default="1", help="frames per second of a .gif or .html animation (default 1)"
    )
    parser.add_argument(
        "--frames",
        metavar="DIR",
        default=None,
        help="write every frame as its own PNG, DIR/frame-000.png on (made if missing), "
        "for slides; --out too only when given",
    )


def _suffixes(k):
    return tuple("." + f for f in FORMATS + (ANIMATED if k.movie else ()))


def _check_frames_folder(text):
    """--frames DIR: a folder, or a name whose parent folder exists (checked before the run)."""
    from pathlib import Path

    from ..errors import ConfigError

    folder = Path(text)
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"--frames {text}: is a file; give a folder (made if missing)")
    check_output_path(folder / "frame-000.png" if folder.is_dir() else folder, "--frames")
    return folder


def _report(args, line):
    """Print ``line``, after the default case drawn, if one was (:mod:`.viz_defaults`)."""
    says = getattr(args, "_default_says", None)
    if says:
        print(says)
        args._default_says = None
    print(line)


def run(args):
    """Check ``--out``, draw ``args.kind`` and save it there; returns 0."""
    from ..viz import style

    frames = getattr(args, "frames", None)
    if args.kind.movie:  # a bad --fps is a mistake worth naming even for a still picture
        _fps(args)
    if frames is not None:
        folder = _check_frames_folder(frames)
    look = look_from_args(args)
    with style.use(look):  # the figure (or every frame) is built and saved in its look
        if args.out is None and frames is not None:  # the frames alone
            return _write_frames(args, folder, None)
        given = f"{args.kind.name}.png" if args.out is None else args.out
        out = check_output_path(given, "--out", _suffixes(args.kind))
        fmt = out.suffix.lower().lstrip(".")
        if frames is not None or fmt in ANIMATED:
            return _write_frames(args, folder if frames is not None else None, out)
        _save_still(args, out, fmt)
    _report(args, f"wrote {out} ({args.kind.name} figure, {fmt.upper()})")
    return 0


def _save_still(args, out, fmt):
    """Draw the kind's still picture and save it in the look in force."""
    from ..viz import style
    from ..viz.output import save_figure

    look = style.current()
    fig = style.finish(args.kind.draw(args), look)
    save_figure(fig, out, fmt, dpi=look.save_dpi, transparent=look.transparent)


def _fps(args):
    from ..viz.limits import MAX_FPS
    from .viz_kinds import positive_number

    return positive_number(args.fps, "--fps", MAX_FPS, 1)


def _write_frames(args, folder, out):
    """The kind's animation to ``out`` (its still picture for .png/.svg/.pdf) and
    every frame to ``folder``; returns 0."""
    from ..viz.animation import write_animation, write_frames

    fps = _fps(args)
    movie = args.kind.movie(args)
    if folder is not None:
        paths = write_frames(movie, folder)
        _report(
            args, f"wrote {len(paths)} frames to {folder}/ ({paths[0].name} .. {paths[-1].name})"
        )
    if out is None:
        return 0
    fmt = out.suffix.lower().lstrip(".")
    if fmt in ANIMATED:
        n = write_animation(movie, out, fps=fps)
        _report(args, f"wrote {out} ({args.kind.name} animation, {n} frames, {fmt.upper()})")
    else:  # --frames with a still --out: the picture the kind draws, in its look
        _save_still(args, out, fmt)
        _report(args, f"wrote {out} ({args.kind.name} figure, {fmt.upper()})")
    return 0
