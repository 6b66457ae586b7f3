"""The ``collsim`` command line: one sub-command per module in this package.

Each module defines ``register(subparsers)``, which adds its parser and sets
``func`` to the function that runs it, and may say what its exit statuses 0 and 1
mean in ``EXIT_STATUS`` (:mod:`.exit_status`).  Heavy imports happen inside those
functions, and :func:`main` registers only the command it was given (all of them for
``collsim --help``), so that ``collsim --version`` and ``collsim lesson list`` load neither
numpy, networkx nor matplotlib.
"""

import argparse
import importlib
import os
import sys

from ..errors import CollsimError
from . import exit_status

__all__ = ["main", "build_parser"]

# the order here is the order ``collsim --help`` lists them in
COMMAND_MODULES = (
    "tour",
    "run",
    "step",
    "plan",
    "viz",
    "pipeline",
    "infer",
    "verify",
    "strategies",
    "hardware",
    "tune",
    "exec",
    "lesson",
)


def build_parser(commands=COMMAND_MODULES):
    """The top-level parser with the sub-commands ``commands`` (default: every one)."""
    from .. import __version__

    parser = argparse.ArgumentParser(
        prog="collsim",
        description=(
            "A virtual GPU cluster in one process: watch collectives move real arrays, "
            "count every byte and latency step, and check parallel training against one device."
        ),
        epilog="New here? `collsim tour` (a minute), then `collsim lesson 1`; `collsim lesson "
        "list` shows all 15.  Every sub-command has its own --help.\n\n"
        + exit_status.epilog(
            exit_status.Meaning(
                "done, and the command's check passed",
                "a negative verdict (each --help says which)",
            )
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"collsim {__version__}")
    subparsers = parser.add_subparsers(title="commands", metavar="COMMAND")
    for name in commands:
        module = importlib.import_module(f".{name}", __name__)
        module.register(subparsers)
        meaning = getattr(module, "EXIT_STATUS", exit_status.DEFAULT)
        exit_status.annotate(subparsers.choices[name], meaning)
    return parser


def main(argv=None):
    """Entry point of the ``collsim`` console script; returns the exit status."""
    from .parsing import join_negative_values

    # one process plays every rank and their arrays are small, so OpenBLAS's worker
    # threads (one per core) only contend with each other and with the simulation: on 2
    # busy cores lesson 15 took 1.8 s of CPU with them and 1.15 s without. numpy reads
    # this when it is first imported, which is later; a value the user set wins.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(commands_named(argv))
    # `--latency -1us` reaches the command as a value, to be refused by name
    args, unknown = parser.parse_known_args(join_negative_values(argv))
    if unknown:  # said by the sub-command's parser, with its usage (argparse: exit 2)
        getattr(args, "_parser", parser).error(f"unrecognized arguments: {' '.join(unknown)}")
    if not hasattr(args, "func"):
        parser.print_help()
        return 0
    try:
        if hasattr(args, "_default_ranks"):  # a command with the cluster flags
            from .common import resolve_cluster_args

            resolve_cluster_args(args)  # --ranks from --nodes on a preset, before any check
        status = args.func(args)
        sys.stdout.flush()
    except CollsimError as exc:  # refused input exits 2, as argparse's refusals do
        print(f"collsim: error: {exc}", file=sys.stderr)
        return exit_status.status_of(exc)
    except BrokenPipeError:
        # `collsim run ... | head`: the reader left; that is not an error of ours
        _silence_stdout()
        return 0
    except KeyboardInterrupt:
        print("collsim: interrupted", file=sys.stderr)
        return 130
    except OSError as exc:
        if exc.filename is not None:  # a file we were asked to read or write
            print(f"collsim: error: {exc.filename}: {exc.strerror}", file=sys.stderr)
            return exit_status.FAILED
        # stdout itself failed (a full disk, /dev/full): say so once, without a traceback
        _silence_stdout()
        print(f"collsim: error: cannot write the output: {exc.strerror or exc}", file=sys.stderr)
        return exit_status.FAILED
    return 0 if status is None else status


def commands_named(argv):
    """The sub-commands to register for ``argv``: the one it names, none for a bare
    ``--version``, else all (``--help``, a typo argparse should answer with the choices)."""
    if argv[:1] and argv[0] in COMMAND_MODULES:
        return (argv[0],)
    if argv == ["--version"]:
        return ()
    return COMMAND_MODULES


def _silence_stdout():
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    import os

    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # not a real file (captured in tests)
        pass


if __name__ == "__main__":
    sys.exit(main())
