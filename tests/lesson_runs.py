"""Run a lesson the way a student does, with chosen answers written into its answer slots.

A copy of ``lessons/`` goes to a temporary folder; :func:`fill` writes an answer where the
student would (``ring_bytes_answer = None`` becomes ``ring_bytes_answer = 1.5e8``, on the
same line, so every file:line stays true); :func:`run` runs it through ``collsim lesson N``
in this process and returns what it printed, split at each exercise's check, with what each
check was called with (recorded by a spy around :mod:`collsim.teach`'s checks).
"""

import ast
import contextlib
import io
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from collsim import teach
from collsim.cli import main
from collsim.cli.lesson import find_lessons

ROOT = Path(__file__).resolve().parents[1]
LESSONS = ROOT / "lessons"
NUMBERS = sorted(find_lessons(LESSONS))
CHECKS = ("check", "check_array", "check_function", "check_rank")


@dataclass(frozen=True)
class Slot:
    """One exercise's answer slot in the lesson file."""

    exercise: str  # "4.1"
    name: str  # "ring_bytes_answer"
    line: int  # the line of ``name = None``
    kind: str  # which check: "check", "check_function", ...
    none_at: tuple = (0, 0)  # (line, column) of the ``None`` itself


@dataclass
class Call:
    """What one check was called with, and what it printed."""

    exercise: str
    kind: str
    arguments: dict  # the keyword form of every argument but the answer
    printed: str = ""  # the check's own output
    before: str = ""  # everything the lesson printed before this check


@dataclass
class Run:
    status: int
    output: str
    calls: dict = field(default_factory=dict)  # exercise -> Call


def lesson_path(folder, number):
    return find_lessons(Path(folder))[number]


def slots(path):
    """``{exercise: Slot}`` read from the lesson's check calls and assignments."""
    tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    assigned = {
        t.id: (n.lineno, (n.value.lineno, n.value.col_offset))
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant) and n.value.value is None
        for t in n.targets
        if isinstance(t, ast.Name)
    }
    found = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and getattr(n.func, "attr", None) in CHECKS:
            exercise, name = n.args[0].value, n.args[1].id
            line, none_at = assigned[name]
            found[exercise] = Slot(exercise, name, line, n.func.attr, none_at)
    return found


def copy_lessons(tmp_path):
    folder = Path(tmp_path) / "lessons"
    shutil.copytree(LESSONS, folder, ignore=shutil.ignore_patterns("ja", "__pycache__"))
    return folder


def fill(path, answers):
    """Write ``answers`` ({slot name: Python source}) into the lesson's slots, line for line."""
    path = Path(path)
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    for slot in slots(path).values():
        if slot.name in answers:
            row, column = slot.none_at  # the None, wherever the formatter put it
            text = lines[row - 1]
            assert text[column : column + 4] == "None", text
            lines[row - 1] = f"{text[:column]}{answers[slot.name]}{text[column + 4 :]}"
    path.write_text("".join(lines), encoding="utf-8")


# The spy around each check.  It is compiled as if it were part of collsim.teach, so that a
# check looking for its caller (the lesson cell, whose answer slot it names) steps over it
# as it steps over its own frames, with this code or any earlier one.
SPY = """
def spy(exercise, answer, *args, **kwargs):
    arguments = dict(zip(names[2:], args), **kwargs)
    start = stream.tell()
    try:
        return real(exercise, answer, *args, **kwargs)
    finally:
        printed = stream.getvalue()[start:]
        calls[exercise] = Call(exercise, kind, arguments, printed, stream.getvalue()[:start])
"""


@contextlib.contextmanager
def _spy(calls, stream):
    """Record every check's arguments and output, and the output before it."""
    originals = {kind: getattr(teach, kind) for kind in CHECKS}

    def wrap(kind):
        real = originals[kind]
        names = real.__code__.co_varnames[: real.__code__.co_argcount]
        scope = dict(names=names, real=real, stream=stream, calls=calls, kind=kind, Call=Call)
        exec(compile(SPY, teach.__file__, "exec"), scope)
        return scope["spy"]

    for kind in CHECKS:
        setattr(teach, kind, wrap(kind))
    try:
        yield
    finally:
        for kind, real in originals.items():
            setattr(teach, kind, real)


def run(folder, number, progress, reveal=False, solutions=False):
    """Run lesson ``number`` of ``folder`` through ``collsim lesson``; a :class:`Run`."""
    stream, calls = io.StringIO(), {}
    env = {
        "COLLSIM_PROGRESS": str(progress),
        "COLLSIM_SOLUTIONS": "1" if solutions else "",
        "COLLSIM_REVEAL": "1" if reveal else "",
        "MPLBACKEND": "Agg",
        "COLLSIM_LESSON_OUT": str(Path(progress).parent / "pictures"),
    }
    before = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        with _spy(calls, stream), contextlib.redirect_stdout(stream):
            with contextlib.redirect_stderr(stream):
                status = main(["lesson", str(number), "--no-pause", "--dir", str(folder)])
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return Run(status, stream.getvalue(), calls)


# written next to a lesson copy as _wrongs.py: a solution, and wrong versions of a function
WRONGS = """
import importlib.util
from pathlib import Path


def solution(lesson, name):
    path = Path(__file__).parent / "solutions" / lesson
    spec = importlib.util.spec_from_file_location("_wrong_solutions", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


def _map(value, how):
    if isinstance(value, (list, tuple)):
        return type(value)(_map(v, how) for v in value)
    return how(value)


def scaled(reference, index):
    return lambda *a: _map(reference(*a), lambda v: v * a[index])


def plus_one(reference):
    return lambda *a: _map(reference(*a), lambda v: v + 1)


def inverse(reference):
    return lambda *a: _map(reference(*a), lambda v: 1 / v)
"""


def with_wrongs(path):
    """``import _wrongs`` on the lesson's first import line: every line number stays."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    first = next(i for i, line in enumerate(lines) if line.startswith(("import ", "from ")))
    lines[first] = "import _wrongs; " + lines[first]
    path.write_text("".join(lines), encoding="utf-8")
    (path.parent / "_wrongs.py").write_text(WRONGS, encoding="utf-8")
    sys.modules.pop("_wrongs", None)
