"""Fuzz ``collsim plan``: every flag with bad numbers, units, names and paths (issue 11, item 12).

Each call must succeed, say the plan is invalid (exit 1), or fail with a collsim error or an
argparse usage error (exit 2) whose message contains the offending value, within a few
seconds.  Every flag is parametrised with every bad value (nothing left to chance);
Hypothesis then combines flags.
"""

import pytest
from fuzzkit import run_cli
from hypothesis import given
from hypothesis import strategies as st

from collsim import cli

# a model small enough that a plan that is accepted answers in milliseconds
SMALL = ["--layers", "4", "--hidden", "64", "--heads", "4", "--seq", "64"]
JOB = ["--world-size", "8", "--global-batch", "16", *SMALL]

BAD_NUMBERS = ["-1", "0", "nan", "inf", "-inf", str(2**62), "1e300", "2.5", "eight", ""]
BAD_UNITS = ["-1GiB", "nan", "inf", "1e300", "12 parsecs", "abc", "", "0"]
BAD_NAMES = ["", "nope", "LLAMA", "1f1b1", "gpt-3"]

INT_FLAGS = [
    "--layers",
    "--hidden",
    "--heads",
    "--kv-heads",
    "--ffn-hidden",
    "--vocab",
    "--seq",
    "--world-size",
    "--gpus-per-node",
    "--tp",
    "--pp",
    "--dp",
    "--cp",
    "--vpp",
    "--dp-replicate-size",
    "--dp-shard-size",
    "--global-batch",
    "--micro-batch",
    "--accumulation",
    "--top",
    "--suggestions",
]
UNIT_FLAGS = [
    "--params",
    "--gpu-memory",
    "--compute-rate",
    "--intra-bandwidth",
    "--inter-bandwidth",
    "--intra-latency",
    "--inter-latency",
]
NAME_FLAGS = ["--model", "--zero", "--recompute", "--precision", "--schedule", "--architecture"]


@pytest.fixture(autouse=True)
def only_our_commands(monkeypatch):
    # the other sub-commands are written concurrently; fuzz ours through the real main()
    monkeypatch.setattr(cli, "COMMAND_MODULES", ("plan", "viz"))


def _plan(flag, value, search=False):
    rest = [a for a in JOB]
    if flag in rest:  # replace the job's own value of that flag
        i = rest.index(flag)
        del rest[i : i + 2]
    if flag == "--params":
        rest = rest[:4]  # params instead of the shape
    if flag == "--model":
        rest = ["--world-size", "8", "--global-batch", "16"]
    argv = ["plan", *rest, f"{flag}={value}"] + (["--search"] if search else [])
    outcome = run_cli(argv, timeout=10)
    if outcome.status != 0 and not outcome.stdout:  # refused: the message quotes the value
        assert value in outcome.stderr, (argv, outcome.stderr)
    return outcome


@pytest.mark.parametrize("flag", INT_FLAGS)
def test_every_count_flag_refuses_bad_numbers_naming_them(flag):
    for value in BAD_NUMBERS:
        outcome = _plan(flag, value)
        if value in ("-1", "nan", "inf", "-inf", str(2**62), "1e300", "eight"):
            assert outcome.status in (1, 2), (flag, value, outcome.stdout[:200])


@pytest.mark.parametrize("flag", UNIT_FLAGS)
def test_every_unit_flag_refuses_bad_quantities_naming_them(flag):
    for value in BAD_UNITS:
        outcome = _plan(flag, value)
        if value in ("nan", "12 parsecs", "abc", "-1GiB"):
            assert outcome.status in (1, 2), (flag, value)


@pytest.mark.parametrize("flag", NAME_FLAGS)
def test_every_name_flag_refuses_unknown_names_naming_them(flag):
    for value in BAD_NAMES:
        outcome = _plan(flag, value)
        assert outcome.status in (1, 2), (flag, value)


def test_search_flags_too():
    for value in ("-1", str(2**62), "x", "1001"):
        assert _plan("--top", value, search=True).status in (1, 2)
    for value in ("0", "-1", str(2**62)):
        assert _plan("--world-size", value, search=True).status in (1, 2)


@pytest.mark.parametrize(
    "path",
    [
        "/no/such/folder/job.toml",
        "/etc/hostname/job.toml",
        "/tmp",
        "/dev/full",
        "/dev/null",
        "job.yaml",
        "",
    ],
)
def test_config_paths_that_cannot_be_read_are_refused_naming_them(path):
    outcome = run_cli(["plan", f"--config={path}"], bad=path, timeout=5)
    assert outcome.status == 2


COUNTS = st.one_of(
    st.integers(-3, 40),
    st.sampled_from([2**62, 2**20 + 1, 10**18]),
    st.sampled_from(["nan", "1e300", "x", ""]),
)


@given(
    values=st.fixed_dictionaries(
        {},
        optional={
            "--tp": COUNTS,
            "--pp": COUNTS,
            "--cp": COUNTS,
            "--vpp": COUNTS,
            "--world-size": COUNTS,
            "--global-batch": COUNTS,
            "--micro-batch": COUNTS,
            "--dp-replicate-size": COUNTS,
            "--dp-shard-size": COUNTS,
            "--kv-heads": COUNTS,
        },
    ),
    search=st.booleans(),
)
def test_combinations_of_flags_never_traceback_or_hang(values, search):
    argv = ["plan", *SMALL, "--suggestions", "2"]
    for flag, value in values.items():
        argv.append(f"{flag}={value}")
    if search:
        argv.append("--search")
    outcome = run_cli(argv, timeout=10)
    assert outcome.status in (0, 1, 2)  # valid, invalid, or refused input
    if outcome.status == 2 and "invalid" not in outcome.stderr:  # not argparse's refusal
        # a value collsim refused: the message quotes one of the values given
        assert any(str(v) in outcome.stderr for v in values.values()), outcome.stderr
