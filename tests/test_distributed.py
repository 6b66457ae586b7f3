"""collsim.distributed against numpy: every collective and point-to-point call, every
ReduceOp, Hypothesis-drawn world sizes (1-16), shapes and dtypes, values from a seeded
generator; and async_op, whose tensor is written only when the collective completes."""

import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import collsim
import collsim.distributed as dist
from collsim.runtime import blocking

DTYPES = ["float64", "float32", "float16", "int64", "int32"]
OPS = [
    dist.ReduceOp.SUM,
    dist.ReduceOp.AVG,
    dist.ReduceOp.PRODUCT,
    dist.ReduceOp.MIN,
    dist.ReduceOp.MAX,
]
FEW = settings(max_examples=12)  # each example is a run of up to 16 rank threads

worlds = st.integers(1, 16)
shapes = st.lists(st.integers(1, 3), max_size=3).map(tuple)  # () is a 0-d tensor
dtypes = st.sampled_from(DTYPES)
seeds = st.integers(0, 2**16)


@pytest.fixture(autouse=True)
def no_thread_left_behind():
    before = threading.active_count()
    yield
    assert threading.active_count() == before


def run(k, main, *args):
    """Every rank's return value of ``main(*args)`` on a ring of ``k`` ranks."""
    return blocking.run(collsim.Cluster(collsim.topology.ring(k)), main, *args).returns


def values(seed, shape, dtype, op=dist.ReduceOp.SUM):
    """Small integers (exact in every dtype and reduction order); -1 or 1 for PRODUCT."""
    rng = np.random.default_rng(seed)
    if op is dist.ReduceOp.PRODUCT:
        return rng.choice([-1, 1], size=shape).astype(dtype)
    return rng.integers(-4, 4, size=shape).astype(dtype)


def reference(op, stack):
    """numpy's reduction of ``stack`` over its first axis (one row per rank)."""
    dtype, k = stack.dtype, len(stack)
    if op is dist.ReduceOp.AVG:
        total = stack.sum(axis=0, dtype=np.float64)
        if np.issubdtype(dtype, np.integer):
            return np.trunc(total / k).astype(dtype)  # NCCL's integer average truncates
        return (stack.sum(axis=0).astype(dtype) / dtype.type(k)).astype(dtype)
    fn = {
        dist.ReduceOp.SUM: np.sum,
        dist.ReduceOp.PRODUCT: np.prod,
        dist.ReduceOp.MIN: np.min,
        dist.ReduceOp.MAX: np.max,
    }[op]
    return fn(stack, axis=0).astype(dtype)


def assert_same(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


# -- reductions ---------------------------------------------------------------------------


@pytest.mark.parametrize("op", OPS, ids=lambda o: o.name)
@FEW
@given(k=worlds, shape=shapes, dtype=dtypes, seed=seeds)
def test_all_reduce_in_place(op, k, shape, dtype, seed):
    x = values(seed, (k, *shape), dtype, op)

    def main():
        dist.init_process_group(backend="collsim")
        t = np.array(x[dist.get_rank()])
        assert dist.all_reduce(t, op=op) is None  # in place, returns None as torch
        return t

    for t in run(k, main):
        assert_same(t, reference(op, x))


@pytest.mark.parametrize("op", OPS, ids=lambda o: o.name)
@FEW
@given(k=worlds, shape=shapes, dtype=dtypes, seed=seeds, data=st.data())
def test_reduce_to_dst(op, k, shape, dtype, seed, data):
    x = values(seed, (k, *shape), dtype, op)
    dst = data.draw(st.integers(0, k - 1))

    def main():
        dist.init_process_group()
        t = np.array(x[dist.get_rank()])
        dist.reduce(t, dst=dst, op=op)
        return t

    for r, t in enumerate(run(k, main)):
        assert_same(t, reference(op, x) if r == dst else x[r])  # the others keep theirs


@pytest.mark.parametrize("layout", ["concat", "stack"])
@pytest.mark.parametrize("op", OPS, ids=lambda o: o.name)
@FEW
@given(k=worlds, shape=shapes, dtype=dtypes, seed=seeds)
def test_reduce_scatter_tensor(op, layout, k, shape, dtype, seed):
    x = values(seed, (k, k, *shape), dtype, op)  # (rank, block, *output shape)
    whole = reference(op, x)  # (block, *shape)
    if layout == "concat" and not shape:
        shape = (1,)  # a concatenated input needs a first axis to concatenate along
        x, whole = x.reshape(k, k, 1), whole.reshape(k, 1)

    def main():
        dist.init_process_group()
        r = dist.get_rank()
        inp = x[r] if layout == "stack" else x[r].reshape(k * shape[0], *shape[1:])
        out = np.zeros(shape, dtype=dtype)
        dist.reduce_scatter_tensor(out, inp, op=op)
        return out

    for r, out in enumerate(run(k, main)):
        assert_same(out, whole[r])


# -- data movement ------------------------------------------------------------------------


@FEW
@given(k=worlds, shape=shapes, dtype=dtypes, seed=seeds)
def test_all_gather_into_a_list(k, shape, dtype, seed):
    x = values(seed, (k, *shape), dtype)

    def main():
        dist.init_process_group()
        parts = [np.zeros(shape, dtype=dtype) for _ in range(dist.get_world_size())]
        dist.all_gather(parts, np.array(x[dist.get_rank()]))
        return parts

    for parts in run(k, main):
        for i, part in enumerate(parts):
            assert_same(part, x[i])


@pytest.mark.parametrize("layout", ["concat", "stack"])
@FEW
@given(k=worlds, shape=shapes, dtype=dtypes, seed=seeds)
def test_all_gather_into_tensor(layout, k, shape, dtype, seed):
    x = values(seed, (k, *shape), dtype)
    want = x if layout == "stack" else np.concatenate(list(x.reshape(k, -1, *shape[1:])))

    def main():
        dist.init_process_group()
        out = np.zeros(want.shape, dtype=dtype)
        dist.all_gather_into_tensor(out, np.array(x[dist.get_rank()]))
        return out

    for out in run(k, main):
        assert_same(out, want)


@FEW
@given(k=worlds, shape=shapes, dtype=dtypes, seed=seeds, data=st.data())
def test_broadcast_from_src(k, shape, dtype, seed, data):
    x = values(seed, (k, *shape), dtype)
    src = data.draw(st.integers(0, k - 1))

    def main():
        dist.init_process_group()
        t = np.array(x[dist.get_rank()])
        dist.broadcast(t, src=src)
        return t

    for t in run(k, main):
        assert_same(t, x[src])


@FEW
@given(k=worlds, rows=st.integers(1, 2), tail=shapes, dtype=dtypes, seed=seeds)
def test_all_to_all_single(k, rows, tail, dtype, seed):
    x = values(seed, (k, k, rows, *tail), dtype)  # (rank, block for rank j, rows, ...)

    def main():
        dist.init_process_group()
        me = dist.get_rank()
        inp = x[me].reshape(k * rows, *tail)
        out = np.zeros_like(inp)
        sizes = [rows] * k
        dist.all_to_all_single(out, inp, output_split_sizes=sizes, input_split_sizes=sizes)
        return out

    for r, out in enumerate(run(k, main)):
        assert_same(out, x[:, r].reshape(k * rows, *tail))  # block j came from rank j


@FEW
@given(k=worlds, seed=seeds)
def test_barrier_waits_for_the_slowest_rank(k, seed):
    delays = np.random.default_rng(seed).uniform(0, 1e-3, size=k)

    def main():
        dist.init_process_group()
        blocking.compute(seconds=float(delays[dist.get_rank()]))
        dist.barrier()
        return blocking.now()

    assert min(run(k, main)) >= delays.max()


# -- point to point -----------------------------------------------------------------------


@FEW
@given(k=st.integers(2, 16), shape=shapes, dtype=dtypes, seed=seeds, tag=st.integers(0, 9))
def test_send_recv_around_a_ring(k, shape, dtype, seed, tag):
    x = values(seed, (k, *shape), dtype)

    def main():
        dist.init_process_group()
        me = dist.get_rank()
        right, left = (me + 1) % k, (me - 1) % k
        got = np.zeros(shape, dtype=dtype)
        if me % 2 == 0:  # a send waits for its receive: half the ranks receive first
            dist.send(np.array(x[me]), dst=right, tag=tag)
            src = dist.recv(got, src=left, tag=tag)
        else:
            src = dist.recv(got, src=left, tag=tag)
            dist.send(np.array(x[me]), dst=right, tag=tag)
        return src, got

    for r, (src, got) in enumerate(run(k, main)):
        assert src == (r - 1) % k
        assert_same(got, x[(r - 1) % k])


@FEW
@given(k=st.integers(2, 16), shape=shapes, dtype=dtypes, seed=seeds)
def test_isend_irecv_need_wait(k, shape, dtype, seed):
    x = values(seed, (k, *shape), dtype)

    def main():
        dist.init_process_group()
        me = dist.get_rank()
        got = np.full(shape, 7, dtype=dtype)
        receiving = dist.irecv(got, src=(me - 1) % k)
        sending = dist.isend(np.array(x[me]), dst=(me + 1) % k)
        before = got.copy(), receiving.is_completed()
        assert sending.wait() and receiving.wait()
        return before, got, receiving.is_completed(), receiving._source_rank()

    for r, ((before, done_before), got, done, source) in enumerate(run(k, main)):
        assert not done_before and (before == 7).all()  # nothing has arrived yet
        assert done and source == (r - 1) % k
        assert_same(got, x[(r - 1) % k])


@pytest.mark.parametrize("nonblocking", [False, True], ids=["recv", "irecv"])
@FEW
@given(k=st.integers(2, 16), shape=shapes, dtype=dtypes, seed=seeds)
def test_recv_from_any_rank_returns_the_sender(nonblocking, k, shape, dtype, seed):
    x = values(seed, (k, *shape), dtype)

    def main():
        dist.init_process_group()
        me = dist.get_rank()
        if me != 0:
            dist.send(np.array(x[me]), dst=0, tag=3)
            return None
        got = {}
        for _ in range(k - 1):
            t = np.zeros(shape, dtype=dtype)
            if nonblocking:
                work = dist.irecv(t, tag=3)
                work.wait()
                src = work._source_rank()
            else:
                src = dist.recv(t, tag=3)
            got[src] = t
        return got

    got = run(k, main)[0]
    assert sorted(got) == list(range(1, k))
    for src, t in got.items():
        assert_same(t, x[src])


# -- async_op -----------------------------------------------------------------------------

ASYNC_CALLS = {
    # name -> (program(x, k, me) -> (work, tensor written), reference(x, k, me))
    "all_reduce": (
        lambda x, k, me: _async(dist.all_reduce, x[me].copy()),
        lambda x, k, me: x.sum(axis=0),
    ),
    "reduce": (
        lambda x, k, me: _async(dist.reduce, x[me].copy(), dst=0),
        lambda x, k, me: x.sum(axis=0) if me == 0 else x[me],
    ),
    "broadcast": (
        lambda x, k, me: _async(dist.broadcast, x[me].copy(), src=k - 1),
        lambda x, k, me: x[k - 1],
    ),
    "all_gather_into_tensor": (
        lambda x, k, me: _async(dist.all_gather_into_tensor, np.zeros((k, 3)), x[me], out=0),
        lambda x, k, me: x,
    ),
    "all_gather": (
        lambda x, k, me: _async(dist.all_gather, [np.zeros(3) for _ in range(k)], x[me], out=0),
        lambda x, k, me: x,
    ),
    "reduce_scatter_tensor": (
        lambda x, k, me: _async(
            dist.reduce_scatter_tensor, np.zeros(3), np.stack([x[me]] * k), out=0
        ),
        lambda x, k, me: x.sum(axis=0),
    ),
    "all_to_all_single": (
        lambda x, k, me: _async(
            dist.all_to_all_single, np.zeros((k, 3)), np.stack([x[me]] * k), out=0
        ),
        lambda x, k, me: x,
    ),
}


def _async(fn, *args, out=None, **kwargs):
    """``(work, the tensor the call writes, a copy of it before the call)`` of
    ``fn(*args, async_op=True)``; ``out`` is the position of the written argument."""
    written = args[0 if out is None else out]
    before = np.stack(written) if isinstance(written, list) else written.copy()
    return fn(*args, async_op=True, **kwargs), written, before


@pytest.mark.parametrize("name", sorted(ASYNC_CALLS))
@settings(max_examples=5)
@given(k=st.integers(2, 8), seed=seeds)
def test_async_op_writes_the_tensor_when_the_collective_completes(name, k, seed):
    program, want = ASYNC_CALLS[name]
    x = values(seed, (k, 3), "float64")

    def main():
        dist.init_process_group()
        work, written, initial = program(x, k, dist.get_rank())
        now = (lambda: np.stack(written)) if isinstance(written, list) else written.copy
        before, done_before = now(), work.is_completed()
        assert work.wait() is True
        return initial, before, done_before, now(), work.is_completed()

    for me, (initial, before, done_before, after, done) in enumerate(run(k, main)):
        # before wait() the tensor holds what it held: the values arrive in simulated
        # time, when the collective completes, not at the call
        assert not done_before
        np.testing.assert_array_equal(before, initial)
        assert done
        np.testing.assert_array_equal(after, want(x, k, me))


def test_async_all_reduce_overlaps_compute_and_lands_without_wait():
    k = 4

    def main():
        dist.init_process_group()
        t = np.full(8, float(dist.get_rank()))
        work = dist.all_reduce(t, async_op=True)
        unchanged = t.tolist()
        blocking.compute(seconds=1.0)  # far longer than the all-reduce takes
        landed = work.is_completed(), t.tolist()
        work.wait()
        return unchanged, landed, blocking.now()

    for me, (unchanged, (done, landed), now) in enumerate(run(k, main)):
        assert unchanged == [float(me)] * 8
        assert done and landed == [6.0] * 8
        assert now == pytest.approx(1.0)  # the wait found it done: no time added


def test_the_same_program_gives_the_same_trace_twice():
    def main():
        dist.init_process_group()
        me = dist.get_rank()
        t = np.arange(6.0) * me
        dist.all_reduce(t)
        dist.broadcast(t, src=2)
        got = np.zeros(6)
        if me == 0:
            for _ in range(3):
                dist.recv(got)
        else:
            dist.send(t, dst=0)
        return t

    cluster = collsim.Cluster(collsim.topology.ring(4))
    first, second = (blocking.run(cluster, main).trace.to_chrome() for _ in range(2))
    assert first == second
