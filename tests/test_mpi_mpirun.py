"""Programs written for mpi4py print, under collsim exec, what they printed under real mpirun.

The golden files in tests/data/mpirun/ were recorded by tools/record_mpirun.py with mpi4py
4.1.2 on MPICH 5.0.2 (each file's header says so): every rank's stdout, in order.  Here the
same unmodified programs run on collsim's ranks (``from mpi4py import MPI`` gives
collsim.mpi) and must print the same lines on every rank.
"""

import importlib.util
from pathlib import Path

import pytest

from collsim.launch import exec_script

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "data" / "mpirun"
PROGRAMS = ROOT / "tools" / "mpirun_programs"


def _recorder():
    spec = importlib.util.spec_from_file_location(
        "record_mpirun", ROOT / "tools" / "record_mpirun.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RECORDER = _recorder()
CASES = [(name, n) for name, counts in RECORDER.RANKS.items() for n in counts]


def test_every_program_has_its_golden_files():
    programs = {p.stem for p in PROGRAMS.glob("*.py")}
    assert programs == set(RECORDER.RANKS)
    recorded = {p.name for p in GOLDEN.glob("*.txt")}
    assert recorded == {f"{name}.n{n}.txt" for name, n in CASES}


@pytest.mark.parametrize("name, n", CASES)
def test_collsim_exec_prints_what_mpirun_printed(name, n):
    golden = (GOLDEN / f"{name}.n{n}.txt").read_text()
    header = golden.splitlines()[0]
    result = exec_script(PROGRAMS / f"{name}.py", n=n, echo=False)
    ours = RECORDER.golden_text([text.splitlines() for text in result.stdout], header[2:])
    assert ours == golden


@pytest.mark.parametrize("algorithm", ["ring", "tree", "halving_doubling"])
def test_the_output_does_not_depend_on_the_collective_algorithm(algorithm):
    # the algorithm changes the bytes, steps and time, never the values
    golden = (GOLDEN / "mpi_buffers.n2.txt").read_text()
    result = exec_script(PROGRAMS / "mpi_buffers.py", n=2, algorithm=algorithm, echo=False)
    ours = RECORDER.golden_text([t.splitlines() for t in result.stdout], golden.splitlines()[0][2:])
    assert ours == golden
    used = {t.tag.algorithm for t in result.run.trace.transfers if hasattr(t.tag, "algorithm")}
    assert algorithm in used
