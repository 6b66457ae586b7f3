"""The shapes the topology-aware algorithms promise: NCCL's rings on rails, one channel
per NIC each way; the double binary tree's two trees; the 2-D all-reduce's rails; NVLS's
combined groups; and their refusals."""

import dataclasses

import pytest

import collsim
from collsim import hardware
from collsim.collectives.double_tree import gpu_trees, node_trees
from collsim.collectives.nccl_ring import channel_rings
from collsim.collectives.nvls import NvlsSwitch
from collsim.collectives.registry import algorithms_for, build
from collsim.errors import ConfigError
from collsim.hardware.layout import NodeLayout, node_layout
from collsim.topology import route


def layout_of(nodes, gpus):
    return NodeLayout(tuple(tuple(range(n * gpus, (n + 1) * gpus)) for n in range(nodes)))


SHAPES = [(m, g) for m in (1, 2, 3, 4, 5) for g in (1, 2, 3, 4, 8)]


@pytest.mark.parametrize("nodes,gpus", SHAPES)
def test_each_nic_carries_exactly_one_channel_each_way(nodes, gpus):
    rings = channel_rings(layout_of(nodes, gpus))
    k = nodes * gpus
    assert len(rings) == (gpus if nodes > 1 else 1)
    assert all(sorted(ring) == list(range(k)) for ring in rings)  # each a ring of all K
    if nodes == 1:
        assert rings == (tuple(range(k)),)  # the textbook ring
        return
    leaving, entering = [0] * k, [0] * k
    for ring in rings:
        for a, b in zip(ring, ring[1:] + ring[:1]):
            if a // gpus != b // gpus:  # a hop between nodes, through a's and b's NICs
                leaving[a] += 1
                entering[b] += 1
    assert leaving == entering == [1] * k


@pytest.mark.parametrize("nodes,gpus", SHAPES)
def test_every_channel_crosses_on_the_rail_of_the_gpu_it_leaves(nodes, gpus):
    crossings = off_rail = 0
    for ring in channel_rings(layout_of(nodes, gpus)):
        for a, b in zip(ring, ring[1:] + ring[:1]):
            if a // gpus != b // gpus:
                crossings += 1
                off_rail += a % gpus != b % gpus
    assert crossings == (gpus * nodes if nodes > 1 else 0)
    # the one forced exception: G = 2 and M odd, where one hop per channel back to node 0
    # must cross rails (2-colouring an odd cycle); still one channel per NIC (above)
    assert off_rail == (gpus if gpus == 2 and nodes % 2 == 1 and nodes > 1 else 0)


@pytest.mark.parametrize("nodes", [2, 3, 4])
def test_on_dgx_a100_every_inter_node_move_goes_through_its_own_rail_switch(nodes):
    graph = hardware.topology("dgx-a100", nodes=nodes)
    layout = node_layout(graph, range(8 * nodes))
    schedule = build("all_reduce", "nccl_ring", 8 * nodes, layout=layout)
    for _, move in schedule.moves():
        local = graph.nodes[move.src]["local"]
        if graph.nodes[move.src]["node"] != graph.nodes[move.dst]["node"]:
            assert route(graph, move.src, move.dst) == [
                (move.src, f"rail{local}"),
                (f"rail{local}", move.dst),
            ]
        else:
            assert route(graph, move.src, move.dst)[0] == (move.src, f"nvswitch{move.src // 8}")


@pytest.mark.parametrize("nodes", [1, 2, 3, 4, 5, 6, 7, 8, 13, 16])
def test_two_trees_and_each_node_has_children_in_at_most_one(nodes):
    trees = node_trees(nodes)
    assert len(trees) == 2
    interior = [[n for n in range(nodes) if n in tree] for tree in trees]  # has a child
    for tree in trees:  # a tree: one root, every node reaches it
        assert sum(p is None for p in tree) == 1
        for n in range(nodes):
            seen = set()
            while tree[n] is not None:
                assert n not in seen
                seen.add(n)
                n = tree[n]
    both = set(interior[0]) & set(interior[1])
    # mirrored (M even) trees share no interior node; shifted (M odd) ones share node 0
    # alone, tree 0's root, which has a single child there
    assert both == (set() if nodes % 2 == 0 or nodes == 1 else {0})
    if both:
        assert sum(p == 0 for p in trees[0]) == 1
    assert all(sum(p == n for p in t) <= 2 for t in trees for n in range(nodes))  # binary


@pytest.mark.parametrize("nodes,gpus", [(1, 4), (2, 4), (3, 2), (4, 8), (5, 3)])
def test_each_tree_moves_half_the_buffer_up_and_down_every_edge(nodes, gpus):
    layout = layout_of(nodes, gpus)
    pieces = 4
    schedule = build("all_reduce", "double_tree", nodes * gpus, layout=layout, pieces=pieces)
    assert schedule.n_chunks == 2 * pieces
    for t, parent in enumerate(gpu_trees(layout)):
        half = set(range(t * pieces, (t + 1) * pieces))
        for child, up in enumerate(parent):
            if up is None:
                continue
            going_up = [
                c
                for _, m in schedule.moves()
                if (m.src, m.dst) == (child, up)
                for c in m.chunks
                if c in half
            ]
            going_down = [
                c
                for _, m in schedule.moves()
                if (m.src, m.dst) == (up, child)
                for c in m.chunks
                if c in half
            ]
            assert sorted(going_up) == sorted(going_down) == sorted(half)
            if up // gpus != child // gpus:  # between nodes: the heads, on one rail
                assert up % gpus == child % gpus == (0 if t == 0 else gpus // 2)


@pytest.mark.parametrize("nodes,gpus", [(1, 4), (2, 2), (3, 4)])
def test_hierarchical_crosses_nodes_only_on_rails(nodes, gpus):
    schedule = build("all_reduce", "hierarchical", nodes * gpus, layout=layout_of(nodes, gpus))
    assert schedule.n_steps == 2 * (gpus - 1) + 2 * (nodes - 1)
    for _, m in schedule.moves():
        if m.src // gpus != m.dst // gpus:
            assert m.src % gpus == m.dst % gpus


def test_nvls_groups_its_moves_for_the_switch():
    switch = NvlsSwitch("nvswitch0", 0.8)
    schedule = build("all_reduce", "nvls", 8, layout=layout_of(1, 8), switch=switch, pieces=4)
    assert schedule.n_steps == 5
    for index, step in enumerate(schedule.steps):
        groups = {}
        for m in step:
            groups.setdefault(m.combine, []).append(m)
        assert len(groups) == (8 if index in (0, 4) else 16)
        for combine, moves in groups.items():
            assert combine.members == len(moves) == 7 and combine.switch == "nvswitch0"
            ends = {m.dst for m in moves} if combine.key[0] == "reduce" else {m.src for m in moves}
            assert len(ends) == 1 and all(m.reduce == (combine.key[0] == "reduce") for m in moves)


def test_nvls_refuses_a_switch_that_does_not_reduce():
    cluster = collsim.Cluster(hardware.topology("dgx-a100"))
    with pytest.raises(ConfigError, match="'dgx-a100'.*reduces=True.*dgx-h100.*'nccl_ring'"):
        cluster.all_reduce(count=8, algorithm="nvls")


def test_nvls_refuses_a_group_that_spans_nodes():
    cluster = collsim.Cluster(hardware.topology("dgx-h100", nodes=2))
    with pytest.raises(ConfigError, match=r"spanning nodes \[0, 1\].*one node"):
        cluster.all_reduce(count=8, algorithm="nvls", group=[0, 8])
    out = cluster.all_reduce(count=64, algorithm="nvls", group=list(range(8, 16)))
    assert out.algorithm == "nvls"  # a group inside node 1 runs


def test_unequal_nodes_refuse_the_2d_algorithms_and_keep_one_ring():
    cluster = collsim.Cluster(hardware.topology("dgx-a100", nodes=2))
    group = [0, 1, 2, 8]  # three ranks on node 0, one on node 1
    for algorithm in ("hierarchical", "double_tree"):
        with pytest.raises(ConfigError, match=rf"{algorithm}.*\[3, 1\] ranks per node"):
            cluster.all_reduce(count=8, algorithm=algorithm, group=group)
    layout = node_layout(cluster.topology, group)
    assert algorithms_for("all_reduce", 4, layout)[-1] == "nccl_ring"
    assert cluster.all_reduce(count=8, algorithm="nccl_ring", group=group).stats.steps == 6


def test_generic_topologies_offer_and_build_what_they_did():
    assert algorithms_for("all_reduce", 8) == (
        "ring",
        "tree",
        "halving_doubling",
        "naive",
        "one_shot",
        "two_shot",
    )
    assert build("all_reduce", "ring", 4) == build("all_reduce", "ring", 4, layout=layout_of(2, 2))


def test_small_machine_file_shapes_build():
    # a 3-GPU NVSwitch node: the rotation's exception for G | M - 1 (h = 1 on the last)
    machine = hardware.preset("dgx-a100")
    small = dataclasses.replace(
        machine, name="three", gpus_per_node=3, inter=dataclasses.replace(machine.inter, nics=3)
    )
    graph = hardware.topology(small, nodes=4)  # M - 1 = 3: G divides it
    rings = channel_rings(node_layout(graph, range(12)))
    assert all(
        a % 3 == b % 3
        for ring in rings
        for a, b in zip(ring, ring[1:] + ring[:1])
        if a // 3 != b // 3
    )


def test_a_step_may_join_a_pair_twice_only_with_different_chunks():
    # NCCL's channels (and the two trees) are separate connections: several moves of one
    # step may join a pair, each its own message, but never with the same chunk
    from collsim.collectives.schedule import ChunkMove, Schedule

    two = (ChunkMove(0, 1, range(0, 1), True), ChunkMove(0, 1, range(1, 2), True))
    Schedule("all_reduce", "two_channels", 2, 2, (two,))
    same = (ChunkMove(0, 1, range(0, 2), True), ChunkMove(0, 1, range(1, 2), True))
    with pytest.raises(ConfigError, match="step 1 sends one chunk twice between one pair"):
        Schedule("all_reduce", "broken", 2, 2, (same,))
