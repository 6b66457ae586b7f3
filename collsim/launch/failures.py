"""How a rank's failure is reported: :class:`RankError`, with the rank's traceback as the
Python interpreter in an mpirun process prints it."""

import os
import traceback

from ..errors import CollsimError

__all__ = ["RankError", "RankExit", "Exits", "rank_error"]


class RankError(CollsimError):
    """A rank's code raised (or called ``sys.exit`` with a non-zero status).

    ``rank`` is the rank, ``error`` the exception its code raised, ``where`` the last
    frame of the traceback (``file:line, in function``) and ``others`` what the other
    ranks were doing then (the blocking core's note), ``status`` the exit status.
    """

    def __init__(self, message, rank=None, error=None, where=None, others="", status=1):
        super().__init__(message)
        self.rank, self.error, self.where, self.others = rank, error, where, others
        self.status = status


class RankExit(Exception):
    """Raised in a rank's thread for ``sys.exit(status)`` with a non-zero status."""

    def __init__(self, status):
        super().__init__(f"sys.exit({status!r})")
        self.status = status


class Exits:
    """The first non-zero ``sys.exit`` of a rank.  That rank ends there; the others run on
    until they end or wait for it, as they do under mpirun (which then ends the job with
    that status), so a status that only one rank reports (a unittest run whose failure is
    local) does not cut the others' output short."""

    def __init__(self):
        self.first = None  # (rank, status)

    def note(self, rank, status):
        if self.first is None:
            self.first = (rank, status)

    def error(self, waiting=""):
        """The :class:`RankError` the run ends with (``waiting``: who waited for it)."""
        rank, status = self.first
        note = f"\n{waiting}" if waiting else ""
        return RankError(
            f"rank {rank} called sys.exit({status!r}); the run stopped there{note}",
            rank=rank,
            error=RankExit(status),
            others=waiting,
            status=status,
        )


def rank_error(exc, err):
    """A :class:`RankError` for the exception a rank raised; its traceback goes to the
    rank's stderr first, as the Python interpreter in an mpirun process prints it."""
    rank = exc.rank
    others = "\n".join(getattr(exc, "__notes__", []) or [])
    if isinstance(exc, RankExit):
        return RankError(
            f"rank {rank} called sys.exit({exc.status!r}); the run stopped there"
            + (f"\n{others}" if others else ""),
            rank=rank,
            error=exc,
            others=others,
            status=exc.status,
        )
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not _ours(f.filename)]
    last = frames[-1] if frames else None
    where = f"{last.filename}:{last.lineno}, in {last.name}" if last else "(no frame of yours)"
    shown = traceback.format_list(frames) + [_exception_line(exc)]
    text = "Traceback (most recent call last):\n" + "".join(shown)
    if err.echo:
        for line in text.rstrip("\n").split("\n"):
            err.target.write(f"{err.tag(rank)}{line}\n")
        err.flush()
    code = f": {last.line}" if last is not None and last.line else ""
    message = f"rank {rank} raised {type(exc).__name__}: {exc}\n  at {where}{code}" + (
        f"\n{others}" if others else ""
    )
    return RankError(message, rank=rank, error=exc, where=where, others=others)


def _exception_line(exc):
    """``ZeroDivisionError: division by zero`` as Python prints it, without collsim's notes."""
    kind, module = type(exc).__qualname__, type(exc).__module__
    if module not in ("builtins", "__main__"):
        kind = f"{module}.{kind}"
    text = str(exc)
    return f"{kind}: {text}\n" if text else f"{kind}\n"


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # collsim/


def _ours(filename):
    """Whether a traceback frame is collsim's own (the user's frames are what they read)."""
    return os.path.abspath(filename).startswith(_PACKAGE + os.sep)
