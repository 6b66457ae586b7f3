"""Every lesson runs headless as a script, with every exercise filled from the solutions,
and every check passes; the terminal runner (`collsim lesson`) and the tour work with stdin
closed, name the file and line of an unanswered exercise, and number steps from 1."""

import ast
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from collsim.cli import main
from collsim.cli.lesson import cells, find_lessons, numbered_cells

ROOT = Path(__file__).resolve().parents[1]
LESSONS = ROOT / "lessons"
FILES = sorted(find_lessons(LESSONS).values())
CHECKS = {"check", "check_array", "check_function", "check_rank"}
# decimal sizes ("500 KB", "112 GB") and raw rates ("1e+11 B/s") are what item 21 removed
DECIMAL_SIZE = re.compile(r"\d\s?[KMGTP]B\b(?!/s)")
RAW_RATE = re.compile(r"\de[+-]?\d+\s?B/s")


def test_there_are_lessons():
    assert len(FILES) >= 1


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_lesson_runs_and_every_check_passes(path, tmp_path):
    env = dict(
        os.environ, COLLSIM_SOLUTIONS="1", MPLBACKEND="Agg", COLLSIM_LESSON_OUT=str(tmp_path)
    )
    done = subprocess.run(
        [sys.executable, str(path)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Not yet" not in done.stdout
    assert "Correct!" in done.stdout  # at least one exercise was checked
    assert list(tmp_path.glob("*.png")), "a lesson draws at least one picture"
    # one formatter: binary sizes, rates in GB/s (item 21)
    assert not DECIMAL_SIZE.findall(done.stdout), DECIMAL_SIZE.findall(done.stdout)
    assert not RAW_RATE.findall(done.stdout), RAW_RATE.findall(done.stdout)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_lesson_shape(path):
    parts = cells(path.read_text(encoding="utf-8"))
    kinds = [k for k, _ in parts]
    assert kinds[0] == "markdown" and "code" in kinds
    assert "takeaways" in parts[-1][1].lower(), "the last cell is the takeaways"
    assert (LESSONS / "solutions" / path.name).exists(), "solutions live apart"


def _check_calls(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    calls = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and getattr(n.func, "attr", None) in CHECKS
    ]
    return tree, sorted(calls, key=lambda n: n.lineno)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_every_exercise_has_its_own_answer_slot_and_the_solutions_define_it(path):
    tree, calls = _check_calls(path)
    assert calls
    slots = []
    for call in calls:
        answer = call.args[1]
        assert isinstance(answer, ast.Name), f"line {call.lineno}: pass the answer slot itself"
        slots.append(answer.id)
    assert len(set(slots)) == len(slots), f"an answer name is reused: {slots}"
    assert all(name.endswith("_answer") for name in slots), slots
    assigned = [
        t.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign)
        for t in n.targets
        if isinstance(t, ast.Name)
    ]
    for name in slots:
        assert assigned.count(name) == 1, f"{name} must be assigned once (= None)"
    spec = importlib.util.spec_from_file_location("_sol", LESSONS / "solutions" / path.name)
    solutions = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(solutions)
    missing = [name for name in slots if not hasattr(solutions, name)]
    assert not missing, f"solutions/{path.name} does not define {missing}"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_every_numeric_check_states_its_unit(path):
    _, calls = _check_calls(path)
    for call in calls:
        if call.func.attr == "check":
            assert any(k.arg == "unit" for k in call.keywords), f"line {call.lineno}: no unit="


# course-material numbers in lessons, solutions, teach, the tour and the examples are
# caught by tests/test_product_text.py, which reads every product file


def test_the_batch64_example_has_a_topic_name():
    assert (ROOT / "examples" / "dp_batch64.py").exists()
    assert not (ROOT / "examples" / "seed004_dp_batch64.py").exists()


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_lesson_text_numbers_steps_from_1(path):
    # "step 0" may only mean the initial state (item 16)
    prose = re.sub(r"\n#\s*", " ", path.read_text(encoding="utf-8"))  # comment lines joined
    for match in re.finditer(r"step 0\b.{0,40}", prose):
        assert "initial state" in match.group(0), match.group(0)


def test_lesson_4_chunk_rule_takes_the_1_based_step():
    solution_file = LESSONS / "solutions" / "04_ring_allreduce.py"
    spec = importlib.util.spec_from_file_location("_sol4", solution_file)
    solutions = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(solutions)
    # the step-through prints "step 1 of 6: r0 -> r1 chunk 3" for K = 4
    assert solutions.chunk_sent_answer(0, 1, 4) == 3
    assert [solutions.chunk_sent_answer(r, 1, 4) for r in range(4)] == [3, 0, 1, 2]


def test_unanswered_exercise_prints_what_to_do_and_does_not_fail(capsys, monkeypatch):
    from collsim import teach

    monkeypatch.delenv("COLLSIM_SOLUTIONS", raising=False)
    assert teach.check("x.1", None, expected=3, unit="GPUs") is None
    assert "replace None" in capsys.readouterr().out


def test_wrong_answer_says_exactly_what_differs(capsys, monkeypatch):
    from collsim import teach

    monkeypatch.delenv("COLLSIM_SOLUTIONS", raising=False)
    monkeypatch.setenv("COLLSIM_REVEAL", "1")  # the expected values, asked for
    assert teach.check_function("x.2", lambda a: a + 1, lambda a: a * 2, [(1,), (3,)]) is False
    out = capsys.readouterr().out
    assert "case 2" in out and "got 4, expected 6" in out


def test_lesson_list_command(capsys):
    assert main(["lesson", "list"]) == 0
    out = capsys.readouterr().out
    for path in FILES:
        assert f"{int(path.name[:2]):>2}  " in out


def test_missing_lessons_folder_says_where_to_get_them(capsys, tmp_path):
    assert main(["lesson", "list", "--dir", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert "nowhere: no such folder" in err and "collsim lesson init" in err


def test_lesson_help_says_dir_executes_the_files(capsys):
    with pytest.raises(SystemExit):
        main(["lesson", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "EXECUTES the Python code" in help_text


TINY_LESSON = """\
# %% [markdown]
# # 1. Tiny
# A lesson with one exercise.

# %%
from collsim import teach

# %%

guess_answer = None  # your prediction: bytes in a KiB

# %%
teach.check("1.1", guess_answer, expected=1024, unit="B")

# %% [markdown]
# ## Takeaways
# - none
"""


@pytest.fixture
def tiny_lessons(tmp_path):
    folder = tmp_path / "lessons"
    folder.mkdir()
    (folder / "01_tiny.py").write_text(TINY_LESSON, encoding="utf-8")
    (folder / "solutions").mkdir()
    (folder / "solutions" / "01_tiny.py").write_text("guess_answer = 2**10\n", encoding="utf-8")
    return folder


def test_cells_remember_their_file_lines():
    numbered = numbered_cells(TINY_LESSON)
    lines = TINY_LESSON.splitlines()
    for cell in numbered:
        assert lines[cell.line - 1] == cell.source.splitlines()[0]


def test_terminal_runner_names_the_file_and_line_of_the_answer_slot(
    tiny_lessons, capsys, monkeypatch
):
    monkeypatch.delenv("COLLSIM_SOLUTIONS", raising=False)
    assert main(["lesson", "1", "--no-pause", "--dir", str(tiny_lessons)]) == 0
    out = capsys.readouterr().out
    slot_line = TINY_LESSON.splitlines().index(
        "guess_answer = None  # your prediction: bytes in a KiB"
    )
    assert f"01_tiny.py:{slot_line + 1}: set guess_answer = ..." in out
    assert "your prediction: bytes in a KiB" in out


def test_terminal_runner_fills_the_answer_from_the_solution_of_that_name(
    tiny_lessons, capsys, monkeypatch
):
    monkeypatch.setenv("COLLSIM_SOLUTIONS", "1")
    assert main(["lesson", "1", "--no-pause", "--dir", str(tiny_lessons)]) == 0
    assert "Correct! 1.1: 1,024 B (1 KiB)" in capsys.readouterr().out


def test_a_cell_that_raises_stops_the_lesson_with_its_line(tiny_lessons, capsys):
    (tiny_lessons / "02_broken.py").write_text("# %%\nx = 1\n\n# %%\n1 / 0\n", encoding="utf-8")
    assert main(["lesson", "2", "--no-pause", "--dir", str(tiny_lessons)]) == 1
    err = capsys.readouterr().err
    assert "02_broken.py:5: the cell starting here raised ZeroDivisionError" in err


@pytest.mark.parametrize(
    "command",
    [["tour"], ["tour", "--no-pause"], ["lesson", "1"], ["lesson", "1", "--no-pause"]],
    ids=" ".join,
)
def test_stdin_closed_does_not_crash(command, tiny_lessons, monkeypatch, capsys):
    # `collsim tour <&-`: Python then has sys.stdin = None
    monkeypatch.setattr(sys, "stdin", None)
    extra = ["--dir", str(tiny_lessons)] if command[0] == "lesson" else []
    assert main([*command, *extra]) == 0
    assert "step 1 of 6" in capsys.readouterr().out or command[0] == "lesson"


def test_stdin_closed_for_real_in_a_subprocess(tiny_lessons):
    # the real thing, fd 0 closed before Python starts
    done = subprocess.run(
        [sys.executable, "-m", "collsim", "lesson", "1", "--dir", str(tiny_lessons)],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=lambda: os.close(0),
    )
    assert done.returncode == 0, done.stderr
    assert "isatty" not in done.stderr


def test_lesson_4_pictures_show_the_steps_its_text_names():
    # "After step 3 of 6 (the last of the reduce-scatter) ... starting with step 4"
    import numpy as np

    import collsim
    from collsim.viz.ring import ring_figure

    source = (LESSONS / "04_ring_allreduce.py").read_text(encoding="utf-8")
    calls = re.findall(r"ring_figure\(result, step=(K(?: - 1)?)\)", source)
    assert calls == ["K - 1", "K"]
    k = 4
    result = collsim.Cluster(collsim.topology.ring(k)).all_reduce([np.ones(8)] * k)
    steps = {"K - 1": k - 1, "K": k}
    titles = [ring_figure(result, step=steps[c])._suptitle.get_text() for c in calls]
    assert "step 3 of 6" in titles[0] and "step 4 of 6" in titles[1]


# ---- the lesson order and every reference to a lesson's number --------------------------

ORDER = [
    "why_not_one_device",
    "data_parallel",
    "sharding",
    "ring_allreduce",
    "cost_models",
    "where_scaling_stops",
    "tensor_parallel",
    "pipeline_parallel",
    "context_parallel",
    "putting_it_together",
    "debugging_a_hang",
    "real_hardware",
    "toy_to_real_code",
    "mixture_of_experts",
    "serving_a_model",
]
# what a person reads that names lessons by number or by file
REFERRING = [
    ROOT / "README.md",
    ROOT / "CONTRIBUTING.md",
    *sorted(ROOT.glob("docs/*.md")),
    *sorted(LESSONS.glob("*.py")),
    *sorted((LESSONS / "solutions").glob("*.py")),
    *sorted((ROOT / "examples").glob("*.py")),
    *sorted((ROOT / "collsim").rglob("*.py")),
]
LESSON_NUMBER = re.compile(r"\b[Ll]essons? (\d+)(?:(?: and |–|-|, )(\d+))?")
LESSON_PATH = re.compile(r"lessons/(?:solutions/)?(\d\d_[a-z_]+\.py)")


def test_the_lessons_run_01_to_15_with_sharding_third_and_context_parallel_ninth():
    found = find_lessons(LESSONS)
    assert sorted(found) == list(range(1, len(ORDER) + 1))
    assert [found[n].stem[3:] for n in sorted(found)] == ORDER
    assert found[3].name == "03_sharding.py"
    assert found[9].name == "09_context_parallel.py"
    assert sorted(p.name for p in (LESSONS / "solutions").glob("[0-9][0-9]_*.py")) == [
        p.name for _, p in sorted(found.items())
    ]


@pytest.mark.parametrize("path", REFERRING, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_lesson_number_and_file_named_exists(path):
    text = path.read_text(encoding="utf-8")
    numbers = set(find_lessons(LESSONS))
    for match in LESSON_NUMBER.finditer(text):
        for n in filter(None, match.groups()):
            assert int(n) in numbers, f"{path.name}: {match.group(0)!r} names no lesson"
    for match in LESSON_PATH.finditer(text):
        assert (LESSONS / match.group(1)).exists(), f"{path.name}: {match.group(0)} is gone"


def _tags(path):
    """The lesson's exercise ids ("3.1") and picture names ("03_...") as its code says."""
    tree, calls = _check_calls(path)
    ids = [c.args[0].value for c in calls]
    shows = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and getattr(n.func, "attr", None) == "show" and len(n.args) == 2
    ]
    return ids, [_leading_text(s.args[1]) for s in shows]


def _leading_text(node):
    """The literal start of a picture name: "04_x", "07_" + name, f"03_{name}"."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.BinOp):
        return _leading_text(node.left)
    if isinstance(node, ast.JoinedStr) and isinstance(node.values[0], ast.Constant):
        return node.values[0].value
    return ""  # a name with no literal start cannot carry the number: the test says so


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_exercises_pictures_title_and_solutions_carry_the_lesson_number(path):
    number = int(path.name[:2])
    ids, pictures = _tags(path)
    assert ids and all(i.startswith(f"{number}.") for i in ids), ids
    assert pictures and all(name.startswith(f"{number:02d}_") for name in pictures), pictures
    text = path.read_text(encoding="utf-8")
    assert text.splitlines()[1].startswith(f"# # {number}. "), text.splitlines()[1]
    prose = re.findall(r"\*\*Exercise (\d+)\.\d+", text)
    assert prose and all(int(n) == number for n in prose), prose
    solutions = (LESSONS / "solutions" / path.name).read_text(encoding="utf-8")
    assert solutions.startswith(f'"""Solutions to lesson {number}'), solutions[:60]
    comments = re.findall(r"^# (\d+)\.\d+", solutions, flags=re.M)
    assert all(int(n) == number for n in comments), comments


def test_the_readme_lists_every_lesson_in_order_with_its_title():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    items = re.findall(r"^(\d+)\. \[([^\]]+)\]\(lessons/(\d\d_[a-z_]+\.py)\)", readme, re.M)
    found = find_lessons(LESSONS)
    assert [(int(n), f) for n, _, f in items] == [(n, p.name) for n, p in sorted(found.items())]
    for n, title, _ in items:
        header = found[int(n)].read_text(encoding="utf-8").splitlines()[1]
        assert header.startswith(f"# # {n}. {title}"), (header, title)


def test_putting_it_together_names_every_strategy_of_the_nd_guide_and_the_commands():
    text = (LESSONS / "10_putting_it_together.py").read_text(encoding="utf-8")
    rows = re.findall(r"^# \| ([A-Z+]+) \| (?:`|all four)", text, flags=re.M)
    assert rows == ["DP", "FSDP", "TP", "CP", "HSDP", "FSDP+TP", "FSDP+CP", "HSDP+TP", "HSDP+TP+CP"]
    for command in ("collsim strategies", "collsim verify cp", "collsim verify nd"):
        assert f"`{command}`" in text, command


def test_context_parallel_lesson_draws_the_ring_from_the_trace_records():
    # the step grid and the work bars are read from RingStep spans, not recomputed
    text = (LESSONS / "09_context_parallel.py").read_text(encoding="utf-8")
    for needed in (
        "isinstance(c.meta, RingStep)",
        "isinstance(t.tag, RingMessage)",
        "causal_attention_flops",
        "ulysses_attention_bytes",
        ".match",
    ):
        assert needed in text, needed


def test_the_help_counts_every_lesson():
    # `collsim --help` and `collsim lesson --help` say how many lessons `lesson list` shows
    from collsim.cli import build_parser

    count = len(find_lessons(LESSONS))
    assert f"all {count}" in build_parser().format_help().replace("\n", " ")
    assert f"all {count})" in (ROOT / "collsim/cli/lesson.py").read_text(encoding="utf-8")
