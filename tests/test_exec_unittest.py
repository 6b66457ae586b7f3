"""`collsim exec` runs test files as mpirun does: each rank's ``__main__`` is a module in
which unittest, doctest and pytest-style discovery find the script's classes and functions,
and a deadlock inside a unittest test ends the run with the deadlock report (unittest
catches every exception of a test, so the stop must reach every later call too)."""

import subprocess
import sys
import threading

import pytest

from collsim.cli import main

THREE_TESTS = """\
import unittest
from mpi4py import MPI

comm = MPI.COMM_WORLD


class Reductions(unittest.TestCase):
    def test_sum(self):
        self.assertEqual(comm.allreduce(1), comm.Get_size())

    def test_max(self):
        self.assertEqual(comm.allreduce(comm.Get_rank(), op=MPI.MAX), comm.Get_size() - 1)

    def test_rank_is_small(self):
        self.assertLess(comm.Get_rank(), {limit})


if __name__ == "__main__":
    unittest.main()
"""

DOCTESTS = '''\
"""A script whose docstrings are its tests.

>>> double(2)
4
"""
import doctest
from mpi4py import MPI


def double(x):
    """
    >>> double(SIZE)
    4
    """
    return 2 * x


class Box:
    """
    >>> Box().size
    3
    """

    size = 3


SIZE = MPI.COMM_WORLD.allreduce(1)
print("rank", MPI.COMM_WORLD.Get_rank(), doctest.testmod())
'''

PYTEST_STYLE = """\
import inspect
import sys


def test_one():
    pass


def test_two():
    pass


main = sys.modules["__main__"]
found = sorted(n for n, f in inspect.getmembers(main, inspect.isfunction) if n.startswith("test_"))
print("found", found, sorted(n for n in vars(main) if n.startswith("test_")))
"""

DEADLOCK_IN_A_TEST = """\
import unittest
import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD


class Exchange(unittest.TestCase):
    def test_a_both_receive_first(self):
        print("started", flush=True)
        buf = np.zeros(2)
        comm.Recv(buf, source=1 - comm.Get_rank())

    def test_b_barrier(self):
        comm.Barrier()

    def test_c_barrier(self):
        comm.Barrier()


if __name__ == "__main__":
    unittest.main()
"""


def _exec(tmp_path, text, capsys, ranks=2):
    script = tmp_path / "script.py"
    script.write_text(text, encoding="utf-8")
    status = main(["exec", "-n", str(ranks), str(script)])
    out, err = capsys.readouterr()
    return status, out, err


def test_unittest_main_runs_the_three_tests_of_the_script(tmp_path, capsys):
    status, _, err = _exec(tmp_path, THREE_TESTS.format(limit=99), capsys)
    assert status == 0, err
    for rank in (0, 1):
        assert f"[1,{rank}]<stderr>:Ran 3 tests in" in err
        assert f"[1,{rank}]<stderr>:OK" in err


def test_a_failing_unittest_fails_the_run(tmp_path, capsys):
    status, _, err = _exec(tmp_path, THREE_TESTS.format(limit=1), capsys)  # rank 1 fails
    assert status != 0
    assert "[1,1]<stderr>:FAILED (failures=1)" in err
    assert "rank 1 called sys.exit(1)" in err


def test_doctest_testmod_finds_the_scripts_docstrings(tmp_path, capsys):
    status, out, err = _exec(tmp_path, DOCTESTS, capsys)
    assert status == 0, err
    assert "[1,0]<stdout>:rank 0 TestResults(failed=0, attempted=3)" in out
    assert "[1,1]<stdout>:rank 1 TestResults(failed=0, attempted=3)" in out


def test_pytest_style_discovery_sees_the_scripts_functions(tmp_path, capsys):
    status, out, err = _exec(tmp_path, PYTEST_STYLE, capsys)
    assert status == 0, err
    found = "found ['test_one', 'test_two'] ['test_one', 'test_two']"
    assert f"[1,0]<stdout>:{found}" in out and f"[1,1]<stdout>:{found}" in out


def test_each_rank_sees_its_own_main(tmp_path, capsys):
    text = "import __main__\nfrom mpi4py import MPI\n__main__.me = MPI.COMM_WORLD.Get_rank()\n"
    text += "MPI.COMM_WORLD.Barrier()\nprint('me', me, __main__.__dict__['me'])\n"
    status, out, err = _exec(tmp_path, text, capsys, ranks=3)
    assert status == 0, err
    for rank in range(3):
        assert f"[1,{rank}]<stdout>:me {rank} {rank}\n" in out


def test_a_deadlock_inside_a_unittest_test_ends_with_the_report(tmp_path):
    script = tmp_path / "deadlock_test.py"
    script.write_text(DEADLOCK_IN_A_TEST, encoding="utf-8")
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "collsim", "exec", "-n", "2", str(script)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("a deadlock inside a unittest test hung the run")
    assert proc.returncode not in (0, 130), proc.stderr
    assert "would hang forever" in proc.stderr
    assert "deadlock_test.py:12" in proc.stderr  # the Recv each rank is blocked in
    # the stopped ranks print nothing more (as killed processes): no unittest report
    assert "Ran 3 tests" not in proc.stderr and "Aborted" not in proc.stderr
    assert "[1,0]<stdout>:started" in proc.stdout


def test_a_rank_that_swallows_the_stop_is_stopped_and_no_thread_is_left(tmp_path, capsys):
    text = """\
from mpi4py import MPI

comm = MPI.COMM_WORLD
for attempt in range(1000):
    try:
        comm.recv(source=1 - comm.Get_rank())
    except BaseException:
        pass
"""
    before = threading.active_count()
    status, _, err = _exec(tmp_path, text, capsys)
    assert status != 0 and "would hang forever" in err
    assert threading.active_count() == before
