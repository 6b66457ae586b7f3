"""Run the demo programs of mpi4py's source distribution under ``collsim exec`` and under a
real ``mpiexec``, and compare what each rank prints.

mpi4py's demos are not part of collsim: fetch mpi4py's source distribution
(``pip download --no-deps --no-binary :all: mpi4py==4.1.2``, unpack it) and point this
script at its ``demo/`` folder.  Each Python demo runs as its own makefile (or
``runtests.sh``) runs it: the same rank count, arguments and standard input.  Every ``.py``
file there is either run (``RUNS``) or excluded with the reason (``EXCLUDED``); a file that
is neither is reported, so a new demo cannot slip by.

What is compared is each rank's own standard output and standard error, line by line, and
whether the run succeeded.  The order in which *different* ranks' lines reach the terminal
is not defined by MPI (Open MPI forwards each process's output as it comes), so the ranks
are compared one by one, not the interleaved stream; within one rank the order is the
program's.  Two things are the machine's, not the program's, and are masked on both sides:
the processor name (``MPI.Get_processor_name()``: the host's name under mpiexec,
``collsim-rank<r>`` under collsim) and the seconds in unittest's ``Ran N tests in 0.020s``.

    python tools/mpi4py_demos.py PATH/TO/mpi4py-4.1.2/demo \\
        --mpiexec "mpiexec --allow-run-as-root --oversubscribe" --python /venv-mpi/bin/python
    python tools/mpi4py_demos.py PATH/TO/demo --only helloworld.py --mpiexec ...  # one demo

Open MPI's ``--output-filename DIR`` keeps each rank's output in files of its own
(``DIR/1/rank.R/stdout``); collsim's tagged lines (``[1,R]<stdout>:``) are split by rank.
"""

import argparse
import fnmatch
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

TIMEOUT_S = 120  # wall seconds a run may take before it counts as a hang
TAGGED = re.compile(r"^\[1,(\d+)\]<(stdout|stderr)>:(.*)$")
COLLSIM_NAME = r"collsim-rank\d+"  # MPI.Get_processor_name() under collsim
UNITTEST_TIME = re.compile(r"^(Ran \d+ tests?) in \d+(\.\d+)?s$")


class DemoRun(NamedTuple):
    """One demo program and how its makefile runs it."""

    path: str  # relative to demo/
    ranks: int
    args: tuple = ()
    stdin: str = ""


class Excluded(NamedTuple):
    """Demo files (a glob relative to demo/) that are not compared, and why."""

    pattern: str
    reason: str


class RankOutput(NamedTuple):
    """What one rank printed, as lines."""

    stdout: tuple
    stderr: tuple


class Outcome(NamedTuple):
    """One run's verdict: ``same`` or ``differs`` (with the first difference)."""

    run: DemoRun
    verdict: str
    detail: str = ""


def _each(pattern, demo_dir, ranks, **how):
    return tuple(DemoRun(p, ranks, **how) for p in _glob(demo_dir, pattern))


def runs(demo_dir):
    """The runs, as the demos' makefiles and ``runtests.sh`` scripts make them."""
    cpi = tuple(DemoRun("compute-pi/cpi-cco.py", k, stdin="100\n") for k in (1, 2, 3, 4))
    init_fini = tuple(
        DemoRun("init-fini/test_0.py", 2, (option,))
        for option in (
            "threads=true",
            "threads=false",
            "thread_level=single",
            "thread_level=funneled",
            "thread_level=serialized",
            "thread_level=multiple",
            "fast_reduce=true",
            "fast_reduce=false",
            "recv_mprobe=true",
            "recv_mprobe=false",
            "errors=default",
            "errors=exception",
            "errors=abort",
            "errors=fatal",
        )
    )
    return (
        DemoRun("helloworld.py", 5),  # README.txt: mpiexec -n 5 python helloworld.py
        *cpi,
        *_each("mpi-ref-v1/ex-*.py", demo_dir, 2),  # runtests.sh: NP=2
        DemoRun("reductions/test_reductions.py", 1, ("-q",)),
        DemoRun("reductions/test_reductions.py", 4, ("-q",)),
        DemoRun("sequential/test_seq.py", 4),
        DemoRun("threads/sendrecv.py", 1),  # the makefile runs it without mpiexec: one rank
        DemoRun("nxtval/nxtval-threads.py", 5),  # runtests.sh: NP=5
        *init_fini,
        *_each("init-fini/test_[1-6].py", demo_dir, 2),
        DemoRun("init-fini/test_mpi40.py", 2),
        DemoRun("profiling/cpi.py", 8),  # the makefile's NP = 8
        DemoRun("profiling/ring.py", 8),
        DemoRun("profiling/threads.py", 8),
    )


EXCLUDED = (
    Excluded("osu_*.py", "prints timings (OSU micro-benchmarks: latency, bandwidth)"),
    Excluded("mandelbrot/mandelbrot.py", "prints timings (wall-clock seconds per task)"),
    Excluded("mandelbrot/mandelbrot-seq.py", "prints timings; uses no MPI"),
    Excluded("mandelbrot/mandelbrot-master.py", "spawning (Comm.Spawn of a Fortran worker)"),
    Excluded("compute-pi/cpi-dpm.py", "spawning (dynamic processes, ports)"),
    Excluded("spawning/*.py", "spawning (Comm.Spawn)"),
    Excluded("nxtval/nxtval-dynproc.py", "spawning (Comm.Spawn)"),
    Excluded("compute-pi/cpi-rma.py", "RMA (one-sided Win)"),
    Excluded("nxtval/nxtval-onesided.py", "RMA (one-sided Win)"),
    Excluded("nxtval/nxtval-scalable.py", "RMA (one-sided Win)"),
    Excluded("nxtval/nxtval-mpi3.py", "RMA (one-sided Win)"),
    Excluded("futures/*.py", "futures (mpi4py.futures: spawned workers or its own launcher)"),
    Excluded("cuda-aware-mpi/*.py", "needs a GPU array library (CuPy, Numba)"),
    Excluded("libmpi-cffi/*.py", "C/Fortran/wrappers need a compiler (cffi build of libmpi)"),
    Excluded("wrap-*/*.py", "C/Fortran/wrappers need a compiler (a compiled extension)"),
    Excluded("test-run/*.py", "tests mpi4py's own launcher (python -m mpi4py) under mpiexec"),
    Excluded("reductions/reductions.py", "a module test_reductions.py imports, not a program"),
    Excluded("sequential/seq.py", "a module test_seq.py imports, not a program"),
)


def _glob(demo_dir, pattern):
    return sorted(str(p.relative_to(demo_dir)) for p in Path(demo_dir).glob(pattern))


def why_excluded(path):
    """The reason ``path`` (relative to demo/) is not compared, or None.

    >>> why_excluded("osu_bw.py")
    'prints timings (OSU micro-benchmarks: latency, bandwidth)'
    >>> why_excluded("helloworld.py") is None
    True
    """
    for rule in EXCLUDED:
        if fnmatch.fnmatch(path, rule.pattern):
            return rule.reason
    return None


def unclassified(demo_dir):
    """Python demos neither run nor excluded (a newer mpi4py may add some)."""
    ran = {run.path for run in runs(demo_dir)}
    every = _glob(demo_dir, "**/*.py")
    return [p for p in every if p not in ran and why_excluded(p) is None]


def split_tagged(text, ranks):
    """Each rank's lines from ``collsim exec``'s tagged output (untagged lines, collsim's
    own summary and errors, are left out).

    >>> split_tagged("[1,0]<stdout>:a\\n# collsim\\n[1,1]<stderr>:b\\n[1,0]<stdout>:c", 2)
    [RankOutput(stdout=('a', 'c'), stderr=()), RankOutput(stdout=(), stderr=('b',))]
    """
    lines = [{"stdout": [], "stderr": []} for _ in range(ranks)]
    for line in text.splitlines():
        tagged = TAGGED.match(line)
        if tagged and int(tagged.group(1)) < ranks:
            lines[int(tagged.group(1))][tagged.group(2)].append(tagged.group(3))
    return [RankOutput(tuple(r["stdout"]), tuple(r["stderr"])) for r in lines]


def normalise(lines, processor_name):
    """``lines`` with the machine's words masked: the processor name (a regular
    expression: ``re.escape(host)`` under mpiexec, ``COLLSIM_NAME`` under collsim) and
    unittest's seconds.

    >>> normalise(("Hello from node7.", "Ran 80 tests in 0.020s"), "node7")
    ('Hello from <processor name>.', 'Ran 80 tests in <seconds>')
    >>> normalise(("on collsim-rank3.",), COLLSIM_NAME)
    ('on <processor name>.',)
    """
    name = re.compile(rf"\b{processor_name}\b")
    masked = (name.sub("<processor name>", line) for line in lines)
    return tuple(UNITTEST_TIME.sub(r"\1 in <seconds>", line) for line in masked)


def first_difference(ours, theirs):
    """``"rank 1 stdout line 2: 'x' here, 'y' under mpiexec"`` or ``""`` if equal.

    >>> a = [RankOutput(("x",), ())]; b = [RankOutput(("y",), ())]
    >>> first_difference(a, b)
    "rank 0 stdout line 1: 'x' under collsim, 'y' under mpiexec"
    """
    for rank, (mine, real) in enumerate(zip(ours, theirs)):
        for stream in ("stdout", "stderr"):
            a, b = getattr(mine, stream), getattr(real, stream)
            where = f"rank {rank} {stream}"
            for number, (x, y) in enumerate(zip(a, b), start=1):
                if x != y:
                    return f"{where} line {number}: {x!r} under collsim, {y!r} under mpiexec"
            if len(a) != len(b):
                return f"{where}: {len(a)} lines under collsim, {len(b)} under mpiexec"
    return ""


def run_collsim(demo_dir, run, python=sys.executable):
    """(exit status, each rank's output, collsim's own error line) under ``collsim exec``."""
    command = [python, "-m", "collsim", "exec", "-n", str(run.ranks), Path(run.path).name]
    done = _run([*command, *run.args], Path(demo_dir) / Path(run.path).parent, run.stdin)
    if done is None:
        return None, [], "did not finish in time"
    error = next((x for x in done.stderr.splitlines() if x.startswith("collsim: error:")), "")
    return done.returncode, split_tagged(done.stdout + "\n" + done.stderr, run.ranks), error


def run_mpiexec(demo_dir, run, mpiexec, python):
    """(exit status, each rank's output) under a real Open MPI ``mpiexec``."""
    with tempfile.TemporaryDirectory() as out:
        launcher = [*shlex.split(mpiexec), "--output-filename", out, "-n", str(run.ranks)]
        command = [*launcher, python, Path(run.path).name, *run.args]
        done = _run(command, Path(demo_dir) / Path(run.path).parent, run.stdin)
        if done is None:
            return None, []
        ranks = []
        for rank in range(run.ranks):
            files = Path(out) / "1" / f"rank.{rank}"
            ranks.append(RankOutput(*(_lines(files / name) for name in ("stdout", "stderr"))))
        return done.returncode, ranks


def _lines(path):
    return tuple(path.read_text().splitlines()) if path.is_file() else ()


def _run(command, cwd, stdin):
    try:
        return subprocess.run(
            command, cwd=cwd, input=stdin, capture_output=True, text=True, timeout=TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        return None


def compare(demo_dir, run, mpiexec, python, processor_name):
    """Run ``run`` both ways and say whether every rank printed the same."""
    status, ours, error = run_collsim(demo_dir, run)
    real_status, theirs = run_mpiexec(demo_dir, run, mpiexec, python)
    if real_status is None:
        return Outcome(run, "differs", "mpiexec did not finish in time")
    if status is None or (status == 0) != (real_status == 0):
        said = error.removeprefix("collsim: error: ") or "no error line"
        detail = f"exit {status} under collsim ({said}), exit {real_status} under mpiexec"
        return Outcome(run, "differs", detail)
    ours = [RankOutput(*(normalise(s, COLLSIM_NAME) for s in rank)) for rank in ours]
    real_name = re.escape(processor_name)
    theirs = [RankOutput(*(normalise(s, real_name) for s in rank)) for rank in theirs]
    difference = first_difference(ours, theirs)
    return Outcome(run, "differs" if difference else "same", difference)


def processor_name_of(mpiexec, python):
    """The name real MPI gives this machine (what ``helloworld.py`` prints)."""
    code = "from mpi4py import MPI; print(MPI.Get_processor_name())"
    command = [*shlex.split(mpiexec), "-n", "1", python, "-c", code]
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip()


def table(outcomes, demo_dir):
    """The markdown table docs/mpi4py-conformance.md quotes: every run, then every
    excluded file with its reason."""
    lines = ["| demo | -n | under collsim exec | why |", "|---|--:|---|---|"]
    for o in outcomes:
        argv = " ".join((o.run.path, *o.run.args))
        if o.run.stdin:
            argv = f"echo {o.run.stdin.strip()} \\| {argv}"
        verdict = "same output" if o.verdict == "same" else "**differs**"
        lines.append(f"| `{argv}` | {o.run.ranks} | {verdict} | {o.detail} |")
    for path in _glob(demo_dir, "**/*.py"):
        reason = why_excluded(path)
        if reason is not None:
            lines.append(f"| `{path}` | - | excluded | {reason} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("demo_dir", help="mpi4py's demo/ folder (has helloworld.py)")
    parser.add_argument("--mpiexec", required=True, help="Open MPI's mpiexec and its flags")
    parser.add_argument("--python", required=True, help="a python with mpi4py and numpy")
    parser.add_argument("--only", nargs="+", default=(), help="only these demos (paths)")
    args = parser.parse_args(argv)
    if not (Path(args.demo_dir) / "helloworld.py").is_file():
        parser.error(f"demo_dir {args.demo_dir!r}: give mpi4py's demo/ folder")
    for path in unclassified(args.demo_dir):
        print(f"not classified: {path} (add it to RUNS or EXCLUDED)", file=sys.stderr)
    name = processor_name_of(args.mpiexec, args.python)
    outcomes = []
    for run in runs(args.demo_dir):
        if args.only and run.path not in args.only:
            continue
        outcomes.append(compare(args.demo_dir, run, args.mpiexec, args.python, name))
        o = outcomes[-1]
        print(o.run.path, *o.run.args, f"-n {o.run.ranks}", o.verdict, o.detail, sep="\t")
    print(table(outcomes, args.demo_dir))
    return 0 if all(o.verdict == "same" for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
