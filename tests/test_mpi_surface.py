"""What mpi4py's own test suite (and programs written for mpi4py) call beyond the first MPI
programs, checked here without mpi4py's suite (CI does not have it): every predefined
datatype and op in buffer collectives against numpy, buffer specs of any buffer object,
v-collectives and prefix reductions against numpy, requests against the MPI standard's
completion rules, groups, probes and the send modes.  Rank counts and shapes are drawn by
Hypothesis; the oracles are numpy written here, never the code under test."""

import array
import functools
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import collsim
from collsim import mpi as MPI
from collsim.runtime import blocking


def run(k, main):
    return blocking.run(collsim.Cluster(collsim.topology.ring(k)), main).returns


def rank_values(rank, n, dtype):
    """Rank r's input: small values every dtype holds exactly (bools alternate)."""
    if np.dtype(dtype).kind == "b":
        return (np.arange(n) + rank) % 3 != 0
    return ((np.arange(n) * 7 + rank * 3) % 5 + 1).astype(dtype)


# every predefined datatype numpy holds (MPI name -> numpy dtype), from the MPI standard's
# C types; DATATYPE_NULL ones are left out, as mpi4py's suite leaves them out
DATATYPES = {
    "SIGNED_CHAR": "b",
    "UNSIGNED_CHAR": "B",
    "SHORT": "h",
    "UNSIGNED_SHORT": "H",
    "INT": "i",
    "UNSIGNED": "I",
    "LONG": "l",
    "UNSIGNED_LONG": "L",
    "LONG_LONG": "q",
    "UNSIGNED_LONG_LONG": "Q",
    "FLOAT": "f",
    "DOUBLE": "d",
    "LONG_DOUBLE": "g",
    "C_BOOL": "?",
    "C_FLOAT_COMPLEX": "F",
    "C_DOUBLE_COMPLEX": "D",
    "INT8_T": "i1",
    "UINT64_T": "u8",
    "FLOAT16_T": "e",
}
# which ops the MPI standard defines on which kinds of element (section 6.9.2)
OPS_BY_KIND = {
    "i": ("SUM", "PROD", "MAX", "MIN", "LAND", "LOR", "LXOR", "BAND", "BOR", "BXOR"),
    "u": ("SUM", "PROD", "MAX", "MIN", "LAND", "LOR", "LXOR", "BAND", "BOR", "BXOR"),
    "f": ("SUM", "PROD", "MAX", "MIN"),
    "c": ("SUM", "PROD"),
    "b": ("LAND", "LOR", "LXOR"),
}
NUMPY_OPS = {
    "SUM": np.add,
    "PROD": np.multiply,
    "MAX": np.maximum,
    "MIN": np.minimum,
    "LAND": np.logical_and,
    "LOR": np.logical_or,
    "LXOR": np.logical_xor,
    "BAND": np.bitwise_and,
    "BOR": np.bitwise_or,
    "BXOR": np.bitwise_xor,
}
PAIRS = [(name, op) for name, c in DATATYPES.items() for op in OPS_BY_KIND[np.dtype(c).kind]]


def numpy_reduce(op, arrays, dtype):
    """The reduction in rank order, as MPI defines it, cast back to the element type."""
    return functools.reduce(lambda x, y: NUMPY_OPS[op](x, y).astype(dtype), arrays)


@settings(max_examples=4)
@given(k=st.integers(1, 5), n=st.integers(0, 9))
@pytest.mark.parametrize(("name", "op"), PAIRS)
def test_allreduce_and_reduce_move_every_datatype_with_every_op_it_has(name, op, k, n):
    dtype = np.dtype(DATATYPES[name])

    def main():
        comm = MPI.COMM_WORLD
        mine = rank_values(comm.rank, n, dtype)
        total, at_root = np.zeros(n, dtype), np.zeros(n, dtype)
        comm.Allreduce([mine, getattr(MPI, name)], [total, getattr(MPI, name)], getattr(MPI, op))
        comm.Reduce(mine, at_root, op=getattr(MPI, op), root=k - 1)
        return total, at_root

    got = run(k, main)
    expected = numpy_reduce(op, [rank_values(r, n, dtype) for r in range(k)], dtype)
    for r, (total, at_root) in enumerate(got):
        np.testing.assert_array_equal(total, expected)
        if r == k - 1:
            np.testing.assert_array_equal(at_root, expected)


@settings(max_examples=5)
@given(k=st.integers(1, 5), n=st.integers(0, 4), name=st.sampled_from(sorted(DATATYPES)))
def test_bcast_allgather_alltoall_move_every_datatype_as_bytes(k, n, name):
    dtype = np.dtype(DATATYPES[name])

    def main():
        comm = MPI.COMM_WORLD
        mine = rank_values(comm.rank, n * k, dtype)
        root_data = mine.copy()
        comm.Bcast(root_data, root=0)
        gathered = np.zeros(n * k * k, dtype)
        comm.Allgather(mine, gathered)
        swapped = np.zeros(n * k, dtype)
        comm.Alltoall(mine, swapped)
        return root_data, gathered, swapped

    inputs = [rank_values(r, n * k, dtype) for r in range(k)]
    for r, (root_data, gathered, swapped) in enumerate(run(k, main)):
        np.testing.assert_array_equal(root_data, inputs[0])
        np.testing.assert_array_equal(gathered, np.concatenate(inputs))
        expected = np.concatenate([inputs[s][r * n : (r + 1) * n] for s in range(k)])
        np.testing.assert_array_equal(swapped, expected)


def test_buffer_specs_of_every_kind_mpi4py_takes():
    def main():
        comm = MPI.COMM_WORLD
        ints = array.array("i", [comm.rank + 1] * 3)  # array.array infers MPI.INT
        comm.Allreduce(MPI.IN_PLACE, ints, op=MPI.SUM)
        raw = bytearray(b"ab") if comm.rank == 0 else bytearray(2)  # bytes: MPI.BYTE
        comm.Bcast(memoryview(raw), root=0)
        wide = np.zeros(2, np.int64)  # [int64 array, MPI.INT] is 4 ints, as MPI reads it
        comm.Allreduce([np.ones(4, np.int32), MPI.INT], [wide, MPI.INT])
        counted = np.zeros(4)
        comm.Bcast([counted, 2, "d"], root=0)  # a count and a typecode string
        nothing = comm.allreduce(None if comm.rank else None, op=lambda x, y: x)
        return list(ints), bytes(raw), wide.view(np.int32).tolist(), nothing

    assert run(3, main) == [([6, 6, 6], b"ab", [3, 3, 3, 3], None)] * 3


@settings(max_examples=8)
@given(k=st.integers(1, 5), data=st.data())
def test_v_collectives_put_each_ranks_block_where_the_counts_say(k, data):
    counts = data.draw(st.lists(st.integers(0, 4), min_size=k, max_size=k))
    displs = [sum(counts[:r]) for r in range(k)]
    parts = [np.arange(c, dtype=np.float64) + 10 * r for r, c in enumerate(counts)]
    whole = np.concatenate(parts)

    def main():
        comm = MPI.COMM_WORLD
        r = comm.rank
        gathered = np.zeros(len(whole))
        comm.Gatherv(parts[r], [gathered, counts, displs, MPI.DOUBLE], root=0)
        mine = np.zeros(counts[r])
        comm.Scatterv([whole, (counts, displs), MPI.DOUBLE], mine, root=0)
        everywhere = np.zeros(len(whole))
        comm.Allgatherv(parts[r], [everywhere, counts])
        # Alltoallv: rank r sends counts[j] copies of r to rank j
        sent = np.concatenate([np.full(c, float(r)) for c in counts])
        got = np.zeros(k * counts[r])
        comm.Alltoallv([sent, counts], [got, [counts[r]] * k])
        return gathered if r == 0 else None, mine, everywhere, got

    for r, (gathered, mine, everywhere, got) in enumerate(run(k, main)):
        if r == 0:
            np.testing.assert_array_equal(gathered, whole)
        np.testing.assert_array_equal(mine, parts[r])
        np.testing.assert_array_equal(everywhere, whole)
        np.testing.assert_array_equal(got, np.repeat(np.arange(k, dtype=float), counts[r]))


@settings(max_examples=8)
@given(k=st.integers(1, 6), n=st.integers(1, 5))
def test_scan_exscan_and_reduce_scatter_are_numpys_prefix_sums(k, n):
    def main():
        comm = MPI.COMM_WORLD
        mine = np.full(n, comm.rank + 1, np.int64)
        inclusive, exclusive = np.zeros(n, np.int64), np.full(n, -1, np.int64)
        comm.Scan(mine, inclusive)
        comm.Exscan(mine, exclusive)
        counts = list(range(1, k + 1))
        part = np.zeros(counts[comm.rank], np.int64)
        comm.Reduce_scatter(np.arange(sum(counts), dtype=np.int64), part, counts, MPI.SUM)
        return inclusive, exclusive, part, comm.scan(comm.rank), comm.exscan(comm.rank)

    sums = np.cumsum(np.arange(1, k + 1))
    starts = np.cumsum([0, *range(1, k + 1)])
    for r, (inclusive, exclusive, part, scan, exscan) in enumerate(run(k, main)):
        assert (inclusive == sums[r]).all()
        assert (exclusive == (sums[r - 1] if r else -1)).all()  # rank 0's is left alone
        np.testing.assert_array_equal(part, k * np.arange(starts[r], starts[r + 1]))
        assert (scan, exscan) == (r * (r + 1) // 2, None if r == 0 else r * (r - 1) // 2)


def test_a_user_op_that_does_not_commute_sees_the_ranks_in_order():
    # (a, b) is the map t -> a t + b; the op applies the lower rank's map first.  It is
    # associative but not commutative: folding the ranks backwards (a student's natural
    # loop from the last rank down) gives 4*8 + 3*4 + 2*2 + 1 = 49 instead of 26
    def then(inbuf, inoutbuf, datatype):
        first, second = np.asarray(inbuf).copy(), np.asarray(inoutbuf)
        inoutbuf[:] = [first[0] * second[0], second[0] * first[1] + second[1]]

    def main():
        op = MPI.Op.Create(then, commute=False)
        out = np.zeros(2, np.int64)
        MPI.COMM_WORLD.Allreduce(np.array([2, MPI.COMM_WORLD.rank + 1]), out, op=op)
        return out.tolist(), op.Is_commutative(), MPI.MAXLOC((3, 1), (3, 0))

    # 1*8 + 2*4 + 3*2 + 4 = 26
    assert run(4, main) == [([16, 26], False, (3, 0))] * 4


def test_requests_follow_mpis_completion_rules():
    def main():
        comm = MPI.COMM_WORLD
        me, other = comm.rank, 1 - comm.rank
        recvs = [comm.irecv(source=other, tag=t) for t in (1, 2)]
        for t in (2, 1):
            comm.send(f"tag {t}", dest=other, tag=t)
        first = MPI.Request.waitany(recvs)
        rest = MPI.Request.waitsome(recvs)
        done = MPI.Request.testany(recvs)  # every request is null now
        buf = np.zeros(2)
        persistent = comm.Recv_init(buf, source=other, tag=5)
        sends = comm.Send_init(np.full(2, float(me)), dest=other, tag=5)
        MPI.Prequest.Startall([persistent, sends])
        MPI.Request.Waitall([persistent, sends])
        active_after_wait = bool(persistent)
        persistent.Free()
        return first, rest, done, buf.tolist(), active_after_wait, persistent == MPI.REQUEST_NULL

    for r, (first, rest, done, buf, active, null) in enumerate(run(2, main)):
        index, obj = first
        assert obj == f"tag {index + 1}"
        assert rest == ([1 - index], [f"tag {2 - index}"])
        assert done == (MPI.UNDEFINED, True, None)
        assert (buf, active, null) == ([float(1 - r)] * 2, True, True)


def test_probe_then_receive_what_it_found_and_the_send_modes():
    def main():
        comm = MPI.COMM_WORLD
        if comm.rank == 0:
            comm.Ssend(np.arange(3, dtype=np.int32), dest=1, tag=8)
            comm.bsend("buffered", dest=1, tag=9)
            x = np.full(2, 7.0)
            comm.Sendrecv_replace(x, dest=1, source=1)
            return x.tolist()
        status = MPI.Status()
        comm.Probe(MPI.ANY_SOURCE, 8, status)
        got = np.zeros(status.Get_count(MPI.INT), np.int32)
        comm.Recv(got, status.source, status.tag)
        message = comm.mprobe(0, 9)
        nothing_waiting = comm.Iprobe(0, 9)
        x = np.full(2, -1.0)
        comm.Isendrecv_replace(x, dest=0, source=0).Wait()
        return got.tolist(), message.recv(), nothing_waiting, x.tolist()

    assert run(2, main) == [[-1.0, -1.0], ([0, 1, 2], "buffered", False, [7.0, 7.0])]


def test_groups_and_the_communicators_made_from_them():
    def main():
        world = MPI.COMM_WORLD
        group = world.Get_group()
        odd = group.Incl([r for r in range(world.size) if r % 2])
        comm = world.Create(odd)
        mine = world.Create_group(odd) if world.rank % 2 else MPI.COMM_NULL
        shared = world.Split_type(MPI.COMM_TYPE_SHARED)
        compared = MPI.Comm.Compare(world, shared), MPI.Comm.Compare(world, world.Dup())
        if comm == MPI.COMM_NULL:
            return None, mine == MPI.COMM_NULL, compared
        return (
            (comm.allreduce(world.rank), mine.Get_size()),
            odd.Translate_ranks([0], group),
            compared,
        )

    got = run(5, main)
    congruent = (MPI.CONGRUENT, MPI.CONGRUENT)
    assert got[0] == got[2] == got[4] == (None, True, congruent)
    assert got[1] == got[3] == ((4, 2), [1], congruent)


def test_handles_pickle_to_the_same_object_and_the_rest_is_refused_by_name():
    assert pickle.loads(pickle.dumps(MPI.COMM_WORLD)) is MPI.COMM_WORLD
    assert pickle.loads(pickle.dumps(MPI.MAX)) is MPI.MAX
    assert pickle.loads(pickle.dumps(MPI.DOUBLE)) is MPI.DOUBLE
    assert MPI.REAL2 == MPI.DATATYPE_NULL and MPI.LONG_DOUBLE.Get_size() == np.dtype("g").itemsize
    for call, name in [
        (lambda: MPI.Win.Create(None), "MPI.Win.Create"),
        (lambda: MPI.File.Open(MPI.COMM_WORLD, "x"), "MPI.File.Open"),
        (lambda: MPI.COMM_WORLD.Spawn("python"), "Intracomm.Spawn"),
    ]:
        with pytest.raises(NotImplementedError, match=name):
            call()


@pytest.mark.parametrize(
    ("nnodes", "dims", "expected"),
    # the MPI standard's own examples of MPI_Dims_create (MPI 4.1, section 8.5.2)
    [(6, [0, 0], [3, 2]), (7, [0, 0], [7, 1]), (6, [0, 3, 0], [2, 3, 1]), (12, 2, [4, 3])],
)
def test_compute_dims_gives_the_standards_examples(nnodes, dims, expected):
    assert MPI.Compute_dims(nnodes, dims) == expected


def test_compute_dims_refuses_what_the_standard_calls_erroneous():
    with pytest.raises(MPI.Exception, match="must divide 7"):
        MPI.Compute_dims(7, [0, 3, 0])


@settings(max_examples=8)
@given(k=st.integers(1, 12), periodic=st.booleans())
def test_cartesian_shift_coords_and_sub_follow_row_major_order(k, periodic):
    dims = MPI.Compute_dims(k, 2)

    def main():
        cart = MPI.COMM_WORLD.Create_cart(dims, periods=[periodic, periodic])
        row = cart.Sub([False, True])
        return cart.Get_coords(cart.rank), cart.Shift(0, 1), cart.Shift(1, -1), row.Get_size()

    for r, (coords, down, left, row_size) in enumerate(run(k, main)):
        i, j = divmod(r, dims[1])
        assert coords == [i, j] and row_size == dims[1]

        def rank_at(a, b):
            if not periodic and not (0 <= a < dims[0] and 0 <= b < dims[1]):
                return MPI.PROC_NULL
            return (a % dims[0]) * dims[1] + b % dims[1]

        assert down == (rank_at(i - 1, j), rank_at(i + 1, j))
        assert left == (rank_at(i, j + 1), rank_at(i, j - 1))


@settings(max_examples=6)
@given(k=st.integers(1, 6), seed=st.integers(0, 2**16))
def test_maxloc_and_minloc_on_pair_buffers_find_numpys_argmax_and_argmin(k, seed):
    values = np.random.default_rng(seed).integers(0, 4, size=(k, 3)).astype(float)

    def main():
        comm = MPI.COMM_WORLD
        pair = MPI.Datatype.Get_value_index(MPI.DOUBLE, MPI.INT)
        mine = np.zeros(3, dtype=pair.numpy)
        mine["value"], mine["index"] = values[comm.rank], comm.rank
        high, low = np.zeros_like(mine), np.zeros_like(mine)
        comm.Allreduce([mine, pair], [high, pair], op=MPI.MAXLOC)
        comm.Allreduce([mine, pair], [low, pair], op=MPI.MINLOC)
        return pair, high["index"].tolist(), low["index"].tolist()

    for pair, high, low in run(k, main):
        assert pair == MPI.DOUBLE_INT and pair.Get_size() == 16  # a C struct {double; int}
        assert high == values.argmax(axis=0).tolist()  # ties: the lowest rank, as numpy
        assert low == values.argmin(axis=0).tolist()


def test_handle_constructors_and_per_rank_counts_as_mpi4py_has_them():
    def main():
        comm = MPI.COMM_WORLD
        sent = np.repeat(np.arange(comm.size, dtype=np.int32) + 10 * comm.rank, 2)
        got = np.zeros(2 * comm.size + 3, np.int32)  # longer than needed: the count says
        comm.Alltoall([sent, 2, MPI.INT], [got, 2, MPI.INT])
        return got[: 2 * comm.size].tolist()

    assert run(2, main) == [[0, 0, 10, 10], [1, 1, 11, 11]]
    assert isinstance(MPI.Comm.Get_parent(), MPI.Intercomm) and not MPI.Comm.Get_parent()
    with pytest.raises(TypeError):
        MPI.Comm((1, 2, 3))
    with pytest.raises(TypeError):
        MPI.Datatype((1, 2, 3))
    assert MPI.Datatype.fromcode("d") is MPI.DOUBLE


@settings(max_examples=6)
@given(k=st.integers(1, 5), count=st.integers(0, 3))
def test_a_scalar_count_and_stride_in_a_v_spec_mean_every_rank_the_same(k, count):
    stride = count + 1  # one spare element between the blocks
    whole = np.arange(k * stride, dtype=np.float64)

    def main():
        comm = MPI.COMM_WORLD
        mine = np.full(count, -1.0)
        comm.Scatterv([whole, (count, stride), MPI.DOUBLE], mine, root=0)
        back = np.full(k * count, -1.0) if comm.rank == 0 else None
        comm.Gatherv(mine, [back, count] if comm.rank == 0 else None, root=0)  # count per rank
        return mine.tolist(), None if back is None else back.tolist()

    got = run(k, main)
    blocks = [whole[r * stride : r * stride + count].tolist() for r in range(k)]
    assert [mine for mine, _ in got] == blocks
    assert got[0][1] == [v for block in blocks for v in block]


def test_groups_pickle_as_mpi4py_pickles_them():
    assert pickle.loads(pickle.dumps(MPI.GROUP_EMPTY)) is MPI.GROUP_EMPTY
    copy = pickle.loads(pickle.dumps(MPI.Group(MPI.GROUP_NULL)))
    assert copy == MPI.GROUP_NULL and copy is not MPI.GROUP_NULL
    with pytest.raises(ValueError, match="cannot pickle"):
        pickle.dumps(MPI.Group((0, 1)))
    assert MPI.Group((4, 2)).Translate_ranks([1], group=MPI.Group((2, 3))) == [0]


@settings(max_examples=5)
@given(k=st.integers(1, 6))
def test_graph_and_distributed_graph_neighbours_are_the_edges_given(k):
    # a ring as MPI_Graph_create takes it: index[i] counts the edges of nodes 0..i
    index = [2 * (i + 1) for i in range(k)]
    edges = [e for i in range(k) for e in ((i - 1) % k, (i + 1) % k)]

    def main():
        comm = MPI.COMM_WORLD
        graph = comm.Create_graph(index, edges)
        # each rank gives one edge, to its right; the others learn theirs from all
        dist = comm.Create_dist_graph([comm.rank], [1], [(comm.rank + 1) % k])
        return (
            graph.Get_topology(),
            graph.neighbors,
            dist.Get_topology(),
            dist.Get_dist_neighbors()[:2],
            MPI.Graphcomm.fromint(graph.toint()) == graph,
        )

    for r, (kind, neighbours, dist_kind, (ins, outs), handle) in enumerate(run(k, main)):
        assert (kind, dist_kind, handle) == (MPI.GRAPH, MPI.DIST_GRAPH, True)
        assert neighbours == [(r - 1) % k, (r + 1) % k]
        assert (ins, outs) == ([(r - 1) % k], [(r + 1) % k])


@pytest.mark.parametrize("dims", [[2], [3], [2, 2], [1, 3]])
def test_neighbor_collectives_fill_mpis_slots_on_a_periodic_grid(dims):
    # slot 2d is the -1 neighbour of dimension d, slot 2d+1 the +1 one; on a dimension of
    # 2 ranks both are the same rank, and each block must still land in its own slot
    k = int(np.prod(dims))

    def main():
        cart = MPI.COMM_WORLD.Create_cart(dims, periods=[True] * len(dims))
        # the block for out-slot i says who sent it and to which slot
        mine = np.array([[cart.rank, i] for i in range(2 * len(dims))], dtype=np.int32)
        got = np.zeros_like(mine)
        cart.Neighbor_alltoall(mine, got)
        return cart.Get_coords(cart.rank), got.tolist(), cart.neighbor_allgather(cart.rank)

    for coords, got, gathered in run(k, main):
        for slot, (sender, sent_slot) in enumerate(got):
            d, step = divmod(slot, 2)
            step = -1 if step == 0 else 1
            theirs = list(coords)
            theirs[d] = (theirs[d] + step) % dims[d]
            assert sender == int(np.ravel_multi_index(theirs, dims))
            assert sent_slot == slot ^ 1  # it sent that block the other way
            assert gathered[slot] == sender


def test_a_status_is_one_block_of_memory_and_reduce_local_checks_counts():
    status = MPI.Status()
    status.source, status.tag = 11, 22
    memory = status.tomemory()
    memory[list(memory).index(22)] = 222  # writing the memory changes the field
    assert (status.source, status.tag, MPI.Status(status).tag) == (11, 222, 222)
    with pytest.raises(ValueError, match="mismatch in inbuf count 2 and inoutbuf count 3"):
        MPI.SUM.Reduce_local([np.zeros(3), 2, MPI.DOUBLE], np.zeros(3))
    with pytest.raises(ValueError, match="MPI datatypes"):
        MPI.SUM.Reduce_local([np.zeros(2, np.int32), MPI.INT], [np.zeros(4, np.int16), MPI.SHORT])


def test_a_rank_holds_at_most_32_live_user_ops_as_mpi4py():
    def main():
        ops = [MPI.Op.Create(lambda a, b, t: None) for _ in range(32)]
        with pytest.raises(MPI.Exception, match="32 user-defined ops are live on this rank"):
            MPI.Op.Create(lambda a, b, t: None)
        ops.pop().Free()
        ops.append(MPI.Op.Create(lambda a, b, t: None))  # one freed: room for one
        for op in ops:
            op.Free()
        return len(ops)

    # every rank has its own 32 (a process of its own in MPI)
    result = collsim.runtime.blocking.run(collsim.Cluster(collsim.topology.ring(2)), main)
    assert result.returns == [32, 32]
