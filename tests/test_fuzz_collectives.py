"""Fuzz the collective API (issue 11, item 12): bad types, values, shapes, dtypes, roots,
counts, ops and algorithms either work or raise a collsim error naming the value, fast."""

import numpy as np
from fuzzkit import check_api
from hypothesis import given
from hypothesis import strategies as st

import collsim
from collsim import topology
from collsim.collectives import ALGORITHMS

K = 4
COLLECTIVES = list(ALGORITHMS)
# text a user might type; no quotes or backslashes, so the value reads the same in repr()
TEXT = st.text(
    st.characters(codec="ascii", categories=("L", "N", "P", "S", "Zs"), exclude_characters="'\"\\"),
    max_size=8,
)
NUMBERS = st.one_of(
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([2**62, -(2**62), 1e300, -1e300, 0.5, -0.0]),
)
ANYTHING = st.one_of(NUMBERS, TEXT, st.none(), st.booleans(), st.lists(st.integers(0, 5)))


def cluster():
    return collsim.Cluster(topology.ring(K, "100GB/s", "1us"))


def buffers(n=8, dtype="float32"):
    return [np.arange(n, dtype=dtype) + r for r in range(K)]


@given(collective=st.sampled_from(COLLECTIVES), root=ANYTHING)
def test_roots(collective, root):
    check_api(cluster().collective, collective, buffers(), root=root, bad=root)


@given(
    collective=st.sampled_from(COLLECTIVES),
    count=ANYTHING,
    dtype=st.sampled_from(["float32", "int64", "bfloat16"]),
)
def test_counts(collective, count, dtype):
    # count-only runs need no memory, so even 2**62 elements must finish at once
    outcome = check_api(cluster().collective, collective, count=count, dtype=dtype, bad=count)
    if outcome.error is None:
        assert isinstance(count, int) and not isinstance(count, bool) and count >= 0


@given(collective=st.sampled_from(COLLECTIVES), op=st.one_of(TEXT, NUMBERS, st.none()))
def test_ops(collective, op):
    outcome = check_api(cluster().collective, collective, buffers(), op=op, bad=op)
    if outcome.error is None:
        assert str(op).lower() in ("sum", "avg", "prod", "max", "min")


@given(collective=st.sampled_from(COLLECTIVES), name=st.one_of(TEXT, NUMBERS))
def test_algorithm_names(collective, name):
    check_api(cluster().collective, collective, buffers(), algorithm=name, bad=name)


@given(name=TEXT)
def test_collective_names(name):
    check_api(cluster().collective, name, buffers(), bad=name)


@given(dtype=st.one_of(TEXT, st.sampled_from(["float8", "uint8", "complex64", "bool"])))
def test_count_only_dtypes(dtype):
    check_api(cluster().all_reduce, count=8, dtype=dtype, bad=dtype)


@given(
    collective=st.sampled_from(COLLECTIVES),
    dtype=st.sampled_from(
        [
            "float64",
            "float32",
            "float16",
            "int64",
            "int32",
            "int8",
            "uint16",
            "bool",
            "complex64",
            "object",
            "U3",
        ]
    ),
    shape=st.lists(st.integers(0, 5), max_size=3).map(tuple),
    n_buffers=st.integers(0, 6),
    odd=st.sampled_from([None, "shape", "dtype"]),
)
def test_buffers(collective, dtype, shape, n_buffers, odd):
    arrays = [np.zeros(shape, dtype=dtype) for _ in range(n_buffers)]
    if odd and arrays:
        last = np.zeros(shape + (2,)) if odd == "shape" else np.zeros(shape, dtype="int16")
        arrays[-1] = last
    outcome = check_api(cluster().collective, collective, arrays)
    if outcome.error is None:  # it ran: the answer has torch's shape
        out = outcome.value.outputs[0]
        if collective == "all_gather":
            assert out.shape == ((K * shape[0],) + shape[1:] if shape else (K,))
        elif collective not in ("reduce_scatter",) and out is not None:
            assert out.shape == shape


@given(value=st.one_of(NUMBERS, TEXT, st.none(), st.booleans()))
def test_buffers_that_are_not_lists(value):
    outcome = check_api(cluster().all_reduce, value, bad=value)
    assert outcome.error is not None


@given(group=st.one_of(TEXT, st.lists(st.one_of(st.integers(-3, 6), st.floats(0, 4)), max_size=5)))
def test_groups(group):
    # the group's own checks belong to collsim.runtime.group; here: no traceback, no
    # silent truncation of 1.5 to rank 1
    outcome = check_api(cluster().all_reduce, count=8, group=group)
    if outcome.error is None:  # a list of whole numbers, taken as they are
        assert not isinstance(group, str) and all(float(r).is_integer() for r in group)
        assert outcome.value.group.ranks == tuple(int(r) for r in group)


@given(root=ANYTHING, op=st.one_of(TEXT, st.none()), x=st.one_of(ANYTHING, st.just([1, [2]])))
def test_rank_programs(root, op, x):
    def program(rank):
        return (yield from rank.reduce(x, root=root, op=op))

    check_api(cluster().run, program)
