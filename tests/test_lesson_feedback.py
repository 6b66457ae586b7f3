"""The lessons' feedback as a student meets it (issue 27, items 1, 2, 3 and 5).

Every lesson runs through ``collsim lesson N`` with answers written into its answer slots,
as a student writes them (``tests/lesson_runs.py``):

- unanswered, it prints no exercise's answer before that exercise's check;
- every slot filled with a wrong value of each kind (scaled by one of the exercise's own
  quantities, off by one, the reciprocal, a value of the wrong type): each reply names the
  cause and the file:line to edit, and never the correct value on a first try;
- the wrong answers a student tried (issue 27's list) get the diagnosis they deserve, and
  the alternative definitions the lessons discuss are answered by name.
"""

import inspect
import math
import re

import pytest
from lesson_runs import NUMBERS, copy_lessons, fill, lesson_path, run, slots, with_wrongs

from collsim.teach.diagnosis import Quantity
from collsim.teach.feedback import quantity
from collsim.units import format_rate, format_size, format_time

KINDS = ("scaled", "off by one", "reciprocal", "wrong type")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return copy_lessons(tmp_path_factory.mktemp("pristine"))


class Unanswered(dict):
    """Each lesson run once with every slot left as None, when first asked for: a Run."""

    def __init__(self, folder, tmp_path_factory):
        super().__init__()
        self.folder, self.tmp = folder, tmp_path_factory

    def __missing__(self, number):
        progress = self.tmp.mktemp(f"unanswered{number}") / "progress.json"
        done = self[number] = run(self.folder, number, progress)
        assert done.status == 0, done.output[-2000:]
        return done


@pytest.fixture(scope="module")
def unanswered(folder, tmp_path_factory):
    return Unanswered(folder, tmp_path_factory)


# ---- predict, then see --------------------------------------------------------------------


def answer_texts(call):
    """The ways a lesson prints this exercise's answer (its unit's formatter, plain digits)."""
    expected, unit = float(call.arguments["expected"]), call.arguments.get("unit", "")
    texts = {quantity(expected, unit)}
    if unit == "B":
        texts |= {format_size(expected), f"{expected:,.0f}", f"{expected:.0f}"}
    elif unit == "s":
        texts.add(format_time(expected))
    elif unit == "B/s":
        texts.add(format_rate(expected))
    elif unit == "fraction":
        texts |= {f"{expected:.2%}", f"{expected:.4g}"}
    elif not expected.is_integer():
        texts |= {f"{expected:.3g}", f"{expected:.4g}", f"{expected:g}"}
    elif abs(expected) >= 1000:  # "12" is in any prose; "12,288" is telling
        texts |= {f"{expected:,.0f}", f"{expected:.0f}"}
    return {t for t in texts if len(re.sub(r"\D", "", t)) >= 2}  # "4 x" is no evidence


# the same digits, printed before for another reason (checked by reading the lessons): the
# line they may appear on
NOT_THE_ANSWER = {
    ("3.3", "801 KiB"): r"^ZeRO-0 ",  # ZeRO-0's model state per rank, 16Ψ: the same bytes
    ("10.4", "768 GPUs"): r"^hint: ",  # the planner offers 768 and 800; 10.4 asks which
    ("7.3", "12288"): r"^bytes each rank sent: ",  # 7.1's dX all-reduce, also 12,288 B
}


def leaks(call, before):
    """The answer's texts printed in ``before``, on a line not known to mean something else."""
    found = []
    for text in answer_texts(call):
        pattern = rf"(?<![\d.,]){re.escape(text)}(?![\d]|[.,]\d)"
        allowed = NOT_THE_ANSWER.get((call.exercise, text))
        lines = [line for line in before.splitlines() if re.search(pattern, line)]
        if any(not (allowed and re.search(allowed, line)) for line in lines):
            found.append(text)
    return found


@pytest.mark.parametrize("number", NUMBERS)
def test_a_lesson_run_before_any_answer_prints_no_answer_before_its_check(number, unanswered):
    run_ = unanswered[number]
    numeric = [c for c in run_.calls.values() if c.kind == "check"]
    assert numeric, "every lesson has numeric predictions"
    leaked = {}
    for call in numeric:
        before = re.sub(r"(?m)^>>> .*$", "", call.before)  # the code shown, not its output
        leaked[call.exercise] = leaks(call, before)
        assert f"Exercise {call.exercise}:" in call.printed  # and the check asks for it
    leaked = {e: texts for e, texts in leaked.items() if texts}
    assert not leaked, f"answers printed before their checks: {leaked}"


# ---- every slot, every kind of wrong answer ----------------------------------------------


def _parameters(call):
    return list(inspect.signature(call.arguments["reference"]).parameters)


def _scaling_parameter(call):
    """The named argument with the largest value in the first case: a function result
    scaled by it differs in the first case that has it above 1."""
    given = call.arguments.get("given") or {}
    first = dict(zip(_parameters(call), call.arguments["cases"][0]))
    numbers = {n: v for n, v in first.items() if n in given and isinstance(v, int | float)}
    return max(numbers, key=lambda n: numbers[n]) if numbers else None


def _scaling_quantity(call):
    """The exercise's first declared quantity other than 0 or 1, else K."""
    given = [q for q in call.arguments.get("given") or () if float(q.value) not in (0.0, 1.0)]
    if given:
        return given[0]
    ranks = call.arguments.get("ranks")
    return Quantity("K", ranks, "ranks") if ranks else None


def wrong_answer(kind, lesson, slot, call):
    """``(Python source for the slot, a phrase the reply must contain)``, or None where the
    kind does not apply (a rank has no reciprocal, one second more is no counting slip)."""
    if call.kind == "check_rank":
        expected, ranks = int(call.arguments["expected"]), int(call.arguments["ranks"])
        if kind == "wrong type":
            return '"two"', "is not a rank"
        if kind == "reciprocal":
            return None
        other = (expected + (1 if kind == "off by one" else 2)) % ranks
        return str(other), f"you named rank {other}"
    if call.kind == "check_function":
        if kind == "wrong type":
            return "42", "is not a function"
        if call.arguments.get("adapt") is not None:
            return None  # a rank program: lesson 11's own tests give it wrong programs
        solution = f"_wrongs.solution({lesson!r}, {slot.name!r})"
        if kind == "scaled":
            name = _scaling_parameter(call)
            if name is None:
                return None
            return f"_wrongs.scaled({solution}, {_parameters(call).index(name)})", f"{name} = "
        if kind == "off by one":
            if call.arguments.get("unit", "") in ("s", "B/s", "B"):
                return None  # a closed form's bytes or seconds plus one: no counting slip
            return f"_wrongs.plus_one({solution})", "one too many"
        if call.arguments.get("unit", "") == "":
            return None  # indices and positions: 0 has no reciprocal
        return f"_wrongs.inverse({solution})", "reciprocal"
    expected, unit = float(call.arguments["expected"]), call.arguments.get("unit", "")
    if kind == "wrong type":
        return '"lots"', "lots"

    def named(wrong, otherwise):  # an alternative of that value is named instead
        alternatives = call.arguments.get("alternatives", ())
        same = [a.name for a in alternatives if math.isclose(float(a.value), wrong, rel_tol=1e-9)]
        return same[0] if same else otherwise

    if kind == "scaled":
        q = _scaling_quantity(call)
        if q is None:
            return None
        wrong = expected * float(q.value)
        return repr(wrong), named(wrong, f"{q.symbol} = ")
    if kind == "off by one":
        rel = call.arguments.get("rel", 1e-6)
        if unit in ("s", "B/s") or abs(expected) <= 2 or rel * abs(expected) >= 1:
            return None  # no counting slip in a second; 1 + 1 is 2 x 1; 1 byte in 100 MiB
        if unit == "B" and not expected.is_integer():
            return None  # a closed form's fraction of a byte: plus one is no counting slip
        return repr(expected + 1), named(expected + 1, "one too many")
    if abs(abs(expected) - 1) < 1e-9:
        return None  # 1 is its own reciprocal
    return repr(1 / expected), "reciprocal"


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("number", NUMBERS)
def test_every_wrong_answer_names_its_cause_and_the_line_and_not_the_answer(
    number, kind, unanswered, tmp_path
):
    folder = copy_lessons(tmp_path)
    path = lesson_path(folder, number)
    found = slots(path)
    answers, causes = {}, {}
    for exercise, call in unanswered[number].calls.items():
        wrong = wrong_answer(kind, path.name, found[exercise], call)
        if wrong is not None:
            answers[found[exercise].name], causes[exercise] = wrong
    assert answers or kind in ("off by one", "reciprocal"), f"lesson {number}: no {kind} slot"
    fill(path, answers)
    with_wrongs(path)
    done = run(folder, number, tmp_path / "progress.json")
    assert done.status == 0, done.output[-3000:]
    for exercise, cause in causes.items():
        call = done.calls[exercise]
        reply = " ".join(call.printed.split())
        assert reply.startswith(f"Not yet. {exercise}:"), reply
        causes_named = cause if isinstance(cause, tuple) else (cause,)
        assert any(c in reply for c in causes_named), (
            f"{exercise} ({kind}): {cause!r} not in {reply!r}"
        )
        assert f"{path.name}:{found[exercise].line}:" in reply, reply  # the line to edit
        assert "The answer is" not in reply and ", expected " not in reply, reply
        if call.kind == "check":
            want = quantity(float(call.arguments["expected"]), call.arguments.get("unit", ""))
            assert f" {want}" not in reply.split(":", 2)[-1], reply
