"""The topology-aware all-reduce algorithms (nccl_ring, double_tree, hierarchical, nvls)
equal numpy on the hardware presets, and their bytes per rank, per NIC and per link class
equal the closed forms of collsim.collectives.hardware_forms.hardware_cost."""

import dataclasses
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import collsim
from collsim import hardware
from collsim.collectives import reference
from collsim.collectives.auto import fabric_of
from collsim.collectives.double_tree import double_tree_sizes
from collsim.collectives.executor import integer_inputs
from collsim.collectives.hardware_forms import MAX_PIECES, hardware_cost

ALGORITHMS = ("nccl_ring", "double_tree", "hierarchical", "nvls")


def mini(preset, gpus):
    """``preset``'s fabric (NVSwitch, one NIC per GPU on its own rail) with ``gpus`` GPUs
    per node: small enough for many drawn examples."""
    m = hardware.preset(preset)
    inter = dataclasses.replace(m.inter, nics=gpus)
    return dataclasses.replace(m, name=f"{preset}-mini{gpus}", gpus_per_node=gpus, inter=inter)


def runnable(algorithm, machine, nodes):
    return algorithm != "nvls" or (nodes == 1 and machine.intra.reduces)


def check_equals_numpy(graph, algorithm, count, op, seed):
    cluster = collsim.Cluster(graph)
    buffers = integer_inputs(cluster.size, count, "float32", op, seed)
    out = cluster.all_reduce(buffers, algorithm=algorithm, op=op)
    assert out.algorithm == algorithm
    for got, want in zip(out.outputs, reference("all_reduce", buffers, op, 0)):
        np.testing.assert_array_equal(got, want)
    return out


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@settings(max_examples=12)
@given(
    preset=st.sampled_from(["dgx-a100", "dgx-h100"]),
    gpus=st.integers(1, 4),
    nodes=st.integers(1, 4),
    count=st.integers(0, 300),
    op=st.sampled_from(["sum", "max", "prod", "avg"]),
    seed=st.integers(0, 2**16),
)
def test_equals_numpy_on_small_nodes(algorithm, preset, gpus, nodes, count, op, seed):
    machine = mini(preset, gpus)
    if algorithm == "nvls":  # one node of an NVSwitch that reduces
        machine, nodes = mini("dgx-h100", gpus), 1
    check_equals_numpy(hardware.topology(machine, nodes=nodes), algorithm, count, op, seed)


PRESET_CASES = [
    (p, n, a)
    for p in ("dgx-a100", "dgx-h100", "pcie-8gpu")
    for n in (1, 2)
    for a in ALGORITHMS
    if runnable(a, hardware.preset(p), n)
]


@pytest.mark.parametrize("preset,nodes,algorithm", PRESET_CASES)
@settings(max_examples=2)
@given(count=st.integers(1, 2000), seed=st.integers(0, 2**16))
def test_equals_numpy_on_the_presets(preset, nodes, algorithm, count, seed):
    check_equals_numpy(hardware.topology(preset, nodes=nodes), algorithm, count, "sum", seed)


def class_bytes(graph, link_bytes):
    by_class = Counter()
    for (u, v), nbytes in link_bytes.items():
        by_class[graph.edges[u, v]["link_class"]] += nbytes
    return by_class


# (G, M): G = 2 with M odd is left to the structure test: there one channel's hop back to
# node 0 must cross rails (rail -> spine -> rail: 4 links, not 2), see nccl_ring's docstring
BYTE_SHAPES = [(1, 2), (2, 1), (2, 2), (3, 2), (3, 3), (4, 1), (4, 3), (8, 1), (8, 2)]


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("gpus,nodes", BYTE_SHAPES)
@pytest.mark.parametrize("scale", [1, 3])
def test_bytes_per_rank_and_per_link_class_equal_the_closed_form(algorithm, gpus, nodes, scale):
    machine = mini("dgx-h100", gpus)
    if not runnable(algorithm, machine, nodes):
        nodes = 1
    graph = hardware.topology(machine, nodes=nodes)
    cluster = collsim.Cluster(graph)
    k = cluster.size
    count = scale * MAX_PIECES * k * gpus  # every chunk count divides it: equal chunks
    size = 4 * count
    out = cluster.all_reduce(count=count, dtype="float32", algorithm=algorithm)
    fabric = fabric_of(graph, tuple(range(k)))
    cost = hardware_cost(
        algorithm,
        nodes,
        gpus,
        size,
        fabric,
        out.protocol,
        out.schedule.n_chunks // 2 if algorithm == "double_tree" else out.schedule.n_chunks // k,
    )
    assert out.stats.steps == cost.steps
    assert max(out.stats.bytes_sent) == cost.bytes_per_rank
    if algorithm == "double_tree":  # every rank's own count, from the two trees
        sent = double_tree_sizes(nodes, gpus).sent
        assert out.stats.bytes_sent == [round(f * size) for f in sent]
    else:  # nccl_ring, hierarchical and nvls load every rank alike, each way
        assert out.stats.bytes_sent == [cost.bytes_per_rank] * k
        assert out.stats.bytes_received == [cost.bytes_per_rank] * k
    # a hop GPU -> NVSwitch -> GPU, or GPU -> rail switch -> GPU, is two links
    by_class = class_bytes(graph, out.stats.link_bytes)
    assert by_class["nvlink"] == 2 * cost.intra_hop_bytes
    assert by_class["net"] == 2 * cost.inter_hop_bytes
    assert set(by_class) <= {"nvlink", "net"}


@pytest.mark.parametrize(
    "algorithm,per_nic",
    [
        ("nccl_ring", lambda k, g, m, s: 2 * (k - 1) / k * s / g),
        ("hierarchical", lambda k, g, m, s: 2 * (m - 1) / m * s / g),
    ],
)
@pytest.mark.parametrize("gpus,nodes", [(2, 2), (3, 2), (4, 3), (8, 2)])
def test_every_nic_carries_its_closed_form_each_way(algorithm, per_nic, gpus, nodes):
    graph = hardware.topology(mini("dgx-a100", gpus), nodes=nodes)
    cluster = collsim.Cluster(graph)
    k = cluster.size
    count = MAX_PIECES * k * gpus
    out = cluster.all_reduce(count=count, dtype="float32", algorithm=algorithm)
    want = per_nic(k, gpus, nodes, 4 * count)
    nics = [
        (u, v)
        for u, v, role in graph.edges(data="link_class")
        if role == "net" and (isinstance(u, int) or isinstance(v, int))
    ]
    assert len(nics) == 2 * k  # one NIC per GPU, both directions
    assert {out.stats.link_bytes.get(link, 0) for link in nics} == {want}


def test_nvls_sends_and_receives_the_buffer_once_through_the_switch():
    # the closed form: exactly S per rank each way, against the ring's 2(K-1)/K·S; the
    # switch's shared legs carry a combined group's bytes once
    graph = hardware.topology("dgx-h100")
    cluster = collsim.Cluster(graph)
    count = MAX_PIECES * 8 * 16
    nvls = cluster.all_reduce(count=count, dtype="float32", algorithm="nvls")
    ring = cluster.all_reduce(count=count, dtype="float32", algorithm="nccl_ring")
    size = 4 * count
    assert nvls.stats.bytes_sent == nvls.stats.bytes_received == [size] * 8
    assert ring.stats.bytes_sent == [2 * 7 * size // 8] * 8
    up = {nvls.stats.link_bytes[(r, "nvswitch0")] for r in range(8)}
    down = {nvls.stats.link_bytes[("nvswitch0", r)] for r in range(8)}
    assert up == down == {size}


def test_nvls_pipelines_so_each_extra_piece_costs_one_step():
    # P pieces: P + 1 steps, the reduce of piece s beside the multicast of piece s-1
    cluster = collsim.Cluster(hardware.topology("dgx-h100"))
    out = cluster.all_reduce(count=2**28, dtype="float32", algorithm="nvls")
    pieces = out.schedule.n_chunks // 8
    assert pieces > 1 and out.stats.steps == pieces + 1
    both = out.schedule.steps[1]
    kinds = {(m.combine.key[0], m.combine.key[2]) for m in both}
    assert kinds == {("reduce", 1), ("multicast", 0)}


# simulated time / closed form: the rings are exact (every step as slow as its slowest
# hop, no hop shared); NVLS's pieces and the tree's fill, drain and uneven loads make
# their forms upper bounds
TIME_BOUNDS = {
    "nccl_ring": (0.999, 1.001),
    "hierarchical": (0.999, 1.001),
    "nvls": (0.93, 1.001),
    "double_tree": (0.8, 1.001),
}
TIME_CASES = [
    (p, n, a)
    for p, n in (("dgx-a100", 1), ("dgx-a100", 2), ("dgx-h100", 1))
    for a in ALGORITHMS
    if runnable(a, hardware.preset(p), n)
]


@pytest.mark.parametrize("preset,nodes,algorithm", TIME_CASES)
@pytest.mark.parametrize("size", [8, 2**20, 2**30])
def test_simulated_time_meets_the_closed_form(preset, nodes, algorithm, size):
    from collsim.collectives.api import analytical_plan

    cluster = collsim.Cluster(hardware.topology(preset, nodes=nodes))
    out = cluster.all_reduce(count=size // 4, dtype="float32", algorithm=algorithm)
    plan = analytical_plan(cluster, "all_reduce", size, algorithm)
    assert plan.protocol == out.protocol and plan.cost.steps == out.stats.steps
    low, high = TIME_BOUNDS[algorithm]
    assert low <= out.time / plan.cost.time_s <= high
