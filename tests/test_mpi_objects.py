"""collsim.mpi's lowercase calls on picklable objects, for drawn rank counts 1..16 and objects;
the bytes they move are the pickles'."""

import pickle
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import collsim
from collsim import mpi as MPI
from collsim.runtime import blocking


def run(k, main):
    return blocking.run(collsim.Cluster(collsim.topology.ring(k)), main)


def objects(k, seed):
    """One object per rank: a dict of a list, a string, a tuple and an array (values drawn
    from a seeded generator)."""
    rng = np.random.default_rng(seed)
    return [
        {
            "rank": r,
            "values": rng.integers(-50, 50, size=int(rng.integers(0, 5))).tolist(),
            "name": "x" * int(rng.integers(0, 4)),
            "pair": (r, -r),
            "array": rng.standard_normal(2),
        }
        for r in range(k)
    ]


def same(a, b):
    """Equality that compares the arrays inside the dicts element by element."""
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[key], b[key]) for key in a)
    if isinstance(a, list | tuple):
        return type(a) is type(b) and len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, np.ndarray):
        return np.array_equal(a, b)
    return a == b


def fold(values, op):
    out = values[0]
    for v in values[1:]:
        out = op(out, v)
    return out


# call name: (program(comm, objs, root) -> the rank's result, expected(objs, root, r))
CALLS = {
    "send/recv": (
        lambda c, o, root: (
            (
                c.send(o[c.rank], dest=(c.rank + 1) % c.size, tag=2),
                c.recv(source=(c.rank - 1) % c.size, tag=2),
            )[1]
            if c.size > 1
            else o[0]
        ),
        lambda o, root, r: o[(r - 1) % len(o)],
    ),
    "isend/irecv": (
        lambda c, o, root: MPI.Request.waitall(
            [c.irecv(source=(c.rank - 1) % c.size), c.isend(o[c.rank], (c.rank + 1) % c.size)]
        )[0],
        lambda o, root, r: o[(r - 1) % len(o)],
    ),
    "sendrecv": (
        lambda c, o, root: c.sendrecv(
            o[c.rank], dest=(c.rank + 1) % c.size, source=(c.rank - 1) % c.size
        ),
        lambda o, root, r: o[(r - 1) % len(o)],
    ),
    "bcast": (
        lambda c, o, root: c.bcast(o[c.rank] if c.rank == root else None, root=root),
        lambda o, root, r: o[root],
    ),
    "scatter": (
        lambda c, o, root: c.scatter(o if c.rank == root else None, root=root),
        lambda o, root, r: o[r],
    ),
    "gather": (
        lambda c, o, root: c.gather(o[c.rank], root=root),
        lambda o, root, r: o if r == root else None,
    ),
    "allgather": (lambda c, o, root: c.allgather(o[c.rank]), lambda o, root, r: o),
    "reduce": (
        lambda c, o, root: c.reduce(o[c.rank]["values"], op=MPI.SUM, root=root),
        lambda o, root, r: fold([x["values"] for x in o], list.__add__) if r == root else None,
    ),
    "allreduce": (
        lambda c, o, root: c.allreduce(o[c.rank]["pair"], op=MPI.MAX),
        lambda o, root, r: max(x["pair"] for x in o),
    ),
    "alltoall": (
        lambda c, o, root: c.alltoall([(c.rank, j, o[c.rank]["name"]) for j in range(c.size)]),
        lambda o, root, r: [(s, r, o[s]["name"]) for s in range(len(o))],
    ),
    "barrier": (lambda c, o, root: c.barrier(), lambda o, root, r: None),
}


@pytest.mark.parametrize("name", list(CALLS))
@settings(max_examples=8)
@given(k=st.integers(1, 16), seed=st.integers(0, 2**16), data=st.data())
def test_object_call_matches_its_semantics(name, k, seed, data):
    root = data.draw(st.integers(0, k - 1), label="root")
    program, expected = CALLS[name]
    objs = objects(k, seed)
    returns = run(k, lambda: program(MPI.COMM_WORLD, objs, root)).returns
    for r, got in enumerate(returns):
        assert same(got, expected(objs, root, r)), (name, r, got)


@pytest.mark.parametrize("name", list(CALLS))
def test_object_call_on_sixteen_ranks(name):
    program, expected = CALLS[name]
    objs = objects(16, 5)
    returns = run(16, lambda: program(MPI.COMM_WORLD, objs, 13)).returns
    for r, got in enumerate(returns):
        assert same(got, expected(objs, 13, r)), (name, r)


@pytest.mark.parametrize(
    "op, python", [(MPI.SUM, sum), (MPI.PROD, np.prod), (MPI.MAX, max), (MPI.MIN, min)]
)
def test_every_op_on_numbers(op, python):
    values = [3, -2, 5, 1, 4]
    returns = run(5, lambda: MPI.COMM_WORLD.allreduce(values[MPI.COMM_WORLD.rank], op=op)).returns
    assert returns == [python(values)] * 5


@pytest.mark.parametrize(
    "k, folded",
    [
        (3, "((r0,r1),r2)"),
        (4, "((r0,r1),(r2,r3))"),
        (6, "(((r0,r1),(r2,r3)),(r4,r5))"),
    ],
)
@pytest.mark.parametrize("root", [0, 2])
def test_a_function_op_combines_in_mpi4pys_order(k, folded, root):
    # not commutative: the result shows the order, a binomial tree over the ranks in order
    # whatever the root, as real mpi4py 4.1.2 gives it
    def pair(a, b):
        return f"({a},{b})"

    def main():
        comm = MPI.COMM_WORLD
        me = f"r{comm.rank}"
        return comm.reduce(me, op=pair, root=root), comm.allreduce(me, op=pair)

    returns = run(k, main).returns
    assert returns == [(folded if r == root else None, folded) for r in range(k)]


def test_received_objects_are_copies():
    shared = {"list": [1, 2]}

    def main():
        got = MPI.COMM_WORLD.bcast(shared, root=0)
        return got is shared, got == shared

    assert run(2, main).returns == [(False, True), (False, True)]


def test_a_send_moves_exactly_the_pickle():
    obj = {"weights": list(range(100)), "name": "layer"}
    nbytes = len(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))

    def main():
        if MPI.COMM_WORLD.rank == 0:
            MPI.COMM_WORLD.send(obj, dest=1)
        else:
            return MPI.COMM_WORLD.recv(source=0)

    result = run(2, main)
    assert result.returns[1] == obj
    assert result.stats.bytes_sent == [nbytes, 0]
    assert [t.nbytes for t in result.trace.transfers] == [nbytes]


@pytest.mark.parametrize("k", [2, 3, 5, 8])
def test_a_reduction_of_objects_travels_the_rank_order_reduce_schedule(k):
    """The object reduce is collectives.tree.rank_order_reduce's schedule moving pickles:
    the run's transfers are its moves, step by step (issue 26: no tree of its own)."""
    from collsim.collectives.tree import rank_order_reduce

    result = run(k, lambda: MPI.COMM_WORLD.reduce(MPI.COMM_WORLD.rank, op=MPI.SUM, root=0))
    assert result.returns[0] == sum(range(k))
    moved = sorted((t.start, t.src, t.dst) for t in result.trace.transfers)
    pairs = [(m.src, m.dst) for step in rank_order_reduce(k).steps for m in step]
    assert sorted((s, d) for _, s, d in moved) == sorted(pairs)
    by_step = {}
    for start, src, dst in moved:  # later steps start later: the schedule's order
        by_step.setdefault(start, set()).add((src, dst))
    flat = [pair for start in sorted(by_step) for pair in sorted(by_step[start])]
    assert flat == [
        pair for step in rank_order_reduce(k).steps for pair in sorted((m.src, m.dst) for m in step)
    ]


def test_the_object_reduce_follows_whatever_schedule_it_is_given(monkeypatch):
    # a linear schedule in its place (every rank straight to rank 0, in rank order): the
    # run's transfers change with it, so the reduce has no tree of its own
    import collsim.mpi.objects as objects_module
    from collsim.collectives.schedule import ChunkMove, Schedule

    def linear(k):
        steps = tuple((ChunkMove(r, 0, range(0, 1), True),) for r in range(1, k))
        return Schedule("reduce", "tree", k, 1, steps, (), "full", "root", 0)

    monkeypatch.setattr(objects_module, "rank_order_reduce", linear)
    result = run(5, lambda: MPI.COMM_WORLD.reduce(f"r{MPI.COMM_WORLD.rank}", op=MPI.SUM))
    assert result.returns[0] == "r0r1r2r3r4"
    assert sorted((t.start, t.src, t.dst) for t in result.trace.transfers)[-1][1:] == (4, 0)
    assert {(t.src, t.dst) for t in result.trace.transfers} == {(r, 0) for r in range(1, 5)}


def test_bcast_takes_the_communicators_bcast_lock_of_its_rank():
    # mpi4py's MPI._comm_lock_table: per process (here per rank) and communicator
    def main():
        comm = MPI.COMM_WORLD.Dup()
        table = MPI._comm_lock_table(comm)
        before = "bcast" in table
        comm.bcast(comm.rank, root=0)
        lock = table["bcast"]
        return before, type(lock) is type(threading.Lock()), lock.locked(), id(table)

    results = blocking.run(collsim.Cluster(collsim.topology.ring(2)), main).returns
    assert [r[:3] for r in results] == [(False, True, False)] * 2
    assert results[0][3] != results[1][3]  # each rank its own table


@settings(max_examples=6, deadline=None)
@given(k=st.integers(min_value=1, max_value=6), root=st.integers(min_value=0, max_value=5))
def test_scatter_and_alltoall_of_none_send_none_to_every_rank(k, root):
    # mpi4py's rule: None in place of the items is None for each rank (not a refusal)
    root %= k

    def main():
        comm = MPI.COMM_WORLD
        return comm.scatter(None, root=root), comm.alltoall(None)

    assert run(k, main).returns == [(None, [None] * k)] * k
