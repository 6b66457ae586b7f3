"""Activation recomputation (full, per unit) on the mesh trainer, measured by the tracker.

The forward keeps only each unit's input; the backward runs the unit's forward again. The
saving in activation memory and the cost in compute time are read from the same run's trace:
the extra compute is exactly one more forward of every unit.
"""

import pytest

from collsim import Cluster, topology
from collsim.errors import ConfigError
from collsim.network.memory import busiest, memory_peaks
from collsim.nn import Adam
from collsim.parallel.config import ParallelConfig
from collsim.parallel.mesh import train
from collsim.parallel.pipeline.runner import toy_batch, toy_model
from collsim.parallel.pipeline.schedules import SCHEDULE_NAMES


def run(**fields):
    model = toy_model(layers=4, hidden=16, heads=2)
    x, target = toy_batch(batch=8, seq=16, hidden=16)
    config = ParallelConfig(**fields)
    cluster = Cluster(topology.switch(config.world_size), compute_rate="1GFLOP/s")
    return train(model, [(x, target)], config, cluster=cluster, optimizer=Adam(1e-2, eps=1e-6))


@pytest.mark.parametrize("zero", [0, 3])
@pytest.mark.parametrize("name", SCHEDULE_NAMES)
def test_recomputation_trains_like_one_device(name, zero):
    v = 2 if name == "interleaved" else 1
    result = run(dp=2, pp=2, microbatches=4, vpp=v, schedule=name, zero=zero, recompute="full")
    assert result.match is True and result.max_error < 1e-10


def test_recomputation_saves_activations_and_costs_one_more_forward():
    plain, again = run(dp=2, t_f=0), run(dp=2, t_f=0, recompute="full")
    assert plain.match and again.match
    kept = [
        busiest(memory_peaks(r.trace, r.mesh.size)).by_category["activations"]
        for r in (plain, again)
    ]
    assert kept[1] < 0.4 * kept[0]  # inputs only, plus one unit's recomputed activations
    forward = sum(
        c.end - c.start
        for c in plain.trace.computes
        if c.rank == 0 and getattr(c.meta, "kind", None) == "forward"
    )
    busy = [r.run.stats.compute_time[0] for r in (plain, again)]
    assert busy[1] - busy[0] == pytest.approx(forward, rel=1e-9)  # every forward once more
    assert busy[1] / busy[0] == pytest.approx(4 / 3, rel=0.02)  # backward = 2x the forward


def test_selective_recomputation_is_refused_with_the_reason():
    with pytest.raises(
        ConfigError, match="recompute='selective' is not one of none, full .*Korthikanti"
    ):
        ParallelConfig(recompute="selective")
