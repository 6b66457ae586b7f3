"""What goes on the wire: NCCL's protocols (latency per message, payload fraction) and the
groups a switch combines (in-switch reduction and multicast), on the hardware presets.

The oracle is the α–β closed form of one message, with the protocol's latency added to α and
its efficiency dividing β; and, for a combined group, that the switch's shared leg carries the
bytes once while the values are numpy's.
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import collsim
from collsim import hardware
from collsim.collectives.executor import run_schedule
from collsim.collectives.records import CollectiveStep
from collsim.collectives.schedule import ChunkMove, Combine, Schedule
from collsim.topology import path_alpha_beta

PROTOCOL_NAMES = sorted(hardware.PROTOCOLS)


def _one_message(graph, src, dst, nbytes, protocol):
    tag = CollectiveStep("all_reduce", "ring", 0, 0, 0, None, protocol)

    def program(rank):
        if rank.id == src:
            yield rank.send(dst, np.zeros(nbytes // 4, dtype=np.float32), tag=tag)
        elif rank.id == dst:
            yield rank.recv(src, tag=tag)

    return collsim.Cluster(graph).run(program)


@pytest.mark.parametrize("name", PROTOCOL_NAMES)
@pytest.mark.parametrize("dst, link_class", [(5, "nvlink"), (8, "net")])
def test_a_message_pays_the_protocols_latency_and_efficiency(name, dst, link_class):
    protocol = hardware.PROTOCOLS[name]
    g = hardware.topology("dgx-a100", nodes=2)
    nbytes = 1 << 20
    result = _one_message(g, 0, dst, nbytes, protocol)
    alpha, beta = path_alpha_beta(g, 0, dst)
    expected = alpha + protocol.latency_for(link_class) + nbytes / (beta * protocol.efficiency)
    assert result.time == pytest.approx(expected, rel=1e-12)
    assert result.stats.bytes_sent[0] == nbytes  # the trace counts payload, not wire bytes


def test_no_protocol_is_the_plain_alpha_beta_message():
    g = hardware.topology("dgx-h100")
    result = _one_message(g, 0, 3, 4096, None)
    alpha, beta = path_alpha_beta(g, 0, 3)
    assert result.time == pytest.approx(alpha + 4096 / beta, rel=1e-12)


def test_ll_wins_small_messages_and_simple_wins_large_ones():
    g = hardware.topology("dgx-a100")
    times = {
        size: {p: _one_message(g, 0, 1, size, hardware.PROTOCOLS[p]).time for p in PROTOCOL_NAMES}
        for size in (64, 1 << 26)
    }
    assert min(times[64], key=times[64].get) == "ll"
    assert min(times[1 << 26], key=times[1 << 26].get) == "simple"


# -- combined groups: the switch reduces or multicasts ---------------------------------


def _in_switch(k, switch, efficiency, multicast):
    """One step of in-switch reduce-scatter (every rank's chunk c summed into rank c) or of
    a multicast all-gather (rank c's chunk copied to every rank)."""
    moves = []
    for c in range(k):
        key = ("multicast" if multicast else "reduce", c)
        combine = Combine(switch, key, k - 1, efficiency)
        for r in range(k):
            if r != c:
                src, dst = (c, r) if multicast else (r, c)
                moves.append(ChunkMove(src, dst, range(c, c + 1), not multicast, combine=combine))
    moves.sort(key=lambda m: (m.src, m.dst))
    if multicast:
        return Schedule("all_gather", "nvls", k, k, (tuple(moves),), (), "own_chunk", "full")
    return Schedule("reduce_scatter", "nvls", k, k, (tuple(moves),), (), "full", "own_chunk")


def _run(graph, schedule, inputs):
    def program(rank):
        return (yield from run_schedule(rank, schedule, inputs[rank.id]))

    return collsim.Cluster(graph).run(program)


@given(
    count=st.integers(1, 64).map(lambda n: 8 * n),
    seed=st.integers(0, 2**16),
    efficiency=st.sampled_from([1.0, 0.5]),
)
def test_in_switch_reduction_sums_and_crosses_the_down_link_once(count, seed, efficiency):
    g = hardware.topology("dgx-h100")
    rng = np.random.default_rng(seed)
    inputs = [rng.integers(-4, 4, count).astype(np.float64) for _ in range(8)]
    result = _run(g, _in_switch(8, "nvswitch0", efficiency, multicast=False), inputs)
    total = np.sum(inputs, axis=0)
    share = count // 8
    for r in range(8):
        np.testing.assert_array_equal(result.returns[r], total[r * share : (r + 1) * share])
    chunk = share * 8  # bytes of one chunk
    links = result.stats.link_bytes
    for r in range(8):
        assert links[(r, "nvswitch0")] == 7 * chunk  # its chunks of the 7 other owners
        assert links[("nvswitch0", r)] == chunk  # the switch's sum, once
    assert result.stats.bytes_received == [chunk] * 8
    assert result.stats.bytes_sent == [7 * chunk] * 8
    # seven chunks leave every GPU at once: the up link is the bottleneck, at the switch's
    # reduction rate
    alpha, beta = path_alpha_beta(g, 0, 1)
    assert result.time == pytest.approx(alpha + 7 * chunk / (beta * efficiency), rel=1e-9)


def test_in_switch_multicast_copies_and_crosses_the_up_link_once():
    g = hardware.topology("dgx-h100")
    count = 64
    inputs = [np.full(count // 8, float(r)) for r in range(8)]
    result = _run(g, _in_switch(8, "nvswitch0", 1.0, multicast=True), inputs)
    expected = np.repeat(np.arange(8.0), count // 8)
    for r in range(8):
        np.testing.assert_array_equal(result.returns[r], expected)
    chunk = count // 8 * 8
    links = result.stats.link_bytes
    for r in range(8):
        assert links[(r, "nvswitch0")] == chunk  # its own chunk, once
        assert links[("nvswitch0", r)] == 7 * chunk  # every other rank's
    assert result.stats.bytes_sent == [chunk] * 8
    assert result.stats.bytes_received == [7 * chunk] * 8


def test_a_combined_group_waits_for_all_its_members():
    # rank 7 never joins: the six others' moves to rank 0 must not start without it
    g = hardware.topology("dgx-h100")
    schedule = _in_switch(8, "nvswitch0", 1.0, multicast=False)

    def program(rank):
        if rank.id != 7:
            return (yield from run_schedule(rank, schedule, np.ones(8)))

    with pytest.raises(collsim.DeadlockError):
        collsim.Cluster(g).run(program)


def test_rank_programs_and_cluster_methods_on_a_preset_use_ncclss_choice():
    g = hardware.topology("dgx-h100")

    def program(rank):
        out = yield from rank.all_reduce(np.full(64, float(rank.id)))
        return out

    result = collsim.Cluster(g).run(program)
    assert all(np.all(r == sum(range(8))) for r in result.returns)
    # auto, on a preset: NCCL's model takes its LL ring for 512 B (15.9 us against NVLS's 25)
    assert {t.tag.algorithm for t in result.trace.transfers} == {"nccl_ring"}
    assert {t.tag.protocol.name for t in result.trace.transfers} == {"ll"}
    forced = collsim.Cluster(g).all_reduce(
        count=1 << 20, dtype="float32", algorithm="ring", protocol="ll"
    )
    assert {t.tag.protocol.name for t in forced.trace.transfers} == {"ll"}
    plain = collsim.Cluster(collsim.topology.ring(4)).all_reduce(count=64, dtype="float32")
    assert {t.tag.protocol for t in plain.trace.transfers} == {None}
