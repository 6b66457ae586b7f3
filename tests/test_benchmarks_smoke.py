"""The benchmark scripts still run on the current code (issue 18, item 4).

Each script runs with tiny sizes in a fresh interpreter, with a time limit, and must exit
0 and print its table: its machine line, its command and its header.  The scripts assert
their own answers (transfer counts, closed-form times, the exact sums) before they time
anything, so a run that exits 0 also checked collsim's results.  No wall-clock figure is
asserted.  The peers that need torch or mpi4py are checked both ways: where they are not
installed the script must say so with the pip command and still time collsim and numpy.
"""

import importlib.util
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HAS_TORCH = importlib.util.find_spec("torch") is not None
HAS_MPI = importlib.util.find_spec("mpi4py") is not None


def run_script(name, *args, timeout=60):
    """(exit code, stdout, stderr) of ``python benchmarks/<name>.py args`` in this tree."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, f"benchmarks/{name}.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return proc.returncode, proc.stdout, proc.stderr


TABLES = {
    "bench_engine": (
        ["--quick", "--ranks", "8,64", "--transfers", "512"],
        "| K ranks | rounds | transfers | events | wall (s) | transfers/s |",
    ),
    "bench_peers": (
        ["--ranks", "2", "--sizes", "2^10", "--rounds", "1", "--peers", "threaded"],
        "| K | N (float32) | numpy limit | collsim ring | threaded PG | gloo | MPI |",
    ),
    "bench_numpy_limit": (
        ["--quick", "--rounds", "1"],
        "| K | N (float32) | numpy loop | numpy stack | numpy reduce | numpy prealloc |",
    ),
    "bench_inputs": (
        ["--quick"],
        "| K | N | dtype | numpy integers() | collsim integer_inputs | ratio |",
    ),
    "bench_stops": (
        ["--quick"],
        "| program | ranks | stopped by | measured | seconds | / baseline |",
    ),
    "bench_startup": (["--quick"], "| command | best of | wall seconds | CPU seconds |"),
    "bench_lifetime": (
        ["--quick"],
        "| clusters | K | per rank | alive, collector off "
        "| alive after gc.collect() | resident growth |",
    ),
}


@pytest.mark.parametrize("name", list(TABLES))
def test_the_script_prints_its_table(name):
    args, header = TABLES[name]
    code, out, err = run_script(name, *args)
    assert code == 0, err
    assert header in out, out
    assert out.startswith("machine: ") and "nproc " in out and "load average" in out, out
    command = shlex.join(["python", f"benchmarks/{name}.py", *args])
    assert f"command: {command}\n" in out, out


def test_bench_scale_prints_its_table_and_checks_every_k_against_the_closed_form():
    code, out, err = run_script("bench_scale", "--ranks", "8,16")
    assert code == 0, err
    assert (
        out.startswith("machine: ")
        and "command: python benchmarks/bench_scale.py --ranks 8,16\n" in out
    )
    assert "| K ranks | transfers | build (s) | call (s) | run (s) | transfers/s |" in out, out
    assert "|     8 |        112 |" in out and "|    16 |        480 |" in out, out  # 2K(K-1)
    assert out.count("| ok (") == 2, out
    assert "| records (s) | bytes / record |" in out and "not built" not in out, out


def test_bench_scale_can_leave_the_records_unbuilt():
    code, out, err = run_script("bench_scale", "--ranks", "8", "--no-records")
    assert code == 0, err
    assert "| not built (--no-records) |" in out and "| ok (" in out, out


@pytest.mark.parametrize(
    "args, said",
    [
        (["--timeout", "0.05"], "timed out after 0.05 s"),
        (["--max-rss", "1MiB"], "resident (--max-rss)"),
    ],
    ids=["timeout", "max-rss"],
)
def test_bench_scale_stops_a_child_past_its_limit_and_says_so(args, said):
    code, out, err = run_script("bench_scale", "--ranks", "64", *args)
    assert code == 0, err
    assert said in out, out
    assert "| ok (" not in out, out


@pytest.mark.parametrize(
    "args, bad",
    [
        (["--ranks", "8,x"], "'x'"),
        (["--ranks", "1"], "1 ranks"),
        (["--size", "1000"], "1000 B"),
        (["--size", "1XB"], "'1XB'"),
    ],
    ids=["ranks-text", "ranks-one", "size-uneven", "size-unit"],
)
def test_bench_scale_refuses_bad_flags_naming_the_value(args, bad):
    code, out, err = run_script("bench_scale", "--ranks", "8", *args)
    assert code == 2 and bad in err, err
    assert "| K ranks |" not in out


def test_bench_peers_without_a_peer_still_times_collsim_and_numpy():
    code, out, err = run_script(
        "bench_peers", "--ranks", "2", "--sizes", "2^10", "--rounds", "1", "--peers", "none"
    )
    assert code == 0, err
    row = next(line for line in out.splitlines() if line.startswith("| 2 | 2^10 |"))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[2].endswith(("(loop)", "(stack)", "(reduce)")), row  # the numpy limit
    assert cells[3].endswith(("s", "ms", "us", "ns")) and cells[3][0].isdigit(), row  # collsim
    assert cells[4:7] == ["-", "-", "-"], row


def test_bench_peers_names_the_pip_command_of_each_missing_peer():
    code, out, err = run_script(
        "bench_peers", "--ranks", "2", "--sizes", "2^10", "--rounds", "1", "--peers", "threaded,mpi"
    )
    assert code == 0, err
    torch_line = "skipped: threaded PG: torch is not installed (pip install torch==2.13.0"
    mpi_line = "skipped: MPI: mpi4py is not installed (pip install mpi4py mpich)"
    assert (torch_line in out) == (not HAS_TORCH), out
    assert (mpi_line in out) == (not HAS_MPI), out


def test_bench_gloo_runs_or_says_how_to_install_torch():
    code, out, err = run_script("bench_gloo", "--quick", "--max-exp", "10", "--repeats", "1")
    assert code == 0, err
    skipped = "skipped: torch is not installed (pip install torch==2.13.0"
    if HAS_TORCH:
        assert "| N (float32) | gloo, 2 processes | collsim ring, 2 ranks |" in out, out
    else:
        assert skipped in out, out


@pytest.mark.parametrize(
    "name", ["bench_engine", "bench_scale", "bench_peers", "bench_gloo", "bench_lifetime"]
)
def test_the_help_explains_what_is_measured(name):
    code, out, err = run_script(name, "--help")
    assert code == 0, err
    assert "python benchmarks/" in out and "--quick" in out, out


def test_bench_engine_reports_the_memory_a_result_keeps_per_transfer():
    code, out, err = run_script("bench_engine", "--quick", "--ranks", "8", "--transfers", "4096")
    assert code == 0, err
    line = next(x for x in out.splitlines() if x.startswith("memory kept by the result: "))
    kept = float(line.split(": ")[1].split(" B per transfer")[0].replace(",", ""))
    # a packed record is nine pointers (72 B) and shares its values; a tuple per record,
    # unpacked, kept about 120 B: the figure must be the packed one, and not nothing
    assert 40 < kept < 110, line
    assert "(K = 8, tracemalloc, a separate run)" in line


def test_bench_lifetime_finds_every_dropped_cluster_freed_by_reference_counting():
    code, out, err = run_script(
        "bench_lifetime", "--clusters", "6", "--ranks", "4", "--size", "1MiB"
    )
    assert code == 0, err
    row = next(line for line in out.splitlines() if line.startswith("| 6 | 4 | 1 MiB |"))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[3:5] == ["0", "0"], row  # alive with the collector off, and after it
    assert cells[6].endswith("MiB") and float(cells[7].rstrip("x")) < 1, row  # < one cluster
