"""Threads that a rank starts call collectives as that rank (issue 29, item 4), as a
thread of a torch or MPI process does: a worker thread's all-reduce, a thread pool's
object gather, and their output tagged with the rank."""

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import collsim
import collsim.distributed as dist


@given(k=st.integers(1, 5), n=st.integers(0, 6))
def test_a_thread_a_rank_starts_all_reduces_for_it(k, n):
    def main():
        dist.init_process_group()
        me = dist.get_rank()
        box = {}

        def worker():
            t = np.arange(n, dtype=np.int64) * (me + 1)
            dist.all_reduce(t)
            box["sum"], box["rank"] = t, dist.get_rank()

        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
        return box

    expected = np.arange(n) * sum(r + 1 for r in range(k))  # numpy: the oracle
    result = collsim.exec(main, n=k, echo=False)
    for r, box in enumerate(result.returns):
        np.testing.assert_array_equal(box["sum"], expected)
        assert box["rank"] == r  # the thread is its rank, not the main thread's


def test_a_thread_pool_gathers_objects_and_prints_as_its_rank(capsys):
    def main():
        dist.init_process_group()
        me = dist.get_rank()

        def gather():
            everyone = [None] * dist.get_world_size()
            dist.all_gather_object(everyone, f"r{me}")
            print("pool thread", everyone)
            return everyone

        with ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(gather).result()

    result = collsim.exec(main, n=3)
    assert result.returns == [["r0", "r1", "r2"]] * 3
    out = capsys.readouterr().out
    for r in range(3):
        assert f"[1,{r}]<stdout>:pool thread ['r0', 'r1', 'r2']" in out
    assert threading.Thread.start.__name__ == "start"  # put back after the run


def test_the_runs_trace_is_the_same_from_a_thread_or_the_rank_itself():
    def from_thread():
        dist.init_process_group()
        t = threading.Thread(target=dist.all_reduce, args=(np.ones(8),))
        t.start()
        t.join()

    def from_rank():
        dist.init_process_group()
        dist.all_reduce(np.ones(8))

    a, b = collsim.exec(from_thread, n=4, echo=False), collsim.exec(from_rank, n=4, echo=False)
    assert a.trace.transfers == b.trace.transfers and a.time == b.time


@given(k=st.integers(2, 5))
def test_a_thread_receives_while_its_rank_sends(k):
    """The listener thread waits in recv while its rank's own code sends: two calls of one
    rank in flight at once, as torch allows from two threads."""

    def main():
        dist.init_process_group()
        me, size = dist.get_rank(), dist.get_world_size()
        got = np.zeros(4)
        listener = threading.Thread(target=dist.recv, args=(got,), kwargs={"src": (me - 1) % size})
        listener.start()
        dist.send(np.full(4, float(me)), dst=(me + 1) % size)
        listener.join()
        return got

    result = collsim.exec(main, n=k, echo=False)
    for r, got in enumerate(result.returns):
        np.testing.assert_array_equal(got, np.full(4, float((r - 1) % k)))  # its left's
