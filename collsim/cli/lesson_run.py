"""Running a lesson in the terminal: cell by cell, or up to one exercise's check.

``collsim lesson 4`` prints each cell's prose and code, then runs it; ``--exercise 2`` runs
the cells before exercise 4.2's part quietly (their output is shown only if one raises),
then prints and runs that part, and stops right after its check.
"""

import contextlib
import io
import os
import sys
import traceback
from dataclasses import dataclass

from ..course.catalog import read_lesson
from ..course.cells import Cell, exercises, numbered_cells, prose
from ..errors import CollsimError, ConfigError
from .console import stdin_is_terminal

__all__ = ["Stop", "run_lesson", "stop_at"]

NEXT_CELL = {"en": "  [Enter: next cell] ", "ja": "  [Enter: 次のセルへ] "}
PART = {
    "en": "(exercise {name} of {path}: the cells before line {start} ran quietly; this runs "
    "to its check on line {end})\n",
    "ja": "(演習 {name}、{path}: {start} 行目より前のセルは出力なしで実行しました。"
    "{end} 行目のチェックまで実行します)\n",
}


@dataclass(frozen=True)
class Stop:
    """Where a run of one exercise shows itself and where it ends (file lines, 1-based)."""

    name: str  # "4.2"
    shown_from: int  # the first line after the previous exercise's check
    end: int  # the last line of this exercise's check


def stop_at(text, lesson, exercise):
    """The :class:`Stop` for ``--exercise`` ``exercise`` ("2" or "4.2") of ``lesson``."""
    found = exercises(text)
    wanted = str(exercise).strip()
    name = wanted if "." in wanted else f"{lesson}.{wanted}"
    names = [e.name for e in found]
    if name not in names:
        if not names:
            raise ConfigError(f"--exercise {exercise}: lesson {lesson} has no exercises")
        nearest = min(names, key=lambda n: (abs(_number(n) - _number(name, lesson)), n))
        raise ConfigError(
            f"--exercise {exercise}: lesson {lesson} has no exercise {name}; it has "
            f"{', '.join(names)} (the nearest is {nearest.split('.')[1]}, as --exercise "
            f"{nearest.split('.')[1]})"
        )
    index = names.index(name)
    shown_from = found[index - 1].end + 1 if index else 1
    return Stop(name, shown_from, found[index].end)


def _number(name, lesson=None):
    """The exercise's own number: 2 for "4.2" (a wrong lesson counts as far away)."""
    head, _, tail = name.partition(".")
    try:
        far = 0 if lesson is None or head == str(lesson) else 1000
        return int(tail) + far
    except ValueError:
        return 1000


@contextlib.contextmanager
def _language_set(lang):
    """COLLSIM_LANG while a lesson runs, so its feedback speaks ``lang`` whatever the locale."""
    before = os.environ.get("COLLSIM_LANG")
    os.environ["COLLSIM_LANG"] = lang
    try:
        yield
    finally:
        if before is None:
            del os.environ["COLLSIM_LANG"]
        else:
            os.environ["COLLSIM_LANG"] = before


def run_lesson(path, lang="en", pause=True, stop=None, shown=None):
    """Run the lesson file at ``path`` (to ``stop``'s check when given); returns 0.

    ``shown`` is the path as messages print it (relative to the working folder).
    """
    with _language_set(lang):
        namespace = {"__name__": "__main__", "__file__": str(path)}
        pause = pause and stdin_is_terminal()
        sys.path.insert(0, str(path.parent))
        os.environ.setdefault("MPLBACKEND", "Agg")
        if stop is not None:
            print(
                PART[lang].format(
                    name=stop.name, path=shown or path, start=stop.shown_from, end=stop.end
                )
            )
        for cell in numbered_cells(read_lesson(path)):
            if stop is not None and cell.line > stop.end:
                break
            if stop is not None and _last_line(cell) < stop.shown_from:
                _quietly(cell, path, namespace)
                continue
            pause = _show_and_run(_cut(cell, stop), path, namespace, pause, lang)
    return 0


def _last_line(cell):
    return cell.line + cell.source.count("\n")


def _cut(cell, stop):
    """The cell up to the exercise's check (the lines after it belong to the next part)."""
    if stop is None or _last_line(cell) <= stop.end:
        return cell
    kept = cell.source.splitlines()[: stop.end - cell.line + 1]
    return Cell(cell.kind, "\n".join(kept), cell.line)


def _show_and_run(cell, path, namespace, pause, lang):
    if cell.kind == "markdown":
        print(prose(cell))
    else:
        print("\n".join(">>> " + line for line in cell.source.splitlines()))
        _run_cell(cell, path, namespace)
    print()
    if pause:
        try:
            input(NEXT_CELL[lang])
        except (EOFError, RuntimeError):  # stdin closed meanwhile
            return False
    return pause


def _quietly(cell, path, namespace):
    """Run a code cell with its output held back; shown only if the cell raises."""
    if cell.kind != "code":
        return
    held = io.StringIO()
    try:
        with contextlib.redirect_stdout(held):
            _run_cell(cell, path, namespace)
    except CollsimError:
        sys.stdout.write(held.getvalue())
        raise


def _run_cell(cell, path, namespace):
    # compiled under the lesson's own path and line numbers: teach finds the solutions next
    # to it and prints the line of an answer slot as it is in the file
    code = compile("\n" * (cell.line - 1) + cell.source, str(path), "exec")
    try:
        exec(code, namespace)
    except Exception as exc:  # the lesson's (or the student's) code: show it, then stop
        sys.stdout.flush()
        traceback.print_exc()
        raise CollsimError(
            f"{path}:{cell.line}: the cell starting here raised {type(exc).__name__}: {exc} "
            "(traceback above); fix that cell and run the lesson again"
        ) from None
