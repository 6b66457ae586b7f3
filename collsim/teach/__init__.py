"""Exercise checks for the lessons: "predict, then check", with feedback that teaches.

A lesson gives every exercise its own answer slot (``dx_bytes_answer = None``) and calls a
check here with it.  An answer left as ``None`` prints the file and line to edit.  A wrong
answer says how it is wrong: a recognisable factor off (2x, 1/K, (K-1)/K, a unit prefix),
which array elements differ, which rank it named and why that is not the one.  Every
number is printed with its unit (``collsim.units``).  The feedback is in Japanese when the
lesson runs in Japanese (:func:`collsim.teach.language.current_language`: ``COLLSIM_LANG``,
a lesson under ``lessons/ja/``, a ``ja`` locale) and in English otherwise.  With
``COLLSIM_SOLUTIONS=1`` an unanswered exercise takes the value of the same name from
``lessons/solutions/`` (the module with the lesson's file name) and a wrong result raises,
which is how the tests run every lesson.

Examples
--------
>>> check("demo", 112, expected=112, unit="GPUs")
Correct! demo: 112 GPUs
True
>>> check("demo", 224, expected=112, unit="GPUs")  # doctest: +ELLIPSIS +NORMALIZE_WHITESPACE
Not yet. demo: you said 224 GPUs: 2x the answer. Did you count something twice (both
phases, both directions, send and receive)? (Wrong tries: 1; the answer shows after 3, ...
False
"""

import importlib.util
import inspect
import math
import os
from pathlib import Path

from ..course.catalog import course_lessons
from .diagnosis import Alternative, Quantity
from .feedback import (
    as_number,
    describe_difference,
    distinct,
    explain_number,
    quantity,
    rank_problem,
    short,
    short_args,
    size_of,
    unit_name,
)
from .known_slips import one_message_slips as _one_message_slips
from .ladder import REVEAL_AFTER, climb
from .language import current_language
from .messages import message
from .pictures import show
from .slots import AnswerSlot, caller, find_slot
from .slots import lesson_language as _language

__all__ = [
    "check",
    "check_array",
    "check_function",
    "check_rank",
    "show",
    "solutions_mode",
    "Alternative",
    "LessonCheckError",
    "AnswerSlot",
    "Quantity",
    "current_language",
    "one_message_slips",
]


class LessonCheckError(AssertionError):
    """A check failed while running with the solutions (the lesson itself is wrong)."""


def solutions_mode():
    """True when ``COLLSIM_SOLUTIONS=1``: unanswered exercises use the solutions."""
    return os.environ.get("COLLSIM_SOLUTIONS", "") == "1"


def _solution(slot, exercise, lang):
    """The value named ``slot.name`` in ``solutions/<lesson>.py`` next to the lesson (or in
    collsim's own lessons, for a student's copy)."""
    if slot.path is None or slot.name is None:
        raise LessonCheckError(message("no_slot", lang, exercise=exercise))
    path = Path(slot.path).resolve().parent / "solutions" / Path(slot.path).name
    if not path.exists():  # a student's copy holds no answers: the course's own solutions
        path = course_lessons() / "solutions" / Path(slot.path).name
    if not path.exists():
        raise LessonCheckError(message("no_solutions_file", lang, path=path, exercise=exercise))
    spec = importlib.util.spec_from_file_location(f"_solutions_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not hasattr(module, slot.name):
        raise LessonCheckError(
            message("no_solution_value", lang, file=path.name, name=slot.name, exercise=exercise)
        )
    return getattr(module, slot.name)


def _resolve(exercise, answer, what, lang, adapt=None):
    """``(answer, filled)``; ``None`` when unanswered outside solutions mode."""
    if answer is not None:
        return (adapt(answer) if adapt else answer), False
    slot = find_slot(caller())
    if solutions_mode():
        value = _solution(slot, exercise, lang)
        return (adapt(value) if adapt else value), True
    if slot.name is None:
        print(message("replace_none", lang, exercise=exercise, what=what))
    else:
        print(message("edit_slot", lang, exercise=exercise, where=slot.where(what, lang)))
    return None, False


def _fail(exercise, text, lang):
    text = message("not_yet", lang, exercise=exercise, message=text)
    print(text)
    if solutions_mode():
        raise LessonCheckError(text)
    return False


def _lesson_file():
    """The file of the lesson cell that called the check (None in a notebook)."""
    frame = caller()
    return frame.f_code.co_filename if frame is not None else None


def _correct(exercise, answer, detail, lang):
    if not solutions_mode():  # the student's progress, never the solutions'
        climb(exercise, answer, correct=True, where=_lesson_file())
    print(message("correct", lang, exercise=exercise, detail=detail))
    return True


def _wrong(exercise, answer, reply, lang, hint="", what=None):
    """Print a wrong answer's reply at its rung of the hint ladder (:mod:`.ladder`).

    ``reply(reveal)`` is the diagnosis, with the correct value only when ``reveal``; every
    wrong try repeats the file and line to edit.
    """
    rung = climb(exercise, answer, where=_lesson_file()) if not solutions_mode() else None
    reveal = rung is None or rung.reveal
    parts = [reply(reveal)]
    if hint and (rung is None or rung.hint):
        parts.append(message("hint", lang, hint=hint))
    if not reveal:
        parts.append(message("answer_hidden", lang, wrong=rung.wrong, after=REVEAL_AFTER))
    parts.append(message("edit_again", lang, where=find_slot(caller()).where(what, lang)))
    return _fail(exercise, " ".join(parts), lang)


def check(
    exercise, answer, expected, rel=1e-6, unit="", ranks=None, given=(), alternatives=(), hint=""
):
    """Compare a predicted number with what collsim computed (relative tolerance ``rel``).

    ``unit`` ("B", "s", "B/s", "x", "GPUs", ...) formats both numbers (bytes in binary
    units, rates in GB/s, times in s/ms/us/ns); a string answer such as ``"14MiB"`` or
    ``"2ms"`` is read in that unit.  ``ranks`` is the K of the exercise, so a K-fold,
    1/K, (K-1)/K or 2(K-1)/K mistake is named; ``given`` lists the exercise's other
    :class:`Quantity` records and ``alternatives`` the other definitions a student may use
    (:class:`Alternative`), so that a wrong answer is explained by them; ``hint`` is the
    second wrong try's stronger hint.  Returns True when correct, False when wrong, None
    when unanswered.
    """
    lang = _language()
    what = message("what_number", lang, unit=unit_name(unit, lang))
    answer, _ = _resolve(exercise, answer, what, lang)
    if answer is None:
        return None
    value, problem = as_number(answer, unit, lang)
    if problem:
        return _wrong(exercise, answer, lambda reveal: problem, lang, hint, what)
    if math.isclose(value, float(expected), rel_tol=rel, abs_tol=1e-300):
        return _correct(exercise, answer, quantity(expected, unit), lang)
    said, want = distinct(value, expected, unit)
    how = explain_number(
        value,
        expected,
        rel=rel,
        ranks=ranks,
        lang=lang,
        unit=unit,
        quantities=given,
        alternatives=alternatives,
    )

    def reply(reveal):
        text = message("said", lang, said=said, how=how)
        return text + (" " + message("answer_is", lang, want=want) if reveal else "")

    return _wrong(exercise, answer, reply, lang, hint, what)


def check_array(exercise, answer, expected, rtol=0.0, atol=0.0, unit="", hint=""):
    """Compare an array answer element by element; a wrong one says which shape or which
    elements differ (how many, the first few, and their expected values once revealed)."""
    lang = _language()
    what = message("what_array", lang)
    answer, _ = _resolve(exercise, answer, what, lang)
    if answer is None:
        return None
    if not describe_difference(answer, expected, rtol, atol, unit, lang):
        detail = message("all_elements_agree", lang, count=size_of(expected))
        return _correct(exercise, answer, detail, lang)

    def reply(reveal):
        return describe_difference(answer, expected, rtol, atol, unit, lang, reveal)

    return _wrong(exercise, answer, reply, lang, hint, what)


def _case_quantities(parameters, args, given):
    """The case's numeric arguments as :class:`Quantity` records, named by the reference's
    parameters and described by ``given`` ({parameter: meaning})."""
    return [
        Quantity(name, float(value), given.get(name, name))
        for name, value in zip(parameters, args)
        if isinstance(value, int | float)
        and not isinstance(value, bool)
        and (not given or name in given)  # only the quantities the exercise names
    ]


def _case_alternatives(alternatives, args):
    out = []
    for alt in alternatives:
        value = alt.value(*args) if callable(alt.value) else alt.value
        out.append(Alternative(alt.name, value, alt.why))
    return out


def check_function(
    exercise,
    function,
    reference,
    cases,
    compare=None,
    unit="",
    adapt=None,
    given=None,
    alternatives=(),
    hint="",
):
    """Run a student's ``function`` and the ``reference`` on every case (a tuple of
    arguments) and report the first case where they differ, and how.

    Each case is shown with the reference's parameter names (``case 1: r=0, s=1, K=4``);
    ``given`` ({parameter: meaning}) says what each one counts, so that a wrong result is
    explained by them, and ``alternatives`` may be functions of the case's arguments.
    ``compare(got, want)`` decides equality (default: exact, element by element, so lists
    of arrays work).  ``adapt`` turns the answer into what the cases call, e.g. a rank
    program into a function that runs it on a cluster; it also wraps the solution.
    """
    lang = _language()
    what = message("what_function", lang)
    parameters = _parameters(reference)
    raw = function
    if function is not None and not callable(function):
        problem = message(
            "not_a_function", lang, answer=short(function, 60), parameters=", ".join(parameters)
        )
        return _wrong(exercise, raw, lambda reveal: problem, lang, hint, what)
    try:
        function, _ = _resolve(exercise, function, what, lang, adapt)
    except Exception as exc:  # adapt() met the student's function and it broke
        problem = message("cannot_run", lang, error=type(exc).__name__, text=exc)
        return _wrong(exercise, raw, lambda reveal: problem, lang, hint, what)
    if function is None:
        return None
    for i, args in enumerate(cases):
        label = short_args(args, parameters)
        want = reference(*args)
        try:
            got = function(*args)
        except Exception as exc:  # the student's code: report, don't crash the lesson
            raised = message(
                "case_raised", lang, case=i + 1, args=label, error=type(exc).__name__, text=exc
            )
            return _wrong(exercise, raw, lambda reveal, text=raised: text, lang, hint, what)
        context = dict(
            quantities=_case_quantities(parameters, args, given or {}),
            alternatives=_case_alternatives(alternatives, args),
        )
        differs = describe_difference(got, want, unit=unit, lang=lang, **context)
        try:
            same = compare(got, want) if compare else not differs
        except Exception:  # the student's value would not compare: it is not the answer
            same = False
        if not same:

            def reply(reveal, got=got, want=want, label=label, case=i + 1, context=context):
                how = describe_difference(got, want, unit=unit, lang=lang, reveal=reveal, **context)
                if not how:
                    how = (
                        message("got_expected", lang, got=short(got), want=short(want))
                        if reveal
                        else message("got_only", lang, got=short(got))
                    )
                return message("case_differs", lang, case=case, args=label, how=how)

            return _wrong(exercise, raw, reply, lang, hint, what)
    return _correct(exercise, raw, message("all_cases_agree", lang, count=len(cases)), lang)


def _parameters(reference):
    """The reference's parameter names, which label each case's arguments."""
    try:
        return list(inspect.signature(reference).parameters)
    except (TypeError, ValueError):  # a builtin without a signature: unlabelled cases
        return []


def check_rank(exercise, answer, expected, ranks, why, about=None, hint=""):
    """Check a rank number.  ``why`` says what makes ``expected`` the answer; ``about``
    maps ranks to what each one was doing, so a wrong rank is told why it is not it.

    >>> check_rank("demo", 1, expected=3, ranks=4, why="it never joined",
    ...            about={1: "it waits in all_reduce #2"})  # doctest: +ELLIPSIS
    Not yet. demo: you named rank 1, but it waits in all_reduce #2. (Wrong tries: 1; ...
    False
    """
    lang = _language()
    what = message("what_rank", lang, last=ranks - 1)
    answer, _ = _resolve(exercise, answer, what, lang)
    if answer is None:
        return None
    problem = rank_problem(answer, ranks, lang)
    if problem:
        return _wrong(exercise, answer, lambda reveal: problem, lang, hint, what)
    if int(answer) == int(expected):
        detail = message("rank_is", lang, rank=int(expected), why=why)
        return _correct(exercise, answer, detail, lang)
    state = (about or {}).get(int(answer))
    said = (
        message("named_rank_state", lang, rank=int(answer), state=state)
        if state
        else message("named_rank", lang, rank=int(answer))
    )

    def reply(reveal):
        if not reveal:
            return said + "."
        return message("rank_wrong", lang, said=said, rank=int(expected), why=why)

    return _wrong(exercise, answer, reply, lang, hint, what)


def one_message_slips(alpha, beta, nbytes):
    """The slips of a one-message time α + n/β, in the lesson's language, for ``check(...,
    **teach.one_message_slips(alpha, beta, nbytes))``."""
    return _one_message_slips(alpha, beta, nbytes, _language())
