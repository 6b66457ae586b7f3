"""`auto` as NCCL decides (collsim/collectives/nccl_choice.py): the choice is the model's,
among the algorithms collsim runs, through the API and the CLI."""

import json

import pytest

import collsim
from collsim import hardware
from collsim.cli import main
from collsim.collectives.nccl_choice import COUNTERPARTS
from collsim.collectives.nccl_model import graph_of, predict


@pytest.mark.parametrize(
    "preset, nodes", [("dgx-a100", 1), ("dgx-a100", 2), ("dgx-h100", 1), ("dgx-h100", 4)]
)
@pytest.mark.parametrize("size", [8, 2**16, 2**24, 2**30])
def test_the_run_takes_the_models_pick_among_what_collsim_runs(preset, nodes, size):
    cluster = collsim.Cluster(hardware.topology(preset, nodes=nodes))
    out = cluster.all_reduce(count=size // 4, dtype="float32")
    runnable = {"ring", "tree"}
    if preset == "dgx-h100":
        runnable.add("nvls" if nodes == 1 else "nvls_tree")
    _, winner = predict(graph_of(hardware.preset(preset), nodes), "all_reduce", size, runnable)
    assert out.algorithm == COUNTERPARTS["all_reduce"][winner.entry.algorithm]
    assert out.protocol.name == winner.entry.protocol
    assert out.choice.time_s == pytest.approx(winner.time_us * 1e-6)


def test_nvls_tree_runs_where_the_model_picks_it():
    # on 2 x DGX H100 the model's pick for 1 GiB is NVLS-Tree (docs/nccl-model.md); a
    # cluster has no in-network reduction (CollNet), so the model is asked without it
    model = graph_of(hardware.preset("dgx-h100"), 2)
    assert predict(model, "all_reduce", 2**30)[1].entry.label == "nvls_tree/simple"
    out = collsim.Cluster(hardware.topology("dgx-h100", nodes=2)).all_reduce(
        count=2**28, dtype="float32"
    )
    assert (out.algorithm, out.protocol.name) == ("nvls_tree", "simple")


def test_a_fixed_algorithm_gets_the_models_protocol():
    cluster = collsim.Cluster(hardware.topology("dgx-a100", nodes=2))
    small = cluster.all_reduce(count=2, dtype="float32", algorithm="nccl_ring")
    large = cluster.all_reduce(count=2**28, dtype="float32", algorithm="nccl_ring")
    assert (small.protocol.name, large.protocol.name) == ("ll", "simple")


@pytest.mark.parametrize(
    "choice, source",
    [("nccl", "by NCCL's model"), ("closed-form", "predicted"), ("simulated", "simulated")],
)
def test_collsim_run_says_who_chose(choice, source, capsys):
    argv = [
        "run",
        "all-reduce",
        "--topology",
        "dgx-a100",
        "--nodes",
        "2",
        "--size",
        "4KiB",
        "--count-only",
    ]
    assert main([*argv, "--choice", choice]) == 0
    info = [line for line in capsys.readouterr().out.splitlines() if "NCCL INFO" in line]
    assert len(info) == 1 and f", {source} " in info[0]


def test_the_simulated_choice_is_the_fastest_run(capsys):
    argv = [
        "run",
        "all-gather",
        "--topology",
        "dgx-h100",
        "--size",
        "1MiB",
        "--count-only",
        "--json",
    ]
    assert main([*argv, "--choice", "simulated"]) == 0
    best = json.loads(capsys.readouterr().out)["results"][0]
    for algorithm in ("ring", "halving_doubling"):
        assert main([*argv, "--algorithm", algorithm]) == 0
        other = json.loads(capsys.readouterr().out)["results"][0]
        assert best["time_s"] <= other["time_s"]


def test_a_bad_choice_is_refused_naming_the_flag(capsys):
    assert main(["run", "all-reduce", "--topology", "dgx-a100", "--choice", "fastest"]) == 2
    assert "--choice 'fastest'" in capsys.readouterr().err
