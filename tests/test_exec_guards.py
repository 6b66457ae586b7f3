"""`collsim exec`'s runaway guards from the command line: a busy program stops by default,
at a count of operations (how soon in seconds is benchmarks/bench_stops.py's figure), with a
message naming the flag that raises the guard (the library keeps naming
the Cluster keyword); the flags are checked before the run.  And -n is one option with
mpirun's spellings (-n, -np, --np) and --ranks, with one help text."""

import math
import subprocess
import sys

import pytest
from fuzzkit import run_cli
from hypothesis import given
from hypothesis import strategies as st

import collsim
from collsim.cli import build_parser, main
from collsim.errors import SimulationLimitError

BUSY_SENDS = """\
from mpi4py import MPI

comm = MPI.COMM_WORLD
print("started", flush=True)
while True:
    if comm.Get_rank() == 0:
        comm.send(1, dest=1)
"""
TEN_CALLS = """\
from mpi4py import MPI

for _ in range(10):
    MPI.COMM_WORLD.Barrier()
"""


def _write(tmp_path, text, name="script.py"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_a_busy_program_stops_by_default_naming_the_flag(tmp_path):
    script = _write(tmp_path, BUSY_SENDS)
    try:  # a bound on a hang only; the seconds it takes are bench_stops.py's figure
        proc = subprocess.run(
            [sys.executable, "-m", "collsim", "exec", "-n", "2", str(script)],
            capture_output=True,
            text=True,
            timeout=120,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the busy program ran for 2 minutes")
    assert proc.returncode == 1, proc.stderr
    assert "more than --max-ops 50008 operations" in proc.stderr
    assert "rank 0: 10,000 x send to rank 1" in proc.stderr
    assert "--max-ops 100016, or --max-ops inf" in proc.stderr
    assert "Cluster(" not in proc.stderr


def test_max_ops_from_the_command_line_sets_the_guard(tmp_path, capsys):
    script = _write(tmp_path, TEN_CALLS)
    assert main(["exec", "-n", "2", "--max-ops", "1000", str(script)]) == 0
    capsys.readouterr()
    status = main(["exec", "-n", "2", "--max-ops", "5", str(script)])
    _, err = capsys.readouterr()
    assert status == 1
    assert "more than --max-ops 5 operations" in err and "--max-ops 10, or --max-ops inf" in err


def test_max_time_from_the_command_line_names_its_flag(tmp_path, capsys):
    script = _write(tmp_path, "import collsim\ncollsim.compute(seconds=5)\n")
    status = main(["exec", "-n", "1", "--max-time", "2s", str(script)])
    _, err = capsys.readouterr()
    assert status == 1
    assert "simulated time passed the guard --max-time 2s" in err
    assert "--max-time 4s, or --max-time inf" in err
    assert main(["exec", "-n", "1", "--max-time", "inf", str(script)]) == 0


@pytest.mark.parametrize(
    "flag, value",
    [
        ("--max-ops", "0"),
        ("--max-ops", "2.5"),
        ("--max-ops", "lots"),
        ("--max-time", "-1s"),
        ("--max-time", "0"),
        ("--max-time", "soon"),
        ("--max-events", "nan"),
    ],
)
def test_bad_guard_values_are_refused_by_flag_before_the_run(tmp_path, capsys, flag, value):
    script = _write(tmp_path, "print('ran')\n")
    status = main(["exec", "-n", "2", f"{flag}={value}", str(script)])
    out, err = capsys.readouterr()
    assert status != 0 and "ran" not in out
    assert f"{flag} {value!r}" in err


def test_the_library_still_names_the_cluster_keyword():
    def program(rank):
        while True:
            yield rank.compute(seconds=0)

    cluster = collsim.Cluster(collsim.topology.ring(2), max_ops=100)
    with pytest.raises(SimulationLimitError) as info:
        cluster.run(program)
    assert "Cluster(topology, max_ops=...)" in str(info.value)
    assert "--max-ops" not in str(info.value)
    assert collsim.Cluster(collsim.topology.ring(2), max_ops=math.inf).guard_flags == {}


@pytest.mark.parametrize("spelling", ["-n", "-np", "--np", "--ranks", "-k"])
def test_every_spelling_of_n_is_one_option(tmp_path, capsys, spelling):
    script = _write(tmp_path, "from mpi4py import MPI\nprint(MPI.COMM_WORLD.Get_size())\n")
    assert main(["exec", spelling, "3", str(script)]) == 0
    out, _ = capsys.readouterr()
    assert out.count("3\n") == 3


def test_n_has_one_help_text():
    exec_parser = build_parser()._subparsers._group_actions[0].choices["exec"]
    actions = [a for a in exec_parser._actions if a.dest == "ranks"]
    assert len(actions) == 1
    assert set(actions[0].option_strings) == {"-n", "-np", "--np", "--ranks", "-k"}
    assert "mpirun" in actions[0].help


GUARD_VALUES = st.one_of(
    st.text(
        st.characters(min_codepoint=32, max_codepoint=126, exclude_characters="'\\"), max_size=12
    ),  # printable: the message shows the value as repr() does
    st.sampled_from(["inf", "-inf", "nan", "1e400", "1e-300", "0.5", "10us", "1_000", "3h"]),
    st.integers(-(2**70), 2**70).map(str),
    st.floats(allow_nan=True).map(str),
)


@given(flag=st.sampled_from(["--max-ops", "--max-time", "--max-events"]), value=GUARD_VALUES)
def test_fuzz_guard_flags(tmp_path_factory, flag, value):
    script = _write(tmp_path_factory.mktemp("fuzz"), "print('ran')\n")
    outcome = run_cli(["exec", "-n", "2", f"{flag}={value}", script], bad=value)
    assert outcome.status == 0 or "ran" not in outcome.stdout  # refused before the run
