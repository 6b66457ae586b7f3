"""docs/moe.md sets collsim's dispatch and combine bandwidth on the DGX H100 preset beside
DeepEP's published table (issue 30, "Must show"): the figures it quotes for collsim are what
`python benchmarks/deepep_bandwidth.py` prints, the published ones are DeepEP's, and the
bytes the simulated run moved are those the routing asks for."""

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from fuzzkit import check_api
from hypothesis import given
from hypothesis import strategies as st

from collsim.parallel.experts.deepep import (
    BF16_ELEMENT,
    FP8_ELEMENT,
    DeepEPConfig,
    deepep_bandwidth,
    deepep_routing,
)
from collsim.parallel.experts.formulas import expected_destination_ranks

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "moe.md").read_text(encoding="utf-8")
ROW = r"\| {ep} \| (\w+) \| (\d+) / (\d+) GB/s \| (\d+) / (\d+) GB/s \| (\d+) / (\d+) GB/s \|"
# DeepEP's README, legacy V1 table (normal kernels, H800 + CX7 400 Gb/s), GB/s
DEEPEP = {8: ("NVLink", 153, 158), 16: ("RDMA", 43, 43), 32: ("RDMA", 58, 57), 64: ("RDMA", 51, 50)}


def quoted(ep):
    (row,) = re.findall(ROW.format(ep=ep), DOC)
    return row[0], [int(x) for x in row[1:]]


@pytest.mark.parametrize("ep", [8, 16, pytest.param(32, marks=pytest.mark.slow)])
def test_the_quoted_collsim_figures_are_what_the_simulation_gives(ep):
    link, (their_out, their_back, out, back, over_out, over_back) = quoted(ep)
    assert (link, their_out, their_back) == DEEPEP[ep]
    bw = deepep_bandwidth(nodes=ep // 8)
    assert bw.link == link and bw.ep == ep
    assert (round(bw.dispatch / 1e9), round(bw.combine / 1e9)) == (out, back)
    assert [round(x / 1e9) for x in bw.overlapped] == [over_out, over_back]


def benchmark(*args):
    """``python benchmarks/deepep_bandwidth.py *args`` in this tree."""
    script = [sys.executable, "benchmarks/deepep_bandwidth.py", *args]
    return subprocess.run(script, cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_the_benchmark_prints_the_rows_the_doc_quotes():
    run = benchmark("--ep", "8")
    assert run.returncode == 0, run.stderr
    (line,) = [x for x in run.stdout.splitlines() if x.startswith("| 8 |")]
    assert line in DOC


def test_the_benchmark_refuses_an_ep_that_is_not_whole_nodes():
    run = benchmark("--ep", "12")
    assert run.returncode == 2 and "--ep 12" in run.stderr and "nearest valid --ep 16" in run.stderr


def test_the_run_moves_one_row_per_token_and_destination_rank_inside_a_node():
    config = DeepEPConfig(tokens=128, hidden=64, experts=32)
    reaches = deepep_routing(config, nodes=1, gpus_per_node=8)
    bw = deepep_bandwidth(config, nodes=1)
    # rank 0's counted bytes: every token that reaches it, its own included, at BF16
    assert bw.counted_bytes == reaches[:, :, 0].sum() * 64 * BF16_ELEMENT
    # each token reaches the ranks of its experts once: top-8 of 32 over 8 ranks, 1..8 ranks
    per_token = reaches.sum(axis=2)
    assert per_token.min() >= 1 and per_token.max() <= 8


def test_the_average_token_reaches_the_closed_forms_number_of_ranks():
    reaches = deepep_routing(DeepEPConfig(tokens=4096), nodes=1, gpus_per_node=8)
    measured = reaches.sum(axis=2).mean()
    assert measured == pytest.approx(expected_destination_ranks(256, 8, 8), rel=0.01)
    assert measured < 8  # not one row per chosen expert


def test_two_nodes_send_each_token_across_once_per_node_at_fp8():
    config = DeepEPConfig(tokens=64, hidden=128, experts=32)
    bw = deepep_bandwidth(config, nodes=2)
    reaches = deepep_routing(config, nodes=2, gpus_per_node=8)
    to_node = reaches.reshape(16, 64, 2, 8).any(axis=3)  # (src, token, node)
    assert bw.counted_bytes == to_node[0].sum() * 128 * BF16_ELEMENT  # own node included
    assert set(bw.dispatch_legs) == {"dispatch-inter", "dispatch-intra"}
    row = round(128 * FP8_ELEMENT)
    # the RDMA leg is rank 0's tokens for node 1, once each: its time is at least their bytes
    # over one NIC (47 GB/s on the preset)
    assert bw.dispatch_legs["dispatch-inter"] >= to_node[0, :, 1].sum() * row / 47e9
    assert np.isclose(bw.dispatch * bw.dispatch_time, bw.counted_bytes * FP8_ELEMENT / 2)


def test_a_count_only_all_to_allv_moves_the_counts_rows_and_no_data():
    import collsim
    from collsim.collectives.all_to_allv import direct_all_to_allv, run_all_to_allv
    from collsim.runtime.ops import CountOnly

    counts = [[0, 3, 0], [1, 0, 2], [4, 5, 0]]
    schedule = direct_all_to_allv(counts)

    def program(rank):
        return (yield from run_all_to_allv(rank, schedule, CountOnly(10)))

    run = collsim.Cluster(collsim.topology.switch(3)).run(program)
    assert run.returns == [None, None, None]
    moved = {(t.src, t.dst): t.nbytes for t in run.trace.transfers}
    want = {(s, d): 10 * n for s, row in enumerate(counts) for d, n in enumerate(row) if n}
    assert moved == {k: v for k, v in want.items() if k[0] != k[1]}


BAD_COUNTS = st.one_of(st.integers(-3, 0), st.sampled_from([1.5, float("nan"), True, "8"]))


@given(bad=BAD_COUNTS, which=st.sampled_from(["tokens", "hidden", "top_k", "experts"]))
def test_a_bad_size_is_refused_naming_it(bad, which):
    check_api(lambda: DeepEPConfig(**{which: bad}), bad=bad)


@given(bad=st.one_of(BAD_COUNTS, st.integers(17, 10**6)))
def test_a_bad_node_count_is_refused_before_anything_runs(bad):
    check_api(deepep_bandwidth, DeepEPConfig(tokens=4, hidden=8, experts=16), nodes=bad, bad=bad)


@given(experts=st.integers(1, 64), ep=st.integers(1, 16), top_k=st.integers(1, 70), bad=BAD_COUNTS)
def test_the_closed_form_counts_or_refuses_naming_the_value(experts, ep, top_k, bad):
    value = check_api(expected_destination_ranks, experts, ep, top_k, bad=None)
    if value.error is None:  # a valid triple: between 1 rank and min(k, ep)
        assert 1 - 1e-12 <= value.value <= min(top_k, ep) + 1e-12
    check_api(expected_destination_ranks, bad, ep, top_k, bad=bad)
