"""`collsim exec`: exit codes and the errors for a script that raises, deadlocks or does not
exist, bad -n and bad paths (fuzzed with tests/fuzzkit.py), the summary on stderr, the
trace, and no thread left behind."""

import json
import string
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from fuzzkit import run_cli
from hypothesis import given
from hypothesis import strategies as st

RAISES = """\
from mpi4py import MPI

comm = MPI.COMM_WORLD
if comm.Get_rank() == 1:
    raise ValueError("rank 1 cannot go on")
comm.Barrier()
"""
BOTH_RECV_FIRST = """\
import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
other = 1 - comm.Get_rank()
buf = np.zeros(4)
comm.Recv(buf, source=other)
comm.Send(buf, dest=other)
"""
SKIPS_A_COLLECTIVE = """\
from mpi4py import MPI

comm = MPI.COMM_WORLD
if comm.Get_rank() != 2:
    comm.allreduce(1)
"""
RING_PASS = Path(__file__).resolve().parents[1] / "examples" / "mpi_ring_pass.py"
HELLO = """\
import sys
from mpi4py import MPI

comm = MPI.COMM_WORLD
print(f"hello from {comm.Get_rank()} of {comm.Get_size()}", sys.argv[1:])
"""


@pytest.fixture(scope="module")
def scripts(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("scripts")
    paths = {}
    for name, text in (
        ("raises", RAISES),
        ("recv_first", BOTH_RECV_FIRST),
        ("skips", SKIPS_A_COLLECTIVE),
        ("hello", HELLO),
    ):
        paths[name] = tmp_path / f"{name}.py"
        paths[name].write_text(text, encoding="utf-8")
    return paths


def test_a_script_runs_tagged_with_its_args_and_the_summary_goes_to_stderr(scripts):
    outcome = run_cli(["exec", "-n", "3", scripts["hello"], "x", "--flag", "1", "-n", "9"])
    assert outcome.status == 0
    assert outcome.stdout.splitlines() == [
        f"[1,{r}]<stdout>:hello from {r} of 3 ['x', '--flag', '1', '-n', '9']" for r in range(3)
    ]
    assert "# collsim exec:" in outcome.stderr and "simulated time" in outcome.stderr
    assert "bytes sent per rank: r0 " in outcome.stderr


@pytest.mark.parametrize("flag", ["-n", "-np", "--np", "--ranks", "-k"])
def test_every_spelling_of_the_rank_count(flag, scripts):
    outcome = run_cli(["exec", flag, "2", scripts["hello"]])
    assert outcome.stdout.count("of 2") == 2


def test_a_raising_script_names_the_rank_and_the_line_and_exits_1(scripts):
    before = threading.active_count()
    outcome = run_cli(["exec", "-n", "3", scripts["raises"]], bad="rank 1")
    assert outcome.status == 1
    assert "collsim: error: rank 1 raised ValueError: rank 1 cannot go on" in outcome.stderr
    assert f"{scripts['raises']}:5, in <module>" in outcome.stderr
    assert "[1,1]<stderr>:Traceback (most recent call last):" in outcome.stderr
    assert threading.active_count() == before


@pytest.mark.parametrize(
    ("name", "ranks", "lines"),
    [("recv_first", 2, {0: 7, 1: 7}), ("skips", 3, {0: 5, 1: 5})],
    ids=["both-recv-first", "a-rank-skips-a-collective"],
)
def test_a_deadlocking_script_names_each_blocked_rank_and_its_line(scripts, name, ranks, lines):
    before = threading.active_count()
    outcome = run_cli(["exec", "-n", str(ranks), scripts[name]], bad="hang", timeout=20)
    assert outcome.status == 1
    error = outcome.stderr[outcome.stderr.index("collsim: error:") :]
    assert f"{scripts[name]} on {ranks} ranks would hang forever" in error
    for rank, line in lines.items():
        report = next(x for x in error.splitlines() if x.strip().startswith(f"rank {rank} "))
        assert f"{name}.py:{line}" in report, error
    assert threading.active_count() == before


def test_the_trace_is_written_and_identical_on_a_second_run(tmp_path):
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    for path in (first, second):
        outcome = run_cli(["exec", "-n", "3", "--trace", path, RING_PASS])
        assert f"# trace written to {path}" in outcome.stderr
    assert first.read_bytes() == second.read_bytes()
    spans = [e for e in json.loads(first.read_text())["traceEvents"] if e["ph"] == "X"]
    assert len(spans) == 2 * 3  # three hops, each a span on the sender and the receiver


# ---- refusals, before any rank runs -----------------------------------------------------

BAD_COUNTS = [
    "0",
    "-1",
    "-4",
    "nan",
    "inf",
    "",
    "x",
    "1e300",
    str(2**62),
    "3.5",
    "1025",
    "0x4",
    "4 ranks",
]


@given(
    count=st.one_of(
        st.sampled_from(BAD_COUNTS),
        st.integers(min_value=1025, max_value=2**70).map(str),
        st.integers(max_value=0).map(str),
        st.text(string.ascii_letters + string.punctuation, min_size=1, max_size=8).filter(
            lambda s: not s.startswith("-")
        ),
    )
)
def test_bad_rank_counts_are_refused_naming_them(count):
    before = threading.active_count()
    outcome = run_cli(["exec", "-n", count, "hello.py"], bad=count, timeout=5)
    assert outcome.status in (1, 2)
    assert threading.active_count() == before


@pytest.fixture(scope="module")
def bad_paths(tmp_path_factory):
    root = tmp_path_factory.mktemp("paths")
    regular = root / "file.txt"
    regular.write_text("x\n", encoding="utf-8")
    binary = root / "binary.py"
    binary.write_bytes(b"\xff\xfe\x00 not text")
    broken = root / "broken.py"
    broken.write_text("def f(:\n", encoding="utf-8")
    return {
        "missing": str(root / "no_such_script.py"),
        "missing folder": str(root / "no" / "such" / "script.py"),
        "under a file": str(regular / "script.py"),
        "a folder": str(root),
        "a device": "/dev/full",
        "empty": "",
        "binary": str(binary),
        "syntax error": str(broken),
    }


@pytest.mark.parametrize(
    "case",
    [
        "missing",
        "missing folder",
        "under a file",
        "a folder",
        "a device",
        "empty",
        "binary",
        "syntax error",
    ],
)
def test_bad_scripts_are_refused_naming_them(case, bad_paths):
    path = bad_paths[case]
    outcome = run_cli(["exec", "-n", "2", path], bad=path or "''", timeout=5)
    assert outcome.status == 2 and "collsim: error: script" in outcome.stderr


@pytest.mark.parametrize(
    "case", ["missing folder", "under a file", "a folder", "a device", "empty"]
)
def test_bad_trace_paths_are_refused_before_the_run(case, bad_paths, scripts):
    path = bad_paths[case]
    outcome = run_cli(
        ["exec", "-n", "2", "--trace", path, scripts["hello"]], bad=path or "''", timeout=5
    )
    assert outcome.status == 2 and "hello from" not in outcome.stdout


@given(
    flag=st.sampled_from(["--bandwidth", "--latency", "--algorithm", "--topology", "--protocol"]),
    value=st.sampled_from(["-1", "0x", "nan", "inf", "1e300", "warp", "fast", "-5us", "1 GB/s/s"]),
)
def test_bad_network_flags_are_refused_naming_them(flag, value, scripts):
    outcome = run_cli(
        ["exec", "-n", "2", f"{flag}={value}", scripts["hello"]], bad=value, timeout=5
    )
    assert outcome.status == 0 or "hello from" not in outcome.stdout


def test_help_teaches_what_runs_where_and_that_compute_is_free():
    outcome = run_cli(["exec", "--help"])
    text = " ".join(outcome.stdout.split())
    needed_phrases = (
        "mpirun -n K",
        "FREE (0 s)",
        "collsim.compute(seconds=...)",
        "--tag-output",
        "examples:",
        "collsim exec -n 4 examples/mpi_pi.py",
    )
    for needed in needed_phrases:
        assert needed in text, needed


def test_the_script_gets_its_negative_arguments_as_typed(scripts):
    # a real command line: collsim's main() joins "--shift -1" for its own flags, not the script's
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "collsim",
            "exec",
            "-n",
            "2",
            scripts["hello"],
            "--shift",
            "-1",
            "-n",
            "-3",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"[1,{r}]<stdout>:hello from {r} of 2 ['--shift', '-1', '-n', '-3']" for r in range(2)
    ]


def test_a_crashed_rank_ends_in_the_watchdogs_report_naming_it():
    script = RING_PASS.parent / "mpi_parallel_sum.py"
    before = threading.active_count()
    outcome = run_cli(["exec", "-n", "4", "--crash-rank", "1@1us", script], bad="stalled")
    assert outcome.status == 1
    assert f"{script} on 4 ranks stalled: watchdog timeout" in outcome.stderr
    assert "culprit: rank 1 crashed" in outcome.stderr
    assert threading.active_count() == before
