"""The planner's figures come from the simulator's own closed forms, not from copies.

Each shared function (``collsim.collectives.formulas.closed_form`` for the bytes, steps and
time of every collective; ``bubble_fraction`` and ``peak_inflight`` of
``collsim.parallel.pipeline.schedules.formulas``) is replaced by one that returns a marked
value, wherever a collsim module holds it; the planner's figure must then be the mark. A
figure the planner recomputed on the side (``(p-1)/(m+p-1)`` or ``2(K-1)/K·S`` written by
hand) keeps its own value and fails here.
"""

import sys

import pytest

import collsim.plan
from collsim.collectives import formulas as collective_formulas
from collsim.parallel.pipeline.schedules import formulas as schedule_formulas

MODEL = dict(layers=8, hidden=256, heads=8, seq=512, vocab=1024)


def _replace_everywhere(monkeypatch, module, name, fake):
    """``module.name`` and every collsim module's binding of that same function -> ``fake``."""
    original = getattr(module, name)
    for loaded in list(sys.modules.values()):
        if getattr(loaded, "__name__", "").startswith("collsim"):
            for attr, value in list(vars(loaded).items()):
                if value is original:
                    monkeypatch.setattr(loaded, attr, fake)
    assert getattr(module, name) is fake


# --- the pipeline bubble --------------------------------------------------------------------

BUBBLE = 0.4321  # prints as 43%, which no (p-1)/(m+p-1) of these configurations gives


@pytest.fixture
def marked_bubble(monkeypatch):
    calls = []

    def fake(name, p, m, v=1, t_f=1.0, t_b=1.0, t_w=1.0):
        calls.append((name, p, m, v))
        return BUBBLE

    _replace_everywhere(monkeypatch, schedule_formulas, "bubble_fraction", fake)
    return calls


# pp=4 with only 2 micro-batches per step: the bubble warning fires
BUBBLE_CASES = {
    "gpipe": dict(schedule="gpipe"),
    "1f1b": dict(schedule="1f1b"),
    "interleaved": dict(vpp=2),
}


@pytest.mark.parametrize("case", BUBBLE_CASES, ids=str)
def test_the_step_time_bubble_is_the_schedules_closed_form(marked_bubble, case):
    report = collsim.plan.plan(
        **{**MODEL, **dict(world_size=8, pp=4, global_batch=4), **BUBBLE_CASES[case]}
    )
    assert report.compute["bubble_fraction"] == BUBBLE
    assert marked_bubble, "the planner never asked the schedules' formula"


@pytest.mark.parametrize("case", BUBBLE_CASES, ids=str)
def test_the_bubble_warning_shows_the_schedules_closed_form(marked_bubble, case):
    report = collsim.plan.plan(
        **{**MODEL, **dict(world_size=8, pp=4, global_batch=4), **BUBBLE_CASES[case]}
    )
    (warning,) = [w for w in report.warnings if w.rule == "bubble"]
    assert f"= {BUBBLE:.0%} of the step" in warning.message, warning.message


# --- the micro-batches a stage keeps in flight ------------------------------------------------

IN_FLIGHT = 7  # chunks' worth of activations on the marked stage


@pytest.mark.parametrize(
    "schedule, vpp", [("gpipe", 1), ("1f1b", 1), ("interleaved", 2)], ids=["gpipe", "1f1b", "int"]
)
def test_in_flight_micro_batches_are_the_schedules_closed_form(monkeypatch, schedule, vpp):
    def fake(name, p, m, v=1, stage=None):
        return IN_FLIGHT if stage is not None else (IN_FLIGHT,) * int(p)

    _replace_everywhere(monkeypatch, schedule_formulas, "peak_inflight", fake)
    report = collsim.plan.plan(
        **MODEL, world_size=8, pp=4, vpp=vpp, schedule=schedule, global_batch=32
    )
    assert report.memory["in_flight_microbatches"] == IN_FLIGHT / vpp  # chunks of 1/v stage


# --- the bytes, steps and time of every collective -------------------------------------------

MARKED_COST = collective_formulas.Cost(steps=11, bytes_per_rank=12345.0, time_s=0.125)

# each dimension and collective the planner charges: (dimension, collectives, settings)
COMMUNICATION_CASES = {
    "tp all-reduce": ("tp", {"all_reduce"}, dict(world_size=2, tp=2)),
    "tp with sp": ("tp", {"all_gather", "reduce_scatter"}, dict(world_size=2, tp=2, sp=True)),
    "cp ring attention": ("cp", {"broadcast"}, dict(world_size=2, cp=2)),  # a send a hop
    "dp all-reduce": ("dp", {"all_reduce"}, dict(world_size=4)),
    "dp zero-1": ("dp", {"reduce_scatter", "all_gather"}, dict(world_size=4, zero=1)),
    "dp zero-3": ("dp", {"reduce_scatter", "all_gather"}, dict(world_size=4, zero=3)),
    "dp hsdp": (
        "dp",
        {"reduce_scatter", "all_gather", "all_reduce"},
        dict(world_size=4, dp_shard=2, dp_replicate=2),
    ),
    "pp sends": ("pp", {"broadcast"}, dict(world_size=2, pp=2)),
}


@pytest.mark.parametrize("case", COMMUNICATION_CASES, ids=str)
def test_every_collective_is_the_collectives_closed_form(monkeypatch, case):
    dimension, collectives, settings = COMMUNICATION_CASES[case]
    asked = []

    def fake(collective, algorithm, ranks, size, alpha, beta):
        asked.append(collective)
        return MARKED_COST

    _replace_everywhere(monkeypatch, collective_formulas, "closed_form", fake)
    report = collsim.plan.plan(**MODEL, **settings, global_batch=8)
    ops = report.communication[dimension]["ops"]
    assert {op["collective"] for op in ops.values()} == collectives
    for name, op in ops.items():
        assert op["steps_per_call"] == MARKED_COST.steps, name
        assert op["bytes_per_call"] == MARKED_COST.bytes_per_rank, name
        assert op["time_per_call_s"] == MARKED_COST.time_s, name
        assert op["bytes_per_rank"] == op["calls"] * MARKED_COST.bytes_per_rank, name
    assert collectives <= set(asked)
