"""One-shot and two-shot all-reduce (vLLM's custom all-reduce, NCCL's symmetric-memory
kernels): run from the command line, their bytes read from the trace, ``auto``'s choice
between them moving with α and β, and the crossovers on the presets as docs/inference.md
states them.  Values, moves and closed forms for every K are in test_collective_pairs.py
(the pairs are read from ALGORITHMS), the fast path's equivalence in
test_fast_equivalence.py."""

import json
import re
from pathlib import Path

import numpy as np
import pytest

import collsim
from collsim import topology
from collsim.cli import main
from collsim.collectives.formulas import one_shot_crossover
from collsim.collectives.small_messages import crossovers
from collsim.units import format_size

DOC = Path(__file__).resolve().parents[1] / "docs" / "inference.md"


def run_json(argv, capsys):
    assert main([*argv, "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["results"]
    return row


@pytest.mark.parametrize(
    "spelling, algorithm, steps",
    [("one_shot", "one_shot", 1), ("one-shot", "one_shot", 1), ("twoshot", "two_shot", 2)],
)
def test_collsim_run_runs_them_like_every_other_algorithm(spelling, algorithm, steps, capsys):
    argv = ["run", "all-reduce", "-k", "8", "-s", "64KiB", "--topology", "switch", "-a", spelling]
    row = run_json(argv, capsys)
    assert (row["algorithm"], row["steps"], row["wrong"]) == (algorithm, steps, 0)


@pytest.mark.parametrize("k", [2, 3, 8])
def test_bytes_each_rank_receives(k):
    size = 8 * 840  # bytes: float64, K divides the count
    cluster = collsim.Cluster(topology.switch(k, "100GB/s", "1us"))
    xs = [np.arange(840.0) * (r + 1) for r in range(k)]
    one = cluster.all_reduce(xs, algorithm="one_shot")
    two = cluster.all_reduce(xs, algorithm="two_shot")
    assert one.stats.bytes_received == [(k - 1) * size] * k  # every peer's whole buffer
    assert two.stats.bytes_received == [2 * (k - 1) * size // k] * k  # a ring's bytes
    for out in (one, two):
        for got in out.outputs:
            np.testing.assert_array_equal(got, np.arange(840.0) * k * (k + 1) / 2)


@pytest.mark.parametrize("latency", ["1us", "10us"])
def test_auto_moves_from_one_shot_to_two_shot_where_alpha_and_beta_say(latency, capsys):
    alpha = 2 * float(latency[:-2]) * 1e-6  # a switch path is two links
    crossover = one_shot_crossover(8, alpha, 100e9)
    chosen = {}
    for factor in (0.5, 2.0):
        count = int(crossover * factor) // 4 // 8 * 8  # float32 elements, K divides them
        argv = [
            "run",
            "all-reduce",
            "-k",
            "8",
            "--topology",
            "switch",
            "--bandwidth",
            "100GB/s",
            "--latency",
            latency,
            "-s",
            str(4 * count),
            "-a",
            "auto",
        ]
        chosen[factor] = run_json(argv, capsys)["algorithm"]
    assert chosen == {0.5: "one_shot", 2.0: "two_shot"}


def test_two_ranks_take_one_shot_at_every_size(capsys):
    for size in ("8", "64MiB"):
        argv = ["run", "all-reduce", "-k", "2", "--topology", "switch", "-s", size, "-a", "auto"]
        assert run_json(argv, capsys)["algorithm"] == "one_shot"


def test_the_crossovers_in_docs_are_the_models():
    text = DOC.read_text()
    for machine in ("dgx-h100", "dgx-a100"):
        for row in crossovers(machine):
            one = (
                "always"
                if row.one_to_two_shot == float("inf")
                else format_size(round(row.one_to_two_shot))
            )
            nccl = (
                "never"
                if row.two_shot_to_nccl == float("inf")
                else format_size(round(row.two_shot_to_nccl))
            )
            line = f"| {machine} | {row.ranks} | {one} | {nccl} ({row.nccl_algorithm}) |"
            assert line in text, line
    assert re.search(r"collsim infer --crossovers", text)
