"""``collsim viz KIND``: draw a figure and save it (PNG or SVG, by the --out extension).

Each kind is one function decorated with :func:`kind`: it receives the parsed flags and
returns a matplotlib Figure; saving, the format check and the message are shared.  To add
a kind (ring, traffic, utilization, timeline, sweep, scaling), write one such function
here; ``arguments`` adds its flags.
"""

import argparse
from dataclasses import dataclass
from pathlib import Path

from .plan import add_config_arguments

__all__ = ["register", "run", "kind", "KINDS", "FORMATS"]

FORMATS = ("png", "svg", "pdf")


@dataclass(frozen=True)
class Kind:
    name: str
    help: str  # one line for `collsim viz --help`
    description: str  # what the figure teaches, for `collsim viz NAME --help`
    arguments: object  # function(parser) that adds the kind's flags, or None
    draw: object  # function(args) -> matplotlib Figure


KINDS = {}  # name -> Kind, in the order `collsim viz --help` lists them


def kind(name, help, description, arguments=None):
    """Register the decorated ``draw(args) -> Figure`` as ``collsim viz NAME``."""

    def register_kind(draw):
        KINDS[name] = Kind(name, help, description, arguments, draw)
        return draw

    return register_kind


@kind(
    "memory",
    help="memory per GPU as stacked bars for ZeRO stages 0-3",
    description=(
        "Draw memory per GPU (parameters, gradients, optimizer states, activations) for ZeRO "
        "stages 0-3 side by side, for one configuration given as for `collsim plan`.  Mixed-"
        "precision Adam keeps 16 bytes per parameter (2 weight + 2 gradient + 12 optimizer); "
        "ZeRO-1 shards the 12 over the data-parallel GPUs, ZeRO-2 also the gradients, ZeRO-3 "
        "(FSDP) everything.  Activations do not shard with ZeRO: tp, pp, sequence parallelism, "
        "smaller micro-batches and recomputation reduce them.  The dashed line is the GPU's memory."
    ),
    arguments=add_config_arguments,
)
def memory(args):
    from ..viz.memory import memory_figure
    from .plan import config_from_args

    return memory_figure(config_from_args(args))


def register(subparsers):
    parser = subparsers.add_parser(
        "viz",
        help="draw a figure (memory, ...) and save it as PNG or SVG",
        description="Draw a figure and save it to --out; the format follows the extension "
        f"({', '.join('.' + f for f in FORMATS)}).  Each KIND has its own --help.",
    )
    kinds = parser.add_subparsers(title="kinds", metavar="KIND")
    for k in KINDS.values():
        sub = kinds.add_parser(
            k.name,
            help=k.help,
            description=k.description,
            epilog=f"example:\n  collsim viz {k.name} --params 7B --world-size 8 --out out.svg",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        if k.arguments:
            k.arguments(sub)
        sub.add_argument(
            "--out",
            default=f"{k.name}.png",
            metavar="FILE",
            help=f"where to save; .png, .svg or .pdf (default {k.name}.png)",
        )
        sub.set_defaults(func=run, kind=k)
    parser.set_defaults(func=lambda args: parser.print_help())


def run(args):
    """Draw ``args.kind`` and save it to ``args.out``; returns 0."""
    from ..errors import ConfigError

    out = Path(args.out)
    fmt = out.suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        raise ConfigError(
            f"--out {args.out!r}: the extension picks the format; use one of "
            f"{', '.join('.' + f for f in FORMATS)} (e.g. {out.stem or args.kind.name}.png)"
        )
    fig = args.kind.draw(args)
    fig.savefig(out, format=fmt, dpi=150)
    print(f"wrote {out} ({args.kind.name} figure, {fmt.upper()})")
    return 0
