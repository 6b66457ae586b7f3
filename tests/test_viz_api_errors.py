"""The figure functions refuse bad arguments with a collsim error naming the value, as the
CLI does (issue 11, items 10 and 12): no IndexError, ValueError or matplotlib traceback."""

import pytest
from fuzzkit import check_api

import collsim
from collsim.viz.ring import ring_animation
from collsim.viz.scaling import scaling_rows
from collsim.viz.sweep import sweep
from collsim.viz.utilization import utilization

T = collsim.topology


@pytest.fixture(scope="module")
def result():
    return collsim.Cluster(T.ring(3)).all_reduce(count=12, dtype="float32")


@pytest.mark.parametrize("fps", [0, -1, float("nan"), float("inf"), 100, "1", True])
def test_ring_animation_refuses_bad_fps(result, tmp_path, fps):
    outcome = check_api(ring_animation, result, tmp_path / "r.gif", fps=fps, bad=repr(fps))
    assert outcome.error is not None and not (tmp_path / "r.gif").exists()


@pytest.mark.parametrize("name", ["r.mp4", "r.png", "r"])
def test_ring_animation_refuses_other_formats(result, tmp_path, name):
    outcome = check_api(ring_animation, result, tmp_path / name, bad=name)
    assert outcome.error is not None and "gif or .html" in str(outcome.error)


@pytest.mark.parametrize("bins", [0, -1, 2.5, 10**9, "200", None])
def test_utilization_refuses_bad_bins(result, bins):
    outcome = check_api(utilization, T.ring(3), result.trace, bins=bins, bad=repr(bins))
    assert outcome.error is not None


@pytest.mark.parametrize(
    "kwargs, bad",
    [
        ({"algorithms": ["tree", "tree"]}, "['tree', 'tree']"),
        ({"algorithms": ["hd", "halving_doubling"]}, "['hd', 'halving_doubling']"),
        ({"sizes": ["abc"]}, "'abc'"),
        ({"sizes": [2.5]}, "2.5"),
        ({"sizes": [2**k for k in range(65)]}, "65 sizes"),
    ],
)
def test_sweep_refuses_bad_arguments(kwargs, bad):
    cluster = collsim.Cluster(T.switch(4))
    assert check_api(sweep, cluster, bad=bad, **kwargs).error is not None


def test_sweep_refuses_one_rank():
    outcome = check_api(sweep, collsim.Cluster(T.ring(1)), sizes=[64], bad="1 rank")
    assert outcome.error is not None and "2 or more" in str(outcome.error)


@pytest.mark.parametrize(
    "kwargs, bad",
    [
        ({"gpus": []}, "[]"),
        ({"gpus": [2.5]}, "2.5"),
        ({"gpus": [8], "weak": True, "batch_per_gpu": float("nan")}, "nan"),
        ({"gpus": [8], "weak": True, "batch_per_gpu": -1}, "-1"),
        ({"gpus": [8], "weak": True, "batch_per_gpu": 0}, "0"),
    ],
)
def test_scaling_refuses_bad_arguments(kwargs, bad):
    assert check_api(scaling_rows, bad=bad, **kwargs).error is not None
