"""tools/mpi4py_conformance.py reads unittest's summary of rank 0 as collsim exec and Open
MPI's ``mpiexec --tag-output`` print it, and builds the table docs/mpi4py-conformance.md
quotes (mpi4py's suite itself is not in the repository, so CI checks the reading)."""

import importlib.util
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def tool():
    spec = importlib.util.spec_from_file_location(
        "mpi4py_conformance", ROOT / "tools" / "mpi4py_conformance.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# what Open MPI's --tag-output prints: a rank's tag may end a line it interleaved with
OPEN_MPI = """[1,1]<stderr>:Ran 11 tests in 0.006s
[1,0]<stderr>:Ran 12 tests in 0.005s[1,0]<stderr>:
[1,0]<stderr>:FAILED (failures=2, errors=1, skipped=4, expected failures=1)[1,0]<stderr>:
[1,1]<stderr>:OK"""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (OPEN_MPI, ("failed", 12, 4, 2, 1, 5)),
        ("[1,0]<stderr>:Ran 3 tests in 1s\n[1,0]<stderr>:OK (skipped=1)", ("ok", 3, 2, 0, 0, 1)),
        ("[1,0]<stderr>:Traceback ...\ncollsim: error: rank 0 raised", ("crash", 0, 0, 0, 0, 0)),
    ],
)
def test_rank_0s_summary_is_read_as_unittest_counts_it(text, expected):
    row = tool().parse_summary("test_x", 2, text)
    assert (row.outcome, row.run, row.passed, row.failures, row.errors, row.skipped) == expected


def test_the_command_runs_one_module_under_collsim_exec_or_mpiexec():
    t = tool()
    ours = t.command("/m/test", "test_op", 4, None, "python")
    assert ours[:5] == ["python", "-m", "collsim", "exec", "-n"] and ours[5] == "4"
    assert ours[-3:] == ["/m/test/runtests.py", "-i", "^test_op\\.py$"]
    real = t.command("/m/test", "test_op", 2, "mpiexec --oversubscribe", "py")
    assert real[:5] == ["mpiexec", "--oversubscribe", "--tag-output", "-n", "2"]


def test_the_table_caps_each_module_at_real_mpis_passes(tmp_path):
    t = tool()
    ours = [
        t.ModuleResult("test_op", 1, "failed", 11, 12, 0, 0, 0)._asdict(),
        t.ModuleResult("test_comm", 1, "crash")._asdict(),
    ]
    real = [
        t.ModuleResult("test_op", 1, "ok", 11, 10, 0, 0, 1)._asdict(),
        t.ModuleResult("test_comm", 1, "ok", 101, 85, 0, 0, 16)._asdict(),
    ]
    table = t.table(ours, real, ranks=(1,))
    assert "| test_op | 12 / 10 (11, 0, 0, 0) |" in table
    assert "| test_comm | 0 / 85 (crash) |" in table
    assert "10 / 95 (11 %)" in table  # all modules: min(12, 10) + 0 of 10 + 85
    (tmp_path / "a.json").write_text(json.dumps(ours))
    (tmp_path / "b.json").write_text(json.dumps(real))
    assert (
        t.main(["--table", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--ranks", "1"]) == 0
    )


def test_failing_subtests_give_a_lower_bound_not_a_negative_count():
    text = "[1,0]<stderr>:Ran 11 tests in 2s\n[1,0]<stderr>:FAILED (failures=291, errors=292)"
    assert tool().parse_summary("test_x", 1, text).passed == 0


def _passes(cell):
    ours, real = re.match(r"\**(\d+) / (\d+)", cell).groups()
    return int(ours), int(real)


def test_the_readme_table_sums_the_conformance_page_s_rows():
    """README's mpi4py table is the conformance page's rows summed by area, each module's
    passes counted up to real MPI's: an edit of one that forgets the other fails here."""
    root = Path(__file__).resolve().parents[1]
    page = (root / "docs" / "mpi4py-conformance.md").read_text(encoding="utf-8")
    rows = {
        name: [c.strip() for c in rest.split("|")]
        for name, rest in re.findall(r"^\| (test_\w+) \|(.*)\|$", page, flags=re.M)
    }
    readme = (root / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Programs written elsewhere", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("| ") and "`test_" in line]
    assert len(lines) >= 10
    totals = [[0, 0] for _ in range(3)]
    for line in lines:
        cells = [c.strip() for c in line.strip("|").split("|")]
        modules = re.findall(r"`(test_\w+)`", cells[1])
        for n, cell in enumerate(cells[2:5]):
            ours = sum(min(_passes(rows[m][n])) for m in modules)
            real = sum(_passes(rows[m][n])[1] for m in modules)
            assert _passes(cell) == (ours, real), (modules, n, cell)
            totals[n][0] += ours
            totals[n][1] += real
    total_line = next(line for line in section.splitlines() if "**these modules**" in line)
    cells = [c.strip() for c in total_line.strip("|").split("|")][2:5]
    assert [list(_passes(cell)) for cell in cells] == totals
