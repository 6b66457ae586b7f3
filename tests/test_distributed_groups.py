"""collsim.distributed's groups: the default group, new_group and the device mesh. A
group's collectives and messages stay inside it (read from the trace), a mesh names its
dimensions as torch's does, and each transfer records the mesh dimension it belongs to."""

import gc
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import collsim
import collsim.distributed as dist
from collsim.collectives import is_collective
from collsim.runtime import blocking


@pytest.fixture(autouse=True)
def no_thread_left_behind():
    before = threading.active_count()
    yield
    assert threading.active_count() == before


def run(k, main, *args):
    return blocking.run(collsim.Cluster(collsim.topology.switch(k)), main, *args)


def test_init_binds_each_rank_and_destroy_forgets_it():
    def main():
        before = dist.is_initialized()
        dist.init_process_group(backend="NCCL")  # every torch backend runs on the simulator
        inside = dist.is_initialized(), dist.get_rank(), dist.get_world_size()
        world, backend = dist.group.WORLD, dist.get_backend()
        dist.destroy_process_group()
        dist.init_process_group(backend="cpu:gloo,cuda:nccl")
        again = dist.get_backend(), dist.group.WORLD.id != world.id
        dist.destroy_process_group()
        return before, inside, dist.is_initialized(), world.ranks, backend, again

    returns = run(3, main).returns
    assert returns == [
        (False, (True, r, 3), False, (0, 1, 2), "nccl", ("cpu:gloo,cuda:nccl", True))
        for r in range(3)
    ]
    assert dist.is_initialized() is False  # outside a run


@settings(max_examples=10)
@given(k=st.integers(2, 12), data=st.data())
def test_new_group_collectives_and_messages_stay_inside_the_group(k, data):
    members = data.draw(st.lists(st.integers(0, k - 1), min_size=1, max_size=k, unique=True))
    others = [r for r in range(k) if r not in members]

    def main():
        dist.init_process_group()
        me = dist.get_rank()
        mine = dist.new_group(members)  # every rank makes both, as torch asks
        theirs = dist.new_group(others) if others else None
        group = mine if me in members else theirs
        ranks = dist.get_process_group_ranks(group)
        t = np.full(4, float(me))
        dist.all_reduce(t, group=group)
        g = dist.get_rank(group)  # its place in the group: the next one gets its tensor
        if len(ranks) > 1:
            got = np.zeros(4)
            peer_left = ranks[(g - 1) % len(ranks)]
            if g % 2 == 0:
                dist.send(t + me, dst=ranks[(g + 1) % len(ranks)], group=group)
                assert dist.recv(got, src=peer_left, group=group) == peer_left
            else:
                assert dist.recv(got, src=peer_left, group=group) == peer_left
                dist.send(t + me, dst=ranks[(g + 1) % len(ranks)], group=group)
        return t, ranks, dist.get_rank(mine), dist.get_world_size(mine)

    result = run(k, main)
    for me, (t, ranks, rank_in_mine, size_of_mine) in enumerate(result.returns):
        assert list(ranks) == sorted(members if me in members else others)
        np.testing.assert_array_equal(t, np.full(4, float(sum(ranks))))
        inside = me in members
        assert rank_in_mine == (sorted(members).index(me) if inside else -1)
        assert size_of_mine == (len(members) if inside else -1)  # torch's -1 for outsiders
    for transfer in result.trace.transfers:
        assert (transfer.src in members) == (transfer.dst in members), transfer


def test_recv_from_any_rank_takes_only_its_groups_messages():
    def main():
        dist.init_process_group()
        me = dist.get_rank()
        a, b = dist.new_group([0, 1]), dist.new_group([0, 2])
        if me == 2:  # sends first, on group b, with the same user tag
            dist.send(np.full(2, 2.0), dst=0, group=b)
        elif me == 1:
            blocking.compute(seconds=1e-3)  # rank 2's message waits at rank 0 by then
            dist.send(np.full(2, 1.0), dst=0, group=a)
        else:
            blocking.compute(seconds=2e-3)  # both messages are waiting when it receives
            from_a, from_b = np.zeros(2), np.zeros(2)
            src_a = dist.recv(from_a, group=a)  # any rank of a: never rank 2's message
            src_b = dist.recv(from_b, group=b)
            return src_a, from_a.tolist(), src_b, from_b.tolist()

    assert run(3, main).returns[0] == (1, [1.0, 1.0], 2, [2.0, 2.0])


def test_point_to_point_tags_name_the_package_and_the_group():
    def main():
        dist.init_process_group()
        pair = dist.new_group([0, 1])
        if dist.get_rank() == 0:
            dist.send(np.ones(1), dst=1, group=pair, tag=5)
        else:
            dist.recv(np.zeros(1), src=0, group=pair, tag=5)
        return pair.id

    result = run(2, main)
    (transfer,) = result.trace.transfers
    assert transfer.tag == ("distributed", result.returns[0], 5)
    assert result.returns[0] == result.returns[1]  # both ranks gave the group one id


MESHES = {  # mesh_shape, names: every 2-D and 3-D layout of 8 ranks that has names
    "dp2-tp4": ((2, 4), ("dp", "tp")),
    "dp4-tp2": ((4, 2), ("dp", "tp")),
    "pp2-dp2-tp2": ((2, 2, 2), ("pp", "dp", "tp")),
}


@pytest.mark.parametrize("layout", sorted(MESHES))
def test_device_mesh_groups_are_slices_and_transfers_name_their_dimension(layout):
    shape, names = MESHES[layout]
    grid = np.arange(8).reshape(shape)

    def main():
        mesh = dist.init_device_mesh("cuda", shape, mesh_dim_names=names)  # makes the group
        me = dist.get_rank()
        out = {}
        for name in names:
            t = np.full(2, float(me))
            dist.all_reduce(t, group=mesh.get_group(name))
            out[name] = (
                mesh.get_group(name).ranks,
                mesh.get_local_rank(name),
                mesh.size(name),
                mesh[name].mesh.tolist(),
                t[0],
            )
        return out, mesh.get_coordinate(), mesh.size(), mesh.shape, mesh.ndim

    result = run(8, main)
    for me, (out, coordinate, size, mesh_shape, ndim) in enumerate(result.returns):
        where = [int(c) for c in np.argwhere(grid == me)[0]]
        assert coordinate == where and size == 8 and mesh_shape == shape and ndim == len(shape)
        for axis, name in enumerate(names):
            index = list(where)
            index[axis] = slice(None)
            line = grid[tuple(index)].tolist()  # the ranks sharing every other coordinate
            ranks, local, length, sub, total = out[name]
            assert list(ranks) == line == sub
            assert local == where[axis] and length == shape[axis]
            assert total == sum(line)
    checked = 0
    for transfer in result.trace.transfers:
        assert is_collective(transfer.tag) and transfer.tag.dim in names
        axis = names.index(transfer.tag.dim)
        a, b = np.argwhere(grid == transfer.src)[0], np.argwhere(grid == transfer.dst)[0]
        # a transfer of dimension d joins two ranks that differ only along d
        assert [i for i in range(len(shape)) if a[i] != b[i]] == [axis]
        checked += 1
    assert checked > 0


@st.composite
def meshes(draw):
    """A mesh shape of 1-3 dimensions of 1-4 ranks each, at most 16 ranks, with names."""
    shape = draw(
        st.lists(st.integers(1, 4), min_size=1, max_size=3).filter(lambda s: int(np.prod(s)) <= 16)
    )
    return tuple(shape), ("pp", "dp", "tp")[3 - len(shape) :]


@settings(max_examples=15)
@given(mesh=meshes(), seed=st.integers(0, 2**16))
def test_drawn_meshes_reduce_along_each_dimension_as_numpy(mesh, seed):
    shape, names = mesh
    k = int(np.prod(shape))
    x = np.random.default_rng(seed).integers(-4, 4, size=(k, 3)).astype(np.float64)
    grid = np.arange(k).reshape(shape)

    def main():
        m = dist.init_device_mesh("cuda", shape, mesh_dim_names=names)
        out = []
        for name in names:
            t = x[dist.get_rank()].copy()
            dist.all_reduce(t, op=dist.ReduceOp.MAX, group=m.get_group(name))
            out.append(t)
        return out

    result = run(k, main)
    for me, out in enumerate(result.returns):
        where = np.argwhere(grid == me)[0]
        for axis, t in enumerate(out):
            index = list(where)
            index[axis] = slice(None)
            np.testing.assert_array_equal(t, x[grid[tuple(index)]].max(axis=0))
    for transfer in result.trace.transfers:  # each joins two ranks of one line of its dim
        a, b = np.argwhere(grid == transfer.src)[0], np.argwhere(grid == transfer.dst)[0]
        assert [i for i in range(len(shape)) if a[i] != b[i]] == [names.index(transfer.tag.dim)]


def test_sub_mesh_of_two_dimensions_keeps_the_parents_groups():
    def main():
        mesh = dist.init_device_mesh("cpu", (2, 2, 2), mesh_dim_names=("pp", "dp", "tp"))
        sub = mesh["dp", "tp"]
        same = sub.get_group("tp") is mesh.get_group("tp")
        return sub.mesh.tolist(), sub.mesh_dim_names, same, mesh["pp", "dp", "tp"] is mesh

    returns = run(8, main).returns
    assert returns[5] == ([[4, 5], [6, 7]], ("dp", "tp"), True, True)
    assert returns[2] == ([[0, 1], [2, 3]], ("dp", "tp"), True, True)


def test_device_mesh_built_from_an_array_of_ranks_and_without_names():
    def main():
        dist.init_process_group()
        mesh = dist.DeviceMesh("cuda", [[0, 2], [1, 3]])  # any order of ranks, as torch
        t = np.full(1, float(dist.get_rank()))
        dist.all_reduce(t, group=mesh.get_group(1))
        return mesh.get_group(1).ranks, mesh.get_local_rank(0), t[0], repr(mesh)

    returns = run(4, main).returns
    assert returns[1] == ((1, 3), 1, 4.0, "DeviceMesh('cuda', [[0, 2], [1, 3]])")


def test_groups_of_the_same_ranks_made_twice_are_two_groups():
    def main():
        dist.init_process_group()
        first, second = dist.new_group([0, 1]), dist.new_group([1, 0])
        return first.id != second.id, first.ranks == second.ranks, first.id

    returns = run(2, main).returns
    assert returns[0] == returns[1] and returns[0][:2] == (True, True)


def test_global_and_group_ranks_convert_both_ways():
    def main():
        dist.init_process_group()
        g = dist.new_group([1, 3])
        if dist.get_rank() in (1, 3):
            return dist.get_global_rank(g, 1), dist.get_group_rank(g, 1)

    assert run(4, main).returns[1] == (3, 0)


@pytest.mark.parametrize("call", ["broadcast", "reduce", "send"])
def test_group_src_and_dst_are_group_ranks(call):
    def main():
        dist.init_process_group()
        g = dist.new_group([1, 2])
        me = dist.get_rank()
        if me not in (1, 2):
            return None
        t = np.full(1, float(me))
        if call == "broadcast":
            dist.broadcast(t, group=g, group_src=1)  # group rank 1 is global rank 2
        elif call == "reduce":
            dist.reduce(t, group=g, group_dst=1)
        elif me == 2:
            dist.send(t, group=g, group_dst=0)
        else:
            assert dist.recv(t, group=g, group_src=1) == 2
        return t[0]

    returns = run(3, main).returns
    assert returns[1:] == {"broadcast": [2.0, 2.0], "reduce": [1.0, 3.0], "send": [2.0, 2.0]}[call]


def test_a_finished_run_leaves_no_state_behind():
    import weakref

    from collsim.runtime import blocking

    runs = []

    def main():
        dist.init_process_group()
        dist.new_group([0, 1])
        dist.init_device_mesh("cuda", (2, 2), mesh_dim_names=("dp", "tp"))
        dist.barrier(async_op=True).wait()
        execution = blocking.current_rank()._execution
        assert "distributed" in execution.front_ends  # the state hangs off the run
        runs.append(weakref.ref(execution))

    run(4, main)
    gc.collect()  # the ranks, their run, its state and buffers go once nothing holds them
    assert len(runs) == 4 and all(alive() is None for alive in runs)


def test_new_subgroups_cut_the_world_into_consecutive_groups():
    def main():
        dist.init_process_group()
        mine, groups = dist.new_subgroups(group_size=3)
        t = np.full(1, float(dist.get_rank()))
        dist.all_reduce(t, group=mine)
        odd, _ = dist.new_subgroups_by_enumeration([[1, 3, 5], [0, 2]])
        return mine.ranks, [g.ranks for g in groups], t[0], None if odd is None else odd.ranks

    returns = run(6, main).returns
    assert returns[4] == ((3, 4, 5), [(0, 1, 2), (3, 4, 5)], 12.0, None)
    assert returns[1] == ((0, 1, 2), [(0, 1, 2), (3, 4, 5)], 3.0, (1, 3, 5))


@pytest.mark.parametrize(
    "call, bad",
    [
        (lambda: dist.new_subgroups(group_size=4), "group_size=4"),
        (lambda: dist.new_subgroups(), "group_size=None"),
        (lambda: dist.new_subgroups_by_enumeration([[0, 1], [1, 2]]), "rank 1 is in two"),
    ],
)
def test_new_subgroups_refuse_sizes_that_do_not_cut_the_world(call, bad):
    def main():
        dist.init_process_group()
        call()

    with pytest.raises(collsim.errors.ConfigError, match=bad):
        run(6, main)
