"""The rules every fuzz test applies to the CLI and the public API (issue 11, item 12).

A call may succeed, or fail with a collsim error (``CollsimError``: exit 2 for refused
input, 1 for a failed run) or an argparse usage error (exit 2) whose message names the
offending value.  It may not raise anything else,
and it may not run longer than ``timeout`` seconds (a SIGALRM interrupts it, so a hang
fails the test instead of freezing the suite).

Examples
--------
>>> outcome = run_cli(["run", "all-reduce", "--ranks", "0"], bad="0")
>>> outcome.status
2
>>> outcome = check_api(int, "3")
>>> outcome.value
3
"""

import contextlib
import io
import signal
from dataclasses import dataclass

from collsim.errors import CollsimError

__all__ = ["CliOutcome", "ApiOutcome", "run_cli", "check_api", "Hang", "time_limit"]


class Hang(AssertionError):
    """The call ran past its time limit: on a user's machine it would look hung."""


@contextlib.contextmanager
def time_limit(seconds):
    """Raise :class:`Hang` inside the block once ``seconds`` of wall time have passed."""

    def on_alarm(signum, frame):
        raise Hang(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@dataclass(frozen=True)
class CliOutcome:
    """What one ``collsim`` invocation did: exit status and the text it printed."""

    argv: tuple
    status: int
    stdout: str
    stderr: str


@dataclass(frozen=True)
class ApiOutcome:
    """What one API call did: its return value, or the collsim error it raised."""

    value: object = None
    error: CollsimError | None = None


def _names(message, bad):
    return bad is None or str(bad) in message


def run_cli(argv, bad=None, timeout=10.0):
    """Run ``collsim *argv`` in-process and check it behaved.

    ``bad`` is the offending value as the user typed it: if the command fails, its error
    message must contain it.  Returns a :class:`CliOutcome`; raises ``AssertionError``
    (or :class:`Hang`) on a traceback, a hang or an error that does not name ``bad``.
    """
    from collsim.cli import main

    argv = tuple(str(a) for a in argv)
    out, err = io.StringIO(), io.StringIO()
    status = None
    try:
        with time_limit(timeout), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = main(list(argv))
    except SystemExit as exc:  # argparse: --help exits 0, a usage error exits 2
        status = exc.code if isinstance(exc.code, int) else 2
    except Hang as exc:
        raise Hang(f"collsim {' '.join(argv)}: {exc}") from None
    except Exception as exc:
        raise AssertionError(
            f"collsim {' '.join(argv)} raised {type(exc).__name__}: {exc}"
        ) from exc
    status = 0 if status is None else status
    outcome = CliOutcome(argv, status, out.getvalue(), err.getvalue())
    if status != 0:
        assert _names(outcome.stderr, bad), (
            f"collsim {' '.join(argv)} failed without naming {bad!r}: {outcome.stderr!r}"
        )
    return outcome


def check_api(fn, *args, bad=None, timeout=10.0, **kwargs):
    """Call ``fn(*args, **kwargs)``; allow only success or a collsim error naming ``bad``."""
    try:
        with time_limit(timeout):
            return ApiOutcome(value=fn(*args, **kwargs))
    except CollsimError as exc:
        assert _names(str(exc), bad), f"{fn.__name__}: error does not name {bad!r}: {exc}"
        return ApiOutcome(error=exc)
    except Hang as exc:
        raise Hang(f"{getattr(fn, '__name__', fn)}{args}: {exc}") from None
    except Exception as exc:
        raise AssertionError(
            f"{getattr(fn, '__name__', fn)}(*{args!r}, **{kwargs!r}) raised "
            f"{type(exc).__name__}: {exc}"
        ) from exc
