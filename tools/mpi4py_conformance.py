"""Run mpi4py's own test suite under ``collsim exec`` (or a real ``mpiexec``) and count, per
test module and rank count, the tests run, passed, failed, errored and skipped.

mpi4py's suite is not part of collsim: fetch it from mpi4py's source distribution
(``pip download --no-deps --no-binary :all: mpi4py==4.1.2``, then its ``test/`` folder) and
point this script at that folder.  Each module runs on its own
(``runtests.py -i '^test_x\\.py$'``), so one module that crashes or hangs costs only its own
row; the counts are read from rank 0's unittest summary (``Ran N tests``, ``FAILED
(failures=F, errors=E, skipped=S)``).  A module that ends without a summary is a ``crash``;
one that outlives ``--timeout`` is a ``timeout``.

    python tools/mpi4py_conformance.py PATH/TO/mpi4py/test --out collsim.json
    python tools/mpi4py_conformance.py PATH/TO/mpi4py/test --out real.json \\
        --mpiexec "mpiexec --allow-run-as-root --oversubscribe" --python /venv/bin/python
    python tools/mpi4py_conformance.py --table collsim.json real.json   # the markdown table
"""

import argparse
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

CORE = ("test_comm", "test_p2p_buf", "test_p2p_obj", "test_cco_buf", "test_cco_obj")
CORE += ("test_request", "test_status", "test_op", "test_datatype")
MAX_OPS = 3_000_000  # collsim exec's guard against a rank that loops for ever
RANK0 = re.compile(r"^\[1,0\]<std(?:out|err)>:")
RAN = re.compile(r"^Ran (\d+) tests?")
COUNT = re.compile(r"(failures|errors|skipped|expected failures|unexpected successes)=(\d+)")


class ModuleResult(NamedTuple):
    """One module's counts on one rank count (``outcome``: ok, failed, crash, timeout)."""

    module: str
    ranks: int
    outcome: str
    run: int = 0
    passed: int = 0
    failures: int = 0
    errors: int = 0
    skipped: int = 0


def parse_summary(module, ranks, text):
    """The counts in rank 0's unittest summary (lines tagged ``[1,0]<stderr>:``).

    >>> text = "[1,0]<stderr>:Ran 5 tests in 0.1s\\n[1,0]<stderr>:FAILED (errors=1, skipped=2)"
    >>> parse_summary("test_op", 2, text)
    ModuleResult(module='test_op', ranks=2, outcome='failed', run=5, passed=2, failures=0, \
errors=1, skipped=2)
    """
    lines = [RANK0.sub("", line) for line in text.splitlines() if RANK0.match(line)]
    ran = [int(m.group(1)) for m in map(RAN.match, lines) if m]
    verdicts = [line for line in lines if line.startswith(("OK", "FAILED"))]
    if not ran or not verdicts:
        return ModuleResult(module, ranks, "crash")
    # an expected failure is neither a pass nor a failure: counted with the skips; an
    # unexpected success is a failure (unittest fails the run for it)
    counts = dict.fromkeys(("failures", "errors", "skipped"), 0)
    where = {"expected failures": "skipped", "unexpected successes": "failures"}
    for name, value in COUNT.findall(verdicts[-1]):
        counts[where.get(name, name)] += int(value)
    failures = counts["failures"]
    run = ran[-1]
    # failures and errors count failing subtests too, so with subtests this is a lower
    # bound on the tests that passed (exact when no subtest fails)
    passed = max(0, run - failures - counts["errors"] - counts["skipped"])
    outcome = "ok" if verdicts[-1].startswith("OK") else "failed"
    return ModuleResult(
        module, ranks, outcome, run, passed, failures, counts["errors"], counts["skipped"]
    )


def command(testdir, module, ranks, mpiexec, python):
    """The command that runs ``module`` of mpi4py's suite on ``ranks`` ranks."""
    runner = [str(Path(testdir) / "runtests.py"), "-i", f"^{re.escape(module)}\\.py$"]
    if mpiexec is None:
        # the suite's heavier modules make millions of calls; the guard still stops a loop
        guard = ["--max-ops", str(MAX_OPS)]
        return [python, "-m", "collsim", "exec", "-n", str(ranks), *guard, *runner]
    return [*shlex.split(mpiexec), "--tag-output", "-n", str(ranks), python, *runner]


def run_module(testdir, module, ranks, mpiexec, python, timeout):
    try:
        done = subprocess.run(
            command(testdir, module, ranks, mpiexec, python),
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=testdir,
        )
    except subprocess.TimeoutExpired:
        return ModuleResult(module, ranks, "timeout")
    return parse_summary(module, ranks, done.stdout + "\n" + done.stderr)


def modules_in(testdir, only=()):
    names = sorted(p.stem for p in Path(testdir).glob("test_*.py"))
    return [n for n in names if not only or n in only]


def table(collsim_rows, real_rows, ranks=(1, 2, 4)):
    """Markdown: per module and rank count, collsim's passes / real MPI's passes."""
    ours = {(r["module"], r["ranks"]): r for r in collsim_rows}
    real = {(r["module"], r["ranks"]): r for r in real_rows}
    modules = sorted({m for m, _ in real} | {m for m, _ in ours})
    head = "| module | " + " | ".join(
        f"-n {k}: collsim / real (run, fail, err, skip)" for k in ranks
    )
    lines = [head + " |", "|---" * (len(ranks) + 1) + "|"]
    totals = {k: [0, 0, 0, 0] for k in ranks}  # core ours, core real, all ours, all real
    for module in modules:
        cells = []
        for k in ranks:
            a, b = ours.get((module, k)), real.get((module, k))
            mine = 0 if a is None else max(0, a["passed"])
            theirs = 0 if b is None else b["passed"]
            detail = "-" if a is None else _detail(a)
            cells.append(f"{mine} / {theirs} ({detail})")
            totals[k][2] += min(mine, theirs) if theirs else 0
            totals[k][3] += theirs
            if module in CORE:
                totals[k][0] += min(mine, theirs) if theirs else 0
                totals[k][1] += theirs
        lines.append(f"| {module} | " + " | ".join(cells) + " |")
    for label, i in (("9 core modules", 0), ("all modules", 2)):
        cells = [
            f"{t[i]} / {t[i + 1]} ({100 * t[i] / max(t[i + 1], 1):.0f} %)" for t in totals.values()
        ]
        lines.append(
            f"| **{label}** (passes that real MPI also passes) | " + " | ".join(cells) + " |"
        )
    return "\n".join(lines)


def _detail(row):
    if row["outcome"] in ("crash", "timeout"):
        return row["outcome"]
    return f"{row['run']}, {row['failures']}, {row['errors']}, {row['skipped']}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("testdir", nargs="?", help="mpi4py's test/ folder (has runtests.py)")
    parser.add_argument("--ranks", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--modules", nargs="+", default=(), help="only these (test_op ...)")
    parser.add_argument("--core", action="store_true", help="only the 9 core modules")
    parser.add_argument("--mpiexec", help="run under this mpiexec instead of collsim exec")
    parser.add_argument("--python", default=sys.executable, help="the python that runs it")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per module")
    parser.add_argument("--out", help="write the rows as JSON here")
    parser.add_argument("--table", nargs=2, metavar=("COLLSIM_JSON", "REAL_JSON"))
    args = parser.parse_args(argv)
    if args.table:
        rows = [json.loads(Path(p).read_text()) for p in args.table]
        print(table(*rows, ranks=tuple(args.ranks)))
        return 0
    if args.testdir is None or not (Path(args.testdir) / "runtests.py").is_file():
        parser.error(f"testdir {args.testdir!r}: give mpi4py's test/ folder (with runtests.py)")
    rows = []
    for module in modules_in(args.testdir, CORE if args.core else args.modules):
        for ranks in args.ranks:
            row = run_module(args.testdir, module, ranks, args.mpiexec, args.python, args.timeout)
            rows.append(row._asdict())
            print(*row, sep="\t", flush=True)
            if args.out:
                Path(args.out).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
