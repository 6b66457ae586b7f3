"""``collsim verify`` reads the shared closed forms and hands the trainer one configuration.

Issue 12, item 6: the bytes :func:`~collsim.verify.expected_bytes` sets next to the measured
ones come from :func:`collsim.collectives.formulas.closed_form` (the function the simulator's
own tests check), not from ring factors written out again.  Item 4: :func:`~collsim.verify.verify`
builds one :class:`~collsim.parallel.config.ParallelConfig` and passes it to the trainer, and
refuses what that configuration refuses before any training starts.
"""

import dataclasses
import sys

import pytest
from fuzzkit import run_cli

from collsim.collectives import formulas
from collsim.errors import ConfigError
from collsim.parallel.config import ParallelConfig
from collsim.verify import SCHEMES, expected_bytes, verify

# expected_bytes' arguments for each scheme: degrees > 1 on every dimension it uses
SIZES = dict(
    micro_batch=2, accumulation=2, steps=3, seq=4, hidden=8, ffn=32, layers=2, local_params=1000
)
DEGREES = {"dp": dict(dp=4, tp=1), "dp-tp": dict(dp=2, tp=4)}
CASES = [(scheme, False) for scheme in SCHEMES] + [("dp-tp", True)]  # dp-tp with and without SP
IDS = [f"{scheme}{'-sp' if sp else ''}" for scheme, sp in CASES]

# small runs of every scheme, with a degree of 3 where the sizes allow (uneven rings)
SMALL = dict(hidden=6, heads=3, ffn_hidden=12, seq=6, layers=1, steps=2)
RUNS = {
    "dp": dict(dp=3, batch=6, micro_batch=1),
    "dp-tp": dict(dp=2, tp=3, batch=4, accumulation=2),
    "zero": dict(dp=3, batch=6, stage=2, accumulation=2),
    "fsdp": dict(dp=3, batch=6, reshard_after_forward=False),
    "hsdp": dict(dp_replicate=3, dp_shard=2, batch=6),
}


def _verify_module():
    """The module that defines verify() (and the train_on_cluster it calls)."""
    return sys.modules[verify.__module__]


@pytest.mark.parametrize(("scheme", "sp"), CASES, ids=IDS)
def test_expected_bytes_follow_the_shared_closed_forms(scheme, sp, monkeypatch):
    degrees = DEGREES.get(scheme, dict(dp=1, tp=4))
    shown = expected_bytes(scheme, **degrees, **SIZES, sp=sp)
    assert shown, "every scheme here moves bytes on some dimension"
    calls, real = [], formulas.closed_form

    def tripled(collective, algorithm, ranks, size, alpha, beta):
        calls.append((collective, algorithm, ranks))
        cost = real(collective, algorithm, ranks, size, alpha, beta)
        return dataclasses.replace(cost, bytes_per_rank=3 * cost.bytes_per_rank)

    monkeypatch.setattr(formulas, "closed_form", tripled)
    changed = expected_bytes(scheme, **degrees, **SIZES, sp=sp)
    assert changed == {key: 3 * value for key, value in shown.items()}
    # each figure comes from its own collective on its own dimension, by the ring the trainer runs
    assert {collective for collective, _, _ in calls} == {name for _, name in shown}
    ranks = {"dp": degrees["dp"], "tp": degrees["tp"]}
    assert {(c, a, k) for c, a, k in calls} <= {(name, "ring", ranks[dim]) for dim, name in shown}


@pytest.mark.parametrize("scheme", SCHEMES)
def test_expected_bytes_equal_the_measured_bytes_on_uneven_rings(scheme):
    options = RUNS.get(scheme, dict(tp=3, batch=2))
    report = verify(scheme, **SMALL, **options)
    assert report.match, report
    world = report.config["dp"] * report.config["tp"]
    assert set(report.bytes_by_group) == set(report.formula_bytes)
    for key, formula in report.formula_bytes.items():
        assert sum(report.bytes_by_group[key]) / world == pytest.approx(formula, rel=1e-15), key


TRAIN_CASES = {
    "dp": (dict(dp=2, batch=8, micro_batch=2), dict(dp=2, microbatches=2)),
    "tp-column": (dict(tp=2), dict(tp=2)),
    "tp-row": (dict(tp=2), dict(tp=2)),
    "tp-mlp": (dict(tp=2, accumulation=2), dict(tp=2, microbatches=2)),
    "tp-attention": (dict(tp=2), dict(tp=2)),
    "sp": (dict(tp=2), dict(tp=2, sp=True)),
    "dp-tp": (
        dict(dp=2, tp=2, sequence_parallel=True, bucket_bytes="1KiB"),
        dict(dp=2, tp=2, sp=True, bucket_bytes=1024),
    ),
    "zero": (dict(dp=2, stage=2), dict(dp=2, zero=2)),
    "fsdp": (
        dict(dp=2, prefetch="forward", reshard_after_forward=False),
        dict(dp=2, zero=3, prefetch="forward", reshard_after_forward=False),
    ),
    "hsdp": (dict(dp_replicate=2, dp_shard=2), dict(dp=4, zero=3, dp_replicate=2)),
}


@pytest.fixture
def trained_configs(monkeypatch):
    """The configurations verify hands its trainer (which still trains)."""
    module, seen = _verify_module(), []
    real_train = module.train_on_cluster

    def spy(problem, config, *args, **kwargs):
        seen.append(config)
        return real_train(problem, config, *args, **kwargs)

    monkeypatch.setattr(module, "train_on_cluster", spy)
    return seen


@pytest.mark.parametrize("scheme", SCHEMES)
def test_verify_hands_the_trainer_one_parallel_config(scheme, trained_configs):
    options, fields = TRAIN_CASES[scheme]
    report = verify(scheme, hidden=8, heads=2, seq=4, layers=1, steps=1, **options)
    assert report.match
    # verify's time comes from the layers' FLOPs: no per-pass time on top
    assert trained_configs == [ParallelConfig(**{"t_f": 0.0, **fields})]
    assert report.config["accumulation"] == trained_configs[0].microbatches


def test_sequence_parallel_over_one_tp_rank_is_no_split_in_the_config(trained_configs):
    report = verify(
        "dp-tp",
        dp=2,
        tp=1,
        sequence_parallel=True,
        batch=2,
        hidden=4,
        heads=4,
        seq=4,
        layers=1,
        steps=1,
    )
    assert report.match and report.config["sequence_parallel"] is True
    assert trained_configs[0].sp is False and trained_configs[0].tp == 1


@pytest.mark.parametrize(
    ("options", "bad"),
    [
        (dict(micro_batch=5), "micro batch 5"),  # 64 samples on dp 4: 16 per rank
        (dict(micro_batch=3, accumulation=2), "micro batch 3"),
        (dict(bucket_bytes=0), "bucket_bytes=0"),
        (dict(bucket_bytes=1.5), "bucket_bytes=1.5"),
        (dict(bucket_bytes="1.5"), "'1.5'"),
    ],
)
def test_refusals_come_before_any_training(options, bad, monkeypatch):
    module = _verify_module()

    def no_training(*args, **kwargs):
        raise AssertionError("trained before refusing")

    monkeypatch.setattr(module, "single_device", no_training)
    monkeypatch.setattr(module, "train_on_cluster", no_training)
    with pytest.raises(ConfigError) as err:
        verify("dp", hidden=8, heads=2, seq=4, layers=1, steps=1, **options)
    assert bad in str(err.value)


def test_the_command_refuses_an_empty_gradient_bucket_by_its_flag():
    argv = [
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
        "--bucket-size",
        "0",
    ]
    outcome = run_cli(argv, bad="--bucket-size 0", timeout=10)
    assert outcome.status == 2 and outcome.stdout == ""
    assert "1B" in outcome.stderr  # the nearest valid size
