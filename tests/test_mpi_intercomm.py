"""Intercommunicators (MPI 4.1, section 7.6): ``Create_intercomm`` joins two disjoint
groups, point-to-point goes to the other group's ranks, ``Merge`` orders the group that
passed ``high=False`` first, ``Dup`` and ``Split`` keep the two sides, and what collsim does
not simulate (collectives on one) is refused by name.  The expected values are computed
here from the groups, independently of collsim's code."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import collsim
from collsim import mpi as MPI
from collsim.runtime import blocking


def run(k, main):
    return blocking.run(collsim.Cluster(collsim.topology.ring(k)), main)


def groups(k, cut):
    """The world ranks below ``cut`` and the others."""
    return list(range(cut)), list(range(cut, k))


@settings(max_examples=12)
@given(data=st.data())
def test_two_groups_talk_across_and_merge_in_the_order_high_says(data):
    k = data.draw(st.integers(2, 9), label="ranks")
    cut = data.draw(st.integers(1, k - 1), label="ranks in the low group")
    low_high = data.draw(st.booleans(), label="the low group passes high=True")
    low, high = groups(k, cut)

    def main():
        world = MPI.COMM_WORLD
        mine, theirs = (low, high) if world.rank < cut else (high, low)
        local = world.Split(0 if world.rank < cut else 1)
        inter = local.Create_intercomm(0, world, theirs[0], tag=7)
        me = inter.rank
        # every rank sends its world rank to remote rank me % remote size; receives from all
        # the remote ranks that picked it
        inter.send(world.rank, dest=me % inter.remote_size, tag=3)
        senders = [r for r in range(inter.remote_size) if r % len(mine) == me]
        got = []
        for _ in senders:
            status = MPI.Status()
            value = inter.recv(source=MPI.ANY_SOURCE, tag=3, status=status)
            got.append((status.Get_source(), value))
        flag = low_high if world.rank < cut else not low_high
        merged = inter.Merge(high=flag)
        return (
            (inter.size, inter.remote_size, me, inter.Get_remote_group().ranks),
            sorted(got),
            merged.rank,
            merged.size,
            merged.allreduce(world.rank),
        )

    result = run(k, main).returns
    merged_order = high + low if low_high else low + high
    for r in range(k):
        mine, theirs = (low, high) if r < cut else (high, low)
        me = mine.index(r)
        shape, got, merged_rank, merged_size, total = result[r]
        assert shape == (len(mine), len(theirs), me, tuple(theirs))
        expected = [(i, theirs[i]) for i in range(len(theirs)) if i % len(mine) == me]
        assert got == expected  # Status.source is the sender's rank in its own group
        assert (merged_rank, merged_size) == (merged_order.index(r), k)
        assert total == sum(range(k))


def test_dup_and_split_keep_both_sides_and_messages_never_mix():
    def main():
        world = MPI.COMM_WORLD
        color = world.rank % 2
        inter = world.Split(color).Create_intercomm(0, world, 1 - color)
        twin = inter.Dup()
        # the same tag on the intercommunicator, its duplicate and the world: three messages
        partner = world.rank + 1 - 2 * color
        twin.send("dup", dest=inter.rank, tag=5)
        world.send("world", dest=partner, tag=5)
        inter.send("inter", dest=inter.rank, tag=5)
        got = [inter.recv(source=inter.rank, tag=5), world.recv(source=partner, tag=5)]
        got.append(twin.recv(source=inter.rank, tag=5))
        halves = inter.Split(inter.rank % 2, key=-inter.rank)
        return got, twin.remote_size, (halves.size, halves.remote_size, halves.rank)

    result = run(6, main).returns
    for r in range(6):
        got, remote, halves = result[r]
        assert got == ["inter", "world", "dup"]
        assert remote == 3
        local = r // 2  # its rank among the evens or the odds (0, 1, 2)
        same_parity = [i for i in range(3) if i % 2 == local % 2]
        order = sorted(same_parity, key=lambda i: -i)  # by key -rank
        assert halves == (len(same_parity), len(same_parity), order.index(local))


def test_what_is_not_an_intercommunicator_is_refused_by_name():
    def main():
        world = MPI.COMM_WORLD
        local = world.Split(world.rank % 2)
        inter = local.Create_intercomm(0, world, 1 - world.rank % 2)
        refused = []
        for attempt in (
            lambda: MPI.Intercomm(local),
            lambda: MPI.Intracomm(inter),
            lambda: inter.allreduce(1),
            lambda: inter.Barrier(),
            lambda: world.Create_intercomm(0, world, 0),  # both groups are the world
        ):
            try:
                attempt()
            except (TypeError, NotImplementedError, MPI.Exception) as exc:
                refused.append(f"{type(exc).__name__}: {exc}")
        return refused, inter.Is_inter(), local.Is_inter()

    refused, is_inter, local_is_inter = run(2, main).returns[0]
    assert (is_inter, local_is_inter) == (True, False)
    assert refused[0].startswith("TypeError: MPI.Intercomm(")
    assert "an intracommunicator is not one" in refused[0]
    assert "an intercommunicator is not one" in refused[1]
    assert refused[2].startswith("NotImplementedError: MPI.Intercomm.allreduce: collectives")
    assert "Merge()" in refused[2]
    assert refused[3].startswith("NotImplementedError: MPI.Intercomm.Barrier")
    assert "the groups overlap (ranks [0, 1])" in refused[4]


@pytest.mark.parametrize("k", [2, 3, 5])
def test_the_null_intercommunicator_is_what_get_parent_gives(k):
    def main():
        parent = MPI.Comm.Get_parent()
        return type(parent).__name__, parent == MPI.COMM_NULL

    assert run(k, main).returns == [("Intercomm", True)] * k
