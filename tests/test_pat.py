"""PAT (NCCL's all-gather and reduce-scatter for one GPU per node) as a schedule: its
structure, values, bytes and closed form, the CLI, and where `auto` takes it.  The
numeric checks over every dtype and op come from tests/test_collective_pairs.py, which
runs every algorithm of formulas.ALGORITHMS."""

import json
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import collsim
from collsim import hardware, topology
from collsim.cli import main
from collsim.collectives import closed_form
from collsim.collectives.pat import pat_all_gather, pat_distances, pat_reduce_scatter
from collsim.collectives.schedule import contributions


@given(k=st.integers(1, 70), max_chunks=st.sampled_from([None, 1, 2, 3, 5]))
def test_every_rank_ends_with_what_the_collective_promises(k, max_chunks):
    gathered = list(contributions(pat_all_gather(k, max_chunks)))[-1]
    assert all(gathered[r][c] == {c} for r in range(k) for c in range(k))
    scattered = list(contributions(pat_reduce_scatter(k, max_chunks)))[-1]
    assert all(scattered[r][r] == set(range(k)) for r in range(k))


@given(k=st.integers(2, 70))
def test_log_steps_partners_at_powers_of_two_and_the_rings_bytes(k):
    schedule = pat_all_gather(k)
    assert schedule.n_steps == math.ceil(math.log2(k))
    for i, step in enumerate(schedule.steps):
        assert {(m.src - m.dst) % k for m in step} == {2**i}  # rank r sends to r - 2^i
    sent = [0] * k
    for _, move in schedule.moves():
        sent[move.src] += len(move.chunks)
    assert sent == [k - 1] * k  # (K-1)/K of the buffer each, as the ring
    assert [len(s) for s in pat_reduce_scatter(k).steps] == [
        len(s) for s in reversed(schedule.steps)
    ]


def test_bounded_aggregation_splits_large_messages_into_more_steps():
    assert pat_distances(8) == [(1, 0, 1), (2, 0, 2), (4, 0, 4)]
    assert len(pat_distances(8, max_chunks=2)) == 4  # the 4-chunk message goes in two
    assert max(len(m.chunks) for _, m in pat_all_gather(64, max_chunks=4).moves()) <= 4


@pytest.mark.parametrize("k", [2, 3, 5, 8, 13])
@pytest.mark.parametrize("collective", ["all_gather", "reduce_scatter"])
def test_values_bytes_and_time_equal_numpy_and_the_closed_form(collective, k):
    cluster = collsim.Cluster(topology.fully_connected(k, "100GB/s", "5us"))
    count = 3 * k
    xs = [np.arange(count, dtype=np.int64) * (r + 1) + r for r in range(k)]
    out = getattr(cluster, collective)(xs, algorithm="pat")
    total = sum(xs)
    for r in range(k):
        want = np.concatenate(xs) if collective == "all_gather" else np.array_split(total, k)[r]
        np.testing.assert_array_equal(out.outputs[r], want)
    size = count * 8 * (k if collective == "all_gather" else 1)  # S as nccl-tests counts it
    form = closed_form(collective, "pat", k, size, 5e-6, 100e9)
    assert out.stats.steps == form.steps == math.ceil(math.log2(k))
    assert out.stats.bytes_sent == [form.bytes_per_rank] * k
    assert out.time == pytest.approx(form.time_s, rel=1e-12)  # one link a partner: no contention


def test_collsim_run_takes_pat_and_its_alias_bruck(capsys):
    assert (
        main(
            ["run", "all-gather", "--algorithm", "pat", "--ranks", "6", "--size", "6KiB", "--json"]
        )
        == 0
    )
    row = json.loads(capsys.readouterr().out)["results"][0]
    assert row["algorithm"] == "pat" and row["steps"] == 3 and row["wrong"] == 0
    assert (
        main(["run", "reduce-scatter", "-a", "bruck", "--ranks", "6", "--size", "6KiB", "--json"])
        == 0
    )
    assert json.loads(capsys.readouterr().out)["results"][0]["algorithm"] == "pat"


def test_auto_takes_pat_only_with_one_gpu_per_node():
    single = hardware.loads(
        'base = "dgx-h100"\nname = "h100-1gpu"\ngpus_per_node = 1\n[inter]\nnics = 1'
    )
    one_each = collsim.Cluster(hardware.topology(single, nodes=12))  # not a power of two
    small = one_each.all_gather(count=16, dtype="float32", algorithm="auto")
    assert small.algorithm == "pat"  # 4 steps against the ring's 11: latency wins
    dgx = collsim.Cluster(hardware.topology(hardware.preset("dgx-h100"), nodes=2))
    assert dgx.all_gather(count=16, dtype="float32", algorithm="auto").algorithm != "pat"
