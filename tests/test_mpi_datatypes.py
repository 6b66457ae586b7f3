"""collsim.mpi's derived datatypes: bounds as Open MPI reports them, the bytes a message of
one carries against numpy's own strided views and index lists, their use in point-to-point
and collectives, and taking a type apart (decode, Get_contents, pickling, Free)."""

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import collsim
from collsim import mpi as MPI
from collsim.errors import CollsimError
from collsim.runtime import blocking


def run(k, main):
    return blocking.run(collsim.Cluster(collsim.topology.ring(k)), main)


def through_self(send_spec, recv_spec):
    """Send ``send_spec`` to oneself and receive it into ``recv_spec`` (one rank)."""

    def main():
        MPI.COMM_WORLD.Sendrecv(send_spec, dest=0, recvbuf=recv_spec, source=0)

    run(1, main)


# -- bounds: what Open MPI 4.1.4 (with mpi4py 4.1.2) printed for the same constructors ----


INT, DOUBLE, CHAR = MPI.INT, MPI.DOUBLE, MPI.CHAR
OPEN_MPI = [
    # (type, size, (lb, extent), (true_lb, true_extent)), printed by real Open MPI
    (lambda: INT.Create_contiguous(3), 12, (0, 12), (0, 12)),
    (lambda: INT.Create_vector(2, 3, 4), 24, (0, 28), (0, 28)),
    (lambda: INT.Create_hvector(2, 3, 20), 24, (0, 32), (0, 32)),
    (lambda: INT.Create_indexed([1, 2], [0, 5]), 12, (0, 28), (0, 28)),
    (lambda: INT.Create_indexed_block(2, [0, 5]), 16, (0, 28), (0, 28)),
    (lambda: INT.Create_hindexed_block(2, [0, 20]), 16, (0, 28), (0, 28)),
    (lambda: MPI.Datatype.Create_struct([1, 2], [0, 8], [INT, DOUBLE]), 20, (0, 24), (0, 24)),
    (lambda: INT.Create_subarray([4, 5], [2, 3], [1, 1]), 24, (0, 80), (24, 32)),
    (lambda: INT.Create_subarray([4, 5], [2, 3], [1, 1], MPI.ORDER_F), 24, (0, 80), (20, 40)),
    (lambda: INT.Create_resized(-4, 20), 4, (-4, 20), (0, 4)),
    (
        lambda: INT.Create_darray(
            4, 1, [8], [MPI.DISTRIBUTE_BLOCK], [MPI.DISTRIBUTE_DFLT_DARG], [4]
        ),
        8,
        (0, 32),
        (8, 8),
    ),
    (lambda: INT.Create_vector(2, 3, -4), 24, (-16, 28), (-16, 28)),
    (lambda: INT.Create_hindexed([0, 1], [100, 4]), 4, (4, 4), (4, 4)),  # empty blocks: none
    (lambda: DOUBLE.Create_resized(0, 16).Create_contiguous(2), 16, (0, 32), (0, 24)),
    (lambda: MPI.Datatype.Create_struct([1, 1], [0, 5], [DOUBLE, CHAR]), 9, (0, 8), (0, 8)),
    # markers set by Create_resized stick: they win over the bytes' own bounds
    (
        lambda: MPI.Datatype.Create_struct([1, 1], [0, 4], [INT, INT.Create_resized(0, 16)]),
        8,
        (4, 16),
        (0, 8),
    ),
    (lambda: INT.Create_vector(0, 1, 1), 0, (0, 0), (0, 0)),
    # an extent rounds up to the alignment of the widest basic type (4 bytes for INT)
    (lambda: INT.Create_hvector(2, 1, -9), 8, (-9, 16), (-9, 13)),
    (lambda: INT.Create_hvector(3, 2, 5), 24, (0, 20), (0, 18)),
]


@pytest.mark.parametrize(("make", "size", "extent", "true_extent"), OPEN_MPI)
def test_sizes_and_bounds_are_open_mpis(make, size, extent, true_extent):
    t = make()
    assert (t.Get_size(), t.Get_extent(), t.Get_true_extent()) == (size, extent, true_extent)
    assert (t.lb, t.ub, t.extent) == (extent[0], sum(extent), extent[1])


def test_a_huge_type_is_described_without_listing_its_bytes():
    # 2**31 - 1 bytes: cheap to describe; MPI-3.1 counts are C ints, so a larger count is
    # a struct of whole vectors and the rest, as mpi4py builds it on an MPI-3 library
    big = MPI.BYTE.Create_contiguous(2**31 - 1)
    assert big.size == 2**31 - 1 and big.decode()[1:] == ("CONTIGUOUS", {"count": 2**31 - 1})
    bigger = MPI.BYTE.Create_contiguous(2**32)
    base, combiner, params = bigger.decode()
    assert (base, combiner, bigger.size) == (MPI.DATATYPE_NULL, "STRUCT", 2**32)
    assert [t.combiner for t in params["datatypes"]] == [
        MPI.COMBINER_VECTOR,
        MPI.COMBINER_CONTIGUOUS,
    ]


# -- the bytes a message carries, against numpy ---------------------------------------------


@settings(max_examples=25, deadline=None)
@given(
    count=st.integers(0, 5),
    blocklength=st.integers(0, 4),
    stride=st.integers(1, 6),
    h=st.booleans(),
)
def test_a_vector_moves_the_elements_numpy_picks(count, blocklength, stride, h):
    stride = max(stride, blocklength)  # blocks that do not overlap (a receive writes them)
    a = np.arange(count * stride + blocklength, dtype=np.float64) + 0.5
    # the oracle: the same elements, listed by numpy
    picked = [k * stride + j for k in range(count) for j in range(blocklength)]
    vector = (
        DOUBLE.Create_hvector(count, blocklength, stride * 8)
        if h
        else DOUBLE.Create_vector(count, blocklength, stride)
    ).Commit()
    out = np.zeros(len(picked))
    through_self([a, 1, vector], out)
    assert out.tolist() == a[picked].tolist()
    back = np.full_like(a, -1.0)
    through_self(out, [back, 1, vector])  # a receive scatters to the same places
    expected = np.full_like(a, -1.0)
    expected[picked] = a[picked]
    assert back.tolist() == expected.tolist()


@settings(max_examples=25, deadline=None)
@given(
    blocks=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), min_size=1, max_size=5),
    count=st.integers(1, 3),
)
def test_indexed_types_move_their_index_lists_count_times(blocks, count):
    lengths = [n for n, _ in blocks]
    displs = list(np.cumsum([gap + n for n, gap in blocks]) - lengths)  # in order, gaps
    indexed = INT.Create_indexed(lengths, displs)
    extent = indexed.extent // 4
    # element k starts k extents in (the extent spans lb..ub, from the first block's start)
    reach = max(d + n for n, d in zip(lengths, displs))
    a = np.arange((count - 1) * extent + reach, dtype=np.int32)
    picked = [
        k * extent + d + j for k in range(count) for n, d in zip(lengths, displs) for j in range(n)
    ]
    out = np.zeros(len(picked), np.int32)
    through_self([a, count, indexed], out)
    assert out.tolist() == a[picked].tolist()
    hindexed = INT.Create_hindexed(lengths, [4 * d for d in displs])
    through_self([a, count, hindexed], out)
    assert out.tolist() == a[picked].tolist()


@pytest.mark.parametrize("order", [MPI.ORDER_C, MPI.ORDER_F])
def test_a_subarray_is_numpys_slice_in_the_arrays_order(order):
    a = np.arange(4 * 5 * 3, dtype=np.int64).reshape(4, 5, 3)
    if order == MPI.ORDER_F:
        a = np.asfortranarray(a)
    sub = MPI.INT64_T.Create_subarray([4, 5, 3], [2, 3, 2], [1, 2, 0], order).Commit()
    out = np.zeros(12, np.int64)
    flat = a.reshape(-1, order="CF"[order])  # the memory, as MPI reads it
    through_self([flat, 1, sub], out)
    assert out.tolist() == a[1:3, 2:5, 0:2].reshape(-1, order="CF"[order]).tolist()


def test_a_struct_moves_the_fields_of_numpys_structured_array():
    record = np.dtype([("id", "i4"), ("x", "f8"), ("tag", "S3")], align=True)
    rows = np.zeros(3, record)
    rows["id"], rows["x"], rows["tag"] = [1, 2, 3], [0.5, 1.5, 2.5], [b"abc", b"def", b"ghi"]
    offsets = [record.fields[f][1] for f in ("id", "x", "tag")]
    struct = MPI.Datatype.Create_struct([1, 1, 3], offsets, [INT, DOUBLE, CHAR])
    struct = struct.Create_resized(0, record.itemsize).Commit()
    got = np.zeros(3, record)
    through_self([rows, 3, struct], [got, 3, struct])
    assert got.tolist() == rows.tolist()


def test_a_column_travels_between_ranks_and_status_counts_its_elements():
    def main():
        comm = MPI.COMM_WORLD
        a = np.arange(12.0).reshape(3, 4)
        column = DOUBLE.Create_vector(3, 1, 4).Commit()
        if comm.rank == 0:
            comm.Send([a.reshape(-1)[2:], 1, column], dest=1)
            return None
        got, status = np.full((3, 4), -1.0), MPI.Status()
        comm.Recv([got.reshape(-1)[1:], 1, column], source=0, status=status)
        return got.tolist(), status.Get_count(column), status.Get_count(DOUBLE)

    got, whole, doubles = run(2, main).returns[1]
    assert [row[1] for row in got] == [2.0, 6.0, 10.0] and (whole, doubles) == (1, 3)
    assert all(v == -1.0 for row in got for i, v in enumerate(row) if i != 1)


@pytest.mark.parametrize("k", [1, 2, 4])
def test_bcast_of_an_indexed_type_fills_only_its_elements(k):
    # mpi4py's test_cco_buf.testBcastTypeIndexed: every other element of 10
    def main():
        comm = MPI.COMM_WORLD
        buf = np.arange(10, dtype=np.int16) if comm.rank == 0 else np.full(10, -1, np.int16)
        every_other = MPI.SHORT.Create_indexed_block(1, list(range(1, 10, 2))).Commit()
        comm.Bcast((buf, 1, every_other), root=0)
        every_other.Free()
        return buf.tolist()

    for r, got in enumerate(run(k, main).returns):
        assert got == (list(range(10)) if r == 0 else [i if i % 2 else -1 for i in range(10)])


def test_allreduce_and_gather_of_a_vector_type():
    def main():
        comm = MPI.COMM_WORLD
        a = np.full(8, float(comm.rank + 1))
        evens = DOUBLE.Create_vector(4, 1, 2).Commit()
        total = np.zeros(8)
        comm.Allreduce([a, 1, evens], [total, 1, evens], op=MPI.SUM)
        gathered = np.zeros(2 * comm.size)
        comm.Gather([a, 1, DOUBLE.Create_vector(2, 1, 4)], gathered, root=0)
        return total.tolist(), gathered.tolist()

    total, gathered = run(3, main).returns[0]
    assert total == [6.0, 0.0] * 4 and gathered == [1.0, 1.0, 2.0, 2.0, 3.0, 3.0]


# -- refusals ------------------------------------------------------------------------------


def test_calls_that_do_not_store_a_derived_type_refuse_it_by_name():
    def main():
        vector = DOUBLE.Create_vector(2, 1, 2)
        with pytest.raises(NotImplementedError, match="Allgatherv with a derived datatype"):
            MPI.COMM_WORLD.Allgatherv(np.zeros(1), [np.zeros(4), ([1, 1], [0, 1]), vector])
        with pytest.raises(NotImplementedError, match="Reduce_local with a derived datatype"):
            MPI.SUM.Reduce_local(np.zeros(2), [np.zeros(3), 1, vector])

    run(2, main)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_allgather_alltoall_and_reduce_scatter_fill_every_other_element(k):
    # the receive buffers' odd elements are never written (numpy's x[::2] is the oracle)
    def main():
        comm, me = MPI.COMM_WORLD, MPI.COMM_WORLD.rank
        # one double per rank, its extent stretched to two: rank r's lands at element 2r
        every_other = DOUBLE.Create_resized(0, 16).Commit()
        gathered = np.full(2 * k, -1.0)
        comm.Allgather(np.array([me + 1.0]), [gathered, 1, every_other])
        exchanged = np.full(2 * k, -1.0)
        comm.Alltoall(np.arange(k) + 10.0 * me, [exchanged, 1, every_other])
        mine = np.full(2, -1.0)
        comm.Reduce_scatter_block(np.arange(k, dtype=float), [mine, 1, every_other])
        return gathered.tolist(), exchanged.tolist(), mine.tolist()

    for me, (gathered, exchanged, mine) in enumerate(run(k, main).returns):
        assert gathered[::2] == [r + 1.0 for r in range(k)] and gathered[1::2] == [-1.0] * k
        assert exchanged[::2] == [10.0 * r + me for r in range(k)] and exchanged[1::2] == [-1.0] * k
        assert mine == [float(k * me), -1.0]


def test_bad_arguments_are_refused_with_the_value_and_the_rule():
    with pytest.raises(MPI.Exception, match=r"count=-1.*>= 0") as caught:
        INT.Create_vector(-1, 1, 1)
    assert caught.value.Get_error_class() == MPI.ERR_COUNT
    with pytest.raises(ValueError, match="expecting 1 items, got 2"):
        MPI.Datatype.Create_struct([1], [0], [INT, MPI.FLOAT])
    with pytest.raises(MPI.Exception, match="subsize 3 from start 2 does not fit in size 4"):
        INT.Create_subarray([4], [3], [2])

    def main():  # a count of elements that reaches past the buffer, before any byte moves
        MPI.COMM_WORLD.Send([np.zeros(4), 2, DOUBLE.Create_vector(2, 1, 3)], dest=0)

    with pytest.raises(CollsimError, match="reach bytes 0..64, outside the buffer of 32 bytes"):
        run(1, main)


# -- taking a type apart -------------------------------------------------------------------


def test_decode_contents_and_pickle_make_the_same_type_again():
    t = INT.Create_indexed([1, 2], [0, 5])
    assert t.Get_envelope() == (5, 0, 0, 1, MPI.COMBINER_INDEXED)
    assert t.Get_contents()[:3] == ([2, 1, 2, 0, 5], [], [])
    base, combiner, params = t.decode()
    assert base is INT and getattr(base, f"Create_{combiner.lower()}")(**params).size == t.size
    again = pickle.loads(pickle.dumps(t))
    assert again != t and again.decode()[1:] == t.decode()[1:] and not again.is_named
    assert MPI.Datatype(t) == t and INT.Dup() != INT and INT.Dup().tocode() == "i"
    assert (t.typechar, t.typestr) == ("V", "V28")


def test_free_drops_one_handle_and_leaves_types_made_from_it_whole():
    pair = INT.Create_contiguous(2)
    pairs = MPI.Datatype.Create_struct([2], [0], [pair])
    pair.Free()
    assert pair == MPI.DATATYPE_NULL and pairs.size == 16
    inner = pairs.decode()[2]["datatypes"][0]
    assert inner.decode()[1:] == ("CONTIGUOUS", {"count": 2})
    with pytest.raises(MPI.Exception) as caught:  # predefined: MPI_ERR_TYPE, as MPI says
        MPI.INT.Free()
    assert caught.value.Get_error_class() == MPI.ERR_TYPE and MPI.INT.Get_size() == 4


def test_fortran_kinds_are_predefined_but_not_named():
    kind = MPI.Datatype.Create_f90_real(15, 300)
    assert (kind.typestr, kind.is_predefined, kind.is_named) == ("f8", True, False)
    assert kind.decode() == (MPI.DATATYPE_NULL, "F90_REAL", {"p": 15, "r": 300})
    assert [MPI.Datatype.Create_f90_integer(r).size for r in (2, 4, 9, 18)] == [1, 2, 4, 8]


# -- Pack and Unpack -------------------------------------------------------------------------


@settings(max_examples=20, deadline=None)
@given(n=st.integers(0, 6), m=st.integers(0, 6), code=st.sampled_from(["i", "d", "h", "q", "F"]))
def test_pack_is_numpys_bytes_and_unpack_gives_them_back(n, m, code):
    first, second = np.arange(n, dtype=code), np.arange(m, dtype=np.int16) + 7
    kind = MPI.Datatype.fromcode(code)
    size = kind.Pack_size(n, MPI.COMM_SELF) + MPI.SHORT.Pack_size(m, MPI.COMM_SELF)
    out = bytearray(size)
    position = kind.Pack(first, out, 0, MPI.COMM_SELF)
    assert MPI.SHORT.Pack(second, out, position, MPI.COMM_SELF) == size
    assert bytes(out) == first.tobytes() + second.tobytes()
    external = bytearray(size)
    position = kind.Pack_external("external32", first, external, 0)
    MPI.SHORT.Pack_external("external32", second, external, position)
    big = first.astype(first.dtype.newbyteorder(">")).tobytes() + second.astype(">i2").tobytes()
    assert bytes(external) == big  # external32 is big-endian
    back1, back2 = np.zeros(n, code), np.zeros(m, np.int16)
    position = kind.Unpack_external("external32", external, 0, back1)
    assert MPI.SHORT.Unpack_external("external32", external, position, back2) == size
    assert back1.tolist() == first.tolist() and back2.tolist() == second.tolist()


def test_pack_of_a_vector_is_its_elements_and_too_small_a_buffer_is_refused():
    a = np.arange(12.0)
    evens = DOUBLE.Create_vector(6, 1, 2).Commit()
    out = bytearray(evens.Pack_size(1, MPI.COMM_SELF))
    assert evens.Pack(a[:11], out, 0, MPI.COMM_SELF) == 48  # one element: 11 doubles' extent
    assert bytes(out) == a[::2].tobytes()
    with pytest.raises(CollsimError, match="48 bytes from position 8 pass the buffer's end"):
        evens.Pack(a[:11], out, 8, MPI.COMM_SELF)
    with pytest.raises(CollsimError, match="datarep='native'"):
        MPI.INT.Pack_external_size("native", 1)


def test_a_type_that_is_one_run_of_bytes_moves_without_listing_them():
    # 4 MiB in one contiguous type: the message is a slice of the buffer, not a list of
    # its 4 Mi byte positions (32 MiB of int64 indices)
    import tracemalloc

    n = 4 * 2**20
    runs = [
        MPI.BYTE.Create_contiguous(n),
        MPI.Datatype.Create_struct([n // 2, n // 2], [0, n // 2], [MPI.BYTE, MPI.CHAR]),
        MPI.INT.Create_contiguous(4).Create_vector(n // 128, 8, 8),
    ]
    data = np.arange(n, dtype=np.uint32).view(np.uint8)[:n]
    for t in runs:
        out = np.zeros(n, np.uint8)
        tracemalloc.start()
        packed = t.Pack(data, out, 0, MPI.COMM_SELF)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert packed == n and np.array_equal(out, data)
        assert peak < n, f"{t!r}: {peak} bytes traced to pack {n}"


def test_a_fortran_ordered_array_is_read_in_memory_order():
    # MPI reads a buffer's bytes as they lie in memory: column by column for order="F",
    # so a row of a column-major matrix is a vector of stride (number of rows)
    def main():
        comm = MPI.COMM_WORLD
        a = np.asfortranarray(np.arange(12.0).reshape(3, 4))
        whole = np.zeros(12)
        comm.Sendrecv(a, 0, recvbuf=whole, source=0)
        row = DOUBLE.Create_vector(4, 1, 3).Commit()
        first = np.zeros(4)
        comm.Sendrecv([a, 1, row], 0, recvbuf=first, source=0)
        back = np.zeros((3, 4), order="F")
        comm.Sendrecv(first, 0, recvbuf=[back, 1, row], source=0)
        return whole.tolist(), first.tolist(), back

    whole, first, back = run(1, main).returns[0]
    a = np.arange(12.0).reshape(3, 4)
    assert whole == a.ravel(order="F").tolist() and first == a[0].tolist()
    assert back[0].tolist() == a[0].tolist() and not back[1:].any()
