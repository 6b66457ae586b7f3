"""The flags every ``collsim viz`` kind shares for how its picture looks: --style, --theme,
--dpi, --width/--height/--aspect, --transparent, --title and --lang.

They only name a :class:`collsim.viz.style.Look`; what each style means lives in
:mod:`collsim.viz.style` alone.  Every value is checked before the kind runs anything.
"""

__all__ = ["add_look_arguments", "look_from_args"]


def add_look_arguments(parser):
    """Add the look flags to one kind's parser, in a group of their own."""
    g = parser.add_argument_group(
        "how it looks (every kind)",
        "e.g. --style slides --theme dark for a 1920 x 1080 slide on a dark background",
    )
    g.add_argument(
        "--style",
        default="paper",
        help="paper (default: the figure's own size, 10 pt text) or slides (16:9, "
        "13.33 x 7.5 in, 17 pt text, thick lines: readable on a projector)",
    )
    g.add_argument("--theme", default="light", help="light (default) or dark")
    g.add_argument(
        "--dpi", default=None, help="pixels per inch of a PNG (default 150; slides 144 = 1920 px)"
    )
    g.add_argument("--width", default=None, help="figure width in inches (1-60)")
    g.add_argument("--height", default=None, help="figure height in inches (1-60)")
    g.add_argument(
        "--aspect", default=None, help="width:height, e.g. 16:9 or 4:3 (slides default 16:9)"
    )
    g.add_argument(
        "--transparent", action="store_true", help="no background (for a coloured slide)"
    )
    g.add_argument("--title", default=None, help="replace the figure's title with this text")
    g.add_argument(
        "--lang",
        default=None,
        help="en or ja: the words on the figure (default COLLSIM_LANG, else the locale's); "
        "Japanese needs a CJK font (Debian: apt install fonts-noto-cjk)",
    )


def look_from_args(args):
    """The checked :class:`~collsim.viz.style.Look` the flags name (ConfigError, exit 2,
    naming the flag, the value and the choices, for a bad one)."""
    from ..teach.language import current_language, parse_language
    from ..viz.style import look

    lang = current_language() if args.lang is None else parse_language(args.lang)
    return look(
        style=args.style,
        theme=args.theme,
        dpi=args.dpi,
        width=args.width,
        height=args.height,
        aspect=args.aspect,
        transparent=args.transparent,
        title=args.title,
        lang=lang,
    )
