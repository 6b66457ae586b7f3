"""Units on the command line (issue 25, items 10-12): nccl-tests' size flags read K, M and G
as powers of 1,024; a buffer size in bits and a time without a unit are refused naming the
byte or unit spelling; the run's header prints every flag as typed and as read."""

import json

import pytest
from fuzzkit import run_cli

GiB = 2**30


def _rows(argv):
    outcome = run_cli([*argv, "--json"], timeout=30)
    assert outcome.status == 0, outcome.stderr
    return json.loads(outcome.stdout)["results"]


def test_nccl_tests_sweep_to_8G_ends_at_8_GiB():
    # all_reduce_perf -b 8 -e 8G -f 2: 8 B, 16 B, ... 8 GiB, 31 sizes (it stopped at 4 GiB)
    rows = _rows(["run", "all-reduce", "-b", "8", "-e", "8G", "-f", "2", "--analytical"])
    assert [r["size_bytes"] for r in rows] == [8 * 2**i for i in range(31)]
    assert rows[-1]["size_bytes"] == 8 * GiB


@pytest.mark.parametrize(
    ("flags", "nbytes"),
    [
        (["--size", "64M"], 64 * 2**20),
        (["--size", "64m"], 64 * 2**20),
        (["--size", "64MB"], 64 * 10**6),
        (["--size", "64MiB"], 64 * 2**20),
        (["-b", "1K"], 1024),
        (["-e", "1k", "-b", "1k"], 1024),
    ],
)
def test_a_prefix_alone_means_binary_on_every_size_flag(flags, nbytes):
    (row,) = _rows(["run", "all-reduce", "-k", "2", *flags, "--analytical"])
    assert row["size_bytes"] == nbytes


def test_help_states_the_size_rule():
    text = " ".join(run_cli(["run", "--help"]).stdout.split())
    assert "a prefix alone is binary, as nccl-tests reads -b/-e: 64M = 64 MiB, 8G = 8 GiB" in text
    assert "64MB = 64 x 10^6 B" in text and "A size in bits (64Mb) is refused" in text


@pytest.mark.parametrize(
    ("argv", "bad", "spelling"),
    [
        (["run", "all-reduce", "--size", "64Mb"], "64Mb", "64MB"),
        (["run", "all-reduce", "--size", "64Mb", "--count-only"], "64Mb", "64MB"),
        (["run", "all-reduce", "-b", "8", "-e", "8Gb"], "8Gb", "8GB"),
        (["viz", "traffic", "--size", "1Mbit", "--out", "t.png"], "1Mbit", "1MB"),
    ],
)
def test_a_buffer_size_in_bits_is_refused_with_the_byte_spelling(argv, bad, spelling, tmp_path):
    outcome = run_cli([str(tmp_path / a) if a.endswith(".png") else a for a in argv], bad=bad)
    assert outcome.status != 0 and outcome.stdout == ""
    assert "in bits" in outcome.stderr and f"did you mean {spelling}?" in outcome.stderr


TIME_FLAGS = [
    ["run", "all-reduce", "--count-only", "--latency", "5"],
    ["run", "all-reduce", "--topology", "hierarchical", "--inter-latency", "5"],
    ["step", "all-reduce", "--no-pause", "--latency", "5"],
    ["pipeline", "--latency", "5"],
    ["pipeline", "--t-forward", "5"],
    ["verify", "dp", "--latency", "5"],
    ["exec", "-n", "2", "--latency", "5", "examples/mpi_pi.py"],
    ["viz", "timeline", "--latency", "5", "--out", "t.png"],
    ["run", "all-reduce", "--count-only", "--fail-link", "0-1@5", "--watchdog-timeout", "1s"],
]


@pytest.mark.parametrize("argv", TIME_FLAGS, ids=[" ".join(a[:2] + a[-2:]) for a in TIME_FLAGS])
def test_a_time_without_a_unit_is_refused_as_a_bare_bandwidth_is(argv, tmp_path):
    argv = [str(tmp_path / a) if a.endswith(".png") else a for a in argv]  # never in the checkout
    outcome = run_cli(argv, bad="5", timeout=30)
    assert outcome.status != 0 and outcome.stdout == ""
    assert "has no unit" in outcome.stderr and "5us" in outcome.stderr


def test_zero_alone_is_still_a_free_latency():
    (row,) = _rows(
        [
            "run",
            "all-reduce",
            "-k",
            "2",
            "-s",
            "8",
            "--latency",
            "0",
            "--bandwidth",
            "inf",
            "--count-only",
        ]
    )
    assert row["time_s"] == 0


def test_the_header_prints_every_flag_as_typed_and_as_read():
    out = run_cli(
        [
            "run",
            "all-reduce",
            "-k",
            "4",
            "--bandwidth",
            "100Gbps",
            "--latency",
            "2us",
            "--size",
            "64M",
            "--count-only",
        ]
    ).stdout
    assert "--bandwidth 100Gbps = 12.5 GB/s per link and direction" in out
    assert "--latency 2us = 2 us" in out
    assert "--size 64M = 67,108,864 B (64 MiB)" in out
    sweep = run_cli(["run", "all-reduce", "-b", "8", "-e", "8G", "--analytical"]).stdout
    assert "--min-bytes 8 = 8 B .. --max-bytes 8G = 8,589,934,592 B (8 GiB)" in sweep
    hierarchical = run_cli(
        [
            "run",
            "all-reduce",
            "-k",
            "8",
            "--topology",
            "hierarchical",
            "--inter-bandwidth",
            "400Gbit/s",
            "--count-only",
        ]
    ).stdout
    assert "--inter-bandwidth 400Gbit/s = 50 GB/s per NIC" in hierarchical


def test_step_prints_its_links_as_read():
    out = run_cli(["step", "all-reduce", "--no-pause", "--bandwidth", "8Gb/s"]).stdout
    assert "--bandwidth 8Gb/s = 1 GB/s per link and direction; --latency 5us = 5 us" in out
