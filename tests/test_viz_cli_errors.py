"""``collsim viz`` refuses bad flags and bad --out paths by name, before any work
(issue 11, items 7, 9 and 10): each case used to end in a traceback, a silent wrong
picture, an endless loop or a traceback after the whole run."""

import pytest

from collsim import cli
from collsim.cli import viz_collectives as viz_cli

KINDS = ["memory", "ring", "traffic", "utilization", "timeline", "sweep", "scaling"]


@pytest.fixture
def no_work(monkeypatch):
    """Make every expensive step fail the test: a refusal must come before it."""

    def work(*args, **kwargs):
        raise AssertionError("the command started working before refusing its input")

    monkeypatch.setattr(viz_cli, "_run_collective", work)
    for target in (
        "collsim.viz.sweep.sweep_figure",
        "collsim.viz.scaling.scaling_figure",
        "collsim.viz.memory.memory_figure",
        "collsim.parallel.runs.pipeline.pipeline_step",
    ):
        monkeypatch.setattr(target, work)


def refused(argv, capsys):
    assert cli.main([str(a) for a in argv]) == 2
    return capsys.readouterr().err


BAD_FLAGS = [
    (["ring", "--fps", "0", "--out", "{tmp}/r.gif"], "--fps '0': must be a number above 0"),
    (["ring", "--fps", "nan", "--out", "{tmp}/r.html"], "--fps 'nan'"),
    (["ring", "--fps", "fast", "--out", "{tmp}/r.gif"], "--fps 'fast': not a number"),
    (["ring", "--ranks", "17"], "--ranks 17: the ring picture stays readable up to 16"),
    (["ring", "--step", "-1"], "--step -1: must be >= 0"),
    (["utilization", "--bins", "0"], "--bins 0: must be a whole number from 1 to 2000"),
    (["utilization", "--bins", "1e9"], "--bins '1e9': not a whole number"),
    (["utilization", "--ranks", "65"], "--ranks 65: the utilization picture"),
    (["traffic", "--ranks", "100000"], "--ranks 100000"),
    (["sweep", "--ranks", "1"], "--ranks 1: must be >= 2"),
    (["sweep", "--algorithms", "tree,tree"], "--algorithms 'tree,tree': 'tree' is listed twice"),
    (["sweep", "--algorithms", "hd,halving_doubling"], "are the same algorithm"),
    (["sweep", "--algorithms", "ring,"], "--algorithms 'ring,': an empty name"),
    (["sweep", "--min-bytes", "0", "--max-bytes", "64"], "--min-bytes '0'"),
    (["sweep", "--factor", "1.0000001"], "--factor 1.0000001 has"),
    (["sweep", "--factor", "nan"], "--factor 'nan'"),
    (["sweep", "--max-bytes", str(2**62), "--factor", "1.1"], str(2**62)),
    (["scaling", "--max-gpus", "0"], "--max-gpus 0: must be >= 1"),
    (["scaling", "--weak", "--batch-per-gpu", "nan"], "--batch-per-gpu 'nan'"),
    (["scaling", "--weak", "--batch-per-gpu", "-2"], "--batch-per-gpu '-2'"),
    (["timeline", "--stages", "64", "--microbatches", "256"], "16,384 forward passes"),
    (["timeline", "--stages", "0"], "--stages 0: must be >= 1"),
    (["timeline", "--t-forward", "1e300s"], "--t-forward '1e300s': more than 10 s per pass"),
    (["timeline", "--t-forward", "3"], "--t-forward '3': time '3' has no unit"),
    (["timeline", "--t-weight", "abc"], "--t-weight 'abc': cannot read time"),
]


@pytest.mark.parametrize("argv, message", BAD_FLAGS, ids=[" ".join(a[:3]) for a, _ in BAD_FLAGS])
def test_bad_flag_is_refused_by_name_before_any_work(argv, message, tmp_path, capsys, no_work):
    argv = [a.format(tmp=tmp_path) for a in argv]
    if "--out" not in argv:
        argv += ["--out", str(tmp_path / "x.png")]
    err = refused(["viz", *argv], capsys)
    assert err.startswith("collsim: error: ") and message in err
    assert list(tmp_path.iterdir()) == []  # nothing written


@pytest.mark.parametrize("suffix", [".png", ".gif"])
def test_step_past_the_last_is_refused_not_clamped(suffix, tmp_path, capsys):
    out = tmp_path / f"r{suffix}"
    err = refused(["viz", "ring", "--ranks", "4", "--step", "99", "--out", out], capsys)
    assert "--step 99: the ring all-reduce on 4 ranks has 6 steps; choose 1..6" in err
    assert not out.exists()


def test_default_step_fits_algorithms_with_few_steps(tmp_path, capsys):
    # naive all-reduce has 2 steps: the default (3) falls back to the last, not an error
    argv = ["viz", "ring", "--algorithm", "naive", "--ranks", "4", "--out", tmp_path / "n.png"]
    assert cli.main([str(a) for a in argv]) == 0


def bad_paths(tmp_path):
    blocker = tmp_path / "file.txt"
    blocker.write_text("a regular file")
    return [
        (tmp_path / "missing" / "x.png", "folder", "does not exist"),
        (blocker / "x.png", "file.txt", "is a file, not a folder"),
        (tmp_path / "dir.png", "dir.png", "is a folder"),
        (tmp_path / "x.txt", "x.txt", "unknown file type '.txt'"),
        (tmp_path / "x", "x", "unknown file type '(none)'"),
    ]


@pytest.mark.parametrize("kind", KINDS)
def test_bad_out_path_is_refused_before_any_work(kind, tmp_path, capsys, no_work):
    (tmp_path / "dir.png").mkdir()
    for path, named, rule in bad_paths(tmp_path):
        err = refused(["viz", kind, "--out", path], capsys)
        assert f"--out {path}" in err and named in err and rule in err, err


# the kinds that change over time (ring, utilization, timeline, memory-timeline, compare)
# animate; a picture of totals has nothing to step through
@pytest.mark.parametrize("kind", ["memory", "traffic", "sweep", "scaling"])
def test_only_kinds_that_change_over_time_animate(kind, tmp_path, capsys, no_work):
    for suffix in (".gif", ".html"):
        err = refused(["viz", kind, "--out", tmp_path / f"x{suffix}"], capsys)
        assert f"unknown file type '{suffix}'; use one of .png, .svg, .pdf" in err


@pytest.mark.parametrize("fps", ["0", "-1", "nan", "fast"])
def test_a_bad_fps_is_refused_for_a_still_picture_too(fps, tmp_path, capsys, no_work):
    err = refused(["viz", "ring", "--fps", fps, "--out", tmp_path / "r.png"], capsys)
    assert f"--fps '{fps}'" in err
