"""collsim.mpi's lowercase collectives run schedules of chunk moves from collsim.collectives:
``bcast``, ``allgather`` and ``alltoall`` those of collsim's own collectives (the ones
``Bcast``, ``Allgather`` and ``Alltoall`` run), ``gather`` and ``scatter`` the linear ones,
``barrier`` the dissemination barrier and ``scan``/``exscan`` the chain.  Every transfer
is a chunk move of that schedule, step by step, with one pickle a chunk."""

import dataclasses
import math
import pickle

import pytest

import collsim
from collsim import mpi as MPI
from collsim.collectives.dissemination import dissemination_barrier
from collsim.collectives.registry import build
from collsim.collectives.schedule import ChunkMove, contributions
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


# -- gather, scatter, barrier and scan: collectives/ schedules written out by hand here,
# from the algorithms' descriptions (not from the builders), then checked on a run


def expected_linear(k, root, gather):
    """One step: every rank but the root sends its chunk r to it (gather), or the root
    sends chunk r to every rank r (scatter); (src, dst, chunk) triples."""
    others = [r for r in range(k) if r != root]
    step = [(r, root, r) if gather else (root, r, r) for r in others]
    return [step] if step else []


def expected_dissemination(k):
    """Round i: rank r sends to r + 2^i (mod K), until 2^i reaches K."""
    steps, distance = [], 1
    while distance < k:
        steps.append([(r, (r + distance) % k, 0) for r in range(k)])
        distance *= 2
    return steps


def expected_chain(k):
    """Step s: rank s sends its prefix to rank s + 1."""
    return [[(s, s + 1, 0)] for s in range(k - 1)]


def triples(schedule):
    return [[(m.src, m.dst, m.chunks.start) for m in step] for step in schedule.steps]


@pytest.mark.parametrize("k, root", CASES)
def test_the_linear_gather_and_scatter_are_one_step_to_or_from_the_root(k, root):
    from collsim.collectives.linear import linear_gather, linear_scatter

    gather, scatter = linear_gather(k, root), linear_scatter(k, root)
    assert triples(gather) == expected_linear(k, root, gather=True)
    assert triples(scatter) == expected_linear(k, root, gather=False)
    for schedule in (gather, scatter):
        assert all(len(m.chunks) == 1 and not m.reduce for _, m in schedule.moves())
        assert schedule.n_chunks == k and schedule.root == root
    # what each rank holds at the end: the root every rank's chunk; rank r the root's chunk r
    final = list(contributions(gather))[-1]
    assert [sorted(final[root][c]) for c in range(k)] == [[c] for c in range(k)]
    final = list(contributions(scatter))[-1]
    assert [sorted(final[r][r]) for r in range(k)] == [[root]] * k


@pytest.mark.parametrize("k", [1, 2, 3, 5, 8])
def test_the_dissemination_barrier_lets_no_rank_leave_before_all_arrived(k):
    schedule = dissemination_barrier(k)
    assert triples(schedule) == expected_dissemination(k)
    assert schedule.n_steps == (0 if k == 1 else math.ceil(math.log2(k)))
    assert all(m.reduce for _, m in schedule.moves())  # each learns whom the sender heard of
    tables = list(contributions(schedule))
    assert all(tables[-1][r][0] == frozenset(range(k)) for r in range(k))
    if k > 2:  # one round fewer would not do: someone has not heard from everyone
        assert any(tables[-2][r][0] != frozenset(range(k)) for r in range(k))


@pytest.mark.parametrize("k", [1, 2, 3, 5, 8])
def test_the_chain_scan_hands_each_prefix_to_the_next_rank(k):
    from collsim.collectives.chain import chain_scan

    schedule = chain_scan(k)
    assert triples(schedule) == expected_chain(k)
    assert all(m.reduce for _, m in schedule.moves())
    final = list(contributions(schedule))[-1]
    assert [sorted(final[r][0]) for r in range(k)] == [list(range(r + 1)) for r in range(k)]


def pairs(expected):
    return [sorted((src, dst) for src, dst, _ in step) for step in expected]


@pytest.mark.parametrize("k, root", CASES)
def test_gather_and_scatter_run_the_linear_schedules(k, root):
    def main():
        comm = MPI.COMM_WORLD
        got = comm.gather(f"g{comm.rank:02d}", root=root)
        part = comm.scatter([f"s{r:02d}" for r in range(k)] if comm.rank == root else None, root)
        return got, part

    result = run(k, main)
    names = [f"g{r:02d}" for r in range(k)]
    assert result.returns == [(names if r == root else None, f"s{r:02d}") for r in range(k)]
    expected = pairs(expected_linear(k, root, True)) + pairs(expected_linear(k, root, False))
    assert steps_of(result.trace) == expected
    assert result.trace.transfer_count == 2 * (k - 1)


@pytest.mark.parametrize("k", [1, 2, 3, 5, 8])
def test_barrier_runs_the_dissemination_schedule_with_empty_messages(k):
    def main():
        MPI.COMM_WORLD.barrier()

    result = run(k, main)
    assert steps_of(result.trace) == pairs(expected_dissemination(k))
    assert {t.nbytes for t in result.trace.transfers} == ({0} if k > 1 else set())


@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("k", [1, 2, 3, 5, 8])
def test_scan_and_exscan_run_the_chain_in_mpis_order(k, exclusive):
    # string concatenation does not commute: rank order is the only order that gives these
    def main():
        comm = MPI.COMM_WORLD
        mine = chr(ord("a") + comm.rank)
        return comm.exscan(mine) if exclusive else comm.scan(mine)

    result = run(k, main)
    letters = "abcdefgh"[:k]
    if exclusive:
        assert result.returns == [letters[:r] or None for r in range(k)]
    else:
        assert result.returns == [letters[: r + 1] for r in range(k)]
    assert steps_of(result.trace) == pairs(expected_chain(k))
    assert result.trace.transfer_count == k - 1


def _one_move_a_step(schedule):
    """``schedule`` with each step's moves taken one step at a time."""
    steps = tuple((move,) for step in schedule.steps for move in step)
    return dataclasses.replace(schedule, steps=steps, phases=())


def _gather_then_release(k):
    """A barrier of another shape: every rank reports to rank 0, then rank 0 releases
    everyone (2 steps)."""
    arrive = tuple(ChunkMove(r, 0, range(0, 1), True) for r in range(1, k))
    leave = tuple(ChunkMove(0, r, range(0, 1), False) for r in range(1, k))
    steps = (arrive, leave) if k > 1 else ()
    return dataclasses.replace(dissemination_barrier(k), steps=steps, phases=())


@pytest.mark.parametrize("call", ["gather", "scatter", "barrier"])
def test_the_object_calls_follow_whatever_schedule_they_are_given(monkeypatch, call):
    # another schedule in the builder's place: the run's transfers change with it, so the
    # call has no algorithm of its own
    import collsim.mpi.objects as objects_module

    k, root = 5, 2
    if call == "barrier":
        given = _gather_then_release
        monkeypatch.setattr(objects_module, "dissemination_barrier", given)
        schedule = given(k)
    else:
        builder = getattr(objects_module, f"linear_{call}")
        monkeypatch.setattr(
            objects_module, f"linear_{call}", lambda k, root: _one_move_a_step(builder(k, root))
        )
        schedule = _one_move_a_step(builder(k, root))

    def main():
        comm = MPI.COMM_WORLD
        if call == "gather":
            return comm.gather(comm.rank * 10, root=root)
        if call == "scatter":
            return comm.scatter(list(range(0, 50, 10)) if comm.rank == root else None, root)
        return comm.barrier()

    result = run(k, main)
    expected = {
        "gather": [list(range(0, 50, 10)) if r == root else None for r in range(k)],
        "scatter": [10 * r for r in range(k)],
        "barrier": [None] * k,
    }[call]
    assert result.returns == expected
    assert steps_of(result.trace) == moves_of(schedule)
