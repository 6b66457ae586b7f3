"""collsim.distributed's calls built from grouped point-to-point (gather, scatter, uneven
all_to_all_single, batch_isend_irecv) against numpy; the launcher's algorithm setting; and
the deadlock and mismatch reports a torch-style program gets."""

import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import collsim
import collsim.distributed as dist
from collsim.errors import CollectiveMismatchError, ConfigError, DeadlockError
from collsim.runtime import blocking

DTYPES = ["float64", "float32", "float16", "int64", "int32"]
FEW = settings(max_examples=10)


@pytest.fixture(autouse=True)
def no_thread_left_behind():
    before = threading.active_count()
    yield
    assert threading.active_count() == before


def run(k, main, *args):
    return blocking.run(collsim.Cluster(collsim.topology.switch(k)), main, *args)


def values(seed, shape, dtype):
    return np.random.default_rng(seed).integers(-4, 4, size=shape).astype(dtype)


@pytest.mark.parametrize("async_op", [False, True], ids=["blocking", "async_op"])
@FEW
@given(
    k=st.integers(1, 16),
    shape=st.lists(st.integers(1, 3), max_size=2).map(tuple),
    dtype=st.sampled_from(DTYPES),
    seed=st.integers(0, 2**16),
    data=st.data(),
)
def test_gather_and_scatter(async_op, k, shape, dtype, seed, data):
    x = values(seed, (k, *shape), dtype)
    root = data.draw(st.integers(0, k - 1))

    def main():
        dist.init_process_group()
        me = dist.get_rank()
        parts = [np.zeros(shape, dtype) for _ in range(k)] if me == root else None
        work = dist.gather(np.array(x[me]), parts, dst=root, async_op=async_op)
        work is None or work.wait()
        mine = np.zeros(shape, dtype)
        pieces = [np.array(x[(i + 1) % k]) for i in range(k)] if me == root else None
        work = dist.scatter(mine, pieces, src=root, async_op=async_op)
        work is None or work.wait()
        return parts, mine

    for me, (parts, mine) in enumerate(run(k, main).returns):
        if me == root:
            np.testing.assert_array_equal(np.stack(parts), x)
        np.testing.assert_array_equal(mine, x[(me + 1) % k])  # piece i went to rank i


@pytest.mark.parametrize("async_op", [False, True], ids=["blocking", "async_op"])
@FEW
@given(
    k=st.integers(1, 8),
    tail=st.lists(st.integers(1, 3), max_size=2).map(tuple),
    dtype=st.sampled_from(DTYPES),
    seed=st.integers(0, 2**16),
    data=st.data(),
)
def test_all_to_all_single_with_uneven_splits(async_op, k, tail, dtype, seed, data):
    row = st.lists(st.integers(0, 3), min_size=k, max_size=k)
    rows = np.array(data.draw(st.lists(row, min_size=k, max_size=k)))  # [i][j]: i sends to j
    blocks = [
        [values(seed + i * k + j, (rows[i][j], *tail), dtype) for j in range(k)] for i in range(k)
    ]

    def main():
        dist.init_process_group()
        me = dist.get_rank()
        inp = np.concatenate(blocks[me])
        out = np.zeros((rows[:, me].sum(), *tail), dtype)
        work = dist.all_to_all_single(
            out, inp, rows[:, me].tolist(), rows[me].tolist(), async_op=async_op
        )  # output_split_sizes: what each rank sends me; input_split_sizes: what I send
        work is None or work.wait()
        return out

    for me, out in enumerate(run(k, main).returns):
        np.testing.assert_array_equal(out, np.concatenate([blocks[j][me] for j in range(k)]))


def test_all_to_all_single_gives_the_output_of_torchs_own_example():
    # the uneven example in the docstring of torch.distributed.all_to_all_single (PyTorch)
    inputs = [np.arange(0, 6), np.arange(10, 19), np.arange(20, 25), np.arange(30, 37)]
    input_splits = [[2, 2, 1, 1], [3, 2, 2, 2], [2, 1, 1, 1], [2, 2, 2, 1]]
    output_splits = [[2, 3, 2, 2], [2, 2, 1, 2], [1, 2, 1, 2], [1, 2, 1, 1]]
    torch_says = [
        [0, 1, 10, 11, 12, 20, 21, 30, 31],
        [2, 3, 13, 14, 22, 32, 33],
        [4, 15, 16, 23, 34, 35],
        [5, 17, 18, 24, 36],
    ]

    def main():
        dist.init_process_group()
        me = dist.get_rank()
        out = np.zeros(sum(output_splits[me]), dtype=np.int64)
        dist.all_to_all_single(out, inputs[me], output_splits[me], input_splits[me])
        return out.tolist()

    assert run(4, main).returns == torch_says


@pytest.mark.parametrize("async_op", [False, True], ids=["blocking", "async_op"])
@FEW
@given(k=st.integers(1, 12), dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**16))
def test_all_to_all_of_lists_of_different_sizes(async_op, k, dtype, seed):
    def piece(i, j):  # what rank i sends rank j: i + j + 1 elements
        return values(seed + i * k + j, (i + j + 1,), dtype)

    def main():
        dist.init_process_group()
        me = dist.get_rank()
        out = [np.zeros(j + me + 1, dtype) for j in range(k)]
        work = dist.all_to_all(out, [piece(me, j) for j in range(k)], async_op=async_op)
        work is None or work.wait()
        return out

    for me, out in enumerate(run(k, main).returns):
        for j in range(k):
            np.testing.assert_array_equal(out[j], piece(j, me))


def test_batch_isend_irecv_swaps_with_both_neighbours():
    k = 5

    def main():
        dist.init_process_group()
        me = dist.get_rank()
        left, right = np.zeros(2), np.zeros(2)
        mine = np.full(2, float(me))
        ops = [
            dist.P2POp(dist.isend, mine, (me + 1) % k),
            dist.P2POp(dist.isend, mine, (me - 1) % k),
            dist.P2POp(dist.irecv, left, (me - 1) % k),
            dist.P2POp(dist.irecv, right, (me + 1) % k),
        ]
        for work in dist.batch_isend_irecv(ops):
            work.wait()
        return left[0], right[0]

    assert run(k, main).returns == [((r - 1) % k, (r + 1) % k) for r in range(k)]


@pytest.mark.parametrize(
    "bad, text", [([], "[]"), ([dist.P2POp(dist.send, np.zeros(1), 1)], "entry 0")]
)
def test_batch_isend_irecv_refuses_what_is_not_a_list_of_p2p_ops(bad, text):
    def main():
        dist.init_process_group()
        dist.batch_isend_irecv(bad)

    with pytest.raises(ConfigError, match=text.replace("[", r"\[").replace("]", r"\]")):
        run(2, main)


@pytest.mark.parametrize("algorithm", ["ring", "tree", "halving_doubling"])
def test_the_launchers_algorithm_runs_the_collectives_that_have_it(algorithm):
    def main():
        dist.init_process_group()
        t = np.ones(8)
        dist.all_reduce(t)
        dist.all_to_all_single(np.zeros(8), np.ones(8))  # only "direct": keeps its default
        return t[0]

    with dist.configured(algorithm=algorithm):
        result = run(4, main)
    assert result.returns == [4.0] * 4
    used = {(t.tag.collective, t.tag.algorithm) for t in result.trace.transfers}
    assert used == {("all_reduce", algorithm), ("all_to_all", "direct")}
    assert dist.settings.algorithm_for("all_reduce") is None  # only for the block's run


@pytest.mark.parametrize(
    "algorithm, bad", [("fastest", "'fastest'"), (3, "3"), ({"gather": "ring"}, "'gather'")]
)
def test_an_unknown_algorithm_setting_is_refused_naming_it(algorithm, bad):
    with pytest.raises(ConfigError, match=bad):
        dist.configure(algorithm=algorithm)
    assert dist.settings.current().algorithms == {}  # a refusal changes nothing


def test_a_dict_of_algorithms_sets_one_per_collective():
    with dist.configured(algorithm={"all-reduce": "halving_doubling", "broadcast": "ring"}):
        assert dist.settings.algorithm_for("all_reduce") == "halving_doubling"
        assert dist.settings.algorithm_for("broadcast") == "ring"
        assert dist.settings.algorithm_for("reduce") is None


def test_both_ranks_sending_first_is_a_deadlock_naming_each_line():
    def main():
        dist.init_process_group()
        me = dist.get_rank()
        dist.send(np.ones(4), dst=1 - me)  # a send waits for its receive: nobody receives
        dist.recv(np.zeros(4), src=1 - me)

    with pytest.raises(DeadlockError) as caught:
        run(2, main)
    report = str(caught.value)
    assert report.count("test_distributed_exchange.py") >= 2, report  # each rank's line


def test_ranks_calling_different_collectives_is_a_mismatch_naming_both():
    def main():
        dist.init_process_group()
        t = np.ones(4)
        if dist.get_rank() == 0:
            dist.all_reduce(t)
        else:
            dist.broadcast(t, src=0)

    with pytest.raises(CollectiveMismatchError) as caught:
        run(2, main)
    assert "all_reduce" in str(caught.value) and "broadcast" in str(caught.value)


def test_object_collectives_copy_picklable_objects_and_count_their_bytes():
    def main():
        dist.init_process_group()
        me = dist.get_rank()
        objects = [{"lr": 0.1, "steps": [1, 2]}, "adam"] if me == 1 else [None, None]
        dist.broadcast_object_list(objects, src=1)
        everyone = [None] * dist.get_world_size()
        dist.all_gather_object(everyone, {"rank": me, "seen": objects[1]})
        return objects, everyone

    result = run(3, main)
    for objects, everyone in result.returns:
        assert objects == [{"lr": 0.1, "steps": [1, 2]}, "adam"]
        assert everyone == [{"rank": r, "seen": "adam"} for r in range(3)]
    assert result.stats.bytes_sent[1] > 0  # the pickles moved on the network


@pytest.mark.parametrize(
    "call, bad",
    [
        (lambda: dist.broadcast_object_list((1, 2), src=0), "(1, 2)"),
        (lambda: dist.all_gather_object([None], 1), "[None]"),
        (lambda: dist.all_gather_object([None] * 2, lambda: 0), "cannot be pickled"),
        (lambda: dist.broadcast_object_list([1] * (dist.get_rank() + 1), src=0), "sent 1 objects"),
    ],
)
def test_object_collectives_refuse_what_they_cannot_copy(call, bad):
    def main():
        dist.init_process_group()
        call()

    with pytest.raises(ConfigError, match=bad.replace("(", r"\(").replace(")", r"\)")):
        run(2, main)
