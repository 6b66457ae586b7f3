"""Threads that a rank starts make MPI calls of their own (issue 29, item 4), as threads of a
process with MPI_THREAD_MULTIPLE do: two threads of one rank may wait on each other, a
thread may serve requests while its rank's own code calls too, a thread's exception is
printed and the rank goes on, and a real deadlock between threads names them.

The programs are the patterns of mpi4py's thread demos (a send to self and a receive from
self in two threads released by one Event; a counter served by a thread of rank 0), written
here; the expected values are what MPI's semantics give, computed separately."""

import subprocess
import sys
import threading

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import collsim

# two threads of each rank, released by one Event: one sends to its own rank, one receives
SELF_SENDRECV = """\
import threading

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
me = comm.Get_rank()
outgoing = np.arange(1000, dtype="i") * (me + 1)
incoming = np.zeros_like(outgoing)
go = threading.Event()


def sender():
    go.wait()
    comm.Send([outgoing, MPI.INT], dest=me, tag=3)


def receiver():
    go.wait()
    comm.Recv([incoming, MPI.INT], source=me, tag=3)


workers = [threading.Thread(target=receiver), threading.Thread(target=sender)]
for w in workers:
    w.start()
print("before", int(incoming.sum()), [w.is_alive() for w in workers])
go.set()
for w in workers:
    w.join()
print("after", int(incoming.sum()), [w.is_alive() for w in workers], MPI.Is_thread_main())
"""

# two threads of rank 0 receive a message nobody sends: a real deadlock
THREADS_DEADLOCK = """\
import threading
from mpi4py import MPI

comm = MPI.COMM_WORLD
buf = bytearray(4)


def listen():
    comm.Recv(buf, source=comm.Get_rank(), tag=7)


a = threading.Thread(target=listen)
b = threading.Thread(target=listen, name="listener")
a.start()
b.start()
a.join()
b.join()
"""

# an exception in a started thread: printed by threading.excepthook, the rank goes on
THREAD_RAISES = """\
import threading
from mpi4py import MPI


def boom():
    raise ValueError("from a thread")


t = threading.Thread(target=boom)
t.start()
t.join()
print("rank", MPI.COMM_WORLD.Get_rank(), "goes on", t.is_alive())
"""

# a daemon thread still waiting when the rank's code ends, as a background helper does
DAEMON_LEFT_WAITING = """\
import threading
from mpi4py import MPI

never = threading.Event()
helper = threading.Thread(target=never.wait, daemon=True)
helper.start()
MPI.COMM_WORLD.Barrier()
print("done", helper.is_alive())
"""


def _exec(tmp_path, text, n, *flags):
    script = tmp_path / "script.py"
    script.write_text(text, encoding="utf-8")
    return subprocess.run(
        [sys.executable, "-m", "collsim", "exec", "-n", str(n), *flags, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )


def test_two_threads_of_a_rank_send_to_and_receive_from_it(tmp_path):
    done = _exec(tmp_path, SELF_SENDRECV, 2)
    assert done.returncode == 0, done.stderr
    for r in range(2):
        total = sum(range(1000)) * (r + 1)  # the payload rank r sent itself
        assert f"[1,{r}]<stdout>:before 0 [True, True]" in done.stdout
        assert f"[1,{r}]<stdout>:after {total} [False, False] True" in done.stdout


def test_a_deadlock_between_threads_names_them_and_their_lines(tmp_path):
    done = _exec(tmp_path, THREADS_DEADLOCK, 1)
    assert done.returncode == 1, done.stderr
    err = done.stderr
    assert "would hang forever" in err
    assert "rank 0 (thread Thread-1 (listen)) waits in recv from rank 0" in err
    assert "rank 0 (thread listener) waits in recv from rank 0" in err
    assert "(called at script.py:9 in listen)" in err
    assert "wait for thread Thread-1 (listen) of rank 0 to end (called at script.py:16" in err


def test_an_exception_in_a_thread_is_printed_and_its_rank_goes_on(tmp_path):
    done = _exec(tmp_path, THREAD_RAISES, 2)
    assert done.returncode == 0, done.stderr
    for r in range(2):  # each rank numbers its own threads, as each process does
        assert f"[1,{r}]<stderr>:Exception in thread Thread-1 (boom):" in done.stderr
        assert f"[1,{r}]<stderr>:ValueError: from a thread" in done.stderr
        assert f"[1,{r}]<stdout>:rank {r} goes on False" in done.stdout
    assert "in _bootstrap_inner" in done.stderr and "strand.py" not in done.stderr


def test_a_daemon_thread_left_waiting_ends_with_its_rank_but_a_plain_one_is_reported(tmp_path):
    done = _exec(tmp_path, DAEMON_LEFT_WAITING, 2)
    assert done.returncode == 0, done.stderr  # as the interpreter ends it at exit
    assert "[1,1]<stdout>:done True" in done.stdout
    done = _exec(tmp_path, DAEMON_LEFT_WAITING.replace("daemon=True", "daemon=False"), 2)
    assert done.returncode == 1  # Python would wait for it for ever at exit
    assert "rank 0 (thread Thread-1 (wait)) waits in" in done.stderr


def test_the_same_threaded_program_gives_the_same_trace_byte_for_byte(tmp_path):
    traces = []
    for i in range(2):
        done = _exec(tmp_path, SELF_SENDRECV, 3, "--trace", f"t{i}.json")
        assert done.returncode == 0, done.stderr
        traces.append((tmp_path / f"t{i}.json").read_bytes())
    assert traces[0] == traces[1] and b"send" in traces[0]


def _counter_service(asks):
    """Rank 0 serves a shared counter from a thread of its own (Recv from any source, then
    Ssend the next value) while every rank, rank 0's own code too, asks it ``asks`` times."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    me, ASK, ANSWER = comm.Get_rank(), 1, 2

    def serve():
        counter, request, status = 0, np.zeros(1, "i"), MPI.Status()
        while True:
            comm.Recv(request, source=MPI.ANY_SOURCE, tag=ASK, status=status)
            if request[0] < 0:
                return
            comm.Ssend(np.array([counter], "i"), dest=status.Get_source(), tag=ANSWER)
            counter += 1

    server = threading.Thread(target=serve) if me == 0 else None
    if server is not None:
        server.start()
    got, value = [], np.zeros(1, "i")
    for _ in range(asks):
        comm.Ssend(np.zeros(1, "i"), dest=0, tag=ASK)
        comm.Recv(value, source=0, tag=ANSWER)
        got.append(int(value[0]))
    comm.Barrier()
    if server is not None:
        comm.Ssend(np.array([-1], "i"), dest=0, tag=ASK)
        server.join()
    return got


def test_a_thread_of_rank_0_serves_a_counter_while_every_rank_asks_it():
    k, asks = 5, 3
    got = collsim.exec(lambda: _counter_service(asks), n=k, echo=False).returns
    assert sorted(v for values in got for v in values) == list(range(k * asks))
    assert all(values == sorted(values) for values in got)  # each rank's come in order


def _self_sendrecv_in_threads():
    """Each rank's two threads: one Sends to its own rank, one Recvs from it, joined."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    me = comm.Get_rank()
    sent, received = np.full(64, me + 0.5), np.zeros(64)
    workers = [  # the receiver first: it waits until the other thread sends
        threading.Thread(target=comm.Recv, args=(received,), kwargs={"source": me}),
        threading.Thread(target=comm.Send, args=(sent,), kwargs={"dest": me}),
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return received


def test_eight_ranks_each_send_to_themselves_from_threads():
    result = collsim.exec(_self_sendrecv_in_threads, n=8, echo=False)
    for r, received in enumerate(result.returns):
        np.testing.assert_array_equal(received, np.full(64, r + 0.5))


def _join_times_out_in_simulated_time():
    from mpi4py import MPI

    go = threading.Event()
    t = threading.Thread(target=go.wait)
    t.start()
    t.join(timeout=0.25)  # simulated seconds: the thread still waits
    alive, waited = t.is_alive(), MPI.Wtime()
    go.set()
    t.join()
    return alive, waited, t.is_alive()


def test_a_join_with_a_timeout_waits_that_long_in_simulated_time():
    result = collsim.exec(_join_times_out_in_simulated_time, n=2, echo=False)
    assert result.returns == [(True, 0.25, False)] * 2


def _ring_from_threads(threads):
    """``threads`` pairs of threads in each rank, released together by a threading.Barrier:
    sender i sends to the right neighbour with tag i, receiver i receives from the left."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    me, k = comm.Get_rank(), comm.Get_size()
    start = threading.Barrier(2 * threads + 1)
    received = [None] * threads

    def send(i):
        start.wait()
        comm.send((me, i), dest=(me + 1) % k, tag=i)

    def receive(i):
        start.wait()
        received[i] = comm.recv(source=(me - 1) % k, tag=i)

    pairs = [(f, i) for i in range(threads) for f in (send, receive)]
    workers = [threading.Thread(target=f, args=(i,)) for f, i in pairs]
    for w in workers:
        w.start()
    start.wait()
    for w in workers:
        w.join()
    return received


@settings(max_examples=10)
@given(k=st.integers(1, 4), threads=st.integers(1, 4))
def test_any_number_of_threads_a_rank_starts_exchange_on_a_ring(k, threads):
    result = collsim.exec(lambda: _ring_from_threads(threads), n=k, echo=False)
    for r, received in enumerate(result.returns):
        assert received == [((r - 1) % k, i) for i in range(threads)]
    assert threading.Thread.start.__name__ == "start"  # Python's own again after the run


def _woken_long_before_its_timeout():
    from mpi4py import MPI

    go = threading.Event()
    t = threading.Thread(target=go.set)
    t.start()
    woke = go.wait(timeout=1e9)  # far past the max_time guard (a day), set at once
    t.join()
    return woke, MPI.Wtime()


def test_a_wait_woken_before_a_long_timeout_does_not_trip_the_time_guard():
    result = collsim.exec(_woken_long_before_its_timeout, n=2, echo=False)
    assert result.returns == [(True, 0.0)] * 2 and result.time == 0.0


def _who_is_main():
    from mpi4py import MPI

    seen = []
    t = threading.Thread(target=lambda: seen.append((MPI.Is_thread_main(), _name())))
    t.start()
    t.join()
    return (MPI.Is_thread_main(), _name()), seen[0]


def _name():
    return threading.current_thread().name


def test_a_ranks_own_code_is_its_main_thread_and_a_started_one_is_not():
    # mpi4py's test_threads: Is_thread_main() is True exactly where the name is MainThread
    result = collsim.exec(_who_is_main, n=2, echo=False)
    assert result.returns == [((True, "MainThread"), (False, "Thread-1 (<lambda>)"))] * 2
