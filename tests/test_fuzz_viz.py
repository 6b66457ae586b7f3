"""Fuzz `collsim viz` (issue 11, item 12): every kind, every flag, bad values and paths.

Each kind starts from a small, fast command; one flag at a time gets a bad number, unit,
name or text.  The command may draw (quickly) or fail with a collsim or argparse error
that names the value; a traceback or a hang fails the test (:func:`fuzzkit.run_cli`).
"""

import pytest
from fuzzkit import run_cli
from hypothesis import given
from hypothesis import strategies as st

HUGE = str(2**62)
NUMBERS = ["-1", "0", "nan", "inf", "-inf", HUGE, "1e300", "-1e300", "1.5", "abc", "", "1e-300"]
UNITS = ["-1us", "1e300s", "10 parsecs", "64MiB", "1e300GB/s", "-5GB/s", "1e-300B/s", "0"]
NAMES = ["abc", "", "all-reduse", "ring ", "NaN", "tree,tree", "ring,,tree", "hd,halving_doubling"]
BAD = st.sampled_from(NUMBERS + UNITS + NAMES)

MOE_KINDS = ("moe-routing", "moe-traffic", "moe-load", "moe-timeline")
MOE_FLAGS = [
    "--ep",
    "--experts",
    "--top-k",
    "--capacity-factor",
    "--routing",
    "--dispatcher",
    "--gpus-per-node",
    "--batch",
    "--seq",
    "--seed",
    "--compute-rate",
]
# small, fast base commands (a draw takes well under a second); --out is added per run
SMALL = ["--ranks", "4", "--size", "1KiB"]
BASES = {
    "ring": ["viz", "ring", *SMALL],
    "traffic": ["viz", "traffic", *SMALL, "--topology", "switch"],
    "utilization": ["viz", "utilization", *SMALL, "--bins", "20"],
    "sweep": ["viz", "sweep", "--ranks", "4", "--max-bytes", "256", "--algorithms", "ring"],
    "timeline": ["viz", "timeline", "--stages", "2", "--microbatches", "2"],
    "scaling": ["viz", "scaling", "--params", "125M", "--max-gpus", "8"],
    "memory": ["viz", "memory", "--params", "125M", "--world-size", "8"],
    "memory-timeline": ["viz", "memory-timeline", "--dp", "2", "--layers", "1", "--hidden", "4"],
    "compare": ["viz", "compare", "ring", "tree", *SMALL],
    "mesh": ["viz", "mesh", "--tp", "2", "--dp", "2", "--pp", "1"],
    **{kind: ["viz", kind, "--ep", "2", "--experts", "4"] for kind in MOE_KINDS},
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
COLLECTIVE = ["--algorithm", "--size", "--dtype", *CLUSTER]
FLAGS = {
    "ring": [*COLLECTIVE, "--step", "--fps", "--channel", "--cells"],
    "compare": ["--collective", "--size", "--dtype", "--step", "--cells", *CLUSTER],
    "traffic": COLLECTIVE,
    "utilization": [*COLLECTIVE, "--bins"],
    "sweep": ["--algorithm", "--algorithms", "--min-bytes", "--max-bytes", "--factor", *CLUSTER],
    "timeline": [
        "--schedule",
        "--stages",
        "--microbatches",
        "--virtual",
        "--t-forward",
        "--t-backward",
        "--t-weight",
        "--bandwidth",
        "--latency",
    ],
    "scaling": ["--max-gpus", "--batch-per-gpu", "--params", "--global-batch", "--tp"],
    "memory": ["--params", "--world-size", "--tp", "--micro-batch", "--gpu-memory"],
    "memory-timeline": [
        "--zero",
        "--dp",
        "--prefetch",
        "--dp-replicate",
        "--recompute",
        "--layers",
        "--hidden",
        "--ranks",
        "--bandwidth",
        "--latency",
        "--compute-rate",
    ],
    "mesh": [
        "--tp",
        "--cp",
        "--ep",
        "--dp",
        "--pp",
        "--dp-replicate",
        "--order",
        "--gpus-per-node",
    ],
    **{kind: MOE_FLAGS for kind in MOE_KINDS},
}
# how it looks: every kind takes these (collsim/cli/viz_look.py); --title takes any text
LOOK = ["--style", "--theme", "--dpi", "--width", "--height", "--aspect", "--lang"]
CASES = [(kind, flag) for kind in BASES for flag in FLAGS[kind]]  # for a full local sweep
ANIMATIONS = [".gif", ".html"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("viz")


def _argv(kind, flag, value, joined, out):
    argv = list(BASES[kind])
    if flag in argv:  # replace the base's own value
        i = argv.index(flag)
        del argv[i : i + 2]
    return [*argv, *([f"{flag}={value}"] if joined else [flag, value]), "--out", str(out)]


@pytest.mark.parametrize("kind", list(BASES))  # every kind, not what Hypothesis happens to draw
@given(data=st.data(), value=BAD, joined=st.booleans())
def test_every_viz_flag_takes_bad_values_without_a_traceback(folder, kind, data, value, joined):
    flag = data.draw(st.sampled_from(FLAGS[kind]), label="flag")
    run_cli(_argv(kind, flag, value, joined, folder / f"{kind}.png"), bad=value, timeout=10)


@given(data=st.data(), value=BAD, joined=st.booleans())
def test_the_look_flags_take_bad_values_without_a_traceback(folder, data, value, joined):
    kind = data.draw(st.sampled_from(["timeline", "mesh"]), label="kind")
    flag = data.draw(st.sampled_from(LOOK), label="flag")
    run_cli(_argv(kind, flag, value, joined, folder / f"{kind}-look.png"), bad=value, timeout=10)


@given(
    flag=st.sampled_from(["--fps", "--step", "--ranks", "--size", "--channel"]),
    value=BAD,
    suffix=st.sampled_from(ANIMATIONS),
)
def test_ring_animation_flags(folder, flag, value, suffix):
    argv = ["viz", "ring", "--ranks", "2", "--size", "64"]  # 3 frames: a success stays quick
    if flag in argv:
        del argv[argv.index(flag) : argv.index(flag) + 2]
    argv += [f"{flag}={value}", "--out", str(folder / f"ring{suffix}")]
    run_cli(argv, bad=value, timeout=15)


@given(collective=st.sampled_from(NAMES + NUMBERS), kind=st.sampled_from(["ring", "sweep"]))
def test_bad_collective_names(folder, collective, kind):
    argv = [*BASES[kind][:2], collective, *BASES[kind][2:], "--out", str(folder / "c.png")]
    assert run_cli(argv, bad=collective, timeout=10).status != 0


def _bad_paths(tmp_path):
    (tmp_path / "file").write_text("x")
    (tmp_path / "folder.png").mkdir()
    return [
        tmp_path / "no" / "such" / "v.png",  # a missing folder
        tmp_path / "file" / "v.png",  # a path under a regular file
        tmp_path / "folder.png",  # a folder
        tmp_path / "v.txt",  # an unknown suffix
        "/dev/full",  # a device, no suffix
        "",
    ]


@pytest.mark.parametrize("kind", list(BASES))
def test_bad_out_paths_fail_before_the_work(tmp_path, kind):
    for path in _bad_paths(tmp_path):
        outcome = run_cli([*BASES[kind], "--out", path], bad=str(path), timeout=10)
        assert outcome.status == 2 and outcome.stdout == ""
