"""``mpi4py.util.pkl5`` (collsim.mpi.pkl5): the lowercase calls with pickle protocol 5.

The oracles are MPI's semantics written out in Python (who gets which object, in which
order, with which status), the standard library's own pickle (how many bytes a protocol-5
stream of an array is once its buffer is out of band) and the array's ``nbytes``: the
trace must show the array moving as itself."""

import pickle
import textwrap

import numpy as np
import pytest
from fuzzkit import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

import collsim
from collsim import mpi as MPI
from collsim.mpi import pkl5

RANKS = st.integers(min_value=1, max_value=6)


def run(k, main):
    return collsim.exec(main, n=k, echo=False)


def oob_stream_length(obj):
    """The length of ``obj``'s protocol-5 stream with every buffer out of band (stdlib)."""
    return len(pickle.dumps(obj, protocol=5, buffer_callback=lambda b: False))


def test_a_large_array_moves_as_its_own_message_not_inside_a_pickle():
    array = np.arange(1 << 17, dtype=np.float64)  # 1 MiB, above the 256 KiB threshold

    def main():
        comm = pkl5.Intracomm(MPI.COMM_WORLD)
        if comm.rank == 0:
            comm.send(array, dest=1, tag=3)
            return None
        status = MPI.Status()
        got = comm.recv(source=0, tag=3, status=status)
        return np.array_equal(got, array), status.Get_source(), status.Get_tag()

    result = run(2, main)
    assert result.returns[1] == (True, 0, 3)
    moved = [t.nbytes for t in result.trace.transfers]
    # a header of two int64 lengths, the stream, then the array's bytes exactly
    assert moved == [16, oob_stream_length(array), array.nbytes]


def test_below_the_threshold_the_array_stays_in_the_stream():
    array = np.arange(100, dtype=np.int32)

    def main():
        comm = pkl5.Intracomm(MPI.COMM_WORLD)
        if comm.rank == 0:
            comm.send(array, dest=1)
        else:
            return comm.recv(source=0).tolist()

    result = run(2, main)
    assert result.returns[1] == list(range(100))
    in_band = len(pickle.dumps(array, protocol=5))
    assert [t.nbytes for t in result.trace.transfers] == [8, in_band]


def messages_for(rank):
    """Objects of every kind, one array above a zero threshold, that say who sent them."""
    return [rank, f"r{rank}", {"k": rank}, np.full(3, rank, dtype=np.int64), None]


def same(a, b):
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and np.array_equal(a, b) and a.dtype == b.dtype
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


@settings(max_examples=10, deadline=None)
@given(k=RANKS, root_seed=st.integers(min_value=0, max_value=100))
def test_collectives_give_every_rank_what_mpi_defines(k, root_seed):
    root = root_seed % k

    def main():
        pkl5.pickle.THRESHOLD = 0  # every array out of band
        comm = pkl5.Intracomm(MPI.COMM_WORLD)
        me = comm.rank
        return (
            comm.bcast(messages_for(root) if me == root else None, root=root),
            comm.gather(messages_for(me), root=root),
            comm.scatter([messages_for(r) for r in range(k)] if me == root else None, root),
            comm.allgather(messages_for(me)),
            comm.alltoall([[me, r] for r in range(k)]),
        )

    returns = run(k, main).returns
    for me, (bcast, gather, scatter, allgather, alltoall) in enumerate(returns):
        assert same(bcast, messages_for(root))
        assert same(gather, [messages_for(r) for r in range(k)]) if me == root else gather is None
        assert same(scatter, messages_for(me))
        assert same(allgather, [messages_for(r) for r in range(k)])
        assert alltoall == [[r, me] for r in range(k)]


@settings(max_examples=8, deadline=None)
@given(k=st.integers(min_value=2, max_value=5), count=st.integers(min_value=1, max_value=4))
def test_objects_from_one_sender_arrive_in_order_whatever_their_parts(k, count):
    def main():
        pkl5.pickle.THRESHOLD = 0
        comm = pkl5.Intracomm(MPI.COMM_WORLD)
        if comm.rank == 0:
            got = []
            for _ in range((k - 1) * count):
                status = MPI.Status()
                obj = comm.recv(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=status)
                got.append((status.Get_source(), status.Get_tag(), obj[0], int(obj[1].sum())))
            return got
        requests = [comm.isend((i, np.full(i + 1, comm.rank)), dest=0, tag=7) for i in range(count)]
        pkl5.Request.waitall(requests)
        return None

    got = run(k, main).returns[0]
    for source in range(1, k):
        mine = [(tag, i, total) for s, tag, i, total in got if s == source]
        assert mine == [(7, i, source * (i + 1)) for i in range(count)]


def test_mprobe_improbe_and_the_message_they_return():
    def main():
        pkl5.pickle.THRESHOLD = 0
        comm = pkl5.Intracomm(MPI.COMM_WORLD)
        if comm.rank == 0:
            comm.ssend(np.arange(6.0), dest=1, tag=5)
            comm.send("second", dest=1, tag=6)
            return None
        status = MPI.Status()
        message = comm.mprobe(source=0, tag=5, status=status)
        probed = (type(message).__name__, len(message), bool(message), status.Get_tag())
        first = message.recv()
        seen = comm.improbe(source=0, tag=6)
        while seen is None:
            seen = comm.improbe(source=0, tag=6)
        request = seen.irecv()
        return probed, first.tolist(), request.wait(), bool(message), bool(request)

    probed, first, second, still, pending = run(2, main).returns[1]
    # the header, the stream and one buffer: three matched messages
    assert probed == ("Message", 3, True, 5)
    assert first == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0] and second == "second"
    assert (still, pending) == (False, False)  # both used up: MESSAGE_NULL, REQUEST_NULL


def test_proc_null_sends_nothing_and_receives_none():
    def main():
        comm = pkl5.Intracomm(MPI.COMM_WORLD)
        comm.send({"x": 1}, MPI.PROC_NULL)
        request = comm.isend([1, 2], MPI.PROC_NULL)
        status = MPI.Status()
        got = comm.recv(None, MPI.PROC_NULL, 0, status)
        return got, request.wait(), status.Get_source(), comm.mprobe(MPI.PROC_NULL).recv()

    result = run(1, main)
    assert result.returns == [(None, None, MPI.PROC_NULL, None)]
    assert result.trace.transfers == []


def test_refusals_are_mpi4pys():
    # one rank: a wrong count refused at a root leaves no other rank waiting for it
    def main():
        comm = pkl5.Intracomm(MPI.COMM_WORLD)
        caught = []
        for call in (
            lambda: comm.irecv(None, 0, 0),
            lambda: comm.gather(1, root=comm.size),
            lambda: comm.scatter([1] * (comm.size + 1), root=0),
            lambda: comm.alltoall([1] * (comm.size - 1)),
        ):
            try:
                call()
            except (RuntimeError, MPI.Exception, ValueError) as exc:
                caught.append((type(exc).__name__, str(exc)))
        return caught

    caught = run(1, main).returns[0]
    names = [name for name, _ in caught]
    assert names == ["RuntimeError", "Exception", "ConfigError", "ConfigError"]
    assert "mprobe(source, tag).irecv()" in caught[0][1]
    assert "root=1" in caught[1][1] and "0..0" in caught[1][1]
    assert "expecting 1 items, got 2" in caught[2][1] and "got 0" in caught[3][1]


@pytest.mark.parametrize("k", [2, 4])
def test_intercommunicator_collectives_cross_the_groups(k):
    def main():
        world = MPI.COMM_WORLD
        color = world.rank % 2
        local = world.Split(color)
        inter = pkl5.Intercomm(local.Create_intercomm(0, world, 1 - color))
        remote = inter.Get_remote_size()
        if color == 0:  # group 0's rank 0 is the root of every call
            root = MPI.ROOT if inter.rank == 0 else MPI.PROC_NULL
            return (
                inter.bcast("hello", root=root),
                inter.gather(None, root=root),
                inter.scatter([f"to {r}" for r in range(remote)], root=root),
                inter.allgather(world.rank),
            )
        return (
            inter.bcast(None, root=0),
            inter.gather(world.rank, root=0),
            inter.scatter(None, root=0),
            inter.allgather(world.rank),
        )

    returns = run(k, main).returns
    evens, odds = list(range(0, k, 2)), list(range(1, k, 2))
    assert returns[0] == (None, odds, None, odds)
    for r in evens[1:]:
        assert returns[r] == (None, None, None, odds)
    for i, r in enumerate(odds):
        assert returns[r] == ("hello", None, f"to {i}", evens)


def test_a_script_imports_pkl5_and_each_rank_has_its_own_settings(tmp_path):
    program = tmp_path / "pkl5_prog.py"
    program.write_text(
        textwrap.dedent(
            """
            import numpy as np
            from mpi4py import MPI
            from mpi4py.util import pkl5

            comm = pkl5.Intracomm(MPI.COMM_WORLD)
            if comm.rank == 1:
                pkl5.pickle.THRESHOLD = 0  # only this rank's pkl5, as in its own process
            comm.barrier()
            print(comm.rank, pkl5.pickle.THRESHOLD, comm.allgather(np.ones(2))[0].sum())
            """
        )
    )
    outcome = run_cli(["exec", "-n", "2", str(program)], timeout=120)
    lines = sorted(line.split(":", 1)[1] for line in outcome.stdout.splitlines())
    assert lines == ["0 262144 2.0", "1 0 2.0"]


def test_a_bad_destination_is_refused_naming_it_before_anything_moves():
    def main():
        comm = pkl5.Intracomm(MPI.COMM_WORLD)
        try:
            comm.send(np.zeros(4), dest=5)
        except MPI.Exception as exc:
            return str(exc)

    result = run(2, main)
    assert "dest=5" in result.returns[0] and "0..1" in result.returns[0]
    assert result.trace.transfers == []


def test_the_same_program_gives_the_same_trace_byte_for_byte(tmp_path):
    def main():
        comm = pkl5.Intracomm(MPI.COMM_WORLD)
        got = comm.allgather(np.full(1 << 16, comm.rank))
        right, left = (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size
        return int(comm.sendrecv(got, dest=right, source=left)[1].sum())

    traces = []
    for name in ("first.json", "second.json"):
        collsim.exec(main, n=3, echo=False, trace=tmp_path / name)
        traces.append((tmp_path / name).read_bytes())
    assert traces[0] == traces[1] and len(traces[0]) > 0


def test_small_objects_sent_head_to_head_go_eagerly_as_standard_mode_sends_do():
    # both ranks send before they receive: safe in MPI while the messages are eager
    def main():
        comm = pkl5.Intracomm(MPI.COMM_WORLD)
        other = 1 - comm.rank
        comm.send({"from": comm.rank, "array": np.arange(8)}, dest=other)
        return comm.recv(source=other)["from"]

    assert run(2, main).returns == [1, 0]


def test_testall_polls_in_simulated_time_and_then_gives_the_results():
    from collsim.runtime import blocking

    def main():
        comm = pkl5.Intracomm(MPI.COMM_WORLD)
        if comm.rank == 1:  # busy for a millisecond before it receives
            blocking.call(blocking.current_rank().compute(seconds=1e-3))
            return comm.recv(source=0)
        requests, polls = [comm.issend("late", dest=1)], 0
        while True:
            done, results = pkl5.Request.testall(requests)
            if done:
                return polls > 0, results, MPI.Wtime() >= 1e-3, bool(requests[0])
            polls += 1

    assert run(2, main).returns == [(True, [None], True, False), "late"]
