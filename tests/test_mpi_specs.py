"""Buffer specs (message specifications) as mpi4py parses them.

The oracle is mpi4py's message parser as its documentation and test_msgspec describe it:
``[buf, count, displ, datatype]`` in any of its shorter forms, with a tuple in the
count's place meaning ``(count, displ)``, every part that is None inferred, the
displacement counted in elements; and the exception mpi4py raises for each bad spec
(ValueError, TypeError, KeyError, BufferError), which collsim raises too, as a
``ConfigError`` that names the value.
"""

import array

import numpy as np
import pytest
from fuzzkit import check_api
from hypothesis import given, settings
from hypothesis import strategies as st

import collsim
from collsim import mpi as MPI
from collsim.errors import ConfigError


def on_one_rank(main):
    return collsim.exec(main, n=1).returns[0]


def sendrecv(send, recv):
    MPI.COMM_SELF.Sendrecv(send, 0, 0, recv, 0, 0)


DATATYPE_OF_CODE = {
    "b": "SIGNED_CHAR",
    "h": "SHORT",
    "i": "INT",
    "l": "LONG",
    "B": "UNSIGNED_CHAR",
    "H": "UNSIGNED_SHORT",
    "I": "UNSIGNED",
    "L": "UNSIGNED_LONG",
    "f": "FLOAT",
    "d": "DOUBLE",
}


@given(n=st.integers(1, 9), data=st.data(), code=st.sampled_from(sorted(DATATYPE_OF_CODE)))
def test_count_and_displacement_select_the_elements_numpy_slicing_selects(n, data, code):
    displ = data.draw(st.integers(0, n), label="displ")
    count = data.draw(st.integers(0, n - displ), label="count")
    named = getattr(MPI, DATATYPE_OF_CODE[code])
    datatype = data.draw(st.sampled_from([None, code, named]), label="datatype")
    forms = [  # (the spec's items after the buffer, the slice of elements it names)
        ([(count, displ)], slice(displ, displ + count)),
        ([count, displ, datatype], slice(displ, displ + count)),
        ([(count, displ), datatype], slice(displ, displ + count)),
        ([(None, displ)], slice(displ, n)),  # no count: the rest of the buffer
        ([None, displ, datatype], slice(displ, n)),
        ([count], slice(0, count)),
        ([None, None], slice(0, n)),
    ]

    def main():
        landed = []
        for tail, _ in forms:
            recv = np.zeros(n, code)
            sendrecv([np.arange(1, n + 1).astype(code), *tail], [recv, *tail])
            landed.append(recv.tolist())
        return landed

    for (tail, part), got in zip(forms, on_one_rank(main), strict=True):
        expected = np.zeros(n, code)
        expected[part] = np.arange(1, n + 1).astype(code)[part]
        assert got == expected.tolist(), tail


# (spec, the exception mpi4py raises, words of the message) for a send spec on 5 bytes
BAD_SPECS = {
    "five items": (lambda b: [b, 0, 0, "i", None], ValueError, "has 5 items"),
    "one item": (lambda b: [b], ValueError, "has 1 items"),
    "NUL typecode": (lambda b: [b, 0, "\0"], KeyError, "cannot map '\\x00'"),
    "unknown typecode": (lambda b: [b, "zz"], KeyError, "cannot map 'zz'"),
    "int datatype": (lambda b: [b, 1, 3], KeyError, "cannot map 3"),
    "negative count": (lambda b: [b, -1, "i"], ValueError, "count=-1"),
    "negative displacement": (lambda b: [b, 0, -1, "i"], ValueError, "displacement=-1"),
    "displacement past the end": (lambda b: [b, 0, 2, "i"], ValueError, "displacement 2"),
    "count on None": (lambda b: [None, 1, 0, "i"], ValueError, "count 1"),
    "inferred count, 5 bytes of int": (lambda b: [b, None, 0, "i"], ValueError, "5 bytes"),
    "displacement of DATATYPE_NULL": (
        lambda b: [b, 0, 1, MPI.DATATYPE_NULL],
        ValueError,
        "displacement=1",
    ),
    "inferred count of DATATYPE_NULL": (
        lambda b: [b, None, 0, MPI.DATATYPE_NULL],
        ValueError,
        "cannot infer count",
    ),
    "float count": (lambda b: [b, 1.0, "B"], TypeError, "count=1.0"),
    "array count": (lambda b: [b, np.array([2]), "B"], TypeError, "count=array([2])"),
    "a list is no buffer": (lambda b: [[1, 2, 3, 4], 4, 0, "i"], TypeError, "a list"),
    "a dict is no buffer": (lambda b: [{1: 2}, 4, 0, "i"], TypeError, "a dict"),
    "a class is no buffer": (lambda b: object, TypeError, "is not a buffer"),
}


@pytest.mark.parametrize("name", list(BAD_SPECS))
def test_a_bad_spec_raises_what_mpi4py_raises_naming_the_value(name):
    spec, error, words = BAD_SPECS[name]

    def main():
        try:
            sendrecv(spec(MPI.Alloc_mem(5)), [None, 0, "B"])
        except ConfigError as caught:
            return type(caught).__mro__, str(caught)
        return None, "accepted"

    mro, message = on_one_rank(main)
    assert mro is not None, f"{name}: accepted"
    assert error in mro and ConfigError in mro
    assert words in message and f"mpi4py raises {error.__name__}" in message


def test_counts_that_are_numpy_integers_work_and_numpy_floats_are_a_type_error():
    def main():
        recv = bytearray(2)
        sendrecv([b"abcde", np.int64(2), "B"], [recv, np.array(2), "B"])
        try:
            MPI.COMM_SELF.Alltoallv([b"abc", np.array([3.1])], [bytearray(4), (3, [1])])
        except TypeError as caught:
            return bytes(recv), str(caught)

    received, message = on_one_rank(main)
    assert received == b"ab"
    assert "counts=np.float64(3.1) is not an integer" in message


def test_a_v_spec_with_one_count_and_a_list_of_displacements():
    def main():
        send, recv = array.array("i", range(6)), array.array("i", [0] * 6)
        MPI.COMM_SELF.Alltoallv([send, 3, [2], "i"], [recv, (3, [1]), MPI.INT])
        return recv.tolist()

    assert on_one_rank(main) == [0, 2, 3, 4, 0, 0]


def test_memory_that_cannot_receive_or_be_read_in_order_is_a_buffer_error():
    def main():
        refusals = []
        read_only = np.zeros(3)
        read_only.flags.writeable = False
        foreign = np.zeros(3, ">i4")
        for send, recv in [
            (np.ones(3), read_only),
            ([bytearray(3), "c"], [memoryview(b"abc"), "c"]),
            (b"abc", b"abc"),
            (np.ones((3, 2))[:, 0], np.zeros(3)),  # a strided view
            (foreign, foreign.copy()),  # a byte order MPI.INT does not have
        ]:
            try:
                sendrecv(send, recv)
            except BufferError as caught:
                refusals.append(str(caught))
        sevens = np.full(3, 7, ">i4")
        sendrecv([sevens, MPI.INT], [foreign, MPI.INT])  # named: its bytes move as they are
        return refusals, foreign.tolist()

    refusals, moved = on_one_rank(main)
    assert len(refusals) == 5
    assert "read-only" in refusals[0] and "not contiguous" in refusals[3]
    assert "foreign byte order" in refusals[4] and "[x, MPI.INT]" in refusals[4]
    assert moved == [7, 7, 7]


REDUCE_SCATTER_MISMATCHES = {  # (sendbuf, recvbuf, recvcounts, words), as mpi4py refuses
    "receive count over counts[rank]": (
        lambda: np.zeros(2, "i"),
        lambda: np.zeros(3, "i"),
        [2],
        "receive count 3 and counts[0] 2",
    ),
    "send count over sum(counts)": (
        lambda: np.zeros(3, "i"),
        lambda: np.zeros(2, "i"),
        [2],
        "send count 3 and receive count 2",
    ),
    "in place, receive count under sum(counts)": (
        lambda: MPI.IN_PLACE,
        lambda: [np.zeros(4, "i"), 1, MPI.INT],
        [2],
        "receive count 1 and sum(counts) 2",
    ),
    "datatypes": (
        lambda: [np.zeros(1, "i"), 1, MPI.INT],
        lambda: [np.zeros(1, "f"), 1, MPI.FLOAT],
        [1],
        "mismatch in send and receive MPI datatypes",
    ),
}


@pytest.mark.parametrize("name", list(REDUCE_SCATTER_MISMATCHES))
def test_reduce_scatter_refuses_counts_and_datatypes_that_do_not_match(name):
    send, recv, counts, words = REDUCE_SCATTER_MISMATCHES[name]

    def main():
        try:
            MPI.COMM_SELF.Reduce_scatter(send(), recv(), counts, MPI.SUM)
        except ValueError as refused:
            return str(refused)

    assert words in on_one_rank(main)


def test_a_v_spec_of_datatype_null_with_no_count_is_refused():
    def main():
        try:
            MPI.COMM_SELF.Alltoallv([bytearray(5), None, [0], MPI.DATATYPE_NULL], [None, 0, "B"])
        except ValueError as refused:
            return str(refused)

    assert "cannot infer count" in on_one_rank(main)


def test_absolute_addresses_inside_bytes_and_bytearrays_move_at_bottom():
    def main():
        sent, received = b"abcxyz", bytearray(6)
        at = [MPI.Get_address(sent), MPI.Get_address(received)]
        send, recv = (MPI.Datatype.Create_struct([6], [a], [MPI.CHAR]).Commit() for a in at)
        MPI.COMM_SELF.Alltoallw([MPI.BOTTOM, [1], [0], [send]], [MPI.BOTTOM, [1], [0], [recv]])
        return bytes(received)

    assert on_one_rank(main) == b"abcxyz"


FUZZ_VALUES = st.one_of(
    st.integers(-(2**40), 2**40),
    st.sampled_from([1.5, float("nan"), "x", "", None, (1,), [0], b"ab", object()]),
)


@settings(max_examples=25)
@given(bad=FUZZ_VALUES, slot=st.sampled_from(["count", "displ", "datatype", "buffer"]))
def test_fuzz_a_spec_part_succeeds_or_is_refused_naming_it(bad, slot):
    spec = {"buffer": bad, "count": 2, "displ": 1, "datatype": "i"}
    spec[slot] = bad

    def main():
        parts = [spec["buffer"] if slot == "buffer" else np.zeros(4, "i")]
        MPI.COMM_SELF.Send([*parts, spec["count"], spec["displ"], spec["datatype"]], dest=0)
        MPI.COMM_SELF.Recv([np.zeros(4, "i"), MPI.INT], source=0)

    check_api(on_one_rank, main, bad=None if bad is None else repr(bad)[:20].rstrip("."))


@settings(max_examples=25)
@given(bad=FUZZ_VALUES)
def test_fuzz_buffer_sizes_and_addresses_succeed_or_are_refused_naming_them(bad):
    check_api(MPI.buffer.allocate, bad, bad=repr(bad))
    check_api(MPI.buffer.fromaddress, 0, bad, bad=repr(bad))
