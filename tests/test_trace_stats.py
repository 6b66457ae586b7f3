"""Trace.stats() counts its records per (sender, receiver, size, path) first: the figures
must be those of adding every record one by one, in order, on every kind of run (repeated
routes, switch-combined groups, reroutes), and a size that is not a whole number must still
be added record by record (a product would round differently)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import collsim
from collsim import CountOnly, hardware, topology
from collsim.collectives.api import run_collective
from collsim.fast.packed import PACK_RECORDS, PackedTransfers
from collsim.network.trace import Trace, Transfer, TransferLog
from collsim.runtime.faults import Faults


def record_by_record(trace, n_ranks):
    """The figures of stats(), added one record at a time, in the order recorded."""
    sent, received, messages, link_bytes = [0] * n_ranks, [0] * n_ranks, [0] * n_ranks, {}
    for t in trace.store:
        src, dst, nbytes, links = t.src, t.dst, t.nbytes, t.links
        if not links or links[0][0] == src:
            sent[src] += nbytes
        if not links or links[-1][1] == dst:
            received[dst] += nbytes
        messages[src] += 1
        for link in links:
            link_bytes[link] = link_bytes.get(link, 0) + nbytes
    return sent, received, messages, link_bytes


def assert_same_as_record_by_record(trace, n_ranks):
    stats = trace.stats(n_ranks)
    sent, received, messages, link_bytes = record_by_record(trace, n_ranks)
    assert stats.bytes_sent == sent
    assert stats.bytes_received == received
    assert stats.messages_sent == messages
    assert stats.link_bytes == link_bytes
    assert list(stats.link_bytes) == list(link_bytes)  # the same order: first carried first


def _random_exchanges(rank, seed, rounds):
    rng = np.random.default_rng(seed * 1000 + rank.id)
    sizes = [int(s) for s in rng.integers(0, 4, size=rounds) * 1024]  # repeats, and zeros
    k = rank.size
    for step, size in enumerate(sizes):
        yield rank.exchange(
            sends=[((rank.id + 1) % k, CountOnly(size), step)], recvs=[((rank.id - 1) % k, step)]
        )


@given(
    k=st.integers(2, 9),
    seed=st.integers(0, 2**16),
    rounds=st.integers(1, 6),
    shape=st.sampled_from(["ring", "switch", "fully_connected"]),
)
def test_the_counts_of_random_exchanges_are_those_added_one_by_one(k, seed, rounds, shape):
    topo = {
        "ring": lambda: topology.ring(k),
        "switch": lambda: topology.switch(k),
        "fully_connected": lambda: topology.fully_connected(k),
    }[shape]()
    result = collsim.Cluster(topo).run(_random_exchanges, seed, rounds)
    assert result.trace.transfer_count == len(list(result.trace.store)) == k * rounds
    assert_same_as_record_by_record(result.trace, k)


@pytest.mark.parametrize("algorithm", ["ring", "tree", "nvls"])
def test_the_counts_of_a_per_transfer_collective_are_those_added_one_by_one(algorithm):
    # NVLS: the switch combines each step's moves, and only one member carries the shared
    # leg, so some records have part of a path or none; the per-transfer path everywhere
    cluster = collsim.Cluster(hardware.topology("dgx-h100"), fast=False)
    out = run_collective(cluster, "all_reduce", count=1 << 12, algorithm=algorithm)
    trace = out.run.trace
    assert trace.transfer_count and type(trace.store) is TransferLog
    if algorithm == "nvls":
        assert any(t.links == () or t.links[0][0] != t.src for t in trace.store)
    assert_same_as_record_by_record(trace, 8)


def test_the_counts_of_a_rerouted_run_split_the_failed_link_as_before():
    def program(rank):
        if rank.id == 0:
            yield rank.send(1, CountOnly(1 << 20))
        elif rank.id == 1:
            yield rank.recv(0)

    faults = Faults.parse(fail_link=["0-1@5us"])
    result = collsim.Cluster(topology.bidirectional_ring(4), faults=faults).run(program)
    stats = result.trace.stats(4)
    assert result.trace.faults.reroutes  # the run did take the detour
    assert stats.bytes_sent[0] == stats.bytes_received[1] == 1 << 20
    assert sum(stats.link_bytes.values()) > 1 << 20  # the detour's links carried the rest


def test_fractional_sizes_are_added_one_by_one_in_order():
    # 0.1 added ten times is 0.9999999999999999; 0.1 * 10 is 1.0: a product would differ
    trace = Trace()
    for i in range(10):
        trace.add_transfer(0, 1, i, 0.1, 0.0, 1.0, ((0, 1),), "")
    stats = trace.stats(2)
    assert stats.bytes_sent[0] == sum([0.1] * 10) == 0.9999999999999999
    assert stats.link_bytes[(0, 1)] == 0.9999999999999999
    assert stats.messages_sent == [10, 0]


def test_whole_sizes_of_any_integer_type_are_multiplied_exactly():
    trace = Trace()
    big = np.int64(3 << 40)
    for i in range(1000):
        trace.add_transfer(2, 0, i, big, 0.0, 1.0, ((2, 1), (1, 0)), "")
        trace.add_transfer(0, 2, i, 7, 0.0, 1.0, ((0, 2),), "")
    stats = trace.stats(3)
    assert stats.bytes_sent == [7000, 0, 1000 * (3 << 40)]
    assert stats.bytes_received == [1000 * (3 << 40), 0, 7000]
    assert stats.messages_sent == [1000, 0, 1000]
    assert stats.link_bytes == {(2, 1): 1000 * (3 << 40), (1, 0): 1000 * (3 << 40), (0, 2): 7000}


def test_the_reference_path_keeps_each_transfer_as_its_record_and_reads_it_back_as_is():
    out = collsim.Cluster(topology.ring(3), fast=False).all_reduce(count=6)
    trace = out.trace
    assert type(trace.store) is TransferLog and len(trace.store.records) == 12
    assert all(type(t) is Transfer for t in trace.store.records)
    # the records read back are the objects recorded, in the trace's order
    assert sorted(map(id, trace.transfers)) == sorted(map(id, trace.store.records))
    assert trace.transfers[0] is min(trace.store.records, key=lambda t: (t.end, t.start, t.src))


def test_routes_of_a_uniform_ring_share_their_alpha_and_beta_objects():
    # one float object per value: a transfer reads a warm cache line, not its route's own
    cluster = collsim.Cluster(topology.bidirectional_ring(64, "100GB/s", "5us"))
    from collsim.network import Engine, Network

    net = Network(Engine(), cluster.topology)
    routes = [net.route(r, (r + 1) % 64) for r in range(64)]
    routes += [net.route(r, (r - 1) % 64) for r in range(64)]
    assert len({id(alpha) for _, alpha, _, _ in routes}) == 1
    assert len({id(beta) for _, _, beta, _ in routes}) == 1
    assert routes[0][1] == 5e-6 and routes[0][2] == 100e9


def test_packing_keeps_every_record_its_order_and_the_counts():
    rng = np.random.default_rng(7)
    packed, plain = Trace(PackedTransfers()), Trace()
    for i in range(1000):
        src, dst = (int(x) for x in rng.integers(0, 5, size=2))
        record = (
            src,
            dst,
            i,
            int(rng.integers(0, 9)) * 512,
            float(i),
            float(i) + 0.5,
            ((src, dst),) if src != dst else (),
            f"m{i % 3}",
            None,
        )
        packed.add_transfer(*record)
        plain.add_transfer(*record)
        if i % 97 == 0:
            packed.store.pack()  # chunks of every length, and a tail left as tuples
    assert packed.store.packed and packed.store.recent
    assert list(packed.store) == list(plain.store)
    assert packed.transfer_count == plain.transfer_count == 1000
    assert packed.transfers == plain.transfers
    assert packed.stats(5) == plain.stats(5)
    assert list(packed.stats(5).link_bytes) == list(plain.stats(5).link_bytes)
    assert repr(packed) == repr(plain)


def test_a_long_run_packs_its_records_as_it_goes():
    k, rounds = 64, 2 * PACK_RECORDS // 64 + 3  # two packs and a tail
    result = collsim.Cluster(topology.ring(k)).run(_random_exchanges, 1, rounds)
    trace = result.trace
    assert len(trace.store.packed) == 2
    assert len(trace.store.recent) == k * rounds - 2 * PACK_RECORDS
    assert trace.transfer_count == k * rounds
    ends = [t.end for t in trace.transfers]
    assert ends == sorted(ends) and len(ends) == k * rounds
    assert_same_as_record_by_record(trace, k)
