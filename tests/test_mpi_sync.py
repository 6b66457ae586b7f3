"""``mpi4py.util.sync`` (collsim.mpi.sync): ``Sequential`` orders a block by rank; the classes
that need one-sided memory (``MPI.Win``) refuse at once and say so.

The oracle for ``Sequential`` is its definition: rank r enters only after rank r-1 has
left, so the simulated times at which the ranks enter rise with the rank (without it,
every rank enters at t = 0)."""

import textwrap

import pytest
from fuzzkit import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

import collsim
from collsim import mpi as MPI
from collsim.mpi import sync


@settings(max_examples=8, deadline=None)
@given(k=st.integers(min_value=1, max_value=7), tag=st.integers(min_value=0, max_value=9))
def test_sequential_lets_each_rank_in_after_the_one_before_has_left(k, tag):
    def main():
        comm = MPI.COMM_WORLD
        if comm.rank == 0 and k > 1:  # a message of the user's on the same tag is not a turn
            comm.send("mine", dest=k - 1, tag=tag)
        with sync.Sequential(comm, tag=tag):
            entered = MPI.Wtime()
            MPI.COMM_SELF.Barrier()  # a block that does something
            left = MPI.Wtime()
        mine = comm.recv(source=0, tag=tag) if comm.rank == k - 1 and k > 1 else None
        return entered, left, mine

    returns = collsim.exec(main, n=k, echo=False).returns
    for before, after in zip(returns, returns[1:]):
        assert after[0] > before[1]
    assert returns[0][0] == 0.0
    if k > 1:
        assert returns[-1][2] == "mine"


def test_begin_and_end_are_the_block_without_with():
    def main():
        comm = MPI.COMM_WORLD
        turn = sync.Sequential(comm)
        times = []
        for _ in range(2):
            turn.begin()
            times.append(MPI.Wtime())
            turn.end()
        return times

    returns = collsim.exec(main, n=3, echo=False).returns
    firsts = [times[0] for times in returns]
    assert firsts == sorted(firsts) and len(set(firsts)) == 3


@pytest.mark.parametrize(
    "name, call",
    [
        ("Counter", lambda: sync.Counter(comm=MPI.COMM_WORLD)),
        ("Mutex", lambda: sync.Mutex(comm=MPI.COMM_WORLD)),
        ("Condition", lambda: sync.Condition(comm=MPI.COMM_WORLD)),
        ("Semaphore", lambda: sync.Semaphore(2, comm=MPI.COMM_WORLD)),
    ],
)
def test_what_needs_one_sided_memory_refuses_at_once_naming_win(name, call):
    with pytest.raises(NotImplementedError) as caught:
        call()
    said = str(caught.value)
    assert f"sync.{name}" in said and "MPI.Win" in said and "not simulate" in said


def test_a_script_imports_sync_and_a_counter_fails_at_once(tmp_path):
    program = tmp_path / "sync_prog.py"
    program.write_text(
        textwrap.dedent(
            """
            import mpi4py.util.sync as sync
            from mpi4py import MPI

            with sync.Sequential(MPI.COMM_WORLD):
                print("turn", MPI.COMM_WORLD.rank)
            MPI.COMM_WORLD.Barrier()
            sync.Counter(comm=MPI.COMM_WORLD)
            """
        )
    )
    outcome = run_cli(["exec", "-n", "3", str(program)], timeout=120)
    assert outcome.status == 1
    assert [line.split(":", 1)[1] for line in outcome.stdout.splitlines()] == [
        "turn 0",
        "turn 1",
        "turn 2",
    ]
    assert "sync.Counter needs MPI one-sided communication" in outcome.stderr


def test_other_util_modules_are_refused_naming_the_ones_there_are(tmp_path):
    program = tmp_path / "pool_prog.py"
    program.write_text("from mpi4py.util import pool\n")
    outcome = run_cli(["exec", "-n", "1", str(program)], timeout=60)
    assert outcome.status == 1
    assert "mpi4py.util.pool" in outcome.stderr and "dtlib, pkl5, sync" in outcome.stderr
