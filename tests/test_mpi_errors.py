"""collsim.mpi refuses bad calls with a collsim error naming the value, the rule and the
exception mpi4py raises; deadlocks end in a report naming each rank's call and line; runs
are deterministic; no thread is left behind."""

import builtins
import re
import threading

import numpy as np
import pytest
from fuzzkit import check_api
from hypothesis import given, settings
from hypothesis import strategies as st

import collsim
from collsim import mpi as MPI
from collsim.errors import ConfigError
from collsim.runtime import blocking


def run(k, main):
    return blocking.run(collsim.Cluster(collsim.topology.ring(k)), main)


def x3():
    return np.zeros(3)


# each bad call: (what the rank calls, a piece of the message, the MPI error class or None
# where mpi4py raises ValueError)
BAD_CALLS = {
    "root out of range": (lambda c: c.Bcast(x3(), root=5), "Bcast(root=5)", MPI.ERR_ROOT),
    "object root": (lambda c: c.bcast(1, root=-1), "bcast(root=-1)", MPI.ERR_ROOT),
    "dest out of range": (lambda c: c.Send(x3(), dest=9), "Send(dest=9)", MPI.ERR_RANK),
    "negative tag": (lambda c: c.send(1, dest=0, tag=-5), "send(tag=-5)", MPI.ERR_TAG),
    "tag past TAG_UB": (lambda c: c.Send(x3(), dest=0, tag=2**29), "in 0..536870911", MPI.ERR_TAG),
    "source a string": (lambda c: c.recv(source="0"), "recv(source='0')", MPI.ERR_RANK),
    "count mismatch": (
        lambda c: c.Allreduce(x3(), np.zeros(4)),
        "mismatch in send count 3 and receive count 4",
        None,
    ),
    "dtype mismatch": (
        lambda c: c.Allreduce(x3(), np.zeros(3, np.int64)),
        "mismatch in send and receive MPI datatypes",
        None,
    ),
    "spec of another size": (
        lambda c: c.Bcast([np.zeros(3, np.int32), MPI.DOUBLE]),
        "a buffer of 12 bytes is not a whole number of MPI.DOUBLE",
        None,
    ),
    "count past the buffer": (
        lambda c: c.Send([x3(), 7, MPI.DOUBLE], dest=0),
        "count 7 is more than the buffer's 3",
        None,
    ),
    # [buf, count, datatype]: mpi4py reads the 3 as the datatype and raises KeyError
    "not a buffer": (
        lambda c: c.Bcast([1, 2, 3]),
        "cannot map 3 (the last item of [1, 2, 3])",
        None,
    ),
    "strided buffer": (lambda c: c.Bcast(np.zeros((3, 4))[:, 1]), "not contiguous", None),
    "read-only receive": (
        lambda c: c.Recv(np.frombuffer(b"12345678", np.uint8), source=0),
        "read-only",
        None,
    ),
    "null datatype": (
        lambda c: c.Send([x3(), MPI.DATATYPE_NULL], dest=0),
        "MPI.DATATYPE_NULL describes no elements",
        None,
    ),
    "not an MPI op": (
        lambda c: c.Allreduce(x3(), x3(), op="sum"),
        "Allreduce(op='sum')",
        MPI.ERR_OP,
    ),
    "not an op": (lambda c: c.allreduce(1, op="sum"), "allreduce(op='sum')", MPI.ERR_OP),
    "block count": (
        lambda c: c.Alltoall(np.zeros(3), np.zeros(3)),
        "count must be a multiple of 2 (nearest: 2 or 4)",
        None,
    ),
    "scatter items": (
        lambda c: c.scatter([1, 2, 3], root=c.rank),
        "expecting 2 items, got 3",
        None,
    ),
    "unpicklable": (lambda c: c.send(lambda: 0, dest=0), "cannot be pickled", None),
    "split color": (lambda c: c.Split(color=-4), "Split(color=-4)", MPI.ERR_ARG),
    "free world": (lambda c: c.Free(), "MPI_COMM_WORLD", MPI.ERR_COMM),
    "null recvbuf": (lambda c: c.Allreduce(x3(), None), "Allreduce(recvbuf=None)", MPI.ERR_ARG),
}


@pytest.mark.parametrize("name", list(BAD_CALLS))
def test_a_bad_call_raises_a_collsim_error_naming_it(name):
    call, words, error_class = BAD_CALLS[name]
    before = threading.active_count()
    with pytest.raises(ConfigError) as caught:
        run(2, lambda: call(MPI.COMM_WORLD))
    message = str(caught.value)
    assert words in message
    if error_class is None:  # mpi4py's own refusal: the exception it names is the one raised
        named = re.search(r"mpi4py raises (ValueError|TypeError|KeyError|BufferError)", message)
        assert named or "pickling" in message
        assert not named or isinstance(caught.value, getattr(builtins, named.group(1)))
    else:
        assert isinstance(caught.value, MPI.Exception)
        assert caught.value.Get_error_class() == error_class
        assert "mpi4py raises MPI.Exception with MPI_ERR_" in message
    assert threading.active_count() == before


def test_a_truncated_message_is_mpi_err_truncate():
    def main():
        comm = MPI.COMM_WORLD
        if comm.rank == 0:
            comm.Send(np.arange(5.0), dest=1, tag=1)
        else:
            comm.Recv(np.zeros(2), source=0, tag=1)

    with pytest.raises(
        MPI.Exception,
        match="5 MPI.DOUBLE elements .40 bytes. from rank 0 "
        r"\(tag 1\) is longer than the receive buffer of 2",
    ) as caught:
        run(2, main)
    assert caught.value.Get_error_class() == MPI.ERR_TRUNCATE


def test_a_buffer_message_into_recv_of_objects_says_so():
    def main():
        comm = MPI.COMM_WORLD
        if comm.rank == 0:
            comm.Send(np.arange(2.0), dest=1)
        else:
            comm.recv(source=0)

    with pytest.raises(MPI.Exception, match="float64 buffer of 2 elements, sent with an uppercase"):
        run(2, main)


def test_a_call_outside_a_run_says_how_to_run_it():
    with pytest.raises(ConfigError, match="collsim exec"):
        MPI.COMM_WORLD.Get_rank()


@pytest.mark.parametrize(
    "setting, words",
    [
        ({"algorithm": "warp"}, "algorithm='warp'"),
        ({"algorithm": {"all_reduce": "warp"}}, "'warp'"),
        ({"algorithm": {"gather": "ring"}}, "'gather'"),
        ({"algorithm": 3}, "algorithm=3"),
        ({"eager_limit": -1}, "eager_limit=-1"),
        ({"eager_limit": 1.5}, "eager_limit=1.5"),
    ],
)
def test_configure_refuses_bad_settings(setting, words):
    before = MPI.settings.current()
    with pytest.raises(ConfigError) as caught:
        MPI.configure(**setting)
    assert words in str(caught.value)
    assert MPI.settings.current() == before  # nothing half-set


BAD_VALUES = st.one_of(
    st.integers(-(2**62), -3),
    st.integers(2, 2**62),
    st.sampled_from([1.5, float("nan"), float("inf"), "x", "", None, True, (1,), [0]]),
)


@settings(max_examples=25)
@given(bad=BAD_VALUES, which=st.sampled_from(["root", "dest", "source", "tag", "color"]))
def test_fuzz_bad_arguments_name_the_value(bad, which):
    def main():
        comm = MPI.COMM_WORLD
        if which == "root":
            comm.Bcast(np.zeros(2), root=bad)
        elif which == "dest":
            comm.send(1, dest=bad)
        elif which == "source":
            comm.Recv(np.zeros(2), source=bad)
        elif which == "tag":
            comm.Send(np.zeros(2), dest=0, tag=bad)
        else:
            comm.Split(color=bad)

    if which == "tag" and bad is True:
        return  # True is refused too, but its repr is in every message
    outcome = check_api(run, 2, main, bad=repr(bad), timeout=20)
    if which == "color" and isinstance(bad, int) and not isinstance(bad, bool) and bad >= 0:
        assert outcome.error is None
    else:
        assert outcome.error is not None


# -- deadlocks ------------------------------------------------------------------------------


def both_recv_first():
    comm = MPI.COMM_WORLD
    buf = np.zeros(4)
    comm.Recv(buf, source=1 - comm.rank)  # both wait here: no send ever comes
    comm.Send(buf, dest=1 - comm.rank)


def test_both_ranks_recv_first_is_a_deadlock_naming_each_call_and_line():
    line = both_recv_first.__code__.co_firstlineno + 3
    before = threading.active_count()
    with pytest.raises(collsim.DeadlockError) as caught:
        run(2, both_recv_first)
    report = str(caught.value)
    for rank in (0, 1):
        assert f"rank {rank} waits in recv from rank {1 - rank}" in report
    assert report.count(f"called at test_mpi_errors.py:{line} in both_recv_first") == 2
    assert threading.active_count() == before


def skips_a_collective():
    comm = MPI.COMM_WORLD
    x, out = np.ones(4), np.zeros(4)
    if comm.rank != 2:
        comm.Allreduce(x, out)  # rank 2 never joins
    return out


def test_a_rank_that_skips_a_collective_is_named_in_the_deadlock_report():
    line = skips_a_collective.__code__.co_firstlineno + 4
    with pytest.raises(collsim.DeadlockError) as caught:
        run(3, skips_a_collective)
    report = str(caught.value)
    assert f"called at test_mpi_errors.py:{line} in skips_a_collective" in report
    assert "all_reduce" in report
    assert caught.value.stuck[((0, 1, 2), 0, "all_reduce")] == ([0, 1], [2])


def skips_an_object_bcast():
    comm = MPI.COMM_WORLD
    if comm.rank != 0:
        return comm.bcast(None, root=0)  # the root never calls it
    return None


def test_a_root_that_skips_an_object_bcast_is_a_deadlock():
    line = skips_an_object_bcast.__code__.co_firstlineno + 3
    with pytest.raises(collsim.DeadlockError) as caught:
        run(3, skips_an_object_bcast)
    report = str(caught.value)
    assert f"test_mpi_errors.py:{line} in skips_an_object_bcast" in report
    assert "MPI bcast call #0" in report  # the message the waiting ranks want names the call


# -- determinism ----------------------------------------------------------------------------


def busy_program():
    comm = MPI.COMM_WORLD
    r, k = comm.rank, comm.size
    x = np.arange(64.0) * (r + 1)
    out = np.empty_like(x)
    comm.Allreduce(x, out)
    comm.Bcast(out, root=k - 1)
    if r == 0:
        got = [comm.recv(source=MPI.ANY_SOURCE) for _ in range(k - 1)]
    else:
        comm.send({"rank": r, "sum": float(out.sum())}, dest=0)
        got = None
    sub = comm.Split(r % 2, -r)
    return got, sub.allgather(r), MPI.Wtime()


def test_the_same_program_twice_gives_byte_identical_traces():
    first, second = run(6, busy_program), run(6, busy_program)
    assert first.trace.to_chrome() == second.trace.to_chrome()
    assert first.returns == second.returns
