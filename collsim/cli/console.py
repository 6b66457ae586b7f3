"""The terminal: pause only for a person, and show progress of long runs on stderr.

Examples
--------
>>> with progress("sweep", enabled=False) as note:
...     note("size 1 of 2")
"""

import contextlib
import sys
import threading
import time

__all__ = ["stdin_is_terminal", "pause", "progress", "add_progress_argument"]


def add_progress_argument(parser):
    """--progress: report progress on stderr even when it is not a terminal."""
    parser.add_argument(
        "--progress",
        action="store_true",
        help="report progress of long runs on stderr (automatic when stderr is a terminal)",
    )


def stdin_is_terminal():
    """True when a person can answer on standard input (it exists, is open, is a tty)."""
    stream = sys.stdin
    try:
        return stream is not None and not stream.closed and stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False


def pause(args):
    """Wait for Enter, but only when a person is at the terminal (stdin open and a tty) and
    ``args.no_pause`` is not set."""
    if not getattr(args, "no_pause", True) and stdin_is_terminal():
        try:
            input("  [Enter: next] ")
        except (EOFError, RuntimeError):  # stdin closed while we waited
            pass


def _stderr_is_terminal():
    try:
        return sys.stderr is not None and sys.stderr.isatty()
    except (AttributeError, ValueError, OSError):
        return False


@contextlib.contextmanager
def progress(what, enabled=None, interval=2.0):
    """While the block runs, show ``what``, the latest note and the elapsed wall time on
    stderr; the block receives ``note(text)`` to say where it is ("size 3 of 25").

    Shown when ``enabled`` (a ``--progress`` flag) or when stderr is a terminal, and only
    once the block has run ``interval`` seconds; never on stdout, so ``--json`` output
    stays clean and short runs print nothing.

    >>> with progress("sweep", enabled=False) as note:
    ...     note("size 1 of 2")
    """
    status = {"note": ""}

    def note(text):
        status["note"] = text

    if not (enabled or _stderr_is_terminal()):
        yield note
        return
    stream, done, start = sys.stderr, threading.Event(), time.monotonic()

    def line():
        elapsed = time.monotonic() - start
        return f"\r{what}: {status['note'] + ', ' if status['note'] else ''}{elapsed:.0f} s "

    def tick():
        while not done.wait(interval):
            with contextlib.suppress(OSError, ValueError):
                stream.write(line())
                stream.flush()

    thread = threading.Thread(target=tick, daemon=True)
    thread.start()
    try:
        yield note
    finally:
        done.set()
        thread.join()
        if time.monotonic() - start >= interval:
            with contextlib.suppress(OSError, ValueError):
                stream.write(f"\r{what}: done in {time.monotonic() - start:.1f} s\x1b[K\n")
                stream.flush()
