"""Saving the training state of a ZeRO / FSDP run: full against sharded, measured.

A full state dict gathers every shard to the group's first rank (12Ψ bytes there, three
all-gathers of Ψ); a sharded one writes each rank's 1/N (12Ψ/N bytes, no communication).
What was saved is the state: the master weights equal the trained parameters, and the
shards put together equal the full save.
"""

import numpy as np
import pytest

from collsim.collectives.formulas import closed_form
from collsim.errors import ConfigError
from collsim.nn import Adam
from collsim.parallel.config import ParallelConfig
from collsim.parallel.data.checkpoint import state_dict_peaks
from collsim.parallel.mesh import train
from collsim.parallel.pipeline.runner import toy_batch, toy_model

N = 4


def run(zero, kind):
    model = toy_model(layers=2, hidden=8, heads=2)
    batches = [toy_batch(batch=N, seed=1), toy_batch(batch=N, seed=2)]
    config = ParallelConfig(dp=N, zero=zero)
    return model, train(model, batches, config, optimizer=Adam(1e-2), state_dict=kind)


@pytest.mark.parametrize("zero", [1, 2, 3])
def test_full_and_sharded_saves_cost_what_they_should(zero):
    model, full = run(zero, "full")
    _, sharded = run(zero, "sharded")
    assert full.match and sharded.match
    psi = sum(a.size for a in model.params.values())  # 1200: divides by N
    assert state_dict_peaks(full.trace, N) == [12 * psi, 0, 0, 0]  # fp32 master, m, v
    assert state_dict_peaks(sharded.trace, N) == [12 * psi // N] * N
    extra = full.bytes_by_group[("dp", "all_gather")][0]
    extra -= sharded.bytes_by_group[("dp", "all_gather")][0]
    gather = closed_form("all_gather", "ring", N, psi * 8, 0.0, 1.0).bytes_per_rank
    assert extra == pytest.approx(3 * gather, rel=0.01)  # master, m, v gathered once each


@pytest.mark.parametrize("zero", [1, 3])
def test_what_was_saved_is_the_trained_state(zero):
    _, full = run(zero, "full")
    _, sharded = run(zero, "sharded")
    kept = [s for s in full.saved if s.whole]
    assert len(kept) == 1 and kept[0].rank == 0
    for key, tensors in kept[0].tensors.items():
        parts = [s.tensors[key] for s in sharded.saved]
        for name in ("master", "m", "v"):
            np.testing.assert_array_equal(np.concatenate([p[name] for p in parts]), tensors[name])
    masters = np.concatenate([t["master"] for t in kept[0].tensors.values()])
    params = np.concatenate([np.ravel(a) for a in full.params.values()])
    assert masters.size == params.size  # no padding: every unit's size divides by N
    # the same values (the layouts order them by unit, the dict by name): the trained state
    np.testing.assert_array_equal(np.sort(masters), np.sort(params))


def test_saving_needs_sharded_state_and_a_known_kind():
    model = toy_model(layers=1)
    batches = [toy_batch(batch=2)]
    with pytest.raises(ConfigError, match="state_dict='full' saves a sharded state: it needs"):
        train(model, batches, ParallelConfig(dp=2), state_dict="full")
    with pytest.raises(ConfigError, match="state_dict='all' is not one of full, sharded"):
        train(model, batches, ParallelConfig(dp=2, zero=1), state_dict="all")
