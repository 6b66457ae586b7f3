"""A message in flight is one object, a Transfer: the network's Flow with both posts copied
in.  It sets Flow's fields itself (no call per message), so none may be forgotten, and its
arrival must record and complete exactly what the posts asked."""

import ast
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import collsim
from collsim import CountOnly, topology
from collsim.errors import SimulationLimitError
from collsim.network import Engine, Network
from collsim.network.engine import Event
from collsim.network.flows import Flow, Rescheduled, Route
from collsim.network.trace import Trace
from collsim.runtime.matching import Mailboxes, Transfer
from collsim.runtime.ops import Handle


def _transfer(nbytes=64):
    net = Network(Engine(), topology.ring(3, "1GB/s", "1us"))
    route = net.route(0, 1)
    mail = Mailboxes(net.engine, net, Trace())
    transfer = Transfer(mail)
    transfer.payload, transfer.label, transfer.meta = CountOnly(nbytes), "x", None
    transfer.sender, transfer.send_slot = Handle("send"), -1
    transfer.out, transfer.reduce, transfer.receiver, transfer.recv_slot = (
        None,
        None,
        Handle("recv"),
        -1,
    )
    transfer.depart((0, 1, 7), route, net.engine.now)
    return net, mail, route, transfer


@pytest.mark.parametrize("field", Flow.__slots__)
def test_a_transfer_sets_every_field_a_flow_sets(field):
    _, _, route, transfer = _transfer()
    flow = Flow(route.links, 64, print, "arg", route.beta, route.shares)
    if field in ("on_done", "arg"):  # a transfer's arrival is its own method
        assert getattr(transfer, field) is None
    else:
        assert getattr(transfer, field) == getattr(flow, field)


def test_a_started_transfer_arrives_once_records_and_completes_both_posts():
    net, mail, _, transfer = _transfer(2_000)
    net.start(transfer, net.route(0, 1).alpha)
    net.engine.run()
    assert transfer.sender.done and transfer.receiver.done
    assert transfer.receiver.value == CountOnly(2_000)
    (record,) = mail.trace.transfers
    assert (record.src, record.dst, record.tag, record.nbytes, record.label) == (
        0,
        1,
        7,
        2_000,
        "x",
    )
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

    def keep(self, cluster, trace=None):
        init(self, cluster, trace)
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


def _exchange_made_on_rank_0(entries):
    """``rank.exchange(*entries)`` made by rank 0 of a 4-rank run and never yielded (the
    run says so), or "refused" where exchange refuses the entries."""
    from collsim.errors import CollsimError, UnyieldedOperationError

    made = []

    def program(rank):
        if rank.id == 0:
            try:
                made.append(rank.exchange(*entries))
            except CollsimError:
                made.append("refused")

    try:
        collsim.Cluster(topology.ring(4)).run(program)
    except UnyieldedOperationError:
        assert made[0] != "refused"
    else:
        assert made == ["refused"]
    return made[0]


_PEERS = st.sampled_from([0, 1, 3, 4, -1, True, 2.0, "1"])  # in range, out of range, wrong types


@given(
    sends=st.lists(
        st.tuples(
            _PEERS, st.sampled_from(["size", "array", "list"]), st.sampled_from([0, 7, True, "t"])
        ),
        max_size=3,
    ),
    recvs=st.lists(st.tuples(_PEERS, st.sampled_from([0, 7, None, "t"])), max_size=3),
    as_list=st.booleans(),
)
def test_an_exchange_is_plain_exactly_when_every_entry_passes_the_named_checks(
    sends, recvs, as_list
):
    # rank.exchange inlines plain_send and plain_recv in its fast check: the two must
    # agree, and a plain entry is posted as the general path would post it
    from collsim.runtime.rank_checks import plain_recv, plain_send

    payloads = {"size": CountOnly(8), "array": np.zeros(2), "list": [1.0]}
    send_entries = [(d, payloads[p], t) for d, p, t in sends]
    recv_entries = [(s, t) if t is not None else (s,) for s, t in recvs]

    entries = (
        (send_entries, recv_entries) if as_list else (tuple(send_entries), tuple(recv_entries))
    )
    op = _exchange_made_on_rank_0(entries)
    plain = all(plain_send(e, 4) for e in send_entries) and all(
        plain_recv(e, 4) for e in recv_entries
    )
    if op == "refused":
        assert not plain
        return
    assert op.plain == plain
    if plain:
        assert list(op.send_posts) == send_entries and list(op.recv_posts) == recv_entries
    else:
        for entry, post in zip(send_entries, op.send_posts, strict=True):
            if plain_send(entry, 4):
                assert post == (*entry, "", None)
        for entry, post in zip(recv_entries, op.recv_posts, strict=True):
            if plain_recv(entry, 4):
                assert post == (*entry, None, None)


_PLAIN_SENDS = [(1, CountOnly(8), 0), (3, np.zeros(2), 7)]
_PLAIN_RECVS = [(3, 0), (1, 7)]


@pytest.mark.parametrize(
    "odd_send, odd_recv",
    [
        (None, None),  # every entry plain
        ((4, CountOnly(8), 0), None),  # a peer one past the last rank
        ((-1, CountOnly(8), 0), None),
        ((True, CountOnly(8), 0), None),  # a bool is not a peer
        ((1, CountOnly(8), True), None),  # nor a tag
        ((1, CountOnly(8), "t"), None),
        ((1, [1.0], 0), None),  # a list is not posted as it is
        ((1, CountOnly(8)), None),  # no tag given
        (None, (4, 0)),
        (None, (-1, 0)),
        (None, (1, True)),
        (None, (1,)),
        (None, (1, 0, np.zeros(2))),  # an out= buffer
    ],
    ids=lambda v: repr(v)[:24],
)
def test_each_field_the_fast_check_reads_decides_plainness(odd_send, odd_recv):
    from collsim.runtime.rank_checks import plain_recv, plain_send

    sends = _PLAIN_SENDS + ([odd_send] if odd_send else [])
    recvs = _PLAIN_RECVS + ([odd_recv] if odd_recv else [])

    op = _exchange_made_on_rank_0((sends, recvs))
    named = all(plain_send(e, 4) for e in sends) and all(plain_recv(e, 4) for e in recvs)
    assert named == (odd_send is None and odd_recv is None)
    if named:
        assert op != "refused" and op.plain
    else:  # refused by isend/irecv's checks, or posted through them
        assert op == "refused" or not op.plain


def test_a_collective_steps_messages_are_typed_records_read_by_name():
    # what the executor hands the runtime for one step: named fields, not positions
    from collsim.collectives.registry import build
    from collsim.runtime.ops import Incoming, Outgoing, Steps

    seen = []
    schedule = build("all_reduce", "ring", 3)

    def program(rank):
        from collsim.collectives.executor import run_schedule

        run = run_schedule(rank, schedule, None, count=6, dtype="float32")
        op = next(run)
        while True:
            if isinstance(op, Steps):
                steps = list(op.steps)
                seen.append(steps[0])
                op = Steps(iter(steps))
            try:
                op = run.send((yield op))
            except StopIteration:
                return

    collsim.Cluster(topology.ring(3)).run(program)
    sends, recvs = seen[0]
    assert [type(m) for m in sends] == [Outgoing] and [type(m) for m in recvs] == [Incoming]
    assert sends[0].dst == 1 and sends[0].payload == CountOnly(8)
    assert recvs[0].src == 2 and recvs[0].out is None and recvs[0].reduce is None


def test_a_waiting_post_is_the_message_with_its_sides_named():
    seen = []

    def program(rank):
        if rank.id == 0:
            handle = yield rank.isend(1, CountOnly(8), tag=3, label="x")
            waiting = rank._execution.mail.sends[(0, 1, 3)]
            seen.append(
                (waiting.payload, waiting.label, waiting.sender is handle, waiting.receiver)
            )
            yield rank.wait(handle)
        else:
            yield rank.compute(seconds=1e-3)
            yield rank.recv(0, tag=3)

    collsim.Cluster(topology.ring(2)).run(program)
    assert seen == [(CountOnly(8), "x", True, None)]


def test_a_route_is_a_typed_record_of_the_topologys_path():
    """``Network.route`` gives a :class:`Route`: the topology's links, their summed α and
    narrowest β (as ``Cluster.route`` finds them) and the table of flows on each link."""
    cluster = collsim.Cluster(topology.ring(4, "100GB/s", "5us"))
    net = Network(Engine(), cluster.topology)
    route = net.route(1, 3)
    assert isinstance(route, Route)
    assert (route.links, route.alpha, route.beta) == cluster.route(1, 3)
    assert route.shares == tuple(net.active[link] for link in route.links)


def _reads_of_a_route_by_position(tree):
    """The lines of ``tree`` that index a route (``route[1]``, ``net.route(a, b)[0]``) or
    unpack one (``links, alpha, beta, shares = route``)."""

    def is_route(node):
        if isinstance(node, ast.Name):
            return node.id == "route"
        return isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "route"

    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and is_route(node.value):
            lines.append(node.lineno)
        elif isinstance(node, ast.Assign) and is_route(node.value):
            if any(isinstance(target, ast.Tuple) for target in node.targets):
                lines.append(node.lineno)
    return lines


def test_no_module_outside_the_fast_path_reads_a_route_by_position():
    """Routes are read by field name (issue 26: messages as typed records end to end);
    only ``collsim/fast/`` may unpack them, where a name lookup per transfer would cost."""
    package = Path(collsim.__file__).parent
    found = {}
    for path in sorted(package.rglob("*.py")):
        if "fast" in path.relative_to(package).parts:
            continue
        lines = _reads_of_a_route_by_position(ast.parse(path.read_text(encoding="utf-8")))
        if lines:
            found[str(path.relative_to(package))] = lines
    assert found == {}


def test_the_events_a_stopped_run_leaves_are_typed_records():
    """A run stopped midway hands its pending events on (``Engine.clear``) as ``Event``
    records, and a flow whose rate changed waits as a ``Rescheduled`` record naming it and
    its version: the mailboxes read both by name to free the messages in flight."""
    engine = Engine(max_time=0.5)
    net = Network(engine, topology.switch(3, bandwidth="1GB/s", latency=0))
    net.transfer(0, 2, 1e9, print, "a")  # both share the down link to 2: rates change
    net.transfer(1, 2, 1e9, print, "b")
    with pytest.raises(SimulationLimitError):
        engine.run()  # both would finish at 2 s
    events = engine.clear()
    assert events and all(isinstance(event, Event) for event in events)
    # "a" started alone (its first finish, the bare flow, now stale), then "b" joined:
    # "a" finishes later, at its version 2; "b"'s first finish is the bare flow
    rescheduled = [event.arg for event in events if type(event.arg) is Rescheduled]
    assert [(r.flow.arg, r.version) for r in rescheduled] == [("a", 2)]


def test_a_collectives_steps_are_step_records_of_its_schedules_moves():
    """A collective's rank program posts each step as a ``Step`` record, read by name by
    the runtime, whose sends are the schedule's moves from that rank (in order)."""
    from collsim.collectives.executor import run_schedule
    from collsim.collectives.registry import build
    from collsim.runtime.ops import Step, Steps

    schedule = build("all_reduce", "ring", 4)

    def program(rank):
        inner, value, posted = run_schedule(rank, schedule, np.ones(8)), None, []
        while True:
            try:
                op = inner.send(value)
            except StopIteration as stop:
                return stop.value, posted
            if type(op) is Steps:
                steps = list(op.steps)
                posted += steps
                op = Steps(iter(steps))
            value = yield op

    out = collsim.Cluster(topology.ring(4), fast=False).run(program)
    for r, (result, posted) in enumerate(out.returns):
        assert result.tolist() == [4.0] * 8
        assert all(type(step) is Step for step in posted)
        own = [[m for m in step if m.src == r] for step in schedule.steps]
        assert [[m.meta for m in step.sends] for step in posted] == own
