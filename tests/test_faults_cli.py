"""The fault flags on the command line (issue 15, item 5): what `collsim run`, `pipeline`
and `viz utilization` print and draw under faults, and fuzzing of every new flag."""

import re

import pytest
from fuzzkit import run_cli
from hypothesis import given
from hypothesis import strategies as st

from collsim.collectives.degraded import degraded_ring_all_reduce_time

RUN = ["run", "all-reduce", "-k", "8", "-s", "1MiB", "--count-only"]


def test_run_prints_the_faults_and_the_link_that_set_the_time():
    out = run_cli([*RUN, "--slow-link", "2-3:0.25"]).stdout
    assert "# faults: slow link 2-3: 0.25x its bandwidth" in out
    assert (
        "# time set by link 2->3: busy 143.4 us of the 143.4 us run, at 0.25x its "
        "bandwidth (--slow-link 2-3:0.25)" in out
    )
    row = next(line for line in out.splitlines() if line.strip().startswith("1048576"))
    closed = degraded_ring_all_reduce_time(8, 2**20, 5e-6, 100e9, 0.25)
    assert float(row.split()[5]) == pytest.approx(closed * 1e6, abs=0.005)


def test_run_without_faults_prints_as_before():
    out = run_cli(RUN).stdout
    assert "fault" not in out and "time set by" not in out


def test_run_reroutes_on_a_bidirectional_ring_and_says_over_which_links():
    outcome = run_cli([*RUN, "--topology", "bidirectional_ring", "--fail-link", "2-3@10us"])
    assert outcome.status == 0
    assert "# faults: failed link 2-3: down at t=10 us" in outcome.stdout
    assert re.search(
        r"# rerouted: \d+ transfer\(s\) off failed links, .* over 2->1", outcome.stdout
    )


@pytest.mark.parametrize(
    "flags, culprit",
    [
        (["--fail-link", "2-3@10us"], "culprit: link 2-3 went down at t=10 us"),
        (["--crash-rank", "5@20us"], "culprit: rank 5 crashed at t=20 us"),
    ],
)
def test_run_that_stalls_ends_with_the_watchdog_report(flags, culprit):
    outcome = run_cli([*RUN, *flags, "--watchdog-timeout", "2s"], bad=flags[1])
    assert outcome.status == 1
    assert "watchdog timeout at t=2 s: no progress for 2 s" in outcome.stderr
    assert culprit in outcome.stderr
    assert "flight recorder" in outcome.stderr and "rank 7: last entered #0 all_reduce" in (
        outcome.stderr
    )


def test_faults_are_refused_with_the_closed_form():
    outcome = run_cli([*RUN[:-1], "--analytical", "--slow-link", "2-3:0.5"], bad="2-3:0.5")
    assert outcome.status == 2 and "the closed form models no faults" in outcome.stderr


# the commands whose ranks compute (a straggler slows them) and those that only communicate
COMPUTING = (["pipeline"], ["exec"], ["viz", "timeline"])
COMMUNICATING = (
    ["run"],
    ["step"],
    *(["viz", kind] for kind in ("ring", "traffic", "utilization", "sweep")),
)


def _help(command):
    # argparse wraps lines at hyphens too ("--fail-" / "link"): join those back
    text = " ".join(run_cli([*command, "--help"]).stdout.split())
    return re.sub(r"(\w)- (\w)", r"\1-\2", text)


def test_every_fault_flag_has_an_example_in_the_help():
    for command in (*COMPUTING, *COMMUNICATING):
        text = _help(command)
        for example in (
            "--slow-link 2-3:0.25",
            "--fail-link 2-3@1ms",
            "--crash-rank 5@2ms",
            "--watchdog-timeout 1s",
        ):
            assert example in text, (command, example)
        if command in COMPUTING:
            assert "--slow-rank 3:2x" in text, command


@pytest.mark.parametrize("command", COMMUNICATING, ids=" ".join)
def test_a_collective_alone_is_not_offered_slow_rank(command):
    # issue 25, item 22: a stepped collective does no compute, so a straggler changes nothing
    assert "--slow-rank" not in _help(command)
    start = [*command, "all-reduce"] + (["--no-pause"] if command == ["step"] else [])
    outcome = run_cli([*start, "--slow-rank", "1:2x"], bad="--slow-rank")
    assert outcome.status == 2 and f"usage: collsim {' '.join(command)} " in outcome.stderr
    assert "unrecognized arguments: --slow-rank 1:2x" in outcome.stderr


def test_pipeline_with_a_slow_stage_prints_the_closed_form_step():
    out = run_cli(
        [
            "pipeline",
            "-p",
            "4",
            "-m",
            "8",
            "--schedule",
            "gpipe",
            "--latency",
            "0",
            "--bandwidth",
            "inf",
            "--slow-rank",
            "2:2x",
        ]
    ).stdout
    assert "step time          57 ms" in out  # (m·f + p - 1)·T = (16 + 3)·3 ms
    assert "slowest rank: rank 2, computing 48 ms of the 57 ms run" in out


def test_pipeline_crash_ends_with_the_watchdog_report():
    outcome = run_cli(
        ["pipeline", "-p", "4", "-m", "8", "--crash-rank", "1@5ms", "--watchdog-timeout", "1s"],
        bad="1@5ms",
    )
    assert outcome.status == 1
    assert "culprit: rank 1 crashed at t=5 ms" in outcome.stderr


def test_viz_utilization_draws_a_faulty_and_a_stalled_run(tmp_path):
    faulty = tmp_path / "faulty.png"
    flags = [
        "viz",
        "utilization",
        "all-reduce",
        "-k",
        "6",
        "--topology",
        "bidirectional_ring",
        "--fail-link",
        "2-3@15us",
        "--slow-link",
        "4-5:0.25",
    ]
    assert run_cli([*flags, "--out", faulty]).status == 0
    again = tmp_path / "again.png"
    run_cli([*flags, "--out", again])
    assert faulty.read_bytes() == again.read_bytes()
    stalled = tmp_path / "stalled.png"
    outcome = run_cli(["viz", "utilization", "-k", "6", "--crash-rank", "3@30us", "--out", stalled])
    assert outcome.status == 0 and stalled.stat().st_size > 10_000
    assert "culprit: rank 3 crashed" in outcome.stderr


# -- fuzz ---------------------------------------------------------------------------------

BASES = {
    "run": ["run", "all-reduce", "-k", "4", "-s", "1KiB", "--count-only"],
    "step": ["step", "all-reduce", "-k", "3", "--no-pause"],
    "pipeline": ["pipeline", "-p", "2", "-m", "2"],
}
FLAGS = ["--slow-rank", "--slow-link", "--fail-link", "--crash-rank", "--watchdog-timeout"]
BAD = [
    "-1",
    "0",
    "nan",
    "inf",
    str(2**62),
    "1e300",
    "abc",
    "",
    "1.5",
    "-1us",
    "1e300s",
    "10 parsecs",
    "3:0",
    "3:-1x",
    "99:2",
    "1:1e300",
    "1:nanx",
    "2-9:0.5",
    "0-1@-1ms",
    "0-1@1e300s",
    "0-1:nan",
    "nvswitch9-1:0.5",
    "a-b@1ms",
    "1@2days",
    ":",
    "@",
    "-",
    "3-:2",
    "0-1-2:2",
    "0-0:0.5",
    "1@",
    "@1ms",
    "x@1ms",
    "0-1@1ms",
    "1@1us",
    "1:2x",
    "0-1:0.5",
]


@given(base=st.sampled_from(sorted(BASES)), flag=st.sampled_from(FLAGS), value=st.sampled_from(BAD))
def test_fuzz_fault_flags(base, flag, value):
    run_cli([*BASES[base], f"{flag}={value}"], bad=value, timeout=20)


@given(value=st.sampled_from(BAD))
def test_fuzz_fault_flags_of_viz(value, tmp_path_factory):
    out = tmp_path_factory.mktemp("viz") / "u.png"
    run_cli(
        [
            "viz",
            "utilization",
            "-k",
            "3",
            "--size",
            "1KiB",
            "--bins",
            "20",
            f"--fail-link={value}",
            "--out",
            out,
        ],
        bad=value,
        timeout=20,
    )


def test_run_on_a_preset_names_the_slow_nvswitch_link_not_its_path_neighbour():
    out = run_cli(
        [
            "run",
            "all-reduce",
            "--topology",
            "dgx-a100",
            "--count-only",
            "-s",
            "8MiB",
            "--slow-link",
            "nvswitch0-3:0.5",
        ]
    ).stdout
    assert "# faults: slow link nvswitch0-3: 0.5x its bandwidth" in out
    assert re.search(r"# time set by link (nvswitch0->3|3->nvswitch0): .* at 0\.5x", out)
