"""A group keeps its last numeric call's working block and reuses it once nothing holds
it: the answers must be those of a fresh block every time (every collective, a dirty block
reused), answers still held must never be overwritten, and only small blocks are kept."""

import numpy as np
import pytest

import collsim
from collsim import topology
from collsim.collectives.api import run_collective
from collsim.collectives.registry import BUILDERS
from collsim.fast import routing as routing_module

K = 8


def _inputs(name, count, seed):
    rng = np.random.default_rng(seed)
    shape = (K * count,) if name == "all_to_all" else (count,)
    return [rng.uniform(-1, 1, shape) for _ in range(K)]


def _pointer(array):
    return array.__array_interface__["data"][0]


@pytest.mark.parametrize("name, algorithm", sorted(BUILDERS))
def test_a_reused_block_gives_what_a_fresh_one_gives(name, algorithm):
    cluster = collsim.Cluster(topology.ring(K))
    reference = collsim.Cluster(topology.ring(K), fast=False)
    options = dict(algorithm=algorithm, op="sum", root=3)
    count = 3 if name == "all_to_all" else 2 * K + 3
    for seed in range(3):  # the second and third calls may reuse the first's block, dirty
        buffers = _inputs(name, count, seed)
        got = run_collective(cluster, name, buffers, **options).outputs
        want = run_collective(reference, name, buffers, **options).outputs
        for a, b in zip(got, want, strict=True):
            assert (a is None and b is None) or np.array_equal(a, b)
        del got


def test_the_block_is_reused_once_the_answers_are_dropped():
    cluster = collsim.Cluster(topology.ring(K))
    buffers = _inputs("all_reduce", 1 << 12, 0)
    first = cluster.all_reduce(buffers).outputs
    where = _pointer(first[0])
    del first
    again = cluster.all_reduce(buffers).outputs
    assert _pointer(again[0]) == where  # the same memory, not a fresh block
    assert np.array_equal(again[3], _ring_sum(buffers))  # the ring's order of additions


def test_answers_still_held_are_never_overwritten():
    cluster = collsim.Cluster(topology.ring(K))
    a, b = _inputs("all_reduce", 1 << 12, 1), _inputs("all_reduce", 1 << 12, 2)
    first = cluster.all_reduce(a).outputs
    kept = [x.copy() for x in first]
    second = cluster.all_reduce(b).outputs
    assert not np.shares_memory(first[0], second[0])
    assert all(np.array_equal(x, y) for x, y in zip(first, kept))
    assert np.allclose(second[5], np.sum(b, axis=0), rtol=1e-12, atol=1e-12)
    view = second[2][10:20]  # a slice of one answer holds the block too
    del second
    third = cluster.all_reduce(a).outputs
    assert not np.shares_memory(view, third[2])
    assert np.array_equal(view, _ring_sum(b)[10:20])


def _ring_sum(buffers):
    """Rank 2's answer from the per-transfer engine, which keeps no block."""
    return run_collective(
        collsim.Cluster(topology.ring(K), fast=False), "all_reduce", buffers
    ).outputs[2]


def test_only_blocks_up_to_the_limit_are_kept(monkeypatch):
    monkeypatch.setattr(routing_module, "SPARE_WORK_BYTES", 1 << 10)
    cluster = collsim.Cluster(topology.ring(K))
    small, large = _inputs("all_reduce", 16, 3), _inputs("all_reduce", 1 << 10, 4)
    first = cluster.all_reduce(small).outputs
    where = _pointer(first[0])
    del first
    assert _pointer(cluster.all_reduce(small).outputs[0]) == where  # 8 x 16 x 8 B: kept
    routing = next(iter(cluster.caches.fast["routings"].values()))
    cluster.all_reduce(large)
    assert routing.spare is None  # 8 x 1,024 x 8 B, over the limit: not kept
