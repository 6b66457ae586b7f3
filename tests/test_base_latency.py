"""NCCL's per-call base latency in simulated times: on a machine (a hardware preset), a call
of an algorithm NCCL runs pays its cost model's baseLat once, carried by the first step's
messages and named in the trace; plain α-β topologies and NCCL's 0-latency algorithms
(NVLS, NVLS-Tree, CollNet) keep their times."""

import json

import pytest
from test_algorithms_hw import mini

import collsim
from collsim import hardware, topology
from collsim.cli import main
from collsim.collectives.api import analytical

# NCCL's src/graph/tuning.cc, by hand: a one-node ring all-reduce of 8 GPUs is baseLat +
# 14 steps, each GPU -> NVSwitch -> GPU (two 0.25 us links, the preset's) plus the
# protocol's hwLat on NVLink: LL 6.6 + 14 x 1.1, LL128 14.0 + 14 x 2.4, Simple 8.4 + 14 x 3.9
RING_8B_US = {"ll": 22.0, "ll128": 47.6, "simple": 63.0}


@pytest.mark.parametrize("protocol", sorted(RING_8B_US))
@pytest.mark.parametrize("fast", [True, False])
def test_a_tiny_ring_all_reduce_pays_the_base_latency_once(protocol, fast):
    cluster = collsim.Cluster(hardware.topology("dgx-a100"), fast=fast)
    out = cluster.all_reduce(count=2, dtype="float32", algorithm="nccl_ring", protocol=protocol)
    assert out.time * 1e6 == pytest.approx(RING_8B_US[protocol], abs=1e-3)


def test_the_trace_names_it_on_the_first_step_only(tmp_path):
    trace = tmp_path / "t.json"
    argv = ["run", "all-reduce", "--topology", "dgx-a100", "-s", "8", "-a", "nccl_ring"]
    assert main([*argv, "--protocol", "ll", "--trace", str(trace)]) == 0
    events = json.loads(trace.read_text())
    events = events["traceEvents"] if isinstance(events, dict) else events
    named = {
        e["args"]["step"]: e["args"].get("nccl_base_latency_us")
        for e in events
        if "step" in e.get("args", {})
    }
    assert named[1] == 6.6 and {s: v for s, v in named.items() if s > 1 and v} == {}


@pytest.mark.parametrize(
    "graph, collective, algorithm, base_us",
    [
        (lambda: hardware.topology("dgx-a100", nodes=2), "all_reduce", "double_tree", 8.4),
        (lambda: hardware.topology("dgx-a100"), "all_gather", "ring", 8.4),
        (lambda: hardware.topology(mini("dgx-a100", 1), nodes=4), "all_gather", "pat", 8.0),
        (lambda: hardware.topology("dgx-h100"), "all_reduce", "nvls", 0.0),
        (lambda: hardware.topology("dgx-h100", nodes=2), "all_reduce", "nvls_tree", 0.0),
        (
            lambda: hardware.topology("dgx-h100", nodes=2, sharp=True),
            "all_reduce",
            "collnet_direct",
            0.0,
        ),
        (lambda: hardware.topology("dgx-a100"), "all_reduce", "halving_doubling", 0.0),
    ],
)
def test_each_algorithm_pays_nccls_own_base_latency(graph, collective, algorithm, base_us):
    cluster = collsim.Cluster(graph())
    out = cluster.collective(
        collective, count=1024, dtype="float32", algorithm=algorithm, protocol="simple"
    )
    first = {t.tag.protocol.launch for t in out.trace.transfers if t.tag.step == 0}
    later = {t.tag.protocol.launch for t in out.trace.transfers if t.tag.step > 0}
    assert len(first) == 1 and first.pop() == pytest.approx(base_us * 1e-6)
    assert later <= {0.0}


def test_a_plain_topology_keeps_its_times_even_with_a_protocol():
    cluster = collsim.Cluster(topology.ring(8, "100GB/s", "5us"), protocol="simple")
    out = cluster.all_reduce(count=1024, dtype="float32")
    assert {t.tag.protocol.launch for t in out.trace.transfers} == {0.0}
    # 2(K-1) steps of α + S/(K·β): the links' own α-β, nothing per call
    assert out.time == pytest.approx(14 * (5e-6 + 4096 / 8 / 100e9), rel=1e-12)


def test_the_closed_forms_count_it_once_as_the_run_does():
    cluster = collsim.Cluster(hardware.topology("dgx-a100"))
    for protocol in ("ll", "simple"):
        plan = analytical(cluster, "all_reduce", 8, algorithm="nccl_ring", protocol=protocol)
        out = cluster.all_reduce(count=2, dtype="float32", algorithm="nccl_ring", protocol=protocol)
        assert plan.time_s == pytest.approx(out.time, rel=1e-4)  # the launch is 30 % of it
