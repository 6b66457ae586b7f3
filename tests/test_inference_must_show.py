"""Issue 31's "Must show" figures, as docs/inference.md quotes them, kept true by running the
commands it shows: the 8-GPU decode all-reduce on a DGX H100 beside NCCL's own LL-ring
latency (its tuning tables: 6.6 µs base + 14 hops x 0.6 µs), and the TTFT/TPOT table of the
disaggregation workload, row by row, with the direction DistServe and Splitwise report.
(The crossover table is test_small_message_all_reduce.py's; the tokens against one device
are test_inference_parallel.py's Hypothesis properties.)"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from collsim.cli import main
from collsim.collectives.nccl_model import graph_of, tune_table
from collsim.collectives.nccl_tables import BASE_LATENCY_US, HOP_LATENCY_US
from collsim.collectives.small_messages import crossovers, vllm_choice
from collsim.hardware import preset
from collsim.units import format_size

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "inference.md").read_text(encoding="utf-8")
README = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
FLAT = " ".join(DOC.split())  # the prose as one line: a sentence may wrap anywhere
DECODE = ["infer", "--tp", "8", "--heads", "8", "--preset", "dgx-h100"]


def test_the_readme_sets_the_model_s_crossovers_beside_vllm_s_thresholds():
    for machine, name in (("dgx-h100", "DGX H100"), ("dgx-a100", "DGX A100")):
        four, eight = (format_size(round(r.one_to_two_shot)) for r in crossovers(machine, (4, 8)))
        assert f"{four} on 4 GPUs and {eight} on 8" in README or (
            f"on a {name}: {four} and {eight}" in README
        ), machine
    # vLLM's switch points, as its rule gives them (custom_all_reduce.cuh)
    for k, kib in ((4, 512), (8, 256)):
        assert vllm_choice(k, kib * 1024 - 1) == "one_shot" != vllm_choice(k, kib * 1024)
    assert "switches at 512 KiB and 256 KiB" in README


def decode_all_reduce(algorithm, capsys):
    """(seconds of one decode all-reduce, seconds of a decode step) of the doc's run."""
    assert main([*DECODE, "-a", algorithm, "--json"]) == 0
    f = json.loads(capsys.readouterr().out)
    (row,) = [r for r in f["all_reduces"] if r["phase"] == "decode"]
    assert row["message_bytes"] == 512 and f["tokens"] == f["expected_tokens"]
    return row["mean_seconds"], max(f["decode_step_s"])


def test_the_dgx_h100_decode_all_reduce_beside_nccl_s_ll_ring(capsys):
    ring, ring_step = decode_all_reduce("ring", capsys)
    one, one_step = decode_all_reduce("one_shot", capsys)
    two, _ = decode_all_reduce("two_shot", capsys)
    # NCCL's model of an 8-GPU LL ring: its base latency plus 2(K-1) = 14 NVLink hops
    base, hop = BASE_LATENCY_US["ring"].ll, HOP_LATENCY_US["nvlink"]["ring"].ll
    graph = graph_of(preset("dgx-h100"))
    (nccl,) = [
        e.latency_us
        for e in tune_table(graph, "all_reduce")
        if (e.algorithm, e.protocol) == ("ring", "ll")
    ]
    assert nccl == pytest.approx(base + 14 * hop) == pytest.approx(15.0)
    assert (
        f"NCCL's own cost model puts an 8-GPU LL ring at {base:g} µs base + 14 × {hop:g} µs" in FLAT
    )
    # the simulated ring lands within 3 % of NCCL's 15 µs, from a different split (docs)
    assert ring == pytest.approx(nccl * 1e-6, rel=0.03)
    assert f"each all-reduce of 512 B takes {ring * 1e6:.1f} µs" in FLAT
    assert (
        f"One-shot takes {one * 1e6:.1f} µs for the same message and two-shot {two * 1e6:.1f} µs"
        in FLAT
    )
    assert f"drops from {ring_step * 1e6:.0f} µs to {one_step * 1e6:.0f} µs" in FLAT


def quoted_table():
    """{deployment: [TTFT mean, TTFT p99, TPOT mean, ITL p99 (s), tokens/s]} as quoted."""
    rows = {}
    for line in DOC.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 6 and re.match(r"(colocated|disaggregated)", cells[0]):
            times = [float(c.removesuffix(" µs")) * 1e-6 for c in cells[1:5]]
            rows[cells[0]] = [*times, float(cells[5].removesuffix(" M")) * 1e6, cells[1:]]
    return rows


def workload_command():
    """The workload's command, as the doc shows it under **The workload.**"""
    block = DOC[DOC.index("**The workload.**") :]
    command = re.search(r"```\n(collsim infer .*?)```", block, re.S).group(1)
    return command.replace("\\\n", " ").split()[1:]


def serve_json(argv):
    # a subprocess with one BLAS thread: the numbers are simulated, not measured, so the
    # thread count changes only how long the check takes on a busy machine
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MPLBACKEND="Agg")
    done = subprocess.run(
        [sys.executable, "-m", "collsim", *argv, "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def close_to_quoted(value, quoted_text, quoted):
    """``value`` rounds to the doc's figure: within half its last written digit."""
    digits = quoted_text.split()[0]
    decimals = len(digits.split(".")[1]) if "." in digits else 0
    scale = quoted / float(digits)
    return abs(value - quoted) <= 0.5 * 10**-decimals * scale * 1.0001


@pytest.mark.slow
def test_the_disaggregation_table_is_the_run_of_its_command():
    argv = workload_command()
    assert argv[argv.index("--disaggregate") + 1] == "1:3"
    table = quoted_table()
    assert set(table) == {"colocated × 4", "disaggregated 1:3", "disaggregated 2:2"}
    measured = {}
    for pools in ("1:3", "2:2"):
        argv[argv.index("--disaggregate") + 1] = pools
        f = serve_json(argv)
        assert f["match"] is True
        colocated, split = f["deployments"]
        measured["colocated × 4"] = colocated["metrics"]
        measured[f"disaggregated {pools}"] = split["metrics"]
    for name, (*quoted, texts) in table.items():
        m = measured[name]
        ttft, tpot = (
            m["vllm:time_to_first_token_seconds"],
            m["vllm:request_time_per_output_token_seconds"],
        )
        itl = m["vllm:inter_token_latency_seconds"]
        values = [ttft["mean"], ttft["p99"], tpot["mean"], itl["p99"], m["tokens_per_second"]]
        for value, q, text, what in zip(
            values, quoted, texts, ("TTFT", "TTFT p99", "TPOT", "ITL p99", "tokens/s")
        ):
            assert close_to_quoted(value, text, q), (name, what, value, text)
    # DistServe's and Splitwise's direction: TPOT and its tail fall, TTFT rises with one
    # prefill GPU
    base, split = measured["colocated × 4"], measured["disaggregated 1:3"]
    tpot = "vllm:request_time_per_output_token_seconds"
    assert split[tpot]["mean"] < 0.6 * base[tpot]["mean"]
    itl = "vllm:inter_token_latency_seconds"
    assert split[itl]["p99"] < 0.3 * base[itl]["p99"]
    ttft = "vllm:time_to_first_token_seconds"
    assert split[ttft]["mean"] > 2 * base[ttft]["mean"]
