"""``MPI.Get_address``, ``Aint_add`` and ``Aint_diff``: absolute addresses, checked against
the addresses Python's ``array`` module and numpy report for the same memory; the MPI
idiom they serve (a struct datatype's displacements as differences of field addresses)
under ``collsim exec``; and ``MPI.BOTTOM`` with absolute addresses refused by name."""

import array
import textwrap

import numpy as np
import pytest
from fuzzkit import run_cli
from hypothesis import given
from hypothesis import strategies as st

import collsim
from collsim import mpi as MPI
from collsim.runtime import blocking


def test_the_address_is_where_python_and_numpy_say_the_memory_is():
    ints = array.array("i", range(10))
    assert MPI.Get_address(ints) == ints.buffer_info()[0]
    x = np.arange(10, dtype="i")
    assert MPI.Get_address(x) == x.__array_interface__["data"][0]
    assert MPI.Get_address(x[3:]) - MPI.Get_address(x) == 3 * x.itemsize
    with pytest.raises(BufferError, match="not contiguous"):  # strided: mpi4py refuses it
        MPI.Get_address(x[::2][1:])
    assert MPI.Get_address(None) == MPI.Get_address(MPI.BOTTOM) == 0


@given(st.integers(-(2**62), 2**62), st.integers(-(2**62), 2**62))
def test_aint_add_and_diff_are_address_arithmetic(base, disp):
    assert MPI.Aint_add(base, disp) == base + disp
    assert MPI.Aint_diff(MPI.Aint_add(base, disp), base) == disp


def test_aint_arithmetic_refuses_what_is_not_an_integer():
    with pytest.raises(TypeError):
        MPI.Aint_add(1.5, 2)


def test_a_struct_built_from_field_addresses_moves_the_fields(tmp_path):
    program = tmp_path / "struct.py"
    program.write_text(
        textwrap.dedent("""
        import numpy as np
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        particle = np.zeros(1, [("id", "i4"), ("pad", "i4"), ("x", "f8", 2)])
        base = MPI.Get_address(particle)
        disps = [MPI.Aint_diff(MPI.Get_address(particle[name]), base) for name in ("id", "x")]
        kind = MPI.Datatype.Create_struct([1, 2], disps, [MPI.INT, MPI.DOUBLE]).Commit()
        if comm.rank == 0:
            particle["id"], particle["pad"], particle["x"] = 7, 99, [1.5, 2.5]
            comm.Send([particle, 1, kind], dest=1)
        else:
            comm.Recv([particle, 1, kind], source=0)
            print(disps, int(particle["id"][0]), int(particle["pad"][0]), particle["x"].tolist())
        """)
    )
    outcome = run_cli(["exec", "-n", "2", str(program)], timeout=120)
    assert outcome.status == 0, outcome.stderr
    # the padding field is not in the type: it stays 0 on the receiver
    assert "[1,1]<stdout>:[0, 8] 7 0 [[1.5, 2.5]]" in outcome.stdout


def test_bottom_with_absolute_addresses_is_refused_by_name():
    x = np.arange(4.0)
    got = np.zeros(4)
    absolute = MPI.Datatype.Create_struct([4], [MPI.Get_address(x)], [MPI.DOUBLE])

    def main():
        MPI.COMM_WORLD.Sendrecv([MPI.BOTTOM, 1, absolute], 0, recvbuf=got, source=0)

    with pytest.raises(NotImplementedError, match="MPI.BOTTOM with a datatype of absolute"):
        blocking.run(collsim.Cluster(collsim.topology.ring(1)), main)
