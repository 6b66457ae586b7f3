"""A run's time is when its last rank ends, not the engine's last event.

Two flows that share a link at max-min shares each get a finish scheduled at half the
link's rate; when the smaller one ends, the other speeds up and is finished again
earlier, and its first finish stays in the engine as a stale event that does nothing.
The run used to report the stale event's time as its own (found by PAT, whose wrapped
chunk ranges are two messages on one link)."""

import numpy as np
import pytest

import collsim
from collsim import topology

ALPHA, BETA = 5e-6, 100e9


def two_messages_on_one_link(rank):
    if rank.id == 0:
        a = yield rank.isend(1, np.zeros(24))  # 192 B
        b = yield rank.isend(1, np.zeros(72))  # 576 B
        yield rank.wait(a, b)
    elif rank.id == 1:
        a = yield rank.irecv(0)
        b = yield rank.irecv(0)
        yield rank.wait(a, b)


@pytest.mark.parametrize("fast", [True, False])
def test_the_run_ends_when_the_last_byte_arrives(fast):
    cluster = collsim.Cluster(topology.fully_connected(2, "100GB/s", "5us"), fast=fast)
    run = cluster.run(two_messages_on_one_link)
    assert max(t.end for t in run.trace.transfers) == pytest.approx(ALPHA + 768 / BETA)
    assert run.time == pytest.approx(ALPHA + 768 / BETA, rel=1e-12)  # was α + 2·576/β


def test_a_collective_with_two_messages_per_pair_ends_with_its_transfers():
    cluster = collsim.Cluster(topology.fully_connected(8, "100GB/s", "5us"))
    out = cluster.all_gather(count=24, dtype="int64", algorithm="pat")
    assert out.time == max(t.end for t in out.trace.transfers)
