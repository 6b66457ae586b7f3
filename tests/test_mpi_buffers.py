"""collsim.mpi's uppercase (buffer) calls against numpy, for drawn rank counts 1..16, shapes,
dtypes, roots and ops; IN_PLACE; the algorithm the collectives run."""

from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import collsim
from collsim import mpi as MPI
from collsim.collectives.records import is_collective
from collsim.runtime import blocking

DTYPES = ["float64", "float32", "float16", "int64", "int32"]
OPS = {"sum": MPI.SUM, "prod": MPI.PROD, "max": MPI.MAX, "min": MPI.MIN}
NUMPY_OPS = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}


@dataclass(frozen=True)
class Case:
    """One drawn call: ``k`` ranks, a block of ``shape`` per rank, ``dtype``, ``root``, ``op``."""

    k: int
    shape: tuple
    dtype: str
    root: int
    op: str
    seed: int

    def inputs(self, blocks=1):
        """Per rank an array of ``blocks`` blocks; small integers, so every reduction order
        is exact (``prod``: +-1, as nccl-tests draws them)."""
        rng = np.random.default_rng(self.seed)
        low, high = (-1, 2) if self.op == "prod" else (-4, 4)
        shape = (blocks * self.shape[0], *self.shape[1:]) if blocks > 1 else self.shape
        out = []
        for _ in range(self.k):
            values = rng.integers(low, high, size=shape)
            if self.op == "prod":
                values = np.where(values == 0, 1, values)
            out.append(values.astype(self.dtype))
        return out


@st.composite
def cases(draw, max_k=16):
    k = draw(st.integers(1, max_k))
    shape = tuple(draw(st.lists(st.integers(1, 3), min_size=1, max_size=3)))
    return Case(
        k,
        shape,
        draw(st.sampled_from(DTYPES)),
        draw(st.integers(0, k - 1)),
        draw(st.sampled_from(sorted(OPS))),
        draw(st.integers(0, 2**16)),
    )


def run(k, main, *args, topology=None):
    cluster = collsim.Cluster(topology or collsim.topology.ring(k))
    return blocking.run(cluster, main, *args)


def reduced(arrays, op):
    out = arrays[0].copy()
    for a in arrays[1:]:
        out = NUMPY_OPS[op](out, a).astype(out.dtype)
    return out


# -- one program and one oracle per call ----------------------------------------------------
# program(comm, case, inputs) -> what the rank ends with; expected(case, inputs, r) -> it


def p_send_recv(comm, case, xs):  # a ring pass: Send to the right, Recv from the left
    r, k = comm.rank, comm.size
    got = np.empty_like(xs[r])
    if k == 1:
        return xs[r]
    if r % 2 == 0:
        comm.Send(xs[r], dest=(r + 1) % k, tag=3)
        comm.Recv(got, source=(r - 1) % k, tag=3)
    else:
        comm.Recv(got, source=(r - 1) % k, tag=3)
        comm.Send(xs[r], dest=(r + 1) % k, tag=3)
    return got


def p_isend_irecv(comm, case, xs):
    r, k = comm.rank, comm.size
    got = np.empty_like(xs[r])
    reqs = [
        comm.Irecv([got, MPI.BYTE], source=(r - 1) % k, tag=5),
        comm.Isend(xs[r], dest=(r + 1) % k, tag=5),
    ]
    MPI.Request.Waitall(reqs)
    return got


def p_sendrecv(comm, case, xs):
    r, k = comm.rank, comm.size
    got = np.empty_like(xs[r])
    comm.Sendrecv(xs[r], dest=(r + 1) % k, recvbuf=got, source=(r - 1) % k)
    return got


def p_bcast(comm, case, xs):
    buf = xs[comm.rank].copy()
    comm.Bcast(buf, root=case.root)
    return buf


def p_scatter(comm, case, xs):
    recv = np.empty(case.shape, case.dtype)
    comm.Scatter(xs[comm.rank] if comm.rank == case.root else None, recv, root=case.root)
    return recv


def p_gather(comm, case, xs):
    recv = np.empty((comm.size, *case.shape), case.dtype) if comm.rank == case.root else None
    comm.Gather(xs[comm.rank], recv, root=case.root)
    return recv


def p_allgather(comm, case, xs):
    recv = np.empty((comm.size, *case.shape), case.dtype)
    comm.Allgather([xs[comm.rank], OPS_TYPE[case.dtype]], recv)
    return recv


def p_reduce(comm, case, xs):
    recv = np.empty_like(xs[comm.rank]) if comm.rank == case.root else None
    comm.Reduce(xs[comm.rank], recv, op=OPS[case.op], root=case.root)
    return recv


def p_allreduce(comm, case, xs):
    recv = np.empty_like(xs[comm.rank])
    comm.Allreduce(xs[comm.rank], recv, op=OPS[case.op])
    return recv


def p_reduce_scatter_block(comm, case, xs):
    recv = np.empty(case.shape, case.dtype)
    comm.Reduce_scatter_block(xs[comm.rank], recv, op=OPS[case.op])
    return recv


def p_alltoall(comm, case, xs):
    recv = np.empty_like(xs[comm.rank])
    comm.Alltoall(xs[comm.rank], recv)
    return recv


def p_barrier(comm, case, xs):
    # rank r works r ms first: nobody leaves the barrier before the slowest arrives
    blocking.compute(seconds=1e-3 * comm.rank)
    comm.Barrier()
    return np.array(MPI.Wtime() >= 1e-3 * (comm.size - 1))


OPS_TYPE = {
    "float64": MPI.DOUBLE,
    "float32": MPI.FLOAT,
    "float16": MPI.FLOAT16_T,
    "int64": MPI.INT64_T,
    "int32": MPI.INT32_T,
}


def blocks(xs, k):
    return [x.reshape(k, -1) for x in xs]


CALLS = {
    # name: (program, blocks per input, expected(case, inputs, r))
    "Send/Recv": (p_send_recv, 1, lambda c, xs, r: xs[(r - 1) % c.k]),
    "Isend/Irecv/Waitall": (p_isend_irecv, 1, lambda c, xs, r: xs[(r - 1) % c.k]),
    "Sendrecv": (p_sendrecv, 1, lambda c, xs, r: xs[(r - 1) % c.k]),
    "Bcast": (p_bcast, 1, lambda c, xs, r: xs[c.root]),
    "Scatter": (p_scatter, "k", lambda c, xs, r: xs[c.root].reshape(c.k, *c.shape)[r]),
    "Gather": (p_gather, 1, lambda c, xs, r: np.stack(xs) if r == c.root else None),
    "Allgather": (p_allgather, 1, lambda c, xs, r: np.stack(xs)),
    "Reduce": (p_reduce, 1, lambda c, xs, r: reduced(xs, c.op) if r == c.root else None),
    "Allreduce": (p_allreduce, 1, lambda c, xs, r: reduced(xs, c.op)),
    "Reduce_scatter_block": (
        p_reduce_scatter_block,
        "k",
        lambda c, xs, r: reduced(xs, c.op).reshape(c.k, *c.shape)[r],
    ),
    "Alltoall": (
        p_alltoall,
        "k",
        lambda c, xs, r: np.concatenate([x.reshape(c.k, *c.shape)[r] for x in xs]),
    ),
    "Barrier": (p_barrier, 1, lambda c, xs, r: np.array(True)),
}


def _check_call(name, case):
    program, per, expected = CALLS[name]
    xs = case.inputs(case.k if per == "k" else 1)

    def main():
        return program(MPI.COMM_WORLD, case, xs)

    returns = run(case.k, main).returns
    for r, got in enumerate(returns):
        want = expected(case, xs, r)
        if want is None:
            assert got is None
            continue
        assert got.dtype == want.dtype, (name, r)
        np.testing.assert_array_equal(got.reshape(want.shape), want, err_msg=f"{name} rank {r}")


@pytest.mark.parametrize("name", list(CALLS))
@settings(max_examples=8)
@given(case=cases())
def test_buffer_call_matches_numpy(name, case):
    _check_call(name, case)


@pytest.mark.parametrize("name", list(CALLS))
def test_buffer_call_on_sixteen_ranks(name):
    # the largest drawn rank count, every call, whatever Hypothesis draws
    _check_call(name, Case(16, (2, 3), "float32", 11, "sum", 7))


# -- IN_PLACE -------------------------------------------------------------------------------


def _in_place(call, comm, x):
    r, k = comm.rank, comm.size
    if call == "Allreduce":
        buf = x.copy()
        comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)
    elif call == "Reduce":
        buf = x.copy()
        comm.Reduce(MPI.IN_PLACE if r == 1 else buf, buf if r == 1 else None, root=1)
        buf = buf if r == 1 else None
    elif call == "Allgather":
        buf = np.zeros((k, *x.shape))
        buf[r] = x
        comm.Allgather(MPI.IN_PLACE, buf)
    elif call == "Gather":
        buf = np.zeros((k, *x.shape)) if r == 1 else None
        if r == 1:
            buf[r] = x
        comm.Gather(MPI.IN_PLACE if r == 1 else x, buf, root=1)
    elif call == "Scatter":
        if r == 1:
            buf = np.arange(k * x.size, dtype=float).reshape(k, *x.shape)
            comm.Scatter(buf, MPI.IN_PLACE, root=1)
            buf = buf[1]
        else:
            buf = np.zeros_like(x)
            comm.Scatter(None, buf, root=1)
    elif call == "Reduce_scatter_block":
        buf = np.concatenate([x + b for b in range(k)])
        comm.Reduce_scatter_block(MPI.IN_PLACE, buf, op=MPI.SUM)
        buf = buf[: x.size]
    elif call == "Alltoall":
        buf = np.concatenate([x + 10 * b for b in range(k)])
        comm.Alltoall(MPI.IN_PLACE, buf)
    return buf


def _in_place_expected(call, xs, r):
    k = len(xs)
    if call in ("Allreduce", "Reduce"):
        return None if call == "Reduce" and r != 1 else sum(xs)
    if call == "Allgather":
        return np.stack(xs)
    if call == "Gather":
        return np.stack(xs) if r == 1 else None
    if call == "Scatter":
        return np.arange(k * xs[0].size, dtype=float).reshape(k, *xs[0].shape)[r]
    if call == "Reduce_scatter_block":
        return sum(xs) + r * k
    return np.concatenate([xs[s] + 10 * r for s in range(k)])  # Alltoall


IN_PLACE_CALLS = [
    "Allreduce",
    "Reduce",
    "Allgather",
    "Gather",
    "Scatter",
    "Reduce_scatter_block",
    "Alltoall",
]


@pytest.mark.parametrize("call", IN_PLACE_CALLS)
@pytest.mark.parametrize("k", [2, 5])
def test_in_place(call, k):
    xs = [np.arange(3.0) + 100 * r for r in range(k)]
    returns = run(k, lambda: _in_place(call, MPI.COMM_WORLD, xs[MPI.COMM_WORLD.rank])).returns
    for r, got in enumerate(returns):
        want = _in_place_expected(call, xs, r)
        if want is None:
            assert got is None
        else:
            np.testing.assert_array_equal(got, want, err_msg=f"{call} rank {r}")


# -- which algorithm runs -------------------------------------------------------------------

ALGORITHM_CASES = [
    # (call, collsim collective, algorithm, k)
    ("Allreduce", "all_reduce", "ring", 5),
    ("Allreduce", "all_reduce", "tree", 5),
    ("Allreduce", "all_reduce", "halving_doubling", 4),
    ("Allreduce", "all_reduce", "naive", 3),
    ("Bcast", "broadcast", "tree", 5),
    ("Bcast", "broadcast", "ring", 5),
    ("Reduce", "reduce", "tree", 5),
    ("Reduce", "reduce", "ring", 5),
    ("Allgather", "all_gather", "ring", 4),
    ("Allgather", "all_gather", "halving_doubling", 4),
    ("Reduce_scatter_block", "reduce_scatter", "ring", 4),
    ("Reduce_scatter_block", "reduce_scatter", "halving_doubling", 4),
    ("Alltoall", "all_to_all", "direct", 4),
]


@pytest.mark.parametrize("call, collective, algorithm, k", ALGORITHM_CASES)
def test_configured_algorithm_runs_and_is_correct(call, collective, algorithm, k):
    case = Case(k, (2,), "float64", 1, "sum", 3)
    program, per, expected = CALLS[call]
    xs = case.inputs(k if per == "k" else 1)
    with MPI.configured(algorithm={collective: algorithm}):
        result = run(k, lambda: program(MPI.COMM_WORLD, case, xs))
    used = {
        (t.tag.collective, t.tag.algorithm) for t in result.trace.transfers if is_collective(t.tag)
    }
    assert used == {(collective, algorithm)}
    for r, got in enumerate(result.returns):
        want = expected(case, xs, r)
        if want is not None:
            np.testing.assert_array_equal(got.reshape(want.shape), want)


def test_default_algorithm_is_ring_for_allreduce_and_one_name_sets_every_collective():
    x = [np.ones(8)] * 4

    def main():
        out = np.empty(8)
        MPI.COMM_WORLD.Allreduce(x[0], out)
        MPI.COMM_WORLD.Bcast(out)
        return out

    used = {(t.tag.collective, t.tag.algorithm) for t in run(4, main).trace.transfers}
    assert used == {("all_reduce", "ring"), ("broadcast", "tree")}
    with MPI.configured(algorithm="ring"):  # broadcast's ring is the chain
        used = {(t.tag.collective, t.tag.algorithm) for t in run(4, main).trace.transfers}
    assert used == {("all_reduce", "ring"), ("broadcast", "ring")}


def test_allreduce_bytes_are_the_ring_closed_form():
    # 2(K-1)/K * N * b bytes sent by every rank, as the ring all-reduce's closed form says
    k, n = 4, 1024

    def main():
        out = np.empty(n)
        MPI.COMM_WORLD.Allreduce(np.ones(n), out)

    assert run(k, main).stats.bytes_sent == [2 * (k - 1) * n * 8 // k] * k
