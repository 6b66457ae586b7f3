"""collsim.mpi's point-to-point calls, Status and wildcards, requests, communicators (Split
into rows and columns, Dup, Free) and Wtime against the alpha-beta closed form."""

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import collsim
from collsim import mpi as MPI
from collsim.runtime import blocking
from collsim.topology import path_alpha_beta


def run(k, main, topology=None):
    return blocking.run(collsim.Cluster(topology or collsim.topology.ring(k)), main)


# -- wildcards and Status -------------------------------------------------------------------


@settings(max_examples=10)
@given(k=st.integers(2, 16), seed=st.integers(0, 2**16))
def test_any_source_any_tag_with_status(k, seed):
    counts = np.random.default_rng(seed).integers(0, 6, size=k)

    def main():
        comm = MPI.COMM_WORLD
        if comm.rank != 0:
            comm.Send(
                np.full(counts[comm.rank], comm.rank, dtype=np.int32), dest=0, tag=10 * comm.rank
            )
            return None
        seen = []
        for _ in range(comm.size - 1):
            buf = np.full(8, -1, dtype=np.int32)
            status = MPI.Status()
            comm.Recv(buf, source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=status)
            n = status.Get_count(MPI.INT)
            seen.append(
                (status.Get_source(), status.Get_tag(), n, buf[:n].tolist(), status.Get_count())
            )
        return seen

    seen = run(k, main).returns[0]
    assert sorted(s[0] for s in seen) == list(range(1, k))
    for source, tag, n, values, nbytes in seen:
        assert tag == 10 * source and n == counts[source] and nbytes == 4 * n
        assert values == [source] * n


def test_any_tag_never_takes_another_communicators_message():
    def main():
        world = MPI.COMM_WORLD
        other = world.Dup()
        if world.rank == 1:
            other.send("on the dup", dest=0, tag=1)
            world.send("on the world", dest=0, tag=2)
            return None
        status = MPI.Status()
        first = world.recv(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=status)
        return first, status.Get_tag(), other.recv(source=1)

    assert run(2, main).returns[0] == ("on the world", 2, "on the dup")


def test_a_shorter_message_fills_the_front_and_status_counts_it():
    def main():
        comm = MPI.COMM_WORLD
        if comm.rank == 0:
            comm.Send([np.arange(3.0), MPI.DOUBLE], dest=1, tag=4)
            return None
        buf, status = np.zeros(5), MPI.Status()
        comm.Recv([buf, MPI.DOUBLE], source=0, tag=4, status=status)
        return buf.tolist(), status.Get_count(MPI.DOUBLE), status.count, status.source

    assert run(2, main).returns[1] == ([0.0, 1.0, 2.0, 0.0, 0.0], 3, 24, 0)


@pytest.mark.parametrize(
    "spec, sent",
    [
        (lambda x: x, 6),
        (lambda x: [x, MPI.DOUBLE], 6),
        (lambda x: [x, 2, MPI.DOUBLE], 2),
        (lambda x: (x, 0, MPI.DOUBLE), 0),
        (lambda x: [x, MPI.BYTE], 6),
    ],
)
def test_buffer_specs_send_their_count(spec, sent):
    def main():
        comm = MPI.COMM_WORLD
        if comm.rank == 0:
            comm.Send(spec(np.arange(1.0, 7.0).reshape(2, 3)), dest=1)
            return None
        got, status = np.zeros(6), MPI.Status()
        comm.Recv([got, MPI.BYTE], source=0, status=status)
        return got.tolist(), status.Get_count(MPI.DOUBLE)

    result = run(2, main)
    assert result.returns[1] == ([1.0 + i if i < sent else 0.0 for i in range(6)], sent)
    assert result.stats.bytes_sent[0] == 8 * sent


def test_proc_null_is_a_no_op_as_in_mpi():
    def main():
        comm = MPI.COMM_WORLD
        left = comm.rank - 1 if comm.rank > 0 else MPI.PROC_NULL  # a line, not a ring
        right = comm.rank + 1 if comm.rank < comm.size - 1 else MPI.PROC_NULL
        got, status = np.full(1, -1.0), MPI.Status()
        comm.Sendrecv(
            np.full(1, float(comm.rank)), dest=right, recvbuf=got, source=left, status=status
        )
        return got[0], status.Get_source()

    assert run(3, main).returns == [(-1.0, MPI.PROC_NULL), (0.0, 0), (1.0, 1)]


# -- requests -------------------------------------------------------------------------------


def test_test_polls_until_the_message_arrives_in_simulated_time():
    def main():
        comm = MPI.COMM_WORLD
        if comm.rank == 1:
            blocking.compute(seconds=5e-3)  # the message leaves after 5 ms
            comm.Send(np.ones(4), dest=0)
            return None
        buf = np.zeros(4)
        request, polls = comm.Irecv(buf, source=1), 0
        while not request.Test():
            polls += 1
        return polls, buf.sum(), MPI.Wtime()

    polls, total, when = run(2, main).returns[0]
    assert total == 4.0 and when >= 5e-3
    assert 3 < polls < 50  # 1 us, doubling to 1 ms: about a dozen polls for 5 ms


def test_waitall_as_a_static_method_and_lowercase_waitall():
    def main():
        comm = MPI.COMM_WORLD
        peer = 1 - comm.rank
        bufs = [np.zeros(2) for _ in range(3)]
        reqs = [comm.Irecv(b, source=peer, tag=t) for t, b in enumerate(bufs)]
        reqs += [comm.Isend(np.full(2, 10.0 * t + comm.rank), dest=peer, tag=t) for t in range(3)]
        statuses = []
        assert MPI.Request.Waitall(reqs, statuses) is True
        objs = MPI.Request.waitall([comm.irecv(source=peer), comm.isend(comm.rank, peer)])
        return [b[0] for b in bufs], [s.Get_tag() for s in statuses[:3]], objs[0]

    assert run(2, main).returns[0] == ([1.0, 11.0, 21.0], [0, 1, 2], 1)


def test_a_completed_request_is_request_null_as_in_mpi():
    # MPI_Wait sets the request to MPI_REQUEST_NULL; waiting on it again returns at once
    # with an empty status (mpi4py: wait() gives None, test() (True, None))
    def main():
        comm = MPI.COMM_WORLD
        if comm.rank == 0:
            comm.send("hi", dest=1, tag=3)
            return None
        request = comm.irecv(source=0)
        active = bool(request)
        got, status = request.wait(), MPI.Status()
        again = request.test(status), request.Wait()
        return got, active, request == MPI.REQUEST_NULL, bool(request), again, status.source

    got = run(2, main).returns[1]
    assert got == ("hi", True, True, False, ((True, None), True), MPI.ANY_SOURCE)


def test_a_request_made_of_a_request_is_another_handle_of_it():
    # mpi4py: MPI.Request(req) is req's handle (null for REQUEST_NULL); pkl5 compares with it
    def main():
        comm = MPI.COMM_WORLD
        request = comm.issend("x", dest=comm.rank, tag=1)
        copy = MPI.Request(request)
        before = (bool(copy), copy == request, MPI.Request(MPI.REQUEST_NULL) == MPI.REQUEST_NULL)
        got = comm.recv(source=comm.rank, tag=1)
        copy.wait()
        return before, got, bool(request), bool(MPI.Request(MPI.REQUEST_NULL))

    assert run(1, main).returns == [((True, True, True), "x", False, False)]


# -- eager and synchronous sends ------------------------------------------------------------


def _send_first(n):
    def main():
        comm = MPI.COMM_WORLD
        peer = 1 - comm.rank
        comm.Send(np.ones(n), dest=peer)  # both send first: only buffering saves this
        got = np.zeros(n)
        comm.Recv(got, source=peer)
        return got.sum()

    return main


def test_small_sends_are_eager_so_both_ranks_may_send_first():
    assert run(2, _send_first(8)).returns == [8.0, 8.0]


@pytest.mark.parametrize("eager_limit, n", [(0, 8), (64 * 1024, 64 * 1024)])
def test_a_synchronous_send_first_on_both_ranks_deadlocks(eager_limit, n):
    with MPI.configured(eager_limit=eager_limit):
        with pytest.raises(collsim.DeadlockError, match="send to rank 1"):
            run(2, _send_first(n))


# -- communicators --------------------------------------------------------------------------


@settings(max_examples=10)
@given(rows=st.integers(1, 4), cols=st.integers(1, 4))
def test_split_into_rows_and_columns(rows, cols):
    k = rows * cols

    def main():
        world = MPI.COMM_WORLD
        row, col = divmod(world.rank, cols)
        row_comm = world.Split(color=row, key=col)
        col_comm = world.Split(color=col, key=row)
        row_sum = np.zeros(1)
        row_comm.Allreduce(np.array([float(world.rank)]), row_sum)
        col_members = col_comm.allgather(world.rank)
        backwards = world.Split(color=0, key=-world.rank)  # key orders the new ranks
        order = np.zeros(world.size, dtype=np.int64)  # collsim's all-gather in that order
        backwards.Allgather(np.array([world.rank]), order)
        return (
            row_comm.rank,
            row_comm.size,
            row_sum[0],
            col_comm.rank,
            col_comm.size,
            col_members,
            backwards.rank,
            order.tolist(),
        )

    for r, got in enumerate(run(k, main).returns):
        row, col = divmod(r, cols)
        members = [row * cols + c for c in range(cols)]
        assert got == (
            col,
            cols,
            float(sum(members)),
            row,
            rows,
            [rr * cols + col for rr in range(rows)],
            k - 1 - r,
            list(range(k - 1, -1, -1)),
        )


def test_split_undefined_gives_comm_null_and_free_ends_a_communicator():
    def main():
        world = MPI.COMM_WORLD
        sub = world.Split(MPI.UNDEFINED if world.rank == 0 else 1, 0)
        if world.rank == 0:
            return sub == MPI.COMM_NULL
        dup = sub.Dup()
        size = dup.Get_size()
        dup.Free()
        try:
            dup.barrier()
        except MPI.Exception as exc:
            return size, dup == MPI.COMM_NULL, exc.Get_error_class() == MPI.ERR_COMM
        return "no error"

    assert run(3, main).returns == [True, (2, True, True), (2, True, True)]


def test_comm_self_and_world_identity():
    def main():
        self_comm = MPI.COMM_SELF
        return (
            self_comm.Get_rank(),
            self_comm.Get_size(),
            self_comm.allreduce(5),
            MPI.COMM_WORLD.Get_name(),
            MPI.Get_processor_name(),
            MPI.COMM_WORLD.Get_attr(MPI.TAG_UB),
        )

    assert run(2, main).returns[1] == (0, 1, 5, "MPI_COMM_WORLD", "collsim-rank1", 2**29 - 1)


# -- Wtime: the alpha-beta closed form ------------------------------------------------------

TOPOLOGIES = {
    "ring": lambda: collsim.topology.ring(2, "25GB/s", "3us"),
    "switch": lambda: collsim.topology.switch(2, "50GB/s", "1.5us"),
}


def _ping_pong(message, repeats):
    def main():
        comm = MPI.COMM_WORLD
        buf = message.copy()
        comm.Barrier()
        start = MPI.Wtime()
        for _ in range(repeats):
            if comm.rank == 0:
                comm.Send(buf, dest=1)
                comm.Recv(buf, source=1)
            else:
                comm.Recv(buf, source=0)
                comm.Send(buf, dest=0)
        return MPI.Wtime() - start

    return main


@pytest.mark.parametrize("topology", list(TOPOLOGIES))
@pytest.mark.parametrize("nbytes", [0, 8, 4096, 1 << 20])
@pytest.mark.parametrize("eager_limit", [0, 64 * 1024])
def test_ping_pong_time_is_alpha_plus_n_over_beta(topology, nbytes, eager_limit):
    graph = TOPOLOGIES[topology]()
    alpha, beta = path_alpha_beta(graph, 0, 1)
    back_alpha, back_beta = path_alpha_beta(graph, 1, 0)
    repeats = 3
    with MPI.configured(eager_limit=eager_limit):
        result = run(2, _ping_pong(np.zeros(nbytes, np.uint8), repeats), graph)
    round_trip = alpha + nbytes / beta + back_alpha + nbytes / back_beta
    assert result.returns[0] == pytest.approx(repeats * round_trip, rel=1e-12, abs=1e-15)


def test_lowercase_ping_pong_time_counts_the_pickle():
    graph = TOPOLOGIES["ring"]()
    alpha, beta = path_alpha_beta(graph, 0, 1)
    obj = list(range(1000))
    nbytes = len(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))

    def main():
        comm = MPI.COMM_WORLD
        start = MPI.Wtime()
        if comm.rank == 0:
            comm.send(obj, dest=1)
            comm.recv(source=1)
        else:
            comm.send(comm.recv(source=0), dest=0)
        return MPI.Wtime() - start

    assert run(2, main, graph).returns[0] == pytest.approx(2 * (alpha + nbytes / beta))


def test_wtick_and_wtime_outside_a_run():
    assert MPI.Wtick() == 1e-9
    with pytest.raises(collsim.ConfigError, match="outside a run"):
        MPI.Wtime()


# -- a synchronous send to oneself ------------------------------------------------------------


def test_ssend_to_self_returns_with_its_receive_complete():
    # MPI: an ssend returns once its receive has matched; to oneself the data is copied
    # then, so Testsome right after finds the receive done (mpi4py's testTestSomeRecv)
    def main():
        comm = MPI.COMM_WORLD
        reqs = [comm.irecv(source=0, tag=i) for i in range(4)]
        found = []
        for batch in ([3], [0, 2], [1]):
            for i in batch:
                comm.ssend(f"m{i}", dest=0, tag=i)
            idxs, objs = MPI.Request.testsome(reqs)
            found.append((sorted(idxs), sorted(objs)))
        buf = np.zeros(2)
        req = comm.Irecv(buf, source=0, tag=9)
        comm.Ssend(np.ones(2), dest=0, tag=9)
        return found, req.Test(), buf.tolist()

    found, done, buf = run(1, main).returns[0]
    assert found == [([3], ["m3"]), ([0, 2], ["m0", "m2"]), ([1], ["m1"])]
    assert done and buf == [1.0, 1.0]


def test_a_wait_on_a_receive_from_oneself_resumes_once():
    # the receive completes before the sender's rank resumes; its waiter still runs once
    def main():
        comm = MPI.COMM_WORLD
        got = comm.irecv(source=0, tag=1)
        sent = comm.isend("x", dest=0, tag=1)
        return got.wait(), sent.wait(), MPI.Wtime()

    first, second = run(1, main).returns[0], run(1, main).returns[0]
    assert first == second and first[:2] == ("x", None)
