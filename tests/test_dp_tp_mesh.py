"""DP × TP on a (dp, tp) device mesh (the 2-D rank grid of the DP vs MP example) against
one device, its per-group byte accounting, and the ``collsim verify`` command.

In a mesh of shape (dp, tp) the ranks that share a dp index form one TP group (one model
replica); those that share a tp index form one DP group.  Activations must move along
tp only, gradients along dp only, each by its closed form.
"""

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from collsim import Cluster, topology
from collsim.cli import main
from collsim.errors import ConfigError
from collsim.nn import SGD, TransformerBlock
from collsim.parallel.accounting import mesh_dimension
from collsim.parallel.config import ParallelConfig
from collsim.parallel.mesh import train
from collsim.parallel.tensor.attention import ParallelTransformerBlock
from collsim.runtime.group import RankGrid
from collsim.verify import SCHEMES, verify

seeds = st.integers(0, 2**32 - 1)


@st.composite
def mesh_configs(draw):
    dp = draw(st.integers(1, 3))
    tp = draw(st.sampled_from([1, 2, 4]))
    sp = draw(st.booleans())
    accumulation = draw(st.integers(1, 2))
    layers = draw(st.integers(1, 2))
    return dp, tp, sp, accumulation, layers


@given(mesh_configs(), seeds)
def test_dp_tp_trains_like_one_device(config, seed):
    dp, tp, sp, accumulation, layers = config
    report = verify(
        "dp-tp",
        dp=dp,
        tp=tp,
        sequence_parallel=sp,
        batch=dp * accumulation,
        micro_batch=1,
        hidden=4,
        heads=4,
        ffn_hidden=8,
        seq=4,
        layers=layers,
        steps=3,
        seed=seed,
    )
    assert report.match, report
    assert report.max_rel_diff < 1e-10
    assert report.dp_replica_diff == 0.0  # DP replicas bitwise identical
    assert report.tp_replica_diff == 0.0  # replicated LayerNorms identical across TP
    # per-group accounting equals the closed forms, dimension by dimension
    assert set(report.bytes_by_group) == set(report.formula_bytes)
    for key, formula in report.formula_bytes.items():
        per_rank = report.bytes_by_group[key]
        assert sum(per_rank) / (dp * tp) == pytest.approx(formula, rel=1e-15), key


def test_groups_follow_the_grid_and_nothing_crosses_them():
    rng = np.random.default_rng(0)
    block = TransformerBlock.init(8, 4, rng)
    x, target = rng.uniform(-1, 1, (6, 4, 8)), rng.uniform(-1, 1, (6, 4, 8))
    mesh = RankGrid((3, 2), ("dp", "tp"))
    assert [g.ranks for g in mesh.groups("tp")] == [(0, 1), (2, 3), (4, 5)]  # share dp index
    assert [g.ranks for g in mesh.groups("dp")] == [(0, 2, 4), (1, 3, 5)]  # share tp index

    def make(group, tp_rank):
        return [("0", ParallelTransformerBlock.from_full(block, group, tp_rank))]

    config = ParallelConfig(dp=3, tp=2, t_f=0)  # time from the layers' FLOPs alone
    run = train(
        make, [(x, target)] * 2, config, cluster=Cluster(topology.switch(6)), optimizer=SGD(lr=0.1)
    )
    assert set(run.bytes_by_group) == {("dp", "all_reduce"), ("tp", "all_reduce")}
    for t in run.trace.transfers:
        dim = mesh_dimension(mesh, t.src, t.dst)
        assert dim in ("dp", "tp")
        # activations (rows of 2 samples) along tp, gradient buckets along dp
        assert (dim == "tp") == (t.nbytes == 2 * 4 * 8 * 8 // 2)
    # tp: 4 all-reduces per layer per step of B/dp·S·H·b; dp: 2(K-1)/K of the local shard
    P_local = sum(v.size for v in make(mesh.group("tp", 0), 0)[0][1].params.values())
    assert run.bytes_by_group[("tp", "all_reduce")] == [2 * 4 * 1 * (2 * 4 * 8 * 8)] * 6
    dp_sent = run.bytes_by_group[("dp", "all_reduce")]
    assert sum(dp_sent) / 6 == pytest.approx(2 * 2 * 2 / 3 * P_local * 8)
    # data-parallel gradient traffic overlaps nothing here (one bucket, after backward)
    assert run.buckets == [P_local]


def test_batch64_two_dimensional_grid_example():
    report = verify("dp-tp", dp=2, tp=2, batch=8, hidden=8, heads=2, seq=4, steps=2)
    assert report.match
    keys = {f"{d} {c}" for d, c in report.bytes_by_group}
    assert keys == {"dp all_reduce", "tp all_reduce"}


def test_the_trainer_refuses_a_cluster_of_the_wrong_size():
    make = lambda group, tp_rank: []  # noqa: E731 -- never built: refused first
    with pytest.raises(ConfigError, match="exactly 4 ranks"):
        train(
            make,
            [(np.zeros((2, 1)),) * 2],
            ParallelConfig(dp=2, tp=2),
            cluster=Cluster(topology.switch(6)),
        )


# ---- the command ------------------------------------------------------------------------------


@pytest.mark.parametrize("scheme", SCHEMES)
def test_cli_json_for_every_scheme(scheme, capsys):
    status = main(
        [
            "verify",
            scheme,
            "--batch",
            "8",
            "--hidden",
            "8",
            "--heads",
            "4",
            "--seq",
            "4",
            "--steps",
            "2",
            "--layers",
            "1",
            "--json",
        ]
    )
    data = json.loads(capsys.readouterr().out)
    assert status == 0
    for key in ("scheme", "max_abs_diff", "match", "bytes_sent", "bytes_by_collective", "time_s"):
        assert key in data
    assert data["scheme"] == scheme and data["match"] is True
    # Adam turns the key bias's exactly-zero gradient's rounding (~1e-17) into ~1e-11 steps
    adam = data["config"].get("optimizer") == "Adam"
    assert data["max_abs_diff"] < (1e-10 if adam else 1e-12)
    world = data["config"]["dp"] * data["config"]["tp"]
    assert len(data["bytes_sent"]) == world and data["time_s"] > 0
    for per_rank in data["bytes_by_collective"].values():
        assert len(per_rank) == world
    assert len(data["loss_cluster"]) == 2 == len(data["steps"])


def test_cli_human_report_has_units_and_the_verdict(capsys):
    assert main(["verify", "dp", "--steps", "2", "--hidden", "8", "--micro-batch", "8"]) == 0
    out = capsys.readouterr().out
    assert "MATCH" in out and "global batch 64 = micro batch 8 × dp 4 × accumulation 2" in out
    assert "KiB" in out and " us" in out and "formula" in out and "exposed" in out


def test_cli_bad_configuration_names_the_numbers(capsys):
    assert main(["verify", "tp-mlp", "--tp", "3"]) == 2
    err = capsys.readouterr().err
    assert "tp=3" in err and "hidden=16" in err and "2, 4, 1, 8, 16" in err
    assert main(["verify", "dp", "--micro-batch", "5"]) == 2
    assert "global batch 64" in capsys.readouterr().err
    assert main(["verify", "tp-mlp", "--sp"]) == 2
    assert "sequence parallelism applies" in capsys.readouterr().err
