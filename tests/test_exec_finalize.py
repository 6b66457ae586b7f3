"""A message no rank received, once every rank has ended, is what MPI implementations warn
of at finalize: `collsim exec` warns on stderr and exits 0, as mpirun does; ``--strict``
(and ``strict=True`` in the library) makes it an error.  Generator programs on a Cluster
still raise: there an unreceived message is a mistake of the program being taught."""

import numpy as np
import pytest

import collsim
from collsim import launch
from collsim.cli import main
from collsim.errors import UnmatchedMessage, UnmatchedMessagesError

SENDS_EAGERLY = """\
from mpi4py import MPI

comm = MPI.COMM_WORLD
if comm.Get_rank() == 0:
    comm.send("nobody reads this", dest=1, tag=3)
print("done")
"""


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "eager.py"
    path.write_text(SENDS_EAGERLY, encoding="utf-8")
    return path


def test_an_unreceived_message_is_a_warning_and_the_run_exits_0(script, capsys):
    status = main(["exec", "-n", "2", str(script)])
    out, err = capsys.readouterr()
    assert status == 0, err
    assert "[1,0]<stdout>:done" in out and "[1,1]<stdout>:done" in out
    assert "collsim exec: warning: messages left unmatched" in err
    assert "rank 0 sent to rank 1" in err and "collsim: error" not in err
    assert "# simulated time" in err  # the run's summary follows, as for any run


def test_strict_makes_it_an_error(script, capsys):
    status = main(["exec", "--strict", "-n", "2", str(script)])
    _, err = capsys.readouterr()
    assert status != 0
    assert "collsim: error: messages left unmatched" in err and "rank 0 sent to rank 1" in err


def test_the_library_keeps_them_on_the_result_or_raises_when_strict(script):
    result = launch.exec_script(script, n=2, echo=False)
    assert result.unmatched == (UnmatchedMessage("send", 0, 1, result.unmatched[0].tag),)
    (line,) = result.unmatched_report
    assert "rank 0 sent to rank 1" in line
    assert result.stdout == ["done\n", "done\n"]
    with pytest.raises(UnmatchedMessagesError) as info:
        launch.exec_script(script, n=2, echo=False, strict=True)
    assert info.value.result.time == result.time  # the run completed either way


def test_a_generator_program_still_raises():
    def program(rank):
        if rank.id == 0:
            yield rank.isend(1, np.ones(2))

    with pytest.raises(UnmatchedMessagesError, match="never posted a matching recv") as info:
        collsim.Cluster(collsim.topology.ring(2)).run(program)
    assert info.value.messages[0].kind == "send" and info.value.result.ranks == 2
