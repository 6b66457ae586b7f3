"""examples/dp_training_distributed.py: data-parallel training written with
collsim.distributed ends with the parameters of one device training on the whole batch
(float64, rtol 1e-10), the same on every rank, and runs under ``collsim exec``."""

import runpy
import threading
from pathlib import Path

import numpy as np
import pytest
from fuzzkit import run_cli

import collsim
from collsim.nn import SGD, mse_loss
from collsim.runtime import blocking

EXAMPLE = Path(__file__).parents[1] / "examples" / "dp_training_distributed.py"


@pytest.fixture(autouse=True)
def no_thread_left_behind():
    before = threading.active_count()
    yield
    assert threading.active_count() == before


@pytest.fixture(scope="module")
def example():
    return runpy.run_path(str(EXAMPLE), run_name="dp_training_distributed")


def one_device(example):
    """The oracle: rank 0's initial model trained on every whole batch, on one device."""
    model = example["make_model"](seed=0)
    optimizer = SGD(lr=example["LR"])
    for x, y in example["make_batches"]():
        out, ctx = model.forward(x)
        _, dout = mse_loss(out, y)
        _, grads = model.backward(ctx, dout)
        optimizer.step(model.params, grads)
    return model.params


@pytest.mark.parametrize("k", [1, 2, 4, 8])
def test_data_parallel_parameters_equal_one_device_on_the_whole_batch(example, k, capsys):
    result = blocking.run(collsim.Cluster(collsim.topology.ring(k)), example["main"])
    want = one_device(example)
    start = example["make_model"](seed=0).params
    for params in result.returns:
        assert sorted(params) == sorted(want)
        for name, value in params.items():
            np.testing.assert_allclose(value, want[name], rtol=1e-10, atol=0)
            assert not np.allclose(value, start[name])  # it trained
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == k * example["STEPS"]  # every rank prints its loss every step
    assert result.stats.bytes_sent[0] > 0 or k == 1  # the gradients moved on the network


def test_it_runs_under_collsim_exec_and_prints_each_ranks_loss():
    outcome = run_cli(["exec", "-n", "4", str(EXAMPLE)], timeout=60)
    assert outcome.status == 0, outcome.stderr
    for rank in range(4):
        assert f"[1,{rank}]<stdout>:step 5: loss " in outcome.stdout


def test_a_world_that_does_not_split_the_batch_is_refused_naming_it():
    outcome = run_cli(["exec", "-n", "3", str(EXAMPLE)], bad="3 ranks", timeout=60)
    assert outcome.status != 0
