"""Record what real mpi4py under ``mpirun`` prints for the programs in tools/mpirun_programs/.

Each program's output does not depend on timing (within a rank); this runs it on a few rank
counts with MPICH's ``mpiexec -outfile-pattern`` (one file per rank) and writes the golden
file ``tests/data/mpirun/<program>.n<K>.txt``: a header line, then every rank's lines in
order, each prefixed ``[rank]``.  tests/test_mpi_mpirun.py runs the same programs under
``collsim exec`` and compares.

Real MPI is not a dependency of collsim: install it in a scratch virtual environment and
point this script at that environment's ``python`` and ``mpiexec``, e.g.::

    python -m venv /tmp/mpi && /tmp/mpi/bin/pip install mpi4py mpich numpy
    python tools/record_mpirun.py --python /tmp/mpi/bin/python --mpiexec /tmp/mpi/bin/mpiexec
"""

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROGRAMS = ROOT / "tools" / "mpirun_programs"
GOLDEN = ROOT / "tests" / "data" / "mpirun"
# the rank counts each program is recorded on
RANKS = {
    "mpi_objects": (1, 3, 4),
    "mpi_buffers": (1, 2, 5),
    "mpi_ring": (1, 2, 4),
    "mpi_split": (2, 6),
    "mpi_errors": (2,),
}


def per_rank_output(mpiexec, python, program, n, timeout=60):
    """Each rank's stdout lines of ``mpiexec -n n python program``."""
    with tempfile.TemporaryDirectory() as tmp:
        pattern = str(Path(tmp) / "out.%r")
        subprocess.run(
            [mpiexec, "-n", str(n), "-outfile-pattern", pattern, python, str(program)],
            check=True,
            timeout=timeout,
            cwd=tmp,
        )
        return [(Path(tmp) / f"out.{r}").read_text().splitlines() for r in range(n)]


def golden_text(lines_per_rank, header):
    """The golden file: a ``#`` header, then ``[rank] line`` for every rank in rank order."""
    body = [f"[{r}] {line}" for r, lines in enumerate(lines_per_rank) for line in lines]
    return "\n".join([f"# {header}", *body]) + "\n"


def versions(python):
    code = (
        "from mpi4py import MPI; import mpi4py; print(f'mpi4py {mpi4py.__version__}, '"
        " + MPI.Get_library_version().splitlines()[0])"
    )
    out = subprocess.run([python, "-c", code], check=True, capture_output=True, text=True)
    return " ".join(out.stdout.split())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", required=True, help="a python that has mpi4py and numpy")
    parser.add_argument("--mpiexec", required=True, help="MPICH's mpiexec")
    args = parser.parse_args(argv)
    GOLDEN.mkdir(parents=True, exist_ok=True)
    made = versions(args.python)
    for name, counts in RANKS.items():
        program = PROGRAMS / f"{name}.py"
        for n in counts:
            lines = per_rank_output(args.mpiexec, args.python, program, n)
            header = f"mpiexec -n {n} python tools/mpirun_programs/{name}.py ({made})"
            path = GOLDEN / f"{name}.n{n}.txt"
            path.write_text(golden_text(lines, header))
            print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
