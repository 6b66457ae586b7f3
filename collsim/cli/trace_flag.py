"""``--trace FILE`` on the training commands (pipeline, verify, strategies): the run's
Chrome/Perfetto trace, with a flow arrow from each send to its receive.

The path is checked before the run (:func:`check_trace`), so a bad one costs nothing; the
file is written after it (:func:`write_trace`), and a note says where, on stderr when
stdout carries JSON.
"""

import sys

from ..errors import ConfigError

__all__ = ["add_trace_argument", "check_trace", "write_trace"]


def add_trace_argument(parser, what):
    """Add ``--trace FILE`` to ``parser``; ``what`` says which run(s) it writes."""
    parser.add_argument(
        "--trace",
        metavar="FILE",
        default=None,
        help=f"write {what} as Chrome/Perfetto trace JSON (open it at ui.perfetto.dev: one "
        "process per rank, compute / send / receive tracks, an arrow from each send to "
        "its receive)",
    )


def check_trace(args):
    """``args.trace`` checked before the run (a folder that exists and can be written)."""
    from .paths import check_output_path

    if args.trace is not None:
        check_output_path(args.trace, "--trace")


def write_trace(args, parts, quiet=False):
    """Write ``parts`` (:class:`~collsim.network.chrome.ChromePart` list) to ``args.trace``
    and say so (on stderr with ``quiet``: stdout carries JSON)."""
    from ..network.chrome import write_chrome

    if args.trace is None:
        return
    try:
        write_chrome(parts, args.trace)
    except OSError as exc:  # a full disk, /dev/full: name the file, not stdout
        raise ConfigError(f"--trace {args.trace}: cannot write it ({exc.strerror})") from None
    note = f"# trace written to {args.trace} (open it at ui.perfetto.dev)"
    print(note, file=sys.stderr if quiet else sys.stdout)
