"""A rerouted transfer's bytes are charged to the links that carried them: what it moved
before the failure to the path it left, the rest to its detour (Trace.stats)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import collsim
from collsim.runtime.faults import Faults


def _send(k, nbytes, fail_at, fail="0-1"):
    def program(rank):
        if rank.id == 0:
            yield rank.send(1, np.zeros(nbytes // 8))
        elif rank.id == 1:
            yield rank.recv(0)

    graph = collsim.topology.bidirectional_ring(k, bandwidth="1GB/s", latency=0)
    faults = Faults.parse(fail_link=[f"{fail}@{fail_at}s"])
    return collsim.Cluster(graph, faults=faults).run(program)


@given(k=st.integers(3, 8), fraction=st.sampled_from([0.125, 0.25, 0.5, 0.75]))
def test_bytes_before_the_failure_stay_on_the_failed_link_and_the_rest_take_the_detour(k, fraction):
    nbytes = 1 << 20
    result = _send(k, nbytes, fail_at=fraction * nbytes / 1e9)
    links = result.stats.link_bytes
    assert links[(0, 1)] == pytest.approx(fraction * nbytes)
    detour = [(0, k - 1)] + [(r, r - 1) for r in range(k - 1, 1, -1)]
    for link in detour:  # the other way round the ring, for the rest
        assert links[link] == pytest.approx((1 - fraction) * nbytes)
    assert sum(links.values()) == pytest.approx(nbytes * (fraction + (1 - fraction) * (k - 1)))
    assert result.stats.bytes_sent[0] == nbytes == result.stats.bytes_received[1]


def test_a_failure_after_the_transfer_moves_nothing():
    result = _send(4, 1 << 20, fail_at=1.0)
    assert result.stats.link_bytes == {(0, 1): 1 << 20}


def test_a_transfer_rerouted_twice_charges_each_leg_what_it_carried():
    nbytes = 1 << 20
    t = nbytes / 1e9  # seconds the message takes alone

    def program(rank):
        if rank.id == 0:
            yield rank.send(1, np.zeros(nbytes // 8))
        elif rank.id == 1:
            yield rank.recv(0)

    graph = collsim.topology.fully_connected(4, bandwidth="1GB/s", latency=0)
    faults = Faults.parse(fail_link=[f"0-1@{t / 4}s", f"2-1@{t / 2}s"])
    result = collsim.Cluster(graph, faults=faults).run(program)
    links = result.stats.link_bytes
    legs = [r.old_links for r in result.trace.faults.reroutes]
    assert legs[0] == ((0, 1),)  # the direct link, then a detour through a third rank
    second = legs[1]
    final = result.trace.transfers[0].links
    assert links[(0, 1)] == pytest.approx(nbytes / 4)
    for link in second:
        assert links[link] == pytest.approx(nbytes / 4)
    for link in final:
        assert links[link] == pytest.approx(nbytes / 2)
