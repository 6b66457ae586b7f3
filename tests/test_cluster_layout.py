"""``Cluster`` is one class with one public API, written in modules of one concept each:
construction and ``run`` (runtime/cluster.py), the collective methods
(runtime/collective_calls.py), the checks of the settings that need a model beyond the plain
network (runtime/settings.py) and what faults did in a run (runtime/fault_log.py); the
house rule (tests/test_house_rules.py) holds each to 400 lines."""

import numpy as np
import pytest

import collsim
from collsim.errors import ConfigError
from collsim.runtime.faults import Faults

METHODS = (
    "collective",
    "all_reduce",
    "reduce_scatter",
    "all_gather",
    "broadcast",
    "reduce",
    "all_to_all",
    "run",
    "route",
)


@pytest.mark.parametrize("name", METHODS)
def test_the_public_methods_stay_on_one_class_with_examples(name):
    method = getattr(collsim.Cluster, name)
    assert ">>>" in method.__doc__ or name in ("run",), name
    assert collsim.Cluster.__module__ == "collsim.runtime.cluster"


def test_a_run_without_faults_keeps_no_fault_log_and_a_run_with_them_does():
    buffers = [np.ones(4), np.ones(4)]
    plain = collsim.Cluster(collsim.topology.ring(2), fast=False).all_reduce(buffers)
    assert plain.trace.faults is None
    slow = Faults.parse(slow_link=["0-1:0.5"])
    out = collsim.Cluster(collsim.topology.ring(2), faults=slow, fast=False).all_reduce(buffers)
    assert type(out.trace.faults).__module__ == "collsim.runtime.fault_log"
    assert out.trace.faults.faults is slow and out.time > plain.time


@pytest.mark.parametrize(
    "settings, named",
    [({"protocol": "ll129"}, "ll129"), ({"faults": "0-1:0.5"}, "0-1:0.5")],
)
def test_the_settings_a_plain_ring_skips_are_still_checked_when_given(settings, named):
    with pytest.raises(ConfigError, match=named):
        collsim.Cluster(collsim.topology.ring(2), **settings)
