"""collsim.mpi's lowercase ``bcast``, ``allgather`` and ``alltoall`` run the schedules of
collsim's own collectives (the ones ``Bcast``, ``Allgather`` and ``Alltoall`` run): every
transfer is a chunk move of that schedule, step by step, with one pickle a chunk."""

import pickle

import pytest

import collsim
from collsim import mpi as MPI
from collsim.collectives.registry import build
from collsim.runtime import blocking

CASES = [(k, root) for k in (1, 2, 3, 5, 8) for root in sorted({0, k - 1, k // 2})]


def steps_of(trace):
    """The transfers as steps: ``(src, dst)`` pairs grouped by start time, each sorted."""
    by_start = {}
    for t in trace.transfers:
        by_start.setdefault(t.start, []).append((t.src, t.dst))
    return [sorted(pairs) for _, pairs in sorted(by_start.items())]


def moves_of(schedule):
    return [sorted((m.src, m.dst) for m in step) for step in schedule.steps if step]


def run(k, main):
    # a switch: every pair one hop, and pickles of one size, so a step's moves start together
    return blocking.run(collsim.Cluster(collsim.topology.switch(k)), main)


@pytest.mark.parametrize("k, root", CASES)
def test_bcast_runs_the_binomial_tree_of_collsims_broadcast(k, root):
    obj = {"payload": "x" * 40}

    def main():
        comm = MPI.COMM_WORLD
        return comm.bcast(obj if comm.rank == root else None, root=root)

    result = run(k, main)
    assert result.returns == [obj] * k
    assert steps_of(result.trace) == moves_of(build("broadcast", "tree", k, root))
    pickle_bytes = len(pickle.dumps(obj, pickle.HIGHEST_PROTOCOL))
    assert {t.nbytes for t in result.trace.transfers} == ({pickle_bytes} if k > 1 else set())


@pytest.mark.parametrize("k", [1, 2, 3, 5, 8])
def test_allgather_runs_the_ring_of_collsims_all_gather(k):
    def main():
        comm = MPI.COMM_WORLD
        return comm.allgather(f"rank {comm.rank:02d}")  # one pickle size for every rank

    result = run(k, main)
    assert result.returns == [[f"rank {r:02d}" for r in range(k)]] * k
    assert steps_of(result.trace) == moves_of(build("all_gather", "ring", k))


@pytest.mark.parametrize("k", [1, 2, 3, 5, 8])
def test_alltoall_runs_collsims_direct_all_to_all(k):
    def main():
        comm = MPI.COMM_WORLD
        return comm.alltoall([f"{comm.rank:02d}>{j:02d}" for j in range(k)])

    result = run(k, main)
    assert result.returns == [[f"{i:02d}>{r:02d}" for i in range(k)] for r in range(k)]
    assert steps_of(result.trace) == moves_of(build("all_to_all", "direct", k))
