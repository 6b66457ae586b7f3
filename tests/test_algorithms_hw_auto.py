"""``algorithm="auto"``: the (algorithm, protocol) with the least closed-form time, what it
tells the user (as NCCL_DEBUG=INFO does), and the protocol in every step's tag."""

import pytest
from fuzzkit import check_api, run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

import collsim
from collsim import hardware, topology
from collsim.collectives.auto import choose
from collsim.collectives.nccl_choice import base_latency
from collsim.errors import ConfigError

A100X2 = hardware.topology("dgx-a100", nodes=2)
RANKS = tuple(range(16))


def test_auto_picks_latency_bound_for_8_bytes_and_bandwidth_for_1_gib_on_dgx_a100x2():
    small = choose(A100X2, RANKS, "all_reduce", 8, "auto")
    large = choose(A100X2, RANKS, "all_reduce", 2**30, "auto")
    # 8 B: LL (the least latency per hop) on an algorithm of few steps, not the ring's 30
    assert small.protocol.name == "ll"
    assert small.algorithm in ("double_tree", "hierarchical")
    steps = {c.algorithm: c for c in small.candidates}
    assert steps["nccl_ring"].time_s > 4 * small.time_s
    # 1 GiB: Simple (all of the bandwidth) on the ring laid on all 8 rails
    assert (large.algorithm, large.protocol.name) == ("nccl_ring", "simple")
    assert large.candidates[0].time_s == large.time_s
    assert [c.time_s for c in large.candidates] == sorted(c.time_s for c in large.candidates)


def test_auto_takes_the_tree_across_four_nodes_and_nvls_inside_an_h100():
    a100x4 = hardware.topology("dgx-a100", nodes=4)
    small = choose(a100x4, tuple(range(32)), "all_reduce", 8, "auto")
    assert (small.algorithm, small.protocol.name) == ("double_tree", "ll")
    h100 = hardware.topology("dgx-h100")
    large = choose(h100, tuple(range(8)), "all_reduce", 2**30, "auto")
    assert (large.algorithm, large.protocol.name) == ("nvls", "simple")


def test_a_forced_protocol_is_kept_and_nvls_runs_with_simple_only():
    h100 = hardware.topology("dgx-h100")
    ll = hardware.PROTOCOLS["ll"]
    forced = choose(h100, tuple(range(8)), "all_reduce", 2**20, ll)
    assert forced.protocol == ll and forced.algorithm != "nvls"
    assert {c.protocol for c in forced.candidates} == {ll}


@pytest.mark.parametrize("choice", ["nccl", "closed_form", "simulated"])
def test_the_choice_runs_and_every_step_carries_its_protocol(choice):
    cluster = collsim.Cluster(A100X2, choice=choice)
    out = cluster.all_reduce(count=2, dtype="float32")  # the default on a preset: auto
    assert out.choice is not None and out.choice.size == 8 and out.choice.source == choice
    assert (out.algorithm, out.protocol) == (out.choice.algorithm, out.choice.protocol)
    chosen = out.choice.protocol
    later = {t.tag.protocol for t in out.trace.transfers if t.tag.step > 0}
    first = {t.tag.protocol for t in out.trace.transfers if t.tag.step == 0}
    assert later == {chosen}  # the first step's also carries NCCL's base latency, once
    assert first == {chosen.with_launch(base_latency("all_reduce", out.algorithm, chosen))}
    if choice == "nccl":  # NCCL's constants, not the simulated links: close, not equal
        assert out.time == pytest.approx(out.choice.time_s, rel=0.25)
    else:  # the closed forms are collsim's own; a simulated choice is the run itself
        assert out.time == pytest.approx(out.choice.time_s, rel=1e-3)


def test_the_default_choice_is_nccls_and_differs_from_the_closed_forms_where_nccl_would():
    """NCCL never runs the 2-D hierarchical all-reduce; collsim's closed forms favour it on
    two DGX A100 for a 4 KiB call, NCCL's model the double binary tree."""
    out = collsim.Cluster(A100X2).all_reduce(count=1024, dtype="float32")
    assert (out.algorithm, out.protocol.name, out.choice.source) == ("double_tree", "ll", "nccl")
    mine = collsim.Cluster(A100X2, choice="closed_form").all_reduce(count=1024, dtype="float32")
    assert mine.algorithm == "hierarchical"
    with pytest.raises(collsim.ConfigError, match="did you mean 'nccl'"):
        collsim.Cluster(A100X2, choice="ncl")


def test_generic_topologies_keep_their_default_and_no_protocol():
    cluster = collsim.Cluster(topology.hierarchical(2, 4))
    out = cluster.all_reduce(count=64)
    assert (out.algorithm, out.choice, out.protocol) == ("ring", None, None)
    assert {t.tag.protocol for t in out.trace.transfers} == {None}
    auto = cluster.all_reduce(count=64, algorithm="auto")  # asked for: chosen, no protocol
    assert auto.choice is not None and auto.protocol is None
    assert auto.algorithm == auto.choice.algorithm


@settings(max_examples=10)
@given(size_log2=st.integers(3, 30), nodes=st.integers(1, 4))
def test_the_choice_is_the_least_of_its_candidates(size_log2, nodes):
    graph = hardware.topology("dgx-h100", nodes=nodes)
    choice = choose(graph, tuple(range(8 * nodes)), "all_reduce", 2**size_log2, "auto")
    assert choice.time_s == min(c.time_s for c in choice.candidates)
    assert (choice.algorithm == "nvls") <= (nodes == 1)  # NVLS only inside one node
    line = choice.info_line()
    assert line.startswith("# NCCL INFO AllReduce ") and f"algorithm {choice.algorithm}" in line


def test_collsim_run_says_what_auto_chose_as_nccl_debug_info_does():
    argv = [
        "run",
        "all-reduce",
        "--topology",
        "dgx-a100",
        "--nodes",
        "2",
        "--count-only",
        "--min-bytes",
        "1KiB",
        "--max-bytes",
        "1GiB",
        "--factor",
        "32",
    ]
    out = run_cli(argv)
    assert out.status == 0, out.stderr
    info = [line for line in out.stdout.splitlines() if line.startswith("# NCCL INFO")]
    assert info[0].startswith("# NCCL INFO AllReduce 1 KiB: algorithm ")
    assert "protocol ll," in info[0]
    assert info[-1].startswith("# NCCL INFO AllReduce 1 GiB: algorithm nccl_ring protocol simple")
    rows = [line for line in out.stdout.splitlines() if not line.startswith("#")]
    assert len(rows) == 5 and 1 < len(info) < 5  # a line where the choice changes only


def test_collsim_run_analytical_and_step_name_the_choice():
    out = run_cli(
        ["run", "all-reduce", "--topology", "dgx-h100", "--analytical", "--size", "1GiB", "--json"]
    )
    assert out.status == 0 and '"algorithm": "nvls"' in out.stdout
    step = run_cli(
        ["step", "all-reduce", "--topology", "dgx-h100", "--no-pause", "--choice", "closed-form"]
    )
    assert step.status == 0 and step.stdout.startswith("# NCCL INFO AllReduce 64 B")
    assert "reduce in nvswitch0" in step.stdout  # the switch sums, the step view says so


@pytest.mark.parametrize(
    "argv,bad",
    [
        (["--topology", "dgx-a100", "--algorithm", "nvls"], "nvls"),
        (["--topology", "dgx-a100", "--algorithm", "nvlss"], "nvlss"),
        (["--topology", "hierarchical", "--ranks", "8", "--algorithm", "nvls"], "nvls"),
        (["--topology", "dgx-h100", "--algorithm", "auto", "--protocol", "ll64"], "ll64"),
    ],
)
def test_collsim_run_refuses_what_cannot_run_naming_it(argv, bad):
    out = run_cli(["run", "all-reduce", "--size", "1KiB", *argv], bad=bad)
    assert out.status == 2


def test_build_refuses_auto_without_a_call():
    from collsim.collectives.registry import build

    with pytest.raises(ConfigError, match="'auto' is chosen per call"):
        build("all_reduce", "auto", 8)


# names as a user types them (repr() escapes control characters and backslashes)
PRINTABLE = st.characters(whitelist_categories=("L", "N"), whitelist_characters="-_ ;.'")
NAMES = [
    "nccl_ring",
    "double_tree",
    "hierarchical",
    "nvls",
    "auto",
    "ring",
    "tree",
    "NVLS",
    "dbtree",
    "2d",
    "nccl-ring",
    "nvl",
    "",
    "ring;tree",
    "\u00e9t\u00e9",
    "1e300",
]


@settings(max_examples=20)
@given(
    algorithm=st.sampled_from(NAMES) | st.text(PRINTABLE, max_size=8),
    where=st.sampled_from(
        [
            ["--topology", "dgx-h100"],
            ["--topology", "dgx-a100", "--nodes", "2"],
            ["--topology", "pcie-8gpu"],
            ["--topology", "switch"],
            ["--topology", "hierarchical", "--ranks", "4"],
        ]
    ),
    command=st.sampled_from(["run", "step"]),
)
def test_algorithm_flag_fuzz(algorithm, where, command):
    size = ["--size", "256"] if command == "run" else ["--count", "16"]
    argv = [command, "all-reduce", "--algorithm", algorithm, *where, *size]
    if command == "step":
        argv.append("--no-pause")
    run_cli(argv, bad=algorithm, timeout=20)


@settings(max_examples=20)
@given(
    protocol=st.sampled_from(["ll64", "simpel", "", "5", "LL", "auto", "simple"])
    | st.text(PRINTABLE, max_size=6)
)
def test_protocol_argument_fuzz(protocol):
    cluster = collsim.Cluster(hardware.topology("dgx-h100"))
    check_api(cluster.collective, "all_reduce", count=8, protocol=protocol, bad=protocol)
