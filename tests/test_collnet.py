"""CollNet Direct and Chain (collsim/collectives/collnet.py): the network's switches sum
across nodes (InfiniBand SHARP, a topology with sharp=True); values equal numpy, steps,
bytes per rank and per link class and the time equal hardware_forms' closed form, and
NCCL's model takes CollNet only where SHARP is on."""

import re

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

COLLNET = ("collnet_direct", "collnet_chain")


# every collective CollNet serves: NCCL runs Direct for all-gather and reduce-scatter too
# (its src/device/all_gather.h and reduce_scatter.h), Chain for all-reduce only
SERVED = [("all_reduce", a) for a in COLLNET] + [
    (c, "collnet_direct") for c in ("all_gather", "reduce_scatter")
]


@settings(max_examples=30, deadline=None)
@given(
    case=st.sampled_from(SERVED),
    preset=st.sampled_from(["dgx-a100", "dgx-h100"]),
    gpus=st.integers(1, 4),
    nodes=st.integers(2, 5),
    count=st.integers(0, 300),
    op=st.sampled_from(["sum", "max", "prod", "avg"]),
    seed=st.integers(0, 2**16),
)
def test_equals_numpy(case, preset, gpus, nodes, count, op, seed):
    collective, algorithm = case
    graph = hardware.topology(mini(preset, gpus), nodes=nodes, sharp=True)
    cluster = collsim.Cluster(graph)
    k = cluster.size
    if collective == "reduce_scatter":  # its input is K blocks
        count = count // k * k
    buffers = integer_inputs(k, count, "float32", op, seed)
    options = {} if collective == "all_gather" else dict(op=op)
    out = cluster.collective(collective, buffers, algorithm=algorithm, **options)
    assert out.algorithm == algorithm
    for got, want in zip(out.outputs, reference(collective, buffers, op, 0)):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("algorithm", COLLNET)
@pytest.mark.parametrize("gpus,nodes", [(1, 2), (2, 2), (3, 3), (4, 4), (8, 2), (8, 3)])
def test_steps_bytes_link_classes_and_time_equal_the_closed_form(algorithm, gpus, nodes):
    graph = hardware.topology(mini("dgx-h100", gpus), nodes=nodes, sharp=True)
    cluster = collsim.Cluster(graph)
    k = cluster.size
    count = 64 * k * gpus  # every piece of every sub-part the same size
    out = cluster.all_reduce(count=count, dtype="float32", algorithm=algorithm)
    size = 4 * count
    cost = hardware_cost(
        algorithm, nodes, gpus, size, fabric_of(graph, tuple(range(k))), out.protocol
    )
    assert out.stats.steps == cost.steps
    assert max(out.stats.bytes_sent) == pytest.approx(cost.bytes_per_rank)
    # SHARP's promise: a GPU sends its part into the network once (S/G Direct, S Chain)
    part = size / gpus if algorithm == "collnet_direct" else size
    sent_net = {r: 0 for r in range(k)}
    for (u, v), nbytes in out.stats.link_bytes.items():
        if isinstance(u, int) and graph.edges[u, v]["link_class"] == "net":
            sent_net[u] += nbytes
    heads = range(k) if algorithm == "collnet_direct" else range(0, k, gpus)
    assert [sent_net[r] for r in heads] == pytest.approx([part] * len(heads))
    by_class = class_bytes(graph, out.stats.link_bytes)
    assert by_class.get("nvlink", 0) == pytest.approx(2 * cost.intra_hop_bytes)
    assert by_class["net"] == pytest.approx(2 * cost.inter_hop_bytes)  # GPU -> rail -> GPU
    assert out.time == pytest.approx(cost.time_s, rel=1e-9)


def test_direct_sums_in_every_rail_switch_and_chain_in_rail_zero():
    graph = hardware.topology("dgx-h100", nodes=2, sharp=True)
    cluster = collsim.Cluster(graph)
    direct = cluster.all_reduce(count=4096, dtype="float32", algorithm="collnet_direct")
    chain = cluster.all_reduce(count=4096, dtype="float32", algorithm="collnet_chain")
    switches = {
        name: {m.combine.switch for _, m in out.schedule.moves() if m.combine is not None}
        for name, out in (("direct", direct), ("chain", chain))
    }
    assert switches == {"direct": {f"rail{j}" for j in range(8)}, "chain": {"rail0"}}
    # the step-through names the switch that summed
    assert "reduce in rail0" in str(direct.step(2))


def test_the_sharp_switch_halves_the_network_bytes_of_the_ring():
    """NCCL's ring through K GPUs sends 2(K-1)/K·S/G through each NIC; SHARP S/G."""
    graph = hardware.topology("dgx-a100", nodes=4, sharp=True)
    cluster = collsim.Cluster(graph)

    def nic_bytes(algorithm):
        out = cluster.all_reduce(count=2**16, dtype="float32", algorithm=algorithm)
        return sum(b for (u, v), b in out.stats.link_bytes.items() if u == 0 and v == "rail0")

    assert nic_bytes("nccl_ring") == 2 * 31 / 32 * 2**18 / 8
    assert nic_bytes("collnet_direct") == pytest.approx(2**18 / 8)


@pytest.mark.parametrize(
    "argv, names",
    [
        (["--topology", "dgx-h100", "--nodes", "2"], "--sharp"),
        (["--topology", "dgx-h100", "--sharp"], "--nodes 2"),
        (["--topology", "pcie-8gpu", "--nodes", "2", "--sharp"], "only with NVSwitch"),
        (["--topology", "ring", "--sharp"], "--sharp on --topology 'ring'"),
    ],
)
def test_refused_where_it_cannot_run(argv, names, capsys):
    code = main(["run", "all-reduce", "--algorithm", "collnet_direct", "--size", "1MiB", *argv])
    assert code == 2
    assert names in capsys.readouterr().err


def test_run_takes_it_like_every_other_algorithm(capsys):
    argv = ["run", "all-reduce", "--topology", "dgx-h100", "--nodes", "2", "--sharp"]
    assert main([*argv, "--algorithm", "collnet_chain", "--size", "1MiB"]) == 0
    printed = capsys.readouterr().out
    assert "collnet_chain" in printed
    assert main([*argv, "-a", "collnetdirect", "--size", "1MiB", "--count-only"]) == 0


def test_nccls_model_takes_collnet_only_where_sharp_is_on():
    # 16 x DGX H100 at 1 GiB: with SHARP, NCCL's model prefers CollNet to the ring
    size = 2**28
    plain = collsim.Cluster(hardware.topology("dgx-h100", nodes=16))
    sharp = collsim.Cluster(hardware.topology("dgx-h100", nodes=16, sharp=True))
    assert not plain.all_reduce(count=size, dtype="float32").algorithm.startswith("collnet")
    chosen = sharp.all_reduce(count=size, dtype="float32")
    assert chosen.algorithm.startswith("collnet"), chosen.choice.info_line()


def test_tune_shows_collnet_with_sharp(capsys):
    assert main(["tune", "all-reduce", "--topology", "dgx-h100", "--nodes", "16"]) == 0
    off = capsys.readouterr().out
    assert main(["tune", "all-reduce", "--topology", "dgx-h100", "--nodes", "16", "--sharp"]) == 0
    on = capsys.readouterr().out
    # NCCL's worked latency for CollNet Direct, 8 GPUs a node across nodes: 2 x (3.7 +
    # 7 x 0.4) + 31 = 44.0 us
    row = [line for line in on.splitlines() if "collnet_direct " in line]
    assert "needs CollNet" in off and row and "44.0/" in row[0]


@settings(max_examples=20, deadline=None)
@given(
    topology=st.sampled_from(["ring", "dgx-a100", "dgx-h100", "pcie-8gpu"]),
    nodes=st.sampled_from([None, "1", "2", "3"]),
    sharp=st.booleans(),
    algorithm=st.sampled_from([*COLLNET, "collnet", "auto", "collnet_tree"]),
)
def test_fuzz_run_with_sharp(topology, nodes, sharp, algorithm):
    """Every mix of topology, nodes, --sharp and a CollNet name runs or is refused with
    an error that names what was wrong (fuzzkit's rules)."""
    from fuzzkit import run_cli

    argv = ["run", "all-reduce", "--topology", topology, "-a", algorithm, "-s", "64KiB"]
    argv += (["--nodes", nodes] if nodes else []) + (["--sharp"] if sharp else [])
    # on a generic topology --nodes and --sharp are refused first, naming themselves
    preset = topology != "ring"
    bad = algorithm if algorithm == "collnet_tree" and preset else None
    outcome = run_cli([*argv, "--count-only"], bad=bad, timeout=60)
    assert outcome.status in (0, 2)
    if not preset and (nodes or sharp):
        assert outcome.status == 2 and ("--nodes" in outcome.stderr or "--sharp" in outcome.stderr)


def test_tune_simulates_collnet_beside_the_model_with_sharp(capsys):
    argv = ["tune", "all-reduce", "--topology", "dgx-h100", "--nodes", "2", "--sharp"]
    assert main([*argv, "--size", "1GiB", "--simulate"]) == 0
    row = capsys.readouterr().out.strip().splitlines()[-1]
    # NCCL's model weighs multi-node NVLS (NVLS with CollNet), which collsim does not run;
    # the simulated column is the fastest of what collsim runs there
    simulated = re.search(r"\d ms\s+(\S+)\s+\d", row).group(1)
    assert "1 GiB" in row and simulated in {"ring/simple", "tree/simple", "nvls_tree/simple"} | {
        "collnet_direct/simple",
        "collnet_chain/simple",
    }


# ---- CollNet Direct's all-gather and reduce-scatter: bytes, time, CLI, NCCL's choice

GATHERS = ("all_gather", "reduce_scatter")


@pytest.mark.parametrize("collective", GATHERS)
@pytest.mark.parametrize("gpus,nodes", [(1, 2), (2, 2), (3, 3), (4, 4), (8, 2), (8, 3)])
def test_gathers_steps_bytes_link_classes_and_time_equal_the_closed_form(collective, gpus, nodes):
    graph = hardware.topology(mini("dgx-h100", gpus), nodes=nodes, sharp=True)
    cluster = collsim.Cluster(graph)
    k = cluster.size
    block = 4 * 64  # bytes of one rank's block
    count = 64 * k if collective == "reduce_scatter" else 64
    out = cluster.collective(collective, count=count, dtype="float32", algorithm="collnet_direct")
    size = block * k
    fabric = fabric_of(graph, tuple(range(k)))
    cost = hardware_cost(
        "collnet_direct", nodes, gpus, size, fabric, out.protocol, collective=collective
    )
    assert out.protocol.name == "simple"  # NCCL's CollNet kernels are Simple only
    assert out.stats.steps == cost.steps == (2 if gpus > 1 else 1)
    assert max(out.stats.bytes_sent) == pytest.approx(cost.bytes_per_rank)
    # what SHARP promises: every GPU's NIC carries its block once one way and the M - 1
    # other nodes' blocks of its rail the other way (multicast copies, or sums, in the switch)
    up, down = {r: 0 for r in range(k)}, {r: 0 for r in range(k)}
    for (u, v), nbytes in out.stats.link_bytes.items():
        if graph.edges[u, v]["link_class"] == "net":
            if isinstance(u, int):
                up[u] += nbytes
            if isinstance(v, int):
                down[v] += nbytes
    one, others = [block] * k, [(nodes - 1) * block] * k
    gathering = collective == "all_gather"
    assert list(up.values()) == pytest.approx(one if gathering else others)
    assert list(down.values()) == pytest.approx(others if gathering else one)
    by_class = class_bytes(graph, out.stats.link_bytes)
    assert by_class.get("nvlink", 0) == pytest.approx(2 * cost.intra_hop_bytes)
    assert by_class["net"] == pytest.approx(2 * cost.inter_hop_bytes)
    assert out.time == pytest.approx(cost.time_s, rel=1e-9)


def test_gathers_against_the_ring_halve_the_network_steps():
    """A ring all-gather over 2 x 8 GPUs takes K - 1 = 15 steps; CollNet Direct's two (one
    through the rails' switches, one over NVLink), for the same bytes into every rank."""
    graph = hardware.topology("dgx-a100", nodes=2, sharp=True)
    cluster = collsim.Cluster(graph)
    ring = cluster.all_gather(count=1024, dtype="float32", algorithm="ring")
    collnet = cluster.all_gather(count=1024, dtype="float32", algorithm="collnet_direct")
    assert (ring.stats.steps, collnet.stats.steps) == (15, 2)
    assert collnet.stats.bytes_received == ring.stats.bytes_received  # (K-1) blocks each


@pytest.mark.parametrize("collective", ["all-gather", "reduce-scatter"])
def test_run_count_only_analytical_and_step_through_the_cli(collective, capsys):
    argv = ["--topology", "dgx-h100", "--nodes", "2", "--sharp", "-a", "collnet_direct"]
    assert main(["run", collective, *argv, "--size", "1MiB"]) == 0
    row = capsys.readouterr().out.strip().splitlines()[-1].split()
    assert row[4] == "2" and row[-1] == "0"  # 2 steps, no element wrong
    assert main(["run", collective, *argv, "--size", "1MiB", "--count-only"]) == 0
    counted = capsys.readouterr().out.strip().splitlines()[-1].split()
    assert main(["run", collective, *argv, "--size", "1MiB", "--analytical"]) == 0
    closed = capsys.readouterr().out.strip().splitlines()[-1].split()
    assert counted[4] == closed[4] == "2" and counted[5] == closed[5] == row[5]  # same time
    assert main(["step", collective, *argv, "--count", "16", "--no-pause"]) == 0
    shown = capsys.readouterr().out
    switch = "copy in rail0" if collective == "all-gather" else "reduce in rail0"
    assert switch in shown and "SHARP" in shown and "in the node" in shown


@pytest.mark.parametrize(
    "argv, names",
    [
        (["--topology", "dgx-h100", "--nodes", "2"], "--sharp"),
        (["--topology", "dgx-h100", "--sharp"], "--nodes 2"),
        (["--topology", "pcie-8gpu", "--nodes", "2", "--sharp"], "only with NVSwitch"),
        (["--topology", "dgx-h100", "--nodes", "2", "--sharp", "-a", "collnet_chain"], "chain"),
    ],
)
def test_gathers_refused_where_they_cannot_run(argv, names, capsys):
    algorithm = [] if "-a" in argv else ["-a", "collnet_direct"]
    for mode in ([], ["--analytical"]):
        assert main(["run", "all-gather", *algorithm, "--size", "1MiB", *argv, *mode]) == 2
        err = capsys.readouterr().err
        assert names in err
        if not algorithm:
            continue
        # what to run instead is an all-gather's algorithm, not an all-reduce's
        assert "'ring'" in err and not re.search("nccl_ring|double_tree|nvls|collnet_chain", err)


@pytest.mark.parametrize("collective", GATHERS)
def test_nccls_choice_runs_collnet_direct_for_the_gathers(collective):
    """16 x DGX H100 with SHARP: NCCL's model takes CollNet Direct for a small all-gather or
    reduce-scatter (44 us against the ring's 159 us), and the call runs it, right."""
    cluster = collsim.Cluster(hardware.topology("dgx-h100", nodes=16, sharp=True), choice="nccl")
    k = cluster.size
    count = 4 * k if collective == "reduce_scatter" else 4
    buffers = integer_inputs(k, count, "float32", "sum", 7)
    out = cluster.collective(collective, buffers, algorithm="auto")
    assert (out.algorithm, out.protocol.name) == ("collnet_direct", "simple")
    for got, want in zip(out.outputs, reference(collective, buffers, "sum", 0)):
        np.testing.assert_array_equal(got, want)
    plain = collsim.Cluster(hardware.topology("dgx-h100", nodes=16), choice="nccl")
    assert plain.collective(collective, count=count, dtype="float32").algorithm != out.algorithm


def test_nccls_model_keeps_nvls_gathers_inside_one_node(capsys):
    """NCCL's enqueue.cc: NVLS all-gather and reduce-scatter run on one node only, so
    across nodes its model never weighs them, SHARP or not."""
    argv = ["tune", "all-gather", "--topology", "dgx-h100", "--nodes", "4", "--sharp"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert (
        "off: nvls/simple: NVLS all-gather and reduce-scatter run inside one node only" in printed
    )
    assert "collnet_direct/simple" in printed.splitlines()[-1]  # 1 MiB: what NCCL chooses


def test_nccls_choice_names_what_its_model_prefers_and_collsim_does_not_run():
    """NVLS with SHARP across nodes (the all-reduce NCCL's model takes for 64 MiB on 2 x
    DGX H100 with SHARP) has no schedule in collsim: the choice says so and takes the next."""
    cluster = collsim.Cluster(hardware.topology("dgx-h100", nodes=2, sharp=True), choice="nccl")
    out = cluster.all_reduce(count=2**24, dtype="float32")
    line = out.choice.info_line()
    assert out.algorithm == "nvls_tree"
    assert "NCCL's model prefers nvls/simple, which collsim does not run across nodes" in line
    small = cluster.all_reduce(count=2, dtype="float32")  # the model's own pick runs: no note
    assert "prefers" not in small.choice.info_line()


@pytest.mark.parametrize("collective", GATHERS)
def test_collnet_runs_with_simple_only(collective):
    """NCCL has CollNet kernels for Simple only, whoever chooses the protocol: collsim's
    closed forms would take LL or LL128 for these sizes if they were allowed to."""
    graph = hardware.topology("dgx-h100", nodes=2, sharp=True)
    for choice in ("nccl", "closed_form", "simulated"):
        cluster = collsim.Cluster(graph, choice=choice)
        out = cluster.collective(
            collective, count=2**16, dtype="float32", algorithm="collnet_direct"
        )
        assert out.protocol.name == "simple", choice
    ring = cluster.collective(collective, count=2**16, dtype="float32", algorithm="ring")
    assert ring.protocol.name != "simple"


def test_nccls_model_takes_collnet_direct_up_to_8_gpus_a_node():
    """NCCL's enqueue.cc: CollNet Direct only with up to 8 local GPUs (its arity); an
    NVSwitch node of 16 GPUs (an HGX-2-sized one) is past it."""
    from collsim.collectives.nccl_model import graph_of, tune_table

    machine = mini("dgx-h100", 16)

    def direct(gpus):
        table = tune_table(graph_of(machine, 4, gpus, collnet=True), "all_gather")
        return next(e for e in table if (e.algorithm, e.protocol) == ("collnet_direct", "simple"))

    assert direct(8).disabled == ""
    assert direct(16).disabled == "CollNet Direct runs with at most 8 GPUs a node"


def test_tunes_choice_table_keeps_its_columns_with_the_longest_name():
    # "collnet_direct/simple" is the longest pair NCCL's model names: its row's time still
    # ends where the header's 'predicted' ends
    import contextlib
    import io

    from collsim.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        argv = ["tune", "all-gather", "--topology", "dgx-h100", "--nodes", "16", "--sharp"]
        assert main([*argv, "--size", "1MiB"]) == 0
    head, row = out.getvalue().splitlines()[-2:]
    assert "collnet_direct/simple" in row
    assert len(row.rstrip()) == len(head.rstrip())
    assert row.split("collnet_direct/simple")[1].startswith("  ")
