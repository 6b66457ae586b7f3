"""The ``collsim`` command line: one sub-command per module in this package.

Each module defines ``register(subparsers)``, which adds its parser and sets
``func`` to the function that runs it.  Heavy imports happen inside those
functions so that ``collsim --help`` stays instant.
"""

import argparse
import importlib
import sys

from ..errors import CollsimError

__all__ = ["main", "build_parser"]

# the order here is the order ``collsim --help`` lists them in
COMMAND_MODULES = ("tour", "run", "step", "plan", "viz", "pipeline", "verify", "lesson")


def build_parser():
    """The top-level parser with every sub-command registered."""
    from .. import __version__

    parser = argparse.ArgumentParser(
        prog="collsim",
        description=(
            "A virtual GPU cluster in one process: watch collectives move real arrays, "
            "count every byte and latency step, and check parallel training against one device."
        ),
        epilog="Start with `collsim tour`. Every sub-command has its own --help.",
    )
    parser.add_argument("--version", action="version", version=f"collsim {__version__}")
    subparsers = parser.add_subparsers(title="commands", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(f".{name}", __name__).register(subparsers)
    return parser


def main(argv=None):
    """Entry point of the ``collsim`` console script; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "func"):
        parser.print_help()
        return 0
    try:
        status = args.func(args)
    except CollsimError as exc:
        print(f"collsim: error: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0
    return 0 if status is None else status


if __name__ == "__main__":
    sys.exit(main())
