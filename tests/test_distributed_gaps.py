"""collsim.distributed's gaps closed (issue 29, item 4): small int and bool tensors, the
bitwise ops, torch 2.13's default roots, the list form of reduce_scatter,
all_reduce_coalesced, object point-to-point, and torch's exception types.

The oracles are numpy reductions over the stacked inputs, and a table of what real gloo
(torch 2.13.0, three processes) answered for the same inputs.
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import collsim
import collsim.distributed as dist

SMALL_DTYPES = ("uint8", "int8", "int16", "bool")
OPS = ("SUM", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR")


def run(main, n):
    return collsim.exec(main, n=n, echo=False).returns


def oracle(arrays, op):
    """The reduction of ``arrays`` by numpy alone, in the arrays' own dtype (wrapping)."""
    stacked = np.stack(arrays)
    dtype = stacked.dtype
    return {
        "SUM": lambda: np.add.reduce(stacked, axis=0, dtype=dtype),
        "PRODUCT": lambda: np.multiply.reduce(stacked, axis=0, dtype=dtype),
        "MIN": lambda: stacked.min(axis=0),
        "MAX": lambda: stacked.max(axis=0),
        "BAND": lambda: np.bitwise_and.reduce(stacked, axis=0),
        "BOR": lambda: np.bitwise_or.reduce(stacked, axis=0),
        "BXOR": lambda: np.bitwise_xor.reduce(stacked, axis=0),
    }[op]()


def inputs(k, shape, dtype, seed):
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return [rng.integers(0, 2, shape).astype(bool) for _ in range(k)]
    info = np.iinfo(dtype)
    return [rng.integers(info.min, info.max, shape, endpoint=True, dtype=dtype) for _ in range(k)]


@given(
    k=st.integers(1, 5),
    shape=st.lists(st.integers(0, 4), min_size=1, max_size=2).map(tuple),
    dtype=st.sampled_from(SMALL_DTYPES),
    op=st.sampled_from(OPS),
    seed=st.integers(0, 2**16),
)
def test_all_reduce_of_small_ints_and_bools_equals_numpy(k, shape, dtype, op, seed):
    xs = inputs(k, shape, dtype, seed)

    def main():
        dist.init_process_group()
        t = xs[dist.get_rank()].copy()
        dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
        return t

    for got in run(main, k):
        assert got.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(got, oracle(xs, op))


# what gloo (torch 2.13.0, 3 processes) gave for rank r's [r + 1, 100, 250 or -3, 7 r]
# (bools: [r even, True, False, r == 1]); gloo has no int16, collsim has
GLOO = {
    ("bool", "SUM"): [1, 1, 0, 1],
    ("bool", "PRODUCT"): [0, 1, 0, 0],
    ("bool", "BXOR"): [0, 1, 0, 1],
    ("uint8", "SUM"): [6, 44, 238, 21],
    ("uint8", "PRODUCT"): [6, 64, 40, 0],
    ("uint8", "BXOR"): [0, 100, 250, 9],
    ("int8", "SUM"): [6, 44, -9, 21],
    ("int8", "PRODUCT"): [6, 64, -27, 0],
    ("int8", "BAND"): [0, 100, -3, 0],
    ("int8", "BOR"): [3, 100, -3, 15],
}


@pytest.mark.parametrize("dtype, op", sorted(GLOO))
def test_small_dtypes_reduce_as_gloo_does(dtype, op):
    def main():
        dist.init_process_group()
        r = dist.get_rank()
        if dtype == "bool":
            t = np.array([r % 2 == 0, True, False, r == 1])
        else:
            t = np.array([r + 1, 100, 250 if dtype == "uint8" else -3, 7 * r]).astype(dtype)
        dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
        return t.astype(int).tolist()

    assert run(main, 3) == [GLOO[dtype, op]] * 3


@pytest.mark.parametrize(
    "dtype, op", [("float32", "BAND"), ("float64", "BXOR"), ("float16", "BOR"), ("bool", "AVG")]
)
def test_a_reduction_the_dtype_has_no_meaning_for_is_torchs_runtime_error(dtype, op):
    def main():
        dist.init_process_group()
        dist.all_reduce(np.zeros(2, dtype), op=getattr(dist.ReduceOp, op))

    with pytest.raises(collsim.launch.RankError) as caught:
        run(main, 2)
    assert isinstance(caught.value.error, RuntimeError)  # gloo: "Cannot use ReduceOp.BAND ..."
    assert f"ReduceOp.{op}" in str(caught.value) and dtype in str(caught.value)


def test_gather_scatter_and_broadcast_object_list_default_to_global_rank_0():
    def main():
        dist.init_process_group()
        me, k = dist.get_rank(), dist.get_world_size()
        parts = [np.zeros(1) for _ in range(k)] if me == 0 else None
        dist.gather(np.array([10.0 * me]), parts)
        mine = np.zeros(1)
        dist.scatter(mine, [np.array([float(i)]) for i in range(k)] if me == 0 else None)
        objects = ["from zero", me] if me == 0 else [None, None]
        dist.broadcast_object_list(objects)
        return parts and [float(p[0]) for p in parts], float(mine[0]), objects

    got = run(main, 3)
    assert got[0] == ([0.0, 10.0, 20.0], 0.0, ["from zero", 0])
    assert got[2] == (None, 2.0, ["from zero", 0])


@given(k=st.integers(1, 5), rows=st.integers(0, 3), seed=st.integers(0, 99))
def test_reduce_scatter_list_form_equals_numpy(k, rows, seed):
    rng = np.random.default_rng(seed)
    lists = [[rng.integers(-9, 9, (rows, 2)) for _ in range(k)] for _ in range(k)]

    def main():
        dist.init_process_group()
        out = np.zeros((rows, 2), np.int64)
        dist.reduce_scatter(out, lists[dist.get_rank()], op=dist.ReduceOp.SUM)
        return out

    for r, got in enumerate(run(main, k)):
        np.testing.assert_array_equal(got, sum(lists[s][r] for s in range(k)))


@given(
    k=st.integers(1, 4),
    shapes=st.lists(st.lists(st.integers(0, 3), max_size=2).map(tuple), min_size=1, max_size=4),
    seed=st.integers(0, 99),
)
def test_all_reduce_coalesced_is_one_all_reduce_of_every_tensor(k, shapes, seed):
    rng = np.random.default_rng(seed)
    xs = [[rng.integers(-9, 9, s).astype(np.int32) for s in shapes] for _ in range(k)]

    def main():
        dist.init_process_group()
        ts = [x.copy() for x in xs[dist.get_rank()]]
        dist.all_reduce_coalesced(ts, op=dist.ReduceOp.MAX)
        return ts

    result = collsim.exec(main, n=k, echo=False)
    for got in result.returns:
        for i, t in enumerate(got):
            np.testing.assert_array_equal(t, np.max([xs[r][i] for r in range(k)], axis=0))

    def one_call():  # what coalescing means: the traffic of one all-reduce of them all
        dist.init_process_group()
        dist.all_reduce(np.concatenate([x.reshape(-1) for x in xs[dist.get_rank()]]))

    alone = collsim.exec(one_call, n=k, echo=False)
    assert result.trace.transfer_count == alone.trace.transfer_count
    assert result.bytes_sent == alone.bytes_sent


def test_object_point_to_point_names_the_sender():
    def main():
        dist.init_process_group()
        me = dist.get_rank()
        if me == 0:
            got = [None, None]
            senders = [dist.recv_object_list(got), got[:]]
            senders.append(dist.recv_object_list(got, src=2))
            return senders, got
        if me == 1:
            dist.send_object_list([{"lr": 0.1}, "adam"], dst=0)
        else:
            dist.send_object_list(["two", 2], dst=0)
        return None

    senders, last = run(main, 3)[0]
    assert senders[0] in (1, 2) and senders[2] == 2 and last == ["two", 2]
    first = {1: [{"lr": 0.1}, "adam"], 2: ["two", 2]}[senders[0]]
    assert senders[1] == first


@pytest.mark.parametrize(
    "call, torch_raises",
    [
        (lambda: dist.all_reduce([1.0, 2.0]), TypeError),
        (lambda: dist.all_gather_into_tensor(np.zeros(3), np.zeros(2)), RuntimeError),
        (lambda: dist.reduce_scatter(np.zeros(2), [np.zeros(2)]), RuntimeError),
        (lambda: dist.all_reduce_coalesced([np.zeros(2), np.zeros(2, np.int32)]), RuntimeError),
        (lambda: dist.broadcast(np.zeros(2), src=7), ValueError),
    ],
)
def test_a_refusal_is_the_exception_torch_raises(call, torch_raises):
    def main():
        dist.init_process_group()
        call()

    with pytest.raises(collsim.launch.RankError) as caught:
        run(main, 2)
    assert isinstance(caught.value.error, torch_raises)
    assert isinstance(caught.value.error, collsim.errors.ConfigError)
