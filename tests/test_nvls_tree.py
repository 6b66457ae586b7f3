"""NVLS-Tree (collsim/collectives/nvls_tree.py): in-switch reduce in every node, a binomial
tree across the nodes on each rail, in-switch multicast; values equal numpy, bytes per
rank and per link class and the time equal hardware_forms' closed form."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_algorithms_hw import class_bytes, mini

import collsim
from collsim import hardware
from collsim.cli import main
from collsim.collectives import reference
from collsim.collectives.auto import fabric_of
from collsim.collectives.executor import integer_inputs
from collsim.collectives.hardware_forms import hardware_cost


@settings(max_examples=15)
@given(
    gpus=st.integers(1, 4),
    nodes=st.integers(2, 5),
    count=st.integers(0, 300),
    op=st.sampled_from(["sum", "max", "prod", "avg"]),
    seed=st.integers(0, 2**16),
)
def test_equals_numpy(gpus, nodes, count, op, seed):
    cluster = collsim.Cluster(hardware.topology(mini("dgx-h100", gpus), nodes=nodes))
    buffers = integer_inputs(cluster.size, count, "float32", op, seed)
    out = cluster.all_reduce(buffers, algorithm="nvls_tree", op=op)
    for got, want in zip(out.outputs, reference("all_reduce", buffers, op, 0)):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("gpus,nodes", [(1, 2), (2, 2), (3, 3), (4, 4), (8, 2), (8, 3)])
def test_steps_bytes_link_classes_and_time_equal_the_closed_form(gpus, nodes):
    graph = hardware.topology(mini("dgx-h100", gpus), nodes=nodes)
    cluster = collsim.Cluster(graph)
    k = cluster.size
    count = 8 * k * gpus
    out = cluster.all_reduce(count=count, dtype="float32", algorithm="nvls_tree")
    cost = hardware_cost(
        "nvls_tree", nodes, gpus, 4 * count, fabric_of(graph, tuple(range(k))), out.protocol
    )
    assert out.stats.steps == cost.steps == (2 if gpus > 1 else 0) + 2 * (nodes - 1).bit_length()
    assert max(out.stats.bytes_sent) == cost.bytes_per_rank
    by_class = class_bytes(graph, out.stats.link_bytes)
    assert by_class["nvlink"] == 2 * cost.intra_hop_bytes  # GPU -> NVSwitch -> GPU: two links
    assert by_class["net"] == 2 * cost.inter_hop_bytes  # GPU -> rail switch -> GPU
    assert out.time == pytest.approx(cost.time_s, rel=1e-12)


def test_the_tree_runs_on_rails_and_the_switches_sum_and_copy_per_part():
    graph = hardware.topology("dgx-h100", nodes=4)
    out = collsim.Cluster(graph).all_reduce(count=1024, dtype="float32", algorithm="nvls_tree")
    node = {r: graph.nodes[r]["node"] for r in range(32)}
    local = {r: graph.nodes[r]["local"] for r in range(32)}
    first, *tree, last = out.schedule.steps
    for step in tree:  # across nodes, GPU j to GPU j: each part on its own rail
        assert all(local[m.src] == local[m.dst] == m.chunks.start for m in step)
        assert all(node[m.src] != node[m.dst] for m in step)
    for step, reduce in ((first, True), (last, False)):
        groups = {m.combine.key: m.combine for m in step}
        assert len(groups) == 4 * 8  # one per node and part
        assert all(m.reduce is reduce and node[m.src] == node[m.dst] for m in step)
        assert {g.switch for g in groups.values()} == {f"nvswitch{n}" for n in range(4)}


@pytest.mark.parametrize(
    "argv, names",
    [
        (["--topology", "dgx-a100", "--nodes", "2"], "NVSwitches reduce"),
        (["--topology", "dgx-h100"], "inside one node use 'nvls'"),
    ],
)
def test_refused_where_it_cannot_run(argv, names, capsys):
    assert main(["run", "all-reduce", "--algorithm", "nvls_tree", "--size", "1MiB", *argv]) == 2
    assert names in capsys.readouterr().err


def test_auto_takes_it_where_ncclss_model_does():
    # the model's pick for a large all-reduce on 2 x DGX H100 (docs/nccl-model.md)
    out = collsim.Cluster(hardware.topology("dgx-h100", nodes=2)).all_reduce(
        count=2**28, dtype="float32"
    )
    assert (out.algorithm, out.protocol.name) == ("nvls_tree", "simple")
