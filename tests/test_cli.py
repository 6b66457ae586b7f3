"""The command line: run, step and tour print what they promise; bad flags are errors."""

import json
import subprocess
import sys

import pytest

from collsim.cli import main

JSON_KEYS = {
    "collective",
    "algorithm",
    "protocol",
    "topology",
    "ranks",
    "size_bytes",
    "count",
    "dtype",
    "op",
    "bytes_sent",
    "bytes_received",
    "steps",
    "time_s",
    "algbw_GBps",
    "busbw_GBps",
    "wrong",
    "correct",
}


def run_json(capsys, *argv):
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)["results"]


def test_run_json_schema_and_nccl_tests_bandwidths(capsys):
    (row,) = run_json(
        capsys,
        "run",
        "all-reduce",
        "--ranks",
        "8",
        "--size",
        "64MiB",
        "--topology",
        "ring",
        "--count-only",
    )
    assert set(row) == JSON_KEYS
    assert row["size_bytes"] == 64 * 2**20 and row["steps"] == 14
    assert row["algbw_GBps"] == pytest.approx(row["size_bytes"] / row["time_s"] / 1e9)
    assert row["busbw_GBps"] == pytest.approx(row["algbw_GBps"] * 2 * 7 / 8)
    assert row["bytes_sent"] == [2 * 7 * 64 * 2**20 // 8] * 8
    assert row["correct"] is None  # count-only moves no values to check


def test_run_sweep_has_one_verified_row_per_size(capsys):
    rows = run_json(capsys, "run", "all-gather", "-k", "4", "-b", "64", "-e", "4KiB", "-f", "4")
    assert [r["size_bytes"] for r in rows] == [64, 256, 1024, 4096]
    assert all(r["correct"] is True for r in rows)
    assert all(r["busbw_GBps"] == pytest.approx(r["algbw_GBps"] * 3 / 4) for r in rows)


def test_run_table_and_trace(tmp_path, capsys):
    trace = tmp_path / "t.json"
    assert main(["run", "reduce-scatter", "-k", "4", "-s", "1KiB", "--trace", str(trace)]) == 0
    out = capsys.readouterr().out
    assert "algbw" in out and "(GB/s)" in out and "(us)" in out
    events = json.loads(trace.read_text())["traceEvents"]
    assert {e["pid"] for e in events if e["ph"] == "X"} == {0, 1, 2, 3}


def test_step_prints_every_step(capsys):
    assert main(["step", "all-reduce", "--ranks", "4", "--no-pause"]) == 0
    out = capsys.readouterr().out
    assert out.count("reduce-scatter ") == 3 and out.count("all-gather ") == 3
    assert "r0+r1+r2+r3" in out


def test_bad_input_is_a_collsim_error(capsys):
    assert main(["run", "all-reduse", "--ranks", "4"]) == 2
    assert "did you mean 'all-reduce'" in capsys.readouterr().err
    assert main(["run", "all-reduce", "--size", "10 parsecs"]) == 2
    assert "10 parsecs" in capsys.readouterr().err


def test_console_script_help_and_version():
    help_text = subprocess.run(
        [sys.executable, "-m", "collsim", "--help"], capture_output=True, text=True, check=True
    ).stdout
    for command in ("tour", "run", "step", "plan", "viz"):
        assert command in help_text
    version = subprocess.run(
        [sys.executable, "-m", "collsim", "--version"], capture_output=True, text=True, check=True
    ).stdout
    assert version.startswith("collsim ")


def test_tour_runs_without_a_terminal():
    done = subprocess.run(
        [sys.executable, "-m", "collsim", "tour"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "ring all-reduce" in done.stdout and "closed form" in done.stdout


def test_analytical_mode_equals_the_simulation_for_small_k(capsys):
    args = ("run", "all-reduce", "-k", "8", "-s", "8MiB", "--topology", "switch", "-a", "tree")
    (form,) = run_json(capsys, *args, "--analytical")
    (sim,) = run_json(capsys, *args, "--count-only")
    assert set(form) == JSON_KEYS
    assert (form["steps"], form["time_s"]) == (
        sim["steps"],
        pytest.approx(sim["time_s"], rel=1e-12),
    )
    assert form["bytes_sent"][0] == max(sim["bytes_sent"])
    (big,) = run_json(capsys, "run", "all-reduce", "-k", "4096", "-s", "1GiB", "--analytical")
    assert big["steps"] == 2 * 4095
