"""How fast is the student's loop?  Wall seconds of the commands a student types, each in a
fresh interpreter (start-up, imports, the work, exit), best of N runs.

* ``collsim --version`` and ``collsim lesson list``: no simulator is loaded (target 0.3 s and
  0.5 s on the team's 2-core machine);
* ``collsim lesson 1 --exercise 1``: one exercise, the cells before its part run quietly;
* ``collsim lesson 4 --no-pause``: a whole lesson, its pictures written.

Each run's exit status is checked before its time is kept.  Wall seconds grow with the
machine's load; the CPU seconds (user + system, of the child process) barely do, so both
are printed.  ``--all-lessons`` times every lesson.  ``--code PATH`` times another
checkout of collsim (its folder put first on PYTHONPATH), so a before/after pair is two
commands on one machine:

    python benchmarks/bench_startup.py                    # this checkout, best of 5
    python benchmarks/bench_startup.py --code /work/main  # another checkout (before)
    python benchmarks/bench_startup.py --quick            # one run each
    python benchmarks/bench_startup.py --all-lessons      # and every lesson, whole
"""

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_engine import command_line, machine_line

HERE = Path(__file__).resolve().parents[1]
COMMANDS = [
    ("--version",),
    ("lesson", "list"),
    ("lesson", "1", "--exercise", "1", "--no-pause"),
    ("lesson", "4", "--no-pause"),
]


def timed(argv, code, cwd, rounds):
    """Best (wall, CPU) seconds of ``python -m collsim ARGV`` over ``rounds`` fresh
    interpreters, or None when the command is refused (an older checkout)."""
    env = dict(
        os.environ,
        PYTHONPATH=str(code),
        MPLBACKEND="Agg",
        COLLSIM_LESSON_OUT=str(Path(cwd) / "pictures"),
    )
    for name in ("COLLSIM_LESSONS", "COLLSIM_SOLUTIONS", "COLLSIM_LANG"):
        env.pop(name, None)
    best = (float("inf"), float("inf"))
    for _ in range(rounds):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "collsim", *argv],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
        )
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        if done.returncode != 0:  # an old checkout without --exercise says so: no figure
            return None
        best = (min(best[0], wall), min(best[1], cpu))
    return best


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--code", default=str(HERE), help="the checkout to time (default: this)")
    parser.add_argument("--rounds", type=int, default=5, help="runs per command (best kept)")
    parser.add_argument("--quick", action="store_true", help="one run per command")
    parser.add_argument("--all-lessons", action="store_true", help="also time every lesson")
    args = parser.parse_args(argv)
    rounds = 1 if args.quick else args.rounds
    print(machine_line())
    print(command_line(argv))
    print(f"code: {args.code}\n")
    commands = list(COMMANDS)
    if args.all_lessons:
        commands += [("lesson", str(n), "--no-pause") for n in range(1, 14) if n != 4]
    print("| command | best of | wall seconds | CPU seconds |")
    print("|---|--:|--:|--:|")
    with tempfile.TemporaryDirectory() as scratch:
        for command in commands:
            seconds = timed(command, args.code, scratch, rounds)
            if seconds is None:
                shown = "refused (not in this version) | -"
            else:
                shown = f"{seconds[0]:.2f} | {seconds[1]:.2f}"
            print(f"| collsim {' '.join(command)} | {rounds} | {shown} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
