"""A message in flight is one object, a Transfer: the network's Flow with both posts copied
in.  It sets Flow's fields itself (no call per message), so none may be forgotten, and its
arrival must record and complete exactly what the posts asked."""

import numpy as np
import pytest

import collsim
from collsim import CountOnly, topology
from collsim.network import Engine, Network
from collsim.network.flows import Flow
from collsim.network.trace import Trace
from collsim.runtime.matching import Mailboxes, Transfer
from collsim.runtime.ops import Handle


def _transfer(nbytes=64):
    net = Network(Engine(), topology.ring(3, "1GB/s", "1us"))
    route = net.route(0, 1)
    mail = Mailboxes(net.engine, net, Trace())
    send = (CountOnly(nbytes), "x", None, Handle("send"), -1)
    recv = (None, None, Handle("recv"), -1)
    return net, mail, route, Transfer(mail, (0, 1, 7), send, recv, route)


@pytest.mark.parametrize("field", Flow.__slots__)
def test_a_transfer_sets_every_field_a_flow_sets(field):
    _, _, route, transfer = _transfer()
    flow = Flow(route[0], 64, print, "arg", route[2], route[3])
    if field in ("on_done", "arg"):  # a transfer's arrival is its own method
        assert getattr(transfer, field) is None
    else:
        assert getattr(transfer, field) == getattr(flow, field)


def test_a_started_transfer_arrives_once_records_and_completes_both_posts():
    net, mail, _, transfer = _transfer(2_000)
    net.start(transfer, net.route(0, 1)[1])  # α of the route
    net.engine.run()
    assert transfer.sender.done and transfer.receiver.done
    assert transfer.receiver.value == CountOnly(2_000)
    (record,) = mail.trace.transfers
    assert (record.src, record.dst, record.tag, record.nbytes, record.label) == (0, 1, 7, 2_000,
                                                                                 "x")  # fmt: skip
    assert record.links == ((0, 1),)
    assert record.end == pytest.approx(1e-6 + 2_000 / 1e9, rel=1e-12)


def test_a_numeric_transfer_reduces_into_its_out_buffer():
    def program(rank):
        x = np.arange(4, dtype=np.float64) + rank.id
        if rank.id == 0:
            yield rank.send(1, x)
        else:
            out = np.ones(4)
            got = yield rank.recv(0, out=out, reduce=np.add)
            assert got is out
            return got.tolist()

    result = collsim.Cluster(topology.ring(2)).run(program)
    assert result.returns[1] == [1.0, 2.0, 3.0, 4.0]


def test_a_run_frees_its_execution_without_the_cyclic_collector(monkeypatch):
    # the processes, mailboxes and network of a run refer to each other; the run cuts those
    # cycles, so that what it held (a numeric collective's buffers) goes with the result,
    # not at some later pass of the collector (the last process run was one such cycle)
    import gc
    import weakref

    from collsim.runtime import execution as execution_module

    made = []
    init = execution_module.Execution.__init__

    def keep(self, cluster):
        init(self, cluster)
        made.append(weakref.ref(self))

    monkeypatch.setattr(execution_module.Execution, "__init__", keep)

    def program(rank):
        peer = 1 - rank.id
        got = yield rank.exchange(sends=[(peer, np.ones(1 << 16), 0)], recvs=[(peer, 0)])
        return float(got[0].sum())

    collecting = gc.isenabled()
    gc.disable()
    try:
        result = collsim.Cluster(topology.ring(2)).run(program)
        assert result.returns == [65536.0, 65536.0]
        assert len(made) == 1 and made[0]() is None
    finally:
        if collecting:
            gc.enable()
