"""Process topologies as the MPI standard and mpi4py define them, checked without mpi4py's
suite: a topology communicator's constructor accepts only its own kind, and distributed
graphs keep the edge weights they were made with (``MPI_Dist_graph_neighbors`` gives them
back; ``MPI.UNWEIGHTED`` and ``MPI.WEIGHTS_EMPTY`` are different things)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import collsim
from collsim import mpi as MPI
from collsim.runtime import blocking


def run(k, main):
    return blocking.run(collsim.Cluster(collsim.topology.ring(k)), main).returns


def test_a_topology_constructor_refuses_another_kind_of_communicator():
    def main():
        comm = MPI.COMM_WORLD
        cart, graph = comm.Create_cart([1]), comm.Create_graph([1], [0])
        dist = comm.Create_dist_graph_adjacent([], [])
        refused = []
        for cls, source in [
            (MPI.Topocomm, comm),
            (MPI.Cartcomm, comm),
            (MPI.Graphcomm, cart),
            (MPI.Distgraphcomm, cart),
            (MPI.Cartcomm, graph),
            (MPI.Cartcomm, dist),
            (MPI.Graphcomm, dist),
        ]:
            with pytest.raises(TypeError, match="expecting"):
                cls(source)
            refused.append(cls.__name__)
        # its own kind, any topology for Topocomm, and COMM_NULL are taken
        kept = [type(MPI.Cartcomm(cart)), type(MPI.Topocomm(graph)), type(MPI.Cartcomm())]
        return refused, kept, MPI.Cartcomm(cart).Get_topo()

    refused, kept, topo = run(1, main)[0]
    assert len(refused) == 7
    assert kept == [MPI.Cartcomm, MPI.Topocomm, MPI.Cartcomm]
    assert topo == ([1], [False], [0])


@settings(max_examples=5, deadline=None)
@given(k=st.integers(1, 5))
def test_distributed_graphs_give_back_their_edge_weights(k):
    def main():
        comm, r = MPI.COMM_WORLD, MPI.COMM_WORLD.rank
        sources, destinations = [(r - 1) % k, (r - 2) % k], [(r + 1) % k, (r + 2) % k]
        weighted = comm.Create_dist_graph_adjacent(sources, destinations, [1, 2], [3, 4])
        plain = comm.Create_dist_graph_adjacent(sources, None, MPI.UNWEIGHTED, None)
        empty = comm.Create_dist_graph_adjacent([], [], MPI.WEIGHTS_EMPTY, MPI.WEIGHTS_EMPTY)
        # one edge to the right, weighted 10 + the giver's rank: the receiver's in-weight
        given = comm.Create_dist_graph([r], [1], [(r + 1) % k], [10 + r])
        return (
            weighted.Get_dist_neighbors(),
            weighted.Get_dist_neighbors_count(),
            plain.Get_dist_neighbors(),
            plain.Get_dist_neighbors_count(),
            empty.Get_dist_neighbors(),
            empty.Get_dist_neighbors_count(),
            given.Get_dist_neighbors(),
            comm.Create_dist_graph([r], [1], [(r + 1) % k], MPI.UNWEIGHTED).Get_dist_neighbors(),
        )

    for r, got in enumerate(run(k, main)):
        left, right = (r - 1) % k, (r + 1) % k
        sources, destinations = [left, (r - 2) % k], [right, (r + 2) % k]
        assert got[0] == (sources, destinations, ([1, 2], [3, 4]))
        assert got[1] == (2, 2, True)
        assert got[2:4] == ((sources, [], None), (2, 0, False))
        assert got[4:6] == (([], [], ([], [])), (0, 0, True))
        assert got[6] == ([left], [right], ([10 + left], [10 + r]))
        assert got[7] == ([left], [right], None)


def test_weights_must_match_the_edges():
    def main():
        with pytest.raises(ValueError, match="one weight per edge"):
            MPI.COMM_WORLD.Create_dist_graph_adjacent(
                [0], [0], MPI.WEIGHTS_EMPTY, MPI.WEIGHTS_EMPTY
            )
        return True

    assert run(1, main) == [True]
