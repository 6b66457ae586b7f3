"""A collective of zero bytes returns at once (issue 25, item 14), as NCCL's does (its
``taskAppend`` returns ``ncclSuccess`` for a count of 0 before any work): 0 steps, 0 s and
0 B for every collective and algorithm, numeric and count-only, through the batched path,
the engine, a rank program, the closed form and the CLI."""

import json

import numpy as np
import pytest
from fuzzkit import run_cli

import collsim
from collsim import hardware
from collsim.collectives import analytical, reference
from collsim.collectives.api import run_collective
from collsim.collectives.formulas import ALGORITHMS
from collsim.collectives.registry import algorithms_for

KS = (1, 2, 3, 5, 8)
CASES = [
    (name, algorithm, k) for name in ALGORITHMS for k in KS for algorithm in algorithms_for(name, k)
]


def _nothing_moved(out):
    assert out.stats.steps == 0 and out.schedule.n_steps == 0
    assert out.time == 0.0
    assert sum(out.stats.bytes_sent) == 0 and sum(out.stats.bytes_received) == 0
    assert out.trace.transfer_count == 0


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "reference"])
@pytest.mark.parametrize(("name", "algorithm", "k"), CASES)
def test_every_pair_returns_at_once_on_zero_bytes(name, algorithm, k, fast):
    cluster = collsim.Cluster(collsim.topology.ring(k), fast=fast)
    buffers = [np.zeros(0, "float32") for _ in range(k)]
    out = run_collective(cluster, name, buffers, algorithm=algorithm)
    _nothing_moved(out)
    for got, want in zip(out.outputs, reference(name, buffers, "sum", 0)):
        assert (got is None and want is None) or (got.shape == want.shape == (0,))
    counted = run_collective(cluster, name, count=0, dtype="float32", algorithm=algorithm)
    _nothing_moved(counted)
    cost = analytical(cluster, name, 0, algorithm)
    assert (cost.steps, cost.bytes_per_rank, cost.time_s) == (0, 0.0, 0.0)


@pytest.mark.parametrize("algorithm", ["auto", "nccl_ring", "double_tree", "hierarchical"])
def test_the_hardware_algorithms_return_at_once_too(algorithm):
    cluster = collsim.Cluster(hardware.topology(hardware.PRESETS["dgx-h100"], 2))
    _nothing_moved(cluster.all_reduce(count=0, algorithm=algorithm))
    assert analytical(cluster, "all_reduce", 0, algorithm).time_s == 0.0


def test_nvls_inside_one_node_returns_at_once():
    cluster = collsim.Cluster(hardware.topology(hardware.PRESETS["dgx-h100"], 1))
    _nothing_moved(cluster.all_reduce([np.zeros(0, "float32")] * 8, algorithm="nvls"))


def test_a_rank_program_does_not_wait_for_a_zero_byte_call():
    cluster = collsim.Cluster(collsim.topology.ring(5))

    def program(rank):
        summed = yield from rank.all_reduce(np.zeros(0))
        gathered = yield from rank.all_gather(np.zeros(0))
        return summed.size + gathered.size

    result = cluster.run(program)
    assert result.time == 0.0 and result.returns == [0] * 5
    assert result.trace.transfer_count == 0


@pytest.mark.parametrize(
    "mode", [[], ["--count-only"], ["--analytical"]], ids=["numeric", "count-only", "analytical"]
)
@pytest.mark.parametrize("collective", ["all-reduce", "all-gather", "broadcast", "all-to-all"])
def test_collsim_run_reports_zero_steps_time_and_bytes(collective, mode):
    outcome = run_cli(["run", collective, "--ranks", "5", "--size", "0", *mode, "--json"])
    assert outcome.status == 0, outcome.stderr
    (row,) = json.loads(outcome.stdout)["results"]
    assert (row["steps"], row["time_s"], row["algbw_GBps"]) == (0, 0.0, None)
    assert set(row["bytes_sent"]) == {0} and row["correct"] is not False
