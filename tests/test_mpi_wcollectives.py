"""``Alltoallw`` and ``Neighbor_alltoallw`` (per-peer counts, byte displacements and
datatypes) against numpy: what rank s puts in block r arrives in rank r's block s, a
derived datatype on one side matching plain elements on the other, as MPI's type
signatures do.  Rank counts and block sizes are drawn by Hypothesis."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import collsim
from collsim import mpi as MPI
from collsim.runtime import blocking


def run(k, main):
    return blocking.run(collsim.Cluster(collsim.topology.ring(k)), main).returns


def sent(s, r, n):
    """What rank s sends rank r: n ints that name both."""
    return 100 * s + 10 * r + np.arange(n)


@settings(max_examples=6, deadline=None)
@given(k=st.integers(1, 5), n=st.integers(0, 3), form=st.sampled_from(["pair", "four", "I"]))
def test_alltoallw_moves_block_r_of_each_rank_to_rank_r(k, n, form):
    def main():
        comm, me = MPI.COMM_WORLD, MPI.COMM_WORLD.rank
        out = np.concatenate([sent(me, r, n) for r in range(k)] + [[]]).astype("i")
        back = np.full(k * n, -1, "i")
        displs = [4 * n * r for r in range(k)]  # bytes
        if form == "four":
            comm.Alltoallw([out, [n] * k, displs, [MPI.INT] * k], [back, [n] * k, displs, MPI.INT])
        else:
            spec = (
                [out, ([n] * k, displs), [MPI.INT] * k],
                [back, ([n] * k, displs), [MPI.INT] * k],
            )
            (comm.Ialltoallw(*spec).Wait() if form == "I" else comm.Alltoallw(*spec))
        return back.tolist()

    for r, got in enumerate(run(k, main)):
        want = np.concatenate([sent(s, r, n) for s in range(k)] + [[]]).astype(int)
        assert got == want.tolist()


def test_alltoallw_in_place_and_mixed_datatypes():
    k = 3

    def main():
        comm, me = MPI.COMM_WORLD, MPI.COMM_WORLD.rank
        # in place: 2 ints per peer, 3 ints apart; the third int of each row is left alone
        rows = np.full((k, 3), -1, "i")
        rows[:, :2] = me
        comm.Alltoallw(MPI.IN_PLACE, [rows, ([2] * k, [12 * r for r in range(k)]), [MPI.INT] * k])
        # a column of a 2 x 2k matrix (a vector datatype) to every rank, received as 2 plain ints
        column = MPI.INT.Create_vector(2, 1, 2 * k).Commit()
        matrix = (np.arange(2 * 2 * k).reshape(2, 2 * k) + 100 * me).astype("i")
        got = np.zeros(2 * k, "i")
        comm.Alltoallw(
            [matrix, ([1] * k, [4 * r for r in range(k)]), [column] * k],
            [got, ([2] * k, [8 * r for r in range(k)]), [MPI.INT] * k],
        )
        return rows.tolist(), got.tolist()

    for r, (rows, got) in enumerate(run(k, main)):
        assert rows == [[s, s, -1] for s in range(k)]
        # from rank s: column r of its matrix (elements r and 2k + r, plus 100 s)
        assert got == [v for s in range(k) for v in (100 * s + r, 100 * s + 2 * k + r)]


def test_alltoallw_refuses_what_mpi_refuses():
    def main():
        comm = MPI.COMM_WORLD
        with pytest.raises(MPI.Exception, match="truncat|holds"):
            comm.Alltoallw(
                [np.zeros(2, "i"), ([2], [0]), [MPI.INT]], [np.zeros(2, "i"), ([1], [0]), [MPI.INT]]
            )
        with pytest.raises(ValueError, match="one per peer"):
            comm.Alltoallw(
                [np.zeros(2, "i"), ([1, 1], [0, 4]), [MPI.INT]],
                [np.zeros(2, "i"), ([1], [0]), [MPI.INT]],
            )
        with pytest.raises(NotImplementedError, match="MPI.BOTTOM"):
            comm.Alltoallw([MPI.BOTTOM, ([1], [0]), [MPI.INT]], [MPI.BOTTOM, ([1], [0]), [MPI.INT]])
        return True

    assert run(1, main) == [True]


@pytest.mark.parametrize("dims", [[2], [3], [2, 2]])
def test_neighbor_alltoallw_fills_mpis_slots_on_a_periodic_grid(dims):
    k = int(np.prod(dims))

    def main():
        cart = MPI.COMM_WORLD.Create_cart(dims, periods=True)
        me, m = cart.rank, 2 * len(dims)
        out = np.array([sent(me, i, 1)[0] for i in range(m)], "d")
        back = np.full(m, -1.0)
        displs = [8 * i for i in range(m)]
        cart.Neighbor_alltoallw(
            [out, ([1] * m, displs), [MPI.DOUBLE] * m], [back, ([1] * m, displs), [MPI.DOUBLE] * m]
        )
        again = np.full(m, -1.0)
        spec = (
            [out, ([1] * m, displs), [MPI.DOUBLE] * m],
            [again, ([1] * m, displs), [MPI.DOUBLE] * m],
        )
        cart.Ineighbor_alltoallw(*spec).Wait()
        # the oracle: slot 2d (+1) is what the -1 (+1) neighbour of dimension d sent to its
        # +1 (-1) slot
        want = []
        for d in range(len(dims)):
            low, high = cart.Shift(d, 1)
            want += [sent(low, 2 * d + 1, 1)[0], sent(high, 2 * d, 1)[0]]
        return back.tolist(), again.tolist(), want

    for back, again, want in run(k, main):
        assert back == again == [float(w) for w in want]


@settings(max_examples=4, deadline=None)
@given(k=st.integers(1, 4), n=st.integers(1, 3))
def test_alltoallw_at_bottom_reads_the_absolute_addresses_get_address_gave(k, n):
    def main():
        comm, me = MPI.COMM_WORLD, MPI.COMM_WORLD.rank
        out = np.concatenate([sent(me, r, n) for r in range(k)]).astype("i")
        back = np.full(k * n, -1, "i")
        where, there = MPI.Get_address(out), MPI.Get_address(back)
        # the addresses in the datatypes (a struct each), and in the displacements
        types = [
            MPI.Datatype.Create_struct([n], [where + 4 * n * r], [MPI.INT]).Commit()
            for r in range(k)
        ]
        comm.Alltoallw(
            [MPI.BOTTOM, ([1] * k, [0] * k), types],
            [MPI.BOTTOM, ([n] * k, [there + 4 * n * r for r in range(k)]), [MPI.INT] * k],
        )
        for t in types:
            t.Free()
        return back.tolist()

    for r, got in enumerate(run(k, main)):
        assert got == np.concatenate([sent(s, r, n) for s in range(k)]).tolist()


def test_bottom_outside_every_addressed_buffer_is_refused():
    def main():
        x = np.zeros(2, "i")
        past = MPI.Get_address(x) + x.nbytes  # one int past its end
        spec = [MPI.BOTTOM, ([1], [past]), [MPI.INT]]
        with pytest.raises(NotImplementedError, match="inside no buffer"):
            MPI.COMM_WORLD.Alltoallw(spec, [np.zeros(1, "i"), ([1], [0]), [MPI.INT]])
        return True

    assert run(1, main) == [True]


def test_w_spec_forms_as_mpi4py_reads_them():
    def main():
        comm = MPI.COMM_WORLD
        # [buf, datatypes]: one element to each peer, from the buffer's start
        got = bytearray(3)
        comm.Alltoallw([bytearray(b"abc"), None, None, [MPI.CHAR]], [got, [MPI.CHAR]])
        refused = 0
        for send, recv in [
            ([bytearray(4)], [bytearray(4), [0], [0], [MPI.BYTE]]),  # 1 item
            ([bytearray(4), [0], [0], [MPI.BYTE], None], [bytearray(4), [MPI.BYTE]]),  # 5
            ([MPI.BOTTOM, None, [0], [MPI.BYTE]], [bytearray(4), [MPI.BYTE]]),  # no counts
            ([MPI.BOTTOM, [0], None, [MPI.BYTE]], [bytearray(4), [MPI.BYTE]]),  # no displs
        ]:
            with pytest.raises(ValueError):
                comm.Alltoallw(send, recv)
            refused += 1
        return bytes(got), refused

    assert run(1, main) == [(b"a\x00\x00", 4)]
