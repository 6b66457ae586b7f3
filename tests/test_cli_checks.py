"""Issue 11 in `collsim run`, `step`, `verify` and `pipeline`: refusals come first and name
the value; verify sees nan; the run table says what its columns are."""

import argparse
import json
import os
import subprocess
import sys

import pytest
from fuzzkit import run_cli

from collsim.cli import common, console, limits, main
from collsim.cli.common import join_negative_values
from collsim.cli.limits import MAX_SWEEP_SIZES, check_fits, sweep_sizes
from collsim.verify import SCHEMES, verify

GiB = 2**30


def refused(argv, bad):
    """The command fails with exit 2, names ``bad``, and printed nothing on stdout (no work)."""
    outcome = run_cli(argv, bad=bad, timeout=10)
    assert outcome.status == 2, outcome
    assert outcome.stdout == "", "refused only after printing results"
    return outcome.stderr


# ---- item 5: verify cannot be fooled by nan ---------------------------------------------

SMALL = dict(hidden=8, heads=2, seq=4, layers=1, steps=2)
DEGREES = {
    "dp": dict(dp=2, batch=4),
    "dp-tp": dict(dp=2, tp=2),
    "zero": dict(dp=2, batch=4),
    "fsdp": dict(dp=2, batch=4),
    "hsdp": dict(dp_replicate=2, dp_shard=2),
}


@pytest.mark.parametrize("scheme", SCHEMES)
def test_a_diverged_run_is_a_mismatch_in_every_scheme(scheme):
    report = verify(scheme, lr=1e300, **SMALL, **DEGREES.get(scheme, dict(tp=2)))
    assert not report.match
    assert report.nonfinite and all("step" in where for where in report.nonfinite)
    assert "MISMATCH" in str(report) and "non-finite" in str(report)


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("lr", ["inf", "nan", "-inf", "0", "-0.1", "abc"])
def test_verify_refuses_a_learning_rate_that_is_not_finite_and_positive(scheme, lr):
    assert "learning rate" in refused(["verify", scheme, "--lr", lr], bad=lr) or lr == "abc"


def test_verify_cli_exits_1_on_nan_and_prints_valid_json():
    outcome = run_cli(
        [
            "verify",
            "dp",
            "--dp",
            "2",
            "--batch",
            "4",
            "--hidden",
            "8",
            "--heads",
            "2",
            "--lr",
            "1e300",
            "--json",
        ]
    )
    assert outcome.status == 1
    report = json.loads(outcome.stdout)  # strict JSON: no NaN tokens
    assert report["match"] is False and report["non_finite"]
    assert "NaN" not in outcome.stdout


# ---- item 7: sweeps and rank counts are bounded up front ---------------------------------


def test_a_sweep_has_at_most_64_sizes_and_the_error_names_a_factor_that_fits():
    assert len(sweep_sizes(1, 2**20, 2, max_sizes=21)) == 21
    with pytest.raises(common.ConfigError, match="21 sizes, more than the 20"):
        sweep_sizes(1, 2**20, 2, max_sizes=20)
    with pytest.raises(common.ConfigError, match="nearest valid --factor 1.303") as info:
        sweep_sizes(8, 128 * 2**20, 1.0000001)
    assert f"more than the {MAX_SWEEP_SIZES}" in str(info.value)
    assert len(sweep_sizes(8, 128 * 2**20, 1.303)) <= MAX_SWEEP_SIZES


@pytest.mark.parametrize(
    "flags, bad",
    [
        (["--min-bytes", "0", "--max-bytes", "64"], "0"),
        (["-b", "8", "-e", "128MiB", "--factor", "1.0000001"], "1.0000001"),
        (["-b", "8", "-e", "64", "--factor", "nan"], "nan"),
        (["-b", "8", "-e", "64", "--factor", "inf"], "inf"),
        (["-b", "8", "-e", "64", "--factor", "1"], "1"),
        (["-b", "8", "-e", "64", "--factor", "-2"], "-2"),
        (["-b", "64", "-e", "8"], "8"),
        (["--max-bytes", str(2**62), "--count-only"], str(2**62)),
        (["--ranks", "100000"], "100000"),
        (["--ranks", "100000", "--count-only"], "--analytical"),
        (["--ranks", str(2**62), "--analytical"], str(2**62)),
    ],
)
def test_run_refuses_runaway_sweeps_and_rank_counts_before_running(flags, bad):
    refused(["run", "all-reduce", *flags], bad)


def test_step_bounds_its_ranks():
    refused(["step", "all-reduce", "--ranks", "100000"], "100000")


@pytest.mark.parametrize("flag", ["--layers", "--steps"])
def test_verify_bounds_layers_and_steps(flag):
    refused(["verify", "dp", flag, str(2**62)], str(2**62))


@pytest.mark.parametrize("flag", ["--layers", "--stages", "--microbatches", "--virtual"])
def test_pipeline_bounds_its_sizes(flag):
    refused(["pipeline", flag, str(2**62)], str(2**62))


# ---- item 8: memory is estimated and refused first ---------------------------------------


def test_check_fits_names_bytes_needed_available_and_the_way_out():
    with pytest.raises(common.ConfigError) as info:
        check_fits(3 * GiB, "the buffers", "use --count-only", available=GiB)
    message = str(info.value)
    assert "3 GiB" in message and "3,221,225,472 B" in message and "1 GiB" in message
    assert "--count-only" in message
    assert check_fits(GiB, "the buffers", available=2 * GiB) == GiB


@pytest.mark.parametrize(
    "argv, bad",
    [
        (["run", "all-reduce", "--ranks", "8", "--size", "1GiB"], "--count-only"),
        (["run", "all-reduce", "--ranks", "64", "--size", "64GiB"], "--analytical"),
        (["step", "all-reduce", "--count", str(10**11)], "GiB"),
        (
            [
                "verify",
                "dp",
                "--dp",
                "2",
                "--batch",
                "4",
                "--seq",
                "1",
                "--layers",
                "1",
                "--steps",
                "1",
                "--hidden",
                "2048",
            ],
            "2048",
        ),
        (["pipeline", "-p", "2", "-m", "2", "--hidden", "2048"], "2048"),
    ],
)
def test_runs_that_do_not_fit_are_refused_before_allocating(monkeypatch, argv, bad):
    monkeypatch.setattr(limits, "available_memory", lambda: GiB)
    message = refused(argv, bad)
    assert "1 GiB of memory available" in message


@pytest.mark.parametrize(
    "argv, bad",
    [
        (["pipeline", "--hidden", "99999999999999999999999"], "99999999999999999999999"),
        (["pipeline", "-p", "2", "-m", "2", "--micro-batch-size", "100000"], "100000"),
        (["verify", "dp", "--seq", "4097"], "4097"),
        (["verify", "tp-mlp", "--batch", "1000000"], "1000000"),
    ],
)
def test_runs_that_would_take_minutes_are_refused_first(argv, bad):
    assert "s of numpy arithmetic" in refused(argv, bad)


def test_work_estimate_is_within_the_limit_for_the_defaults():
    from collsim.cli.limits import MAX_WORK_SECONDS, transformer_seconds

    default_dp = transformer_seconds(
        layers=2,
        params_per_layer=3072,
        tokens=64 * 8,
        sequences=64,
        heads=4,
        seq=8,
        hidden=16,
        passes=6,
    )
    assert 0 < default_dp < MAX_WORK_SECONDS / 10


def test_available_memory_reads_the_system():
    available = limits.available_memory()
    assert available is None or available > 0


# ---- item 9: output paths are checked first; no stdin is no pause ------------------------


@pytest.mark.parametrize("where", ["missing", "under_file", "folder"])
@pytest.mark.parametrize("command", ["run", "pipeline"])
def test_bad_output_paths_are_refused_before_the_run(tmp_path, where, command):
    (tmp_path / "file").write_text("x")
    path = {
        "missing": tmp_path / "no" / "t.png",
        "under_file": tmp_path / "file" / "t.png",
        "folder": tmp_path,
    }[where]
    argv = (
        ["run", "all-reduce", "-k", "4", "--trace", path]
        if command == "run"
        else ["pipeline", "--out", path]
    )
    refused(argv, str(path))


def test_step_runs_with_no_stdin_at_all(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", None)
    assert main(["step", "all-reduce", "--ranks", "4"]) == 0
    assert "step 1 of 6" in capsys.readouterr().out


def test_step_runs_with_stdin_closed():
    done = subprocess.run(
        [sys.executable, "-m", "collsim", "step", "all-reduce", "--ranks", "4"],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=lambda: os.close(0),
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "step 6 of 6" in done.stdout


# ---- item 10: numbers and names ------------------------------------------------------------


@pytest.mark.parametrize(
    "argv, bad",
    [
        (["run", "all-reduce", "--seed", "-1"], "-1"),
        (["verify", "dp", "--seed", "-1"], "-1"),
        (["step", "all-reduce", "--count", "-1"], "-1"),
        (["pipeline", "--hidden", "0"], "0"),
        (["pipeline", "--heads", "0"], "0"),
        (["pipeline", "--hidden", "6", "--heads", "4"], "4"),
        (["run", "all-reduce", "--latency", "1e300s"], "1e300s"),
        (["pipeline", "--latency", "1e300s"], "1e300s"),
        (["run", "all-reduce", "--latency", "-1us"], "-1us"),
        (["run", "all-reduce", "--latency=-1us"], "-1us"),
        (["step", "all-reduce", "--latency", "-1us"], "-1us"),
        (["verify", "dp", "--latency", "-1us"], "-1us"),
        (["pipeline", "--latency", "-1us"], "-1us"),
        (["run", "all-reduce", "--size="], "''"),
        (["run", "all-reduce", "--analytical", "--trace", "t.json"], "--analytical"),
        (["run", "all-reduce", "-k", "4", "--bandwidth", "1B/s"], "1B/s"),
        (["verify", "dp", "--compute-rate", "1e-300"], "1e-300"),
    ],
)
def test_bad_numbers_are_collsim_errors_that_name_the_value(argv, bad):
    refused(argv, bad)


@pytest.mark.parametrize("mode", [[], ["--count-only"], ["--analytical"]])
def test_every_mode_refuses_an_all_to_all_block_that_is_not_whole_elements(mode):
    assert "nearest valid sizes 0 B or 32 B" in refused(
        ["run", "all-to-all", "--size", "4", *mode], "4"
    )


def test_negative_values_reach_the_command():
    assert join_negative_values(["--latency", "-1us", "-s", "-.5KiB", "--", "-1"]) == [
        "--latency=-1us",
        "-s=-.5KiB",
        "--",
        "-1",
    ]


# ---- item 17: the run table says what it shows ------------------------------------------


def test_table_names_its_columns_and_shows_no_op_where_there_is_none(capsys):
    assert main(["run", "broadcast", "-k", "4", "-s", "1KiB"]) == 0
    out = capsys.readouterr().out
    assert "max sent/rank" in out and "busiest rank" in out and "#wrong" in out
    row = out.strip().splitlines()[-1].split()
    assert row[3] == "none" and row[-1] == "0"  # redop, #wrong


@pytest.mark.parametrize("collective", ["broadcast", "all-gather", "all-to-all"])
def test_json_op_is_null_without_a_reduction(capsys, collective):
    assert main(["run", collective, "-k", "4", "-s", "1KiB", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["results"]
    assert row["op"] is None and row["wrong"] == 0


def test_wrong_counts_the_elements_that_differ(monkeypatch, capsys):
    import collsim.collectives as collectives

    honest = collectives.reference

    def off_by_one_in_two_places(name, buffers, op, root):
        expected = [None if e is None else e.copy() for e in honest(name, buffers, op, root)]
        expected[0][:2] += 1
        return expected

    monkeypatch.setattr(collectives, "reference", off_by_one_in_two_places)
    assert main(["run", "all-reduce", "-k", "4", "-s", "1KiB"]) == 1
    assert capsys.readouterr().out.strip().splitlines()[-1].split()[-1] == "2"
    assert main(["run", "all-reduce", "-k", "4", "-s", "1KiB", "--json"]) == 1
    (row,) = json.loads(capsys.readouterr().out)["results"]
    assert row["wrong"] == 2 and row["correct"] is False


def test_hierarchical_header_shows_the_links_between_nodes(capsys):
    argv = [
        "run",
        "all-reduce",
        "-k",
        "4",
        "-s",
        "1KiB",
        "--topology",
        "hierarchical",
        "--gpus-per-node",
        "2",
        "--inter-bandwidth",
        "25GB/s",
        "--inter-latency",
        "7us",
    ]
    assert main(argv) == 0
    header = capsys.readouterr().out.split("#           size")[0]
    assert "25GB/s" in header and "7us" in header and "2 GPUs per node" in header


def test_json_fields_carry_units_and_are_documented(capsys):
    from collsim.cli.run import JSON_FIELDS

    assert main(["run", "all-reduce", "-k", "4", "-s", "1KiB", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["results"]
    assert set(row) == set(JSON_FIELDS)
    assert {"algbw_GBps", "busbw_GBps", "time_s", "size_bytes"} <= set(row)
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    help_text = capsys.readouterr().out
    assert all(key in help_text for key in JSON_FIELDS)


def _subcommands():
    from collsim.cli import build_parser

    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return sub.choices


@pytest.mark.parametrize("name", list(_subcommands()))
def test_help_prints_each_default_once(name):
    flat = " ".join(_subcommands()[name].format_help().split())
    for piece in flat.split(" --")[1:]:  # one flag's help
        assert piece.count("(default") <= 1, f"collsim {name}: --{piece}"


def test_op_has_help(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    flat = " ".join(capsys.readouterr().out.split())
    assert "{sum,avg,prod,max,min} reduction of all-reduce" in flat


# ---- item 20: progress on stderr, only when asked or at a terminal ------------------------


def test_progress_reports_on_stderr_only_when_enabled(capsys):
    import time

    with console.progress("sweep", enabled=True, interval=0.01) as note:
        note("size 1 of 2")
        time.sleep(0.1)
    err = capsys.readouterr().err
    assert "sweep: size 1 of 2" in err and "done in" in err
    with console.progress("sweep", enabled=False, interval=0.01):
        time.sleep(0.05)
    assert capsys.readouterr().err == ""


def test_progress_never_touches_json_stdout(capsys):
    assert (
        main(["run", "all-reduce", "-k", "4", "-b", "1KiB", "-e", "4KiB", "--json", "--progress"])
        == 0
    )
    assert len(json.loads(capsys.readouterr().out)["results"]) == 3


# ---- items 13 and 16: words a reader can look up; steps from 1 ----------------------------


def test_the_batch_64_dp_4_run_is_named_by_its_topic():
    report = str(verify("dp", dp=4, batch=64, layers=1, steps=1))
    assert "the batch-64, dp=4 example" in report.splitlines()[0]
    assert "random seed 0" in report and "seed 00" not in report


def test_verify_report_says_random_seed_and_names_the_example(capsys):
    assert main(["verify", "tp-mlp", "--tp", "2", "--hidden", "8", "--seq", "4"]) == 0
    out = capsys.readouterr().out
    assert "random seed 0" in out
    with pytest.raises(SystemExit):
        main(["verify", "--help"])
    assert "the batch-64, dp=4 example" in capsys.readouterr().out


def test_step_numbers_steps_from_one(capsys):
    assert main(["step", "reduce-scatter", "--ranks", "3", "--no-pause"]) == 0
    out = capsys.readouterr().out
    assert "step 1 of 2" in out and "step 2 of 2" in out and "step 0 of" not in out
