"""A fast loop (issue 27, item 8): `collsim --version`, `collsim lesson list` and
`collsim lesson init` load neither numpy, networkx nor matplotlib; those load only where a
simulation, a graph or a picture is made.  How long they take is measured in
benchmarks/bench_startup.py, never asserted here."""

import json
import subprocess
import sys

import pytest

HEAVY = ("numpy", "networkx", "matplotlib")
PROBE = """
import json, sys
from collsim.cli import main
try:
    main({argv!r})
except SystemExit:
    pass
print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {heavy!r})))
"""


def loaded(argv, cwd):
    """The heavy packages a fresh interpreter has imported after ``collsim ARGV``."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(argv=argv, heavy=set(HEAVY))],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return {name.split(".")[0] for name in json.loads(done.stdout.splitlines()[-1])}


@pytest.mark.parametrize(
    "argv",
    [["--version"], ["lesson", "list"], ["lesson", "list", "--lang", "ja"], ["lesson", "init"]],
    ids=" ".join,
)
def test_the_student_loop_loads_no_simulator(argv, tmp_path):
    assert loaded(argv, tmp_path) == set()


def test_import_collsim_alone_loads_no_simulator_and_the_names_still_work(tmp_path):
    probe = (
        "import sys, collsim\n"
        "before = sorted(m for m in sys.modules if m in ('numpy', 'networkx'))\n"
        "ring = collsim.Cluster(collsim.topology.ring(4, bandwidth='1GB/s', latency='1us'))\n"
        "from collsim import ConfigError, Cluster, exec, compute\n"
        "print(before, ring.size, Cluster is collsim.Cluster, callable(exec))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert done.stdout.split() == ["[]", "4", "True", "True"], done.stderr


def test_a_simulation_still_loads_what_it_needs(tmp_path):
    assert {"numpy", "networkx"} <= loaded(["run", "all-reduce", "--ranks", "4"], tmp_path)
