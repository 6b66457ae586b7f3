"""Ctrl-C stops `collsim exec` whatever the ranks do (a busy loop, a long sleep), prints
where each rank was and exits 130, as a shell reports SIGINT.  How soon (well within a second)
is benchmarks/bench_stops.py's figure; here a 30 s limit only tells a hang from a stop."""

import re
import signal
import subprocess
import sys
import time

import pytest

SPINS = """\
from mpi4py import MPI

comm = MPI.COMM_WORLD
total = comm.allreduce(comm.Get_rank())
if comm.Get_rank() == 0:
    print("spinning", flush=True)
    while True:
        pass
comm.recv(source=0)
"""
SLEEPS = """\
import time
from mpi4py import MPI

comm = MPI.COMM_WORLD
comm.Barrier()
if comm.Get_rank() == 1:
    print("sleeping", flush=True)
    time.sleep(120)
comm.Barrier()
"""
# a thread of rank 0 blocks outside collsim (on a plain lock nobody releases) holding the
# run's baton: the run cannot go on, and Ctrl-C must still stop it, naming the thread
THREAD_BLOCKS = """\
import threading
from mpi4py import MPI

comm = MPI.COMM_WORLD
stuck = threading.Lock()
stuck.acquire()


def worker():
    print("blocking", flush=True)
    stuck.acquire()


if comm.Get_rank() == 0:
    t = threading.Thread(target=worker, name="stuck")
    t.start()
    t.join()
comm.Barrier()
"""


def _default_sigint():
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _interrupt(tmp_path, text, ready):
    """Start the script under `collsim exec -n 3`, wait for the line ``ready`` (the run is
    under way), send SIGINT; returns (status, stderr)."""
    script = tmp_path / "script.py"
    script.write_text(text, encoding="utf-8")
    # a child started from a background job inherits SIGINT ignored, and then Python does
    # not turn it into KeyboardInterrupt: give the child the default, as a terminal does
    proc = subprocess.Popen(
        [sys.executable, "-m", "collsim", "exec", "-n", "3", str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_default_sigint,
    )
    try:
        line = proc.stdout.readline()
        assert ready in line, line + proc.stderr.read()
        time.sleep(0.3)  # past its print, into the loop or the sleep (on a loaded machine too)
        proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail("Ctrl-C did not stop collsim exec within 30 s")
        return proc.returncode, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def test_ctrl_c_stops_a_busy_rank_and_says_where_each_rank_was(tmp_path):
    status, err = _interrupt(tmp_path, SPINS, "spinning")
    assert status == 130, err
    assert "interrupted (Ctrl-C)" in err
    assert re.search(r"rank 0: running at script.py:[678] in <module>", err)  # at the loop
    assert "rank 1: blocked at script.py:9 in <module>" in err  # its recv from rank 0
    assert "rank 2: " in err


def test_ctrl_c_does_not_wait_for_a_rank_in_a_long_sleep(tmp_path):
    status, err = _interrupt(tmp_path, SLEEPS, "sleeping")
    assert status == 130, err
    assert re.search(r"rank 1: running at script.py:[78] in <module>", err)  # at the sleep


def test_ctrl_c_stops_a_thread_blocked_outside_collsim_and_names_it(tmp_path):
    status, err = _interrupt(tmp_path, THREAD_BLOCKS, "blocking")
    assert status == 130, err
    assert "rank 0 thread stuck: running at script.py:11 in worker" in err
    assert "rank 0: blocked at script.py:17 in <module>" in err  # its join
    assert "rank 1: blocked at script.py:18 in <module>" in err  # the barrier
