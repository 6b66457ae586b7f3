"""``mpi4py.util.dtlib`` (collsim.mpi.dtlib): numpy dtypes to MPI datatypes and back, checked
against what real mpi4py 4.1.2 gave on Open MPI 4.1.4 for the same calls, against numpy's
own layout of a record (the bytes a message of the type moves are exactly the fields), and
through ``collsim exec`` as a program imports it."""

import textwrap

import numpy as np
import pytest
from fuzzkit import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

import collsim
from collsim import mpi as MPI
from collsim.mpi import dtlib
from collsim.runtime import blocking

# what real mpi4py's to_numpy_dtype printed (repr) for these types, on this machine
REAL_MPI4PY = [
    (
        lambda: MPI.INT.Create_hvector(3, 4, 25),
        "dtype({'names': ['f0', 'f1', 'f2'], 'formats': [('<i4', (4,)), ('<i4', (4,)), "
        "('<i4', (4,))], 'offsets': [0, 25, 50], 'itemsize': 68})",
    ),
    (
        lambda: MPI.INT.Create_indexed([4] * 3, [1, 6, 12]),
        "dtype({'names': ['f0', 'f1', 'f2'], 'formats': [('<i4', (4,)), ('<i4', (4,)), "
        "('<i4', (4,))], 'offsets': [4, 24, 48], 'itemsize': 64}, align=True)",
    ),
    (lambda: MPI.SHORT_INT, "dtype([('f0', '<i2'), ('f1', '<i4')], align=True)"),
    (lambda: MPI.LONG_DOUBLE_INT, "dtype([('f0', '<f16'), ('f1', '<i4')], align=True)"),
    (lambda: MPI.BYTE, "dtype('uint8')"),
    (lambda: MPI.CHARACTER, "dtype('S1')"),
    (lambda: MPI.C_BOOL, "dtype('bool')"),
    (lambda: MPI.Datatype.Create_f90_integer(3), "dtype('int16')"),
]


@pytest.mark.parametrize("make, printed", REAL_MPI4PY)
def test_to_numpy_dtype_gives_what_real_mpi4py_gave(make, printed):
    assert repr(dtlib.to_numpy_dtype(make())) == printed


def test_typealign_and_typecode_as_real_mpi4py_reports_them():
    # real mpi4py: MPI._typealign / MPI._typecode of the same types
    aligns = [MPI.INT.Create_contiguous(3), MPI.INT.Dup(), MPI.SHORT_INT, MPI.LONG_DOUBLE]
    assert [MPI._typealign(t) for t in aligns] == [None, 4, 4, 16]
    assert MPI._typealign(MPI.Datatype.Create_f90_integer(3)) == 2
    codes = [MPI.BYTE, MPI.CHARACTER, MPI.LONG_DOUBLE, MPI.SHORT_INT]
    assert [MPI._typecode(t) for t in codes] == ["B", "c", "g", None]
    record = dtlib.from_numpy_dtype(np.dtype("i,d", align=True))
    assert record.decode()[1:] == ("RESIZED", {"lb": 0, "extent": 16})
    assert MPI._typealign(record) is None


SCALARS = list("?bhilqBHILQfdgFD")


@st.composite
def records(draw):
    """A structured dtype of 1-4 fields (scalars or small subarrays), packed or aligned."""
    fields = []
    for i in range(draw(st.integers(1, 4))):
        code = draw(st.sampled_from(SCALARS))
        shape = draw(st.sampled_from([(), (3,), (2, 3)]))
        fields.append((f"f{i}", code, shape) if shape else (f"f{i}", code))
    return np.dtype(fields, align=draw(st.booleans()))


@settings(max_examples=60, deadline=None)
@given(records())
def test_a_record_goes_to_mpi_and_back_unchanged(record):
    datatype = dtlib.from_numpy_dtype(record)
    assert datatype.Get_extent() == (0, record.itemsize)
    assert datatype.Get_size() == sum(record.fields[n][0].itemsize for n in record.names)
    assert dtlib.to_numpy_dtype(datatype) == record


@settings(max_examples=25, deadline=None)
@given(records(), st.integers(1, 4))
def test_a_message_of_the_type_moves_exactly_the_fields(record, count):
    # numpy's own layout is the oracle: every field arrives, the padding stays untouched
    sent = np.zeros(count, record)
    sent.view(np.uint8)[:] = np.arange(sent.nbytes) % 251 + 1
    got = np.zeros(count, record)
    datatype = dtlib.from_numpy_dtype(record)

    def main():
        comm = MPI.COMM_WORLD
        comm.Sendrecv([sent, count, datatype], dest=0, recvbuf=[got, count, datatype], source=0)

    blocking.run(collsim.Cluster(collsim.topology.ring(1)), main)
    for name in record.names:
        np.testing.assert_array_equal(got[name], sent[name])
    padding = np.ones(record.itemsize, bool)
    for name in record.names:
        field, offset = record.fields[name][:2]
        padding[offset : offset + field.itemsize] = False
    assert not got.view(np.uint8).reshape(count, -1)[:, padding].any()


def test_fortran_subarrays_come_back_in_numpys_c_order():
    fortran = MPI.INT.Create_subarray([2, 3, 4], [2, 3, 4], [0, 0, 0], MPI.ORDER_FORTRAN)
    assert dtlib.to_numpy_dtype(fortran) == np.dtype(("i4", (4, 3, 2)))
    assert dtlib.from_numpy_dtype("(3,4)f8").decode()[1] == "SUBARRAY"
    assert dtlib.from_numpy_dtype("(5,)f8").decode()[1:] == ("CONTIGUOUS", {"count": 5})


@pytest.mark.parametrize(
    "call, bad, says",
    [
        (lambda: dtlib.from_numpy_dtype(">i4"), ">i4", "native byte order"),
        (lambda: dtlib.from_numpy_dtype("O"), "O", "Python objects"),
        (lambda: dtlib.to_numpy_dtype(MPI.DATATYPE_NULL), "DATATYPE_NULL", "null"),
        (lambda: dtlib.to_numpy_dtype(MPI.INT.Create_resized(0, 32)), "RESIZED", "holes"),
        (
            lambda: dtlib.to_numpy_dtype(MPI.INT.Create_subarray([2], [1], [0])),
            "subsizes [1] of sizes [2]",
            "part of an array",
        ),
    ],
)
def test_what_has_no_counterpart_is_a_value_error_that_says_why(call, bad, says):
    with pytest.raises(ValueError) as raised:
        call()
    assert bad in str(raised.value) and says in str(raised.value)


def test_without_numpy_dtlib_gives_the_specs_numpy_would_take(monkeypatch):
    monkeypatch.setattr(dtlib, "_np_dtype", None)
    assert dtlib.to_numpy_dtype(MPI.INT.Create_contiguous(7)) == ("i", (7,))
    spec = dtlib.to_numpy_dtype(MPI.Datatype.Create_struct([1, 1], [0, 8], [MPI.DOUBLE] * 2))
    assert spec["formats"] == ["d", "d"] and spec["itemsize"] == 16 and spec["aligned"]
    with pytest.raises(RuntimeError, match="numpy is not available"):
        dtlib.from_numpy_dtype("i4")


def test_a_program_sends_a_record_array_with_dtlib_under_collsim_exec(tmp_path):
    program = tmp_path / "records.py"
    program.write_text(
        textwrap.dedent("""
        import numpy as np
        from mpi4py import MPI
        from mpi4py.util.dtlib import from_numpy_dtype
        particle = np.dtype([("pos", "f8", 3), ("id", "i4")], align=True)
        mpi_particle = from_numpy_dtype(particle).Commit()
        comm = MPI.COMM_WORLD
        if comm.rank == 0:
            out = np.zeros(2, particle)
            out["pos"], out["id"] = [[1, 2, 3], [4, 5, 6]], [7, 8]
            comm.Send([out, mpi_particle], dest=1)
        else:
            got = np.empty(2, particle)
            comm.Recv([got, mpi_particle], source=0)
            print(got["pos"].sum(), got["id"].tolist(), mpi_particle.Get_extent())
        """)
    )
    outcome = run_cli(["exec", "-n", "2", str(program)], timeout=120)
    assert outcome.status == 0, outcome.stderr
    assert "[1,1]<stdout>:21.0 [7, 8] (0, 32)" in outcome.stdout
