"""How soon does `collsim exec` stop a program that would not end?  Seconds, in a fresh
interpreter each, next to a baseline: the same command running a 10-barrier script that
ends by itself (interpreter start, imports, the run, exit).

* runaway: a rank that sends for ever, stopped by the default ``--max-ops`` guard (a
  count of operations, 50,000 + 4K(K-1)); the time is from start to exit;
* Ctrl-C: a rank in ``while True: pass`` and a rank in ``time.sleep(120)``, each sent
  SIGINT once the script has printed a ready line; the time is from the signal to exit.

Each run's exit status and message are checked before its time is kept (1 and the
``--max-ops`` message for the runaway; 130 and the ranks' report for Ctrl-C).

    python benchmarks/bench_stops.py              # best of 3 runs each
    python benchmarks/bench_stops.py --quick      # one run each
"""

import argparse
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_engine import command_line, machine_line

SCRIPTS = {
    "baseline": "from mpi4py import MPI\nfor _ in range(10):\n    MPI.COMM_WORLD.Barrier()\n",
    "runaway": (
        "from mpi4py import MPI\ncomm = MPI.COMM_WORLD\nwhile True:\n"
        "    if comm.Get_rank() == 0:\n        comm.send(1, dest=1)\n"
    ),
    "busy loop": (
        "from mpi4py import MPI\ncomm = MPI.COMM_WORLD\ncomm.Barrier()\n"
        "if comm.Get_rank() == 0:\n    print('ready', flush=True)\n    while True:\n"
        "        pass\ncomm.recv(source=0)\n"
    ),
    "long sleep": (
        "import time\nfrom mpi4py import MPI\ncomm = MPI.COMM_WORLD\ncomm.Barrier()\n"
        "if comm.Get_rank() == 0:\n    print('ready', flush=True)\n    time.sleep(120)\n"
        "comm.Barrier()\n"
    ),
}
RANKS = {"baseline": 2, "runaway": 2, "busy loop": 3, "long sleep": 3}


def _command(path, ranks):
    return [sys.executable, "-m", "collsim", "exec", "-n", str(ranks), str(path)]


def _default_sigint():
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # as a terminal gives it


def ends_by_itself(path, ranks, status, words):
    """Seconds from start to exit of a run that ends on its own (or by a guard)."""
    start = time.perf_counter()
    proc = subprocess.run(_command(path, ranks), capture_output=True, text=True, timeout=300)
    seconds = time.perf_counter() - start
    assert proc.returncode == status and words in proc.stderr, proc.stderr[-2000:]
    return seconds


def stopped_by_ctrl_c(path, ranks):
    """Seconds from SIGINT to exit, once the script has said it is under way."""
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
    proc = subprocess.Popen(_command(path, ranks), preexec_fn=_default_sigint, **pipes)
    try:
        assert "ready" in proc.stdout.readline()
        time.sleep(0.3)  # into the loop or the sleep
        sent = time.perf_counter()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        seconds = time.perf_counter() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130 and "interrupted (Ctrl-C)" in err, err[-2000:]
    return seconds


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one run each, not the best of 3")
    args = parser.parse_args(argv)
    rounds = 1 if args.quick else 3
    print(machine_line())
    print(command_line(argv))
    with tempfile.TemporaryDirectory() as folder:
        paths = {}
        for name, text in SCRIPTS.items():
            paths[name] = Path(folder) / f"{name.replace(' ', '_')}.py"
            paths[name].write_text(text, encoding="utf-8")
        best = {
            "baseline": min(ends_by_itself(paths["baseline"], 2, 0, "") for _ in range(rounds)),
            "runaway": min(
                ends_by_itself(paths["runaway"], 2, 1, "--max-ops") for _ in range(rounds)
            ),
            "busy loop": min(stopped_by_ctrl_c(paths["busy loop"], 3) for _ in range(rounds)),
            "long sleep": min(stopped_by_ctrl_c(paths["long sleep"], 3) for _ in range(rounds)),
        }
    print(f"best of {rounds} run(s) each; baseline: a 10-barrier script on 2 ranks, start to exit")
    print()
    print("| program | ranks | stopped by | measured | seconds | / baseline |")
    print("|---|--:|---|---|--:|--:|")
    rows = [
        ("baseline (ends by itself)", "baseline", "its end", "start to exit"),
        ("send for ever", "runaway", "default --max-ops", "start to exit"),
        ("while True: pass", "busy loop", "Ctrl-C", "signal to exit"),
        ("time.sleep(120)", "long sleep", "Ctrl-C", "signal to exit"),
    ]
    for label, key, by, measured in rows:
        ratio = best[key] / best["baseline"]
        print(f"| {label} | {RANKS[key]} | {by} | {measured} | {best[key]:.2f} | {ratio:.2f}x |")


if __name__ == "__main__":
    main()
