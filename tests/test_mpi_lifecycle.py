"""MPI's lifecycle and the small calls mpi4py's demo programs make, under `collsim exec`:
``mpi4py.rc``'s ``initialize`` and ``errors``, ``Init``/``Finalize`` once each per rank (MPI
4.1, section 11.2), the error handler a communicator starts with, ``Attach_buffer`` and
``Detach_buffer``, and a subclass of ``MPI.Intracomm`` made from a communicator.  Each
expected line is what mpi4py 4.1.2 on Open MPI 4.1 prints for the same program."""

import re
import textwrap

import pytest
from fuzzkit import run_cli


def rank_lines(stdout, rank):
    return re.findall(rf"^\[1,{rank}\]<stdout>:(.*)$", stdout, flags=re.M)


def run(tmp_path, body, n=2, status=0):
    path = tmp_path / "program.py"
    path.write_text(textwrap.dedent(body))
    outcome = run_cli(["exec", "-n", str(n), str(path)], timeout=120)
    assert outcome.status == status, outcome.stderr
    return [rank_lines(outcome.stdout, r) for r in range(n)]


def test_rc_initialize_false_leaves_each_rank_to_call_init_and_finalize(tmp_path):
    lines = run(
        tmp_path,
        """
        from mpi4py import rc
        rc.initialize = False
        from mpi4py import MPI
        print(MPI.Is_initialized(), MPI.Is_finalized())
        MPI.Init()
        print(MPI.Is_initialized(), MPI.Is_finalized())
        MPI.Finalize()
        print(MPI.Is_initialized(), MPI.Is_finalized())
        """,
    )
    assert lines == [["False False", "True False", "True True"]] * 2


def test_init_twice_and_finalize_twice_are_refused_by_name(tmp_path):
    lines = run(
        tmp_path,
        """
        from mpi4py import MPI
        for call in (MPI.Init, MPI.Finalize, MPI.Finalize):
            try:
                call()
                print(call.__name__, "ok")
            except MPI.Exception as exc:
                print(call.__name__, exc.Get_error_class() == MPI.ERR_OTHER, exc)
        """,
        n=1,
    )
    assert lines[0][0].startswith("Init True MPI.Init on rank 0: MPI is initialized already")
    assert lines[0][1] == "Finalize ok"
    assert lines[0][2].startswith("Finalize True MPI.Finalize on rank 0: MPI was finalized already")


@pytest.mark.parametrize(
    ("errors", "expected"),
    [(None, "ERRORS_RETURN"), ("fatal", "ERRORS_ARE_FATAL"), ("abort", "ERRORS_ABORT")],
)
def test_communicators_start_with_the_error_handler_rc_errors_names(tmp_path, errors, expected):
    setting = "" if errors is None else f"rc.errors = {errors!r}"
    lines = run(
        tmp_path,
        f"""
        from mpi4py import rc
        {setting}
        from mpi4py import MPI
        comms = [MPI.COMM_WORLD, MPI.COMM_SELF, MPI.COMM_WORLD.Dup(), MPI.COMM_WORLD.Split(0)]
        print(*[c.Get_errhandler() == MPI.{expected} for c in comms])
        comms[2].Set_errhandler(MPI.ERRORS_ARE_FATAL)
        print(comms[2].Get_errhandler() == MPI.ERRORS_ARE_FATAL)
        """,
    )
    assert lines == [["True True True True", "True"]] * 2


def test_detach_buffer_gives_back_the_attached_buffer_and_one_at_a_time(tmp_path):
    lines = run(
        tmp_path,
        """
        import mpi4py.rc
        from mpi4py import MPI
        buf = bytearray(100 + MPI.BSEND_OVERHEAD)
        MPI.Attach_buffer(buf)
        try:
            MPI.Attach_buffer(bytearray(8))
        except MPI.Exception as exc:
            print(exc.Get_error_class() == MPI.ERR_BUFFER)
        print(MPI.Detach_buffer() is buf, MPI.Detach_buffer(), MPI.MODE_WRONLY)
        """,
    )
    assert lines == [["True", "True None 4"]] * 2


def test_a_subclass_of_intracomm_takes_its_communicator_in_new(tmp_path):
    # mpi4py's reductions demo: class Intracomm(MPI.Intracomm) with __new__(cls, comm)
    lines = run(
        tmp_path,
        """
        from mpi4py import MPI
        class Ring(MPI.Intracomm):
            def __new__(cls, comm=None):
                return super().__new__(cls, comm)
            def total(self, x):
                for _ in range(self.size - 1):
                    x = self.rank + self.sendrecv(x, (self.rank + 1) % self.size,
                                                  source=(self.rank - 1) % self.size)
                return x
        ring = Ring(MPI.COMM_WORLD.Dup())
        print(type(ring).__name__, ring.rank, ring.size, ring.total(ring.rank))
        """,
        n=3,
    )
    assert [line[0] for line in lines] == [f"Ring {r} 3 3" for r in range(3)]


def test_mpi_4_1_hardware_info_is_refused_by_name_as_mpi4py_refuses_a_call_its_mpi_lacks(
    tmp_path,
):
    # a portable program asks only when Get_version() says 4.1 (mpi4py's test_environ
    # accepts NotImplementedError below it)
    lines = run(
        tmp_path,
        """
        from mpi4py import MPI
        try:
            MPI.Get_hw_resource_info()
        except NotImplementedError as refused:
            print(MPI.Get_version() < (4, 1), refused)
        """,
        n=1,
    )
    assert lines == [
        [
            "True MPI.Get_hw_resource_info: MPI 4.1's hardware resource info (collsim "
            "follows MPI 3.1) is not simulated by collsim; use point-to-point or collective "
            "calls"
        ]
    ]
