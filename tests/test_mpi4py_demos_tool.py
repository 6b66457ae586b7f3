"""tools/mpi4py_demos.py runs mpi4py's demo programs under ``collsim exec`` and a real
``mpiexec`` and compares each rank's lines (mpi4py's demos are not in the repository, so CI
checks the collsim side, the reading and the comparison on programs of the same shape)."""

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

HELLO = """from mpi4py import MPI
name = MPI.Get_processor_name()
print(f"Hello, World! I am process {MPI.COMM_WORLD.rank} of {MPI.COMM_WORLD.size} on {name}.")
"""


def tool():
    spec = importlib.util.spec_from_file_location(
        "mpi4py_demos", ROOT / "tools" / "mpi4py_demos.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_each_ranks_lines_under_collsim_exec_are_read_back_in_rank_order(tmp_path):
    t = tool()
    (tmp_path / "helloworld.py").write_text(HELLO)
    status, ranks, error = t.run_collsim(tmp_path, t.DemoRun("helloworld.py", 3), sys.executable)
    assert (status, error) == (0, "")
    masked = [t.normalise(r.stdout, t.COLLSIM_NAME) for r in ranks]
    assert masked == [
        (f"Hello, World! I am process {r} of 3 on <processor name>.",) for r in range(3)
    ]


def test_standard_input_reaches_rank_0_and_a_failing_rank_is_named(tmp_path):
    t = tool()
    (tmp_path / "ask.py").write_text(
        "from mpi4py import MPI\n"
        "n = int(input()) if MPI.COMM_WORLD.rank == 0 else None\n"
        "n = MPI.COMM_WORLD.bcast(n)\n"
        "print(n * MPI.COMM_WORLD.rank)\n"
        "assert MPI.COMM_WORLD.rank != 1 or n != 7, 'seven'\n"
    )
    status, ranks, _ = t.run_collsim(tmp_path, t.DemoRun("ask.py", 2, stdin="5\n"))
    assert status == 0 and [r.stdout for r in ranks] == [("0",), ("5",)]
    status, _, error = t.run_collsim(tmp_path, t.DemoRun("ask.py", 2, stdin="7\n"))
    assert status == 1 and "rank 1 raised AssertionError: seven" in error


def test_ranks_are_compared_one_by_one_not_as_the_interleaved_stream():
    t = tool()
    ours = [t.RankOutput(("a", "b"), ()), t.RankOutput(("c",), ())]
    assert t.first_difference(ours, [t.RankOutput(("a", "b"), ()), t.RankOutput(("c",), ())]) == ""
    swapped = [t.RankOutput(("b", "a"), ()), t.RankOutput(("c",), ())]
    assert t.first_difference(ours, swapped).startswith("rank 0 stdout line 1")
    shorter = [t.RankOutput(("a", "b"), ()), t.RankOutput((), ("c",))]
    assert t.first_difference(ours, shorter) == (
        "rank 1 stdout: 1 lines under collsim, 0 under mpiexec"
    )


def test_every_demo_file_is_run_or_excluded_with_a_reason(tmp_path):
    t = tool()
    for name in ("helloworld.py", "osu_bw.py", "futures/run_hello.py", "newdemo/x.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    assert t.unclassified(tmp_path) == ["newdemo/x.py"]
    assert "timings" in t.why_excluded("osu_bw.py")
    assert "futures" in t.why_excluded("futures/run_hello.py")
    table = t.table([t.Outcome(t.DemoRun("helloworld.py", 5), "same")], tmp_path)
    assert "| `helloworld.py` | 5 | same output |  |" in table
    assert "| `osu_bw.py` | - | excluded | prints timings" in table


def test_the_tools_docstring_examples_hold():
    import doctest

    results = doctest.testmod(tool())  # tools/ is outside pytest's doctest paths
    assert results.failed == 0 and results.attempted >= 7
