"""Fuzz `collsim run`, `step`, `verify` and `pipeline` (issue 11, item 12).

Every flag of each command gets bad numbers, units, names and text; every output flag bad
paths.  A command may succeed (quickly: the base commands are small) or fail with a
collsim or argparse error that names the value; a traceback or a hang fails the test
(:func:`fuzzkit.run_cli`).
"""

import pytest
from fuzzkit import run_cli
from hypothesis import given
from hypothesis import strategies as st

HUGE = str(2**62)
NUMBERS = ["-1", "0", "nan", "inf", "-inf", HUGE, "1e300", "-1e300", "1.5", "abc", "", "1e-300"]
UNITS = ["-1us", "1e300s", "10 parsecs", "64MiB", "1e300GB/s", "-5GB/s", "1e-300B/s", "0"]
NAMES = ["abc", "", "all-reduse", "ring ", "NaN", "tree,tree", "__init__"]
# a positional that starts with "-" is an option to argparse (`collsim run -- -1` passes it)
POSITIONALS = [v for v in NAMES + NUMBERS if not v.startswith("-")]
BAD = st.sampled_from(NUMBERS + UNITS + NAMES)

# small, fast base commands: every flag is appended once, so the rest stays valid
BASES = {
    "run": ["run", "all-reduce", "-k", "4", "-s", "1KiB"],
    "run-count-only": ["run", "all-gather", "-k", "4", "-s", "1KiB", "--count-only"],
    "run-analytical": ["run", "reduce", "-k", "4", "-s", "1KiB", "--analytical"],
    "step": ["step", "all-reduce", "-k", "3", "--no-pause"],
    "verify": ["verify", "tp-mlp", "--tp", "2", "--hidden", "8", "--seq", "4", "--steps", "1"],
    "verify-dp": [
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
        "--layers",
        "1",
        "--steps",
        "1",
    ],
    "pipeline": ["pipeline", "-p", "2", "-m", "2"],
}
CLUSTER = [
    "--ranks",
    "--topology",
    "--bandwidth",
    "--latency",
    "--model",
    "--gpus-per-node",
    "--inter-bandwidth",
    "--inter-latency",
]
FLAGS = {
    "run": [
        "--algorithm",
        "--size",
        "--min-bytes",
        "--max-bytes",
        "--factor",
        "--dtype",
        "--op",
        "--root",
        "--seed",
        *CLUSTER,
    ],
    "step": ["--algorithm", "--count", *CLUSTER],
    "verify": [
        "--dp",
        "--tp",
        "--batch",
        "--micro-batch",
        "--accumulation",
        "--hidden",
        "--heads",
        "--ffn-hidden",
        "--seq",
        "--layers",
        "--steps",
        "--lr",
        "--seed",
        "--bandwidth",
        "--latency",
        "--compute-rate",
        "--bucket-size",
    ],
    "pipeline": [
        "--schedule",
        "--stages",
        "--microbatches",
        "--virtual",
        "--t-forward",
        "--t-backward",
        "--t-weight",
        "--layers",
        "--hidden",
        "--heads",
        "--seq",
        "--micro-batch-size",
        "--bandwidth",
        "--latency",
    ],
}
CASES = [(base, flag) for base, argv in BASES.items() for flag in FLAGS[argv[0]]]


SWEEP = ["--min-bytes", "1KiB", "--max-bytes", "4KiB", "--factor", "2"]


def _argv(base, flag, value, joined):
    argv = list(BASES[base])
    if flag in SWEEP:  # a sweep instead of the one size
        argv = argv[: argv.index("-s")] + argv[argv.index("-s") + 2 :] + SWEEP
    if flag in argv:  # replace the base's own value
        i = argv.index(flag)
        del argv[i : i + 2]
    return argv + ([f"{flag}={value}"] if joined else [flag, value])


@given(case=st.sampled_from(CASES), value=BAD, joined=st.booleans())
def test_every_flag_takes_bad_values_without_a_traceback(case, value, joined):
    base, flag = case
    run_cli(_argv(base, flag, value, joined), bad=value, timeout=10)


@given(command=st.sampled_from(["run", "step"]), name=st.sampled_from(POSITIONALS))
def test_bad_collective_names(command, name):
    outcome = run_cli([command, name, "-k", "3"], bad=name, timeout=10)
    assert outcome.status != 0


@given(scheme=st.sampled_from(POSITIONALS))
def test_bad_verify_schemes(scheme):
    assert run_cli(["verify", scheme], bad=scheme, timeout=10).status == 2


def _bad_paths(tmp_path):
    (tmp_path / "file").write_text("x")
    return {
        "missing folder": tmp_path / "no" / "such" / "t.png",
        "under a file": tmp_path / "file" / "t.png",
        "a folder": tmp_path,
        "empty": "",
    }


@pytest.mark.parametrize("kind", ["missing folder", "under a file", "a folder", "empty"])
@pytest.mark.parametrize(
    "argv",
    [
        ["run", "all-reduce", "-k", "4", "-s", "1KiB", "--trace"],
        ["run", "all-reduce", "-k", "4", "-s", "1KiB", "--count-only", "--trace"],
        ["pipeline", "-p", "2", "-m", "2", "--out"],
        ["pipeline", "-p", "2", "-m", "2", "--json", "--out"],
        ["pipeline", "-p", "2", "-m", "2", "--trace"],
        ["verify", "dp", "--trace"],
        ["strategies", "--trace"],
    ],
    ids=[
        "run",
        "run-count-only",
        "pipeline",
        "pipeline-json",
        "pipeline-trace",
        "verify-trace",
        "strategies-trace",
    ],
)
def test_bad_output_paths_fail_before_the_work(tmp_path, argv, kind):
    path = _bad_paths(tmp_path)[kind]
    outcome = run_cli([*argv, path], bad=str(path), timeout=10)
    assert outcome.status == 2 and outcome.stdout == ""


@pytest.mark.parametrize(
    "argv",
    [["run", "all-reduce", "-k", "2", "-s", "8"], ["pipeline", "-p", "2", "-m", "2"]],
    ids=["run", "pipeline"],
)
def test_a_trace_on_a_full_disk_is_an_error_not_a_traceback(argv):
    outcome = run_cli([*argv, "--trace", "/dev/full"], bad="/dev/full", timeout=10)
    assert outcome.status == 2
