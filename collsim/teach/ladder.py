"""The hint ladder: what a wrong answer is told, try after try, without giving it away.

First wrong try: the diagnosis and the file and line to edit.  Second: the exercise's
stronger hint (the shape of the formula) as well.  The correct value only on request
(``collsim lesson N --reveal``, or ``COLLSIM_REVEAL=1`` for a lesson run as a script) or
after :data:`REVEAL_AFTER` wrong tries of that exercise, counted in the student's progress
file (:mod:`collsim.teach.progress`).  Only a lesson's exercises (ids such as "4.2") are
counted; any other check is always at its first rung.

Examples
--------
>>> Rung(wrong=1).hint, Rung(wrong=2).hint, Rung(wrong=3).reveal
(False, True, True)
"""

import hashlib
import os
import re
from dataclasses import dataclass

from .progress import record_try

__all__ = ["REVEAL_AFTER", "Rung", "climb", "fingerprint", "lesson_of", "reveal_requested"]

REVEAL_AFTER = 3  # wrong tries of one exercise after which its answer is shown
EXERCISE_ID = re.compile(r"(\d+)\.\d+")


@dataclass(frozen=True)
class Rung:
    """Where one exercise is on the ladder."""

    wrong: int  # wrong tries so far, this one included
    revealed: bool = False  # the student asked for the answer (--reveal)

    @property
    def hint(self):
        """The second rung: the stronger hint."""
        return self.wrong >= 2 or self.reveal

    @property
    def reveal(self):
        """The last rung: the correct value."""
        return self.revealed or self.wrong >= REVEAL_AFTER


def reveal_requested():
    """True when ``COLLSIM_REVEAL=1`` (set by ``collsim lesson N --reveal``)."""
    return os.environ.get("COLLSIM_REVEAL", "") == "1"


def lesson_of(exercise):
    """``"4"`` for the exercise ``"4.2"``; None for an id that is not a lesson's."""
    match = EXERCISE_ID.fullmatch(str(exercise))
    return match.group(1) if match else None


def fingerprint(answer):
    """What tells one answer from the next: its ``repr``, or a function's code, whose
    ``repr`` names a memory address that changes every run."""
    code = getattr(answer, "__code__", None)
    if code is None:
        return answer
    text = repr((code.co_code, code.co_consts, code.co_names))
    return "function " + hashlib.sha256(text.encode()).hexdigest()[:16]


def climb(exercise, answer, correct=False, where=None):
    """Record this try of ``exercise`` (run from the lesson file ``where``) and return its
    :class:`Rung`."""
    lesson = lesson_of(exercise)
    if lesson is None:
        return Rung(wrong=1, revealed=reveal_requested())
    tried = record_try(lesson, exercise, correct, answer=fingerprint(answer), where=where)
    return Rung(wrong=max(tried.wrong, 1), revealed=reveal_requested())
