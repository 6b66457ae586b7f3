"""Reports that send the reader the right way (issue 25, item 9): a tag mismatch names
the message that waits with the other tag, a rank that skipped a barrier is named with
where it finished, and the watchdog groups a peer's pending messages into one line per
call, its steps as a range.  Through rank programs (`Cluster.run`) and, for the first
two, under `collsim exec`."""

import re

import numpy as np
import pytest
from fuzzkit import run_cli

import collsim
from collsim import topology
from collsim.collectives.records import CollectiveStep
from collsim.errors import CollsimError, DeadlockError, WatchdogTimeout
from collsim.runtime.faults import CrashRank, Faults

SENT_1_AWAITED_0 = "rank 0 sent tag 1 to rank 1, which waits for tag 0"
MPI_MISMATCH = (
    "rank 0 sent MPI tag 1 (communicator 0) to rank 1, which waits for MPI tag 0 (communicator 0)"
)
TAG_MISMATCH_SCRIPT = """\
import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
if comm.Get_rank() == 0:
    comm.Send(np.ones(4), dest=1, tag=1)
else:
    comm.Recv(np.zeros(4), source=0, tag=0)
"""
SKIPS_THE_BARRIER = """\
from mpi4py import MPI

comm = MPI.COMM_WORLD
total = comm.allreduce(1)
if comm.Get_rank() != 2:
    comm.Barrier()
"""


def _deadlock(program, k=2):
    with pytest.raises(DeadlockError) as info:
        collsim.Cluster(topology.ring(k)).run(program)
    return info.value, str(info.value)


# -- a tag mismatch names the message sent with the other tag ----------------------------


def test_a_blocking_send_and_recv_with_different_tags_name_the_pending_message():
    def program(rank):
        if rank.id == 0:
            yield rank.send(1, np.ones(2), tag=1)
        else:
            yield rank.recv(0, tag=0)

    error, text = _deadlock(program)
    assert error.waiting[1] == [f"recv from rank 0 (tag 0): {SENT_1_AWAITED_0}"]
    assert error.waiting[0] == [
        "send to rank 1 (tag 1): rank 1 waits for tag 0 from rank 0, which sent tag 1"
    ]
    assert "never sent it" not in text and "never posted" not in text


def test_a_mismatch_behind_a_wait_on_handles_is_named_once():
    def program(rank):
        if rank.id == 0:
            handle = yield rank.isend(1, np.ones(2), tag=1)
            yield rank.wait(handle)
        else:
            got = yield rank.exchange(recvs=[(0, 0)])
            return got

    _, text = _deadlock(program)
    assert text.count(SENT_1_AWAITED_0) == 1
    assert text.splitlines()[-1] == SENT_1_AWAITED_0


def test_a_run_that_ends_with_a_mismatch_names_both_ends_in_one_line():
    def program(rank):
        if rank.id == 0:
            yield rank.isend(1, np.ones(2), tag=1)
        else:
            yield rank.irecv(0, tag=0)

    with pytest.raises(CollsimError) as info:
        collsim.Cluster(topology.ring(2)).run(program)
    assert str(info.value) == f"messages left unmatched when the run ended:\n  {SENT_1_AWAITED_0}"


def test_collsim_exec_names_the_mpi_message_sent_with_the_other_tag(tmp_path):
    script = tmp_path / "tags.py"
    script.write_text(TAG_MISMATCH_SCRIPT, encoding="utf-8")
    outcome = run_cli(["exec", "-n", "2", script])
    assert outcome.status != 0
    line = next(x for x in outcome.stderr.splitlines() if "rank 1 waits in" in x)
    assert line.startswith(
        f"  rank 1 waits in recv from rank 0 (MPI tag 0 (communicator 0)): {MPI_MISMATCH}"
    )
    assert "never sent it" not in outcome.stderr


# -- a rank that skipped a barrier is named, with where it finished ----------------------


def test_a_rank_that_skipped_the_barrier_is_named_with_where_it_finished():
    def skips(rank):
        yield rank.compute(seconds="1ms")
        if rank.id != 2:  # the barrier: an all-reduce of one element
            yield from rank.all_reduce(np.zeros(1))

    _, text = _deadlock(skips, k=3)
    assert (
        "rank 2 finished at t=1 ms when its program skips() returned, while ranks [0, 1] "
        "wait for it" in text.splitlines()
    )


def test_collsim_exec_names_the_rank_that_skipped_the_barrier_and_its_last_line(tmp_path):
    script = tmp_path / "skip.py"
    script.write_text(SKIPS_THE_BARRIER, encoding="utf-8")
    outcome = run_cli(["exec", "-n", "3", script])
    assert outcome.status != 0
    finished = [x for x in outcome.stderr.splitlines() if " finished at " in x]
    assert len(finished) == 1
    assert re.fullmatch(
        r"rank 2 finished at t=[\d.]+ us after its last call at skip\.py:4 "
        r"in <module>, while ranks \[0, 1\] wait for it",
        finished[0],
    )
    assert "rank 0 waits in wait for recv from rank 2 MPI barrier call #1" in outcome.stderr


def test_a_peer_that_finished_is_named_where_a_rank_waits_for_it():
    def program(rank):
        if rank.id == 1:
            yield rank.recv(0)
        else:
            yield rank.compute(seconds="2ms")

    error, _ = _deadlock(program)
    assert error.waiting[1] == [
        "recv from rank 0 (tag 0): rank 0 never sent it: it finished at t=2 ms when its "
        "program program() returned"
    ]


# -- the watchdog: one line per peer and call, steps as a range --------------------------


def _crash_rank_1(program, k=4):
    faults = Faults(crash_ranks=(CrashRank(1, 0.0),), watchdog_timeout=1.0)
    with pytest.raises(WatchdogTimeout) as info:
        collsim.Cluster(topology.ring(k), faults=faults).run(program)
    return str(info.value)


def test_the_watchdog_groups_a_calls_pending_steps_to_one_peer_into_a_range():
    def program(rank):  # seven steps of call #3 posted at once to the crashed rank 1
        if rank.id == 0:
            steps = [CollectiveStep("all_reduce", "ring", 0, 3, s) for s in range(7)]
            handles = []
            for tag in steps:
                handles.append((yield rank.isend(1, np.ones(2), tag=tag)))
            handles.append((yield rank.isend(2, np.ones(2), tag=steps[0])))
            yield rank.wait(*handles)

    text = _crash_rank_1(program)
    line = next(x for x in text.splitlines() if x.startswith("  rank 0:"))
    assert line.endswith(
        "waits for send to rank 1: all_reduce call #3, steps 1–7; "
        "send to rank 2: all_reduce call #3, step 1"
    )
    assert "CollectiveStep(" not in text
    assert max(len(x) for x in text.splitlines()) <= 200


def test_the_watchdog_report_of_a_multi_channel_ring_keeps_every_line_short():
    outcome = run_cli(
        [
            "run",
            "all-reduce",
            "-k",
            "16",
            "--nodes",
            "2",
            "--topology",
            "dgx-a100",
            "--algorithm",
            "nccl_ring",
            "-s",
            "64MiB",
            "--count-only",
            "--crash-rank",
            "1@45us",  # in step 2: step 1 ends after NCCL's 8.4 us base latency and its hop
        ],
        bad="1@45us",
    )
    assert outcome.status == 1
    lines = outcome.stderr.splitlines()
    assert max(len(x) for x in lines) <= 200
    # rank 1 waited on four peers: one line each, its 7 channels counted on one
    at = lines.index(
        "  rank 1: CRASHED at t=45 us; last entered #0 all_reduce, last completed none;"
    )
    assert lines[at + 1 : at + 6] == [
        "      was waiting in all_reduce #0, for:",
        "        send to rank 2: all_reduce call #0, step 2 (x7)",
        "        send to rank 9: all_reduce call #0, step 2",
        "        recv from rank 0: all_reduce call #0, step 2 (x7)",
        "        recv from rank 9: all_reduce call #0, step 2",
    ]


def test_the_flight_recorder_keeps_the_collective_a_rank_entered_as_a_typed_record():
    """What the deadlock and watchdog reports read (the collective a rank entered and the
    last it completed) is the ``Enter`` record it yielded, read by field name, not a
    ``(group, seq, call)`` tuple read by position (issue 26: typed records end to end)."""

    def program(rank):
        yield from rank.all_reduce(np.ones(4))
        execution = rank._execution
        last = execution.completed[rank.id]
        assert execution.entered[rank.id] is last
        return last.group, last.seq, last.call.name

    out = collsim.Cluster(topology.ring(4), fast=False).run(program)
    assert out.returns == [((0, 1, 2, 3), 0, "all_reduce")] * 4
