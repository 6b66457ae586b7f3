"""Matched probes (``Mprobe``, ``Improbe``, ``MPI.Message``) as MPI defines them and mpi4py
spells them: the classmethods ``Message.Probe``/``Iprobe``, a ``Message.Irecv`` that is
pending until the data has arrived, the predefined handles that no rank's receive changes,
and pickling as mpi4py pickles handles.  The oracles are numpy arrays sent, the MPI
standard's rules (a probed message is received once; ``MPI_Mrecv`` of ``MESSAGE_NULL`` is
``MPI_ERR_REQUEST``, as Open MPI reports it) and mpi4py 4.1.2's behaviour on Open MPI."""

import pickle

import numpy as np
import pytest
from fuzzkit import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

import collsim
from collsim import mpi as MPI


def returns(main, n):
    return collsim.exec(main, n=n, echo=False).returns


@settings(max_examples=8)
@given(k=st.integers(2, 5), count=st.integers(0, 40), lowercase=st.booleans())
def test_message_probe_and_iprobe_are_comm_mprobe_and_improbe(k, count, lowercase):
    # every rank sends its numbers to the next one and receives the previous one's through
    # Message.Probe (blocking) or a loop of Message.Iprobe, as mpi4py's classmethods do
    def main():
        comm = MPI.COMM_WORLD
        right, left = (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size
        probe = MPI.Message.probe if lowercase else MPI.Message.Probe
        iprobe = MPI.Message.iprobe if lowercase else MPI.Message.Iprobe
        nothing_yet = iprobe(comm, left, 6)  # no rank sends tag 6
        comm.Send(np.arange(count, dtype=np.int64) * (comm.rank + 1), dest=right, tag=4)
        comm.Send(np.full(count, comm.rank, dtype=np.int64), dest=right, tag=5)
        got = np.full(count, -1, dtype=np.int64)
        status = MPI.Status()
        probe(comm, left, 4, status).Recv(got)
        message = None
        while not message:
            message = iprobe(comm, left, 5)
        second = np.full(count, -1, dtype=np.int64)
        message.Recv(second)
        return nothing_yet, status.source, status.Get_count(MPI.INT64_T), got, second

    for rank, (nothing_yet, source, n, got, second) in enumerate(returns(main, k)):
        left = (rank - 1) % k
        assert nothing_yet is None and (source, n) == (left, count)
        assert np.array_equal(got, np.arange(count) * (left + 1))
        assert np.array_equal(second, np.full(count, left))


def test_a_probed_messages_irecv_is_pending_until_the_data_has_arrived():
    # 1 MiB at 100 GB/s takes about 10 us after the 5 us latency: a request that is done
    # at once would mean a blocking receive hidden behind Irecv; Waitall completes it as
    # mpi4py's tests do
    def main():
        comm = MPI.COMM_WORLD
        data = np.arange(2**17, dtype=np.float64)
        if comm.rank == 1:
            comm.Isend(data, dest=0, tag=3).Wait()
            return None
        message = comm.Mprobe(1, 3)
        got = np.zeros_like(data)
        request = message.Irecv(got)
        first_test = request.Test()
        status = MPI.Status()
        MPI.Request.Waitall([request], [status])
        return message == MPI.MESSAGE_NULL, first_test, request, status, np.array_equal(got, data)

    used_up, first_test, request, status, same = returns(main, 2)[0]
    assert used_up and first_test is False and same
    assert request == MPI.REQUEST_NULL
    assert (status.source, status.tag, status.Get_count(MPI.DOUBLE)) == (1, 3, 2**17)


def test_receiving_message_no_proc_leaves_the_predefined_handle_for_every_rank(tmp_path):
    # the ranks of one run share MPI's predefined handles, as mpirun's processes share
    # their values: rank 0 receiving MESSAGE_NO_PROC must not make it MESSAGE_NULL for rank 1
    program = tmp_path / "noproc.py"
    program.write_text(
        "from mpi4py import MPI\n"
        "comm = MPI.COMM_WORLD\n"
        "if comm.rank == 0:\n"
        "    MPI.MESSAGE_NO_PROC.recv()\n"
        "    MPI.MESSAGE_NO_PROC.Irecv(None).Wait()\n"
        "    copy = MPI.Message(MPI.MESSAGE_NO_PROC)\n"
        "    print(copy == MPI.MESSAGE_NO_PROC, copy.recv(), copy == MPI.MESSAGE_NULL)\n"
        "comm.Barrier()\n"
        "print(comm.rank, bool(MPI.MESSAGE_NO_PROC), MPI.MESSAGE_NO_PROC == MPI.MESSAGE_NULL)\n"
    )
    outcome = run_cli(["exec", "-n", "2", str(program)], timeout=120)
    assert outcome.status == 0, outcome.stderr
    assert "[1,0]<stdout>:True None True" in outcome.stdout
    assert "[1,0]<stdout>:0 True False" in outcome.stdout
    assert "[1,1]<stdout>:1 True False" in outcome.stdout


def test_the_message_of_proc_null_is_message_no_proc_and_its_receive_a_request():
    def main():
        comm = MPI.COMM_WORLD
        message = comm.mprobe(MPI.PROC_NULL)
        found = message == MPI.MESSAGE_NO_PROC, message != MPI.MESSAGE_NULL
        request = message.irecv()
        before = request != MPI.REQUEST_NULL, message == MPI.MESSAGE_NULL
        status = MPI.Status()
        got = request.wait(status)
        return found, before, got, request == MPI.REQUEST_NULL, status.source, status.tag

    assert returns(main, 1) == [((True, True), (True, True), None, True, MPI.PROC_NULL, -1)]


def test_handles_of_messages_copy_compare_and_pickle_as_in_mpi4py():
    for predefined in (MPI.MESSAGE_NULL, MPI.MESSAGE_NO_PROC):
        assert pickle.loads(pickle.dumps(predefined)) is predefined
        copy = pickle.loads(pickle.dumps(MPI.Message(predefined)))
        assert copy is not predefined and copy == predefined
    assert MPI.Message() == MPI.MESSAGE_NULL != MPI.MESSAGE_NO_PROC
    assert not MPI.MESSAGE_NULL and MPI.MESSAGE_NO_PROC
    with pytest.raises(TypeError, match="MPI.Message\\(42\\)"):
        MPI.Message(42)

    def main():
        comm = MPI.COMM_SELF
        request = comm.Isend(b"ab", 0, 0)
        message = comm.Mprobe(0, 0)
        other = MPI.Message(message)
        refused = []
        for handle in (request, message):
            with pytest.raises(ValueError) as refusal:
                pickle.dumps(handle)
            refused.append(str(refusal.value))
        got = bytearray(2)
        message.Recv(got)
        request.Wait()
        return refused, other != message, bytes(got)

    refused, stale_copy_differs, got = returns(main, 1)[0]
    assert "MPI.Request" in refused[0] and "MPI.Message" in refused[1]
    assert stale_copy_differs and got == b"ab"


def test_a_message_is_received_once_then_its_receive_is_refused_by_name():
    def main():
        comm = MPI.COMM_SELF
        comm.send("once", 0, 0)
        message = comm.mprobe(0, 0)
        got = message.recv()
        with pytest.raises(MPI.Exception) as refusal:
            message.recv()
        return got, refusal.value.Get_error_class(), str(refusal.value)

    got, error_class, text = returns(main, 1)[0]
    assert got == "once" and error_class == MPI.ERR_REQUEST
    assert "MPI.MESSAGE_NULL" in text and "Mprobe" in text


def test_the_classmethods_refuse_what_is_not_a_communicator_and_name_bad_peers():
    def main():
        refusals = []
        for call, args in (
            (MPI.Message.Iprobe, ("world", 0, 0)),
            (MPI.Message.Probe, (MPI.COMM_WORLD, 9, 0)),
            (MPI.Message.iprobe, (MPI.COMM_WORLD, 0, -5)),
        ):
            with pytest.raises((TypeError, MPI.Exception)) as refusal:
                call(*args)
            refusals.append(str(refusal.value))
        return refusals

    not_a_comm, bad_source, bad_tag = returns(main, 2)[0]
    assert "'world'" in not_a_comm and "communicator" in not_a_comm
    assert "source=9" in bad_source and "0..1" in bad_source
    assert "tag=-5" in bad_tag and "MPI.ANY_TAG" in bad_tag


def test_a_probe_that_no_running_rank_can_answer_is_a_deadlock_not_a_poll_to_the_guard(tmp_path):
    # ranks 1 and 2 send tag 8 and return; rank 0 probes for tag 7, which nobody will ever
    # send: an MPI program hangs there; collsim polled until --max-ops (5 s of wall time
    # with the CLI's guard, minutes under the conformance runs' 3,000,000)
    program = tmp_path / "probe.py"
    program.write_text(
        "from mpi4py import MPI\n"
        "comm = MPI.COMM_WORLD\n"
        "if comm.rank == 0:\n"
        "    comm.Mprobe(source=MPI.ANY_SOURCE, tag=7)\n"
        "else:\n"
        "    comm.send('another tag', dest=0, tag=8)\n"
    )
    outcome = run_cli(["exec", "-n", "3", str(program)], timeout=120)
    assert outcome.status == 1
    assert "Mprobe(source=MPI.ANY_SOURCE, tag=7) on rank 0" in outcome.stderr
    assert "every other rank of the communicator has ended" in outcome.stderr
    assert "max-ops" not in outcome.stderr

    def main():
        comm = MPI.COMM_WORLD
        if comm.rank == 0:  # rank 1 is still running when the probe starts: it waits
            status = MPI.Status()
            comm.Probe(source=1, tag=7, status=status)
            late = comm.recv(source=1, tag=7)
            with pytest.raises(collsim.DeadlockError, match="Probe\\(source=1, tag=7\\)"):
                comm.Probe(source=1, tag=7)  # rank 1 has returned by now
            with pytest.raises(collsim.DeadlockError, match="the caller's own"):
                comm.Iprobe(source=0) or comm.Probe(source=0)
            return status.source, late
        collsim.compute(seconds=1e-3)
        comm.send("late", dest=0, tag=7)
        return None

    assert returns(main, 2)[0] == (1, "late")
