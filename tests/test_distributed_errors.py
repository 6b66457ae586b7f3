"""collsim.distributed refuses bad input before anything moves, with a collsim error that
names the value as the user gave it (a wrong shape, a bad src, a group the rank is not
in, a call before init_process_group or outside a run)."""

import threading

import numpy as np
import pytest
from fuzzkit import check_api
from hypothesis import given, settings
from hypothesis import strategies as st

import collsim
import collsim.distributed as dist
from collsim.errors import ConfigError
from collsim.runtime import blocking


@pytest.fixture(autouse=True)
def no_thread_left_behind():
    before = threading.active_count()
    yield
    assert threading.active_count() == before


def _cluster(k=4):
    return collsim.Cluster(collsim.topology.ring(k))


def _mesh():
    return dist.init_device_mesh("cuda", (2, 2), mesh_dim_names=("dp", "tp"))


def _read_only():
    t = np.zeros(3)
    t.setflags(write=False)
    return dist.all_reduce(t)


def _destroyed():
    g = dist.new_group([0, 1, 2, 3])
    dist.destroy_process_group(g)
    return g


def _destroyed_with_the_world():
    g = dist.new_group([0, 1, 2, 3])
    dist.destroy_process_group()
    dist.init_process_group()
    return g


# name -> (what every rank runs after init_process_group, text the error must contain)
BAD_CALLS = {
    "tensor is a list": (lambda: dist.all_reduce([1.0, 2.0]), "[1.0, 2.0]"),
    "dtype complex64": (lambda: dist.all_reduce(np.zeros(2, np.complex64)), "complex64"),
    "dtype complex": (lambda: dist.broadcast(np.zeros(2, complex), src=0), "complex128"),
    "read-only tensor": (_read_only, "read-only"),
    "op is a string": (lambda: dist.all_reduce(np.zeros(2), op="sum"), "op='sum'"),
    "op BAND of floats": (
        lambda: dist.all_reduce(np.zeros(2), op=dist.ReduceOp.BAND),
        "ReduceOp.BAND",
    ),
    "op PREMUL_SUM": (
        lambda: dist.all_reduce(np.zeros(2), op=dist.ReduceOp.PREMUL_SUM),
        "ReduceOp.PREMUL_SUM",
    ),
    "reduce op MAX?": (lambda: dist.reduce(np.zeros(2), dst=0, op=max), "op=<built-in"),
    "all_gather list of 3": (
        lambda: dist.all_gather([np.zeros(2)] * 3, np.zeros(2)),
        "got 3 tensors",
    ),
    "all_gather entry shape": (
        lambda: dist.all_gather([np.zeros(2)] * 3 + [np.zeros(5)], np.zeros(2)),
        "(5,)",
    ),
    "all_gather_into_tensor size": (
        lambda: dist.all_gather_into_tensor(np.zeros(7), np.zeros(2)),
        "(7,)",
    ),
    "all_gather_into_tensor dtype": (
        lambda: dist.all_gather_into_tensor(np.zeros(8, np.float32), np.zeros(2)),
        "float32",
    ),
    "reduce_scatter_tensor size": (
        lambda: dist.reduce_scatter_tensor(np.zeros(3), np.zeros(10)),
        "(10,)",
    ),
    "all_to_all_single rows": (
        lambda: dist.all_to_all_single(np.zeros((6, 2)), np.zeros((6, 2))),
        "nearest: 4 or 8",
    ),
    "all_to_all_single splits": (
        lambda: dist.all_to_all_single(np.zeros(8), np.zeros(8), input_split_sizes=[1, 1, 3, 3]),
        "[1, 1, 3, 3]",
    ),
    "all_to_all_single output": (lambda: dist.all_to_all_single(np.zeros(4), np.zeros(8)), "(4,)"),
    "broadcast src=7": (lambda: dist.broadcast(np.zeros(2), src=7), "src=7"),
    "broadcast src=1.5": (lambda: dist.broadcast(np.zeros(2), src=1.5), "src=1.5"),
    "broadcast src missing": (lambda: dist.broadcast(np.zeros(2)), "src=None"),
    "broadcast src and group_src": (
        lambda: dist.broadcast(np.zeros(2), src=0, group_src=0),
        "group_src=0",
    ),
    "reduce dst=-1": (lambda: dist.reduce(np.zeros(2), dst=-1), "dst=-1"),
    "group_dst=4": (lambda: dist.reduce(np.zeros(2), group_dst=4), "group_dst=4"),
    "send to itself": (lambda: dist.send(np.zeros(2), dst=dist.get_rank()), "itself"),
    "send dst=True": (lambda: dist.send(np.zeros(2), dst=True), "dst=True"),
    "recv src=9": (lambda: dist.recv(np.zeros(2), src=9), "src=9"),
    "irecv from itself": (lambda: dist.irecv(np.zeros(2), src=dist.get_rank()), "itself"),
    "tag is text": (
        lambda: dist.isend(np.zeros(2), dst=(dist.get_rank() + 1) % 4, tag="x"),
        "tag='x'",
    ),
    "all_to_all list of 2": (
        lambda: dist.all_to_all([np.zeros(1)] * 2, [np.zeros(1)] * 4),
        "got 2 tensors",
    ),
    "uneven splits sum": (
        lambda: dist.all_to_all_single(np.zeros(4), np.zeros(4), [1] * 4, [1, 1, 1, 2]),
        "add up to 5",
    ),
    "gather_list off dst": (lambda: dist.gather(np.zeros(1), [np.zeros(1)] * 4, dst=3), "dst=3"),
    "scatter_list short": (
        lambda: dist.scatter(
            np.zeros(1), [np.zeros(1)] * 3 if dist.get_rank() == 0 else None, src=0
        ),
        "got 3 tensors",
    ),
    "group is a list": (lambda: dist.all_reduce(np.zeros(2), group=[0, 1]), "new_group([0, 1])"),
    "new_group rank 9": (lambda: dist.new_group([0, 9]), "[9]"),
    "new_group twice": (lambda: dist.new_group([1, 1]), "twice"),
    "new_group text": (lambda: dist.new_group("01"), "'01'"),
    "init twice": (lambda: dist.init_process_group(), "already"),
    "mesh shape (3,)": (lambda: dist.init_device_mesh("cuda", (3,)), "(3,)"),
    "mesh shape zero": (lambda: dist.init_device_mesh("cuda", (0, 4)), "(0, 4)"),
    "mesh names": (
        lambda: dist.init_device_mesh("cuda", (2, 2), mesh_dim_names=("dp",)),
        "('dp',)",
    ),
    "mesh same names": (
        lambda: dist.init_device_mesh("cuda", (2, 2), mesh_dim_names=("a", "a")),
        "('a', 'a')",
    ),
    "mesh no dim pp": (lambda: _mesh()["pp"], "'pp'"),
    "mesh order": (lambda: _mesh()["tp", "dp"], "mesh[('dp', 'tp')]"),
    "mesh get_group()": (lambda: _mesh().get_group(), "get_group()"),
    "mesh get_group(5)": (lambda: _mesh().get_group(5), "get_group(5)"),
    "mesh rank 9": (lambda: dist.DeviceMesh("cuda", [0, 9]), "rank 9"),
    "mesh ragged": (lambda: dist.DeviceMesh("cuda", [[0, 1], [2]]), "[[0, 1], [2]]"),
    "mesh device": (lambda: dist.DeviceMesh(3, [0, 1]), "device_type=3"),
    "destroyed group": (lambda: dist.all_reduce(np.zeros(1), group=_destroyed()), "destroyed"),
    "destroyed world": (lambda: dist.barrier(group=_destroyed_with_the_world()), "destroyed"),
}


@pytest.mark.parametrize("name", sorted(BAD_CALLS))
def test_bad_calls_name_the_value(name):
    body, bad = BAD_CALLS[name]

    def main():
        dist.init_process_group()
        body()

    with pytest.raises(ConfigError) as caught:
        blocking.run(_cluster(4), main)
    assert bad in str(caught.value), str(caught.value)


def test_a_collective_on_a_group_the_rank_is_not_in():
    def main():
        dist.init_process_group()
        pair = dist.new_group([0, 1])
        if dist.get_rank() == 2:
            dist.all_reduce(np.zeros(2), group=pair)

    with pytest.raises(ConfigError, match=r"rank 2 is not in group \[0, 1\]"):
        blocking.run(_cluster(3), main)


@pytest.mark.parametrize("call", ["get_rank", "all_reduce", "new_group", "init_device_mesh"])
def test_calls_before_init_process_group_say_to_call_it(call):
    calls = {
        "get_rank": dist.get_rank,
        "all_reduce": lambda: dist.all_reduce(np.zeros(1)),
        "new_group": lambda: dist.new_group([0]),
        "init_device_mesh": lambda: _mesh().get_group("tp"),
    }
    if call == "init_device_mesh":  # like torch, it makes the default group itself
        assert blocking.run(_cluster(4), calls[call]).returns[0].ranks == (0, 1)
        return
    with pytest.raises(ConfigError, match=rf"{call}\(\).*init_process_group"):
        blocking.run(_cluster(2), calls[call])


def test_outside_a_run_init_says_to_use_collsim_exec():
    with pytest.raises(ConfigError, match="collsim exec") as caught:
        dist.init_process_group(backend="collsim")
    assert "init_process_group" in str(caught.value)
    with pytest.raises(ConfigError, match="collsim exec"):
        dist.all_reduce(np.zeros(2))


@pytest.mark.parametrize(
    "kwargs, bad",
    [
        ({"backend": "tpu"}, "'tpu'"),
        ({"world_size": 8}, "world_size=8"),
        ({"rank": 3}, "rank=3"),
    ],
)
def test_init_refuses_what_does_not_fit_the_run(kwargs, bad):
    with pytest.raises(ConfigError) as caught:
        blocking.run(_cluster(2), lambda: dist.init_process_group(**kwargs))
    assert bad in str(caught.value)


_values = st.one_of(
    st.integers(-(2**62), 2**62),
    st.floats(allow_nan=True),
    st.text(max_size=4),
    st.none(),
    st.booleans(),
)


@settings(max_examples=25)
@given(
    value=_values,
    call=st.sampled_from(
        ["broadcast", "reduce", "send", "recv", "tag", "send_object_list", "recv_object_list"]
    ),
)
def test_fuzzed_ranks_and_tags_are_refused_naming_them(value, call):
    def main():
        dist.init_process_group()
        t = np.zeros(2)
        other = (dist.get_rank() + 1) % 2
        if call == "broadcast":
            dist.broadcast(t, src=value)
        elif call == "reduce":
            dist.reduce(t, dst=value)
        elif call == "send":
            (dist.send if dist.get_rank() == 0 else dist.recv)(t, value)
        elif call == "recv":
            (dist.recv if dist.get_rank() == 0 else dist.send)(t, value)
        elif call == "send_object_list":
            if dist.get_rank() == 0:
                dist.send_object_list(["x"], value)
            else:
                dist.recv_object_list([None], 0)
        elif call == "recv_object_list":
            if dist.get_rank() == 0:
                dist.recv_object_list([None], value)
            else:
                dist.send_object_list(["x"], 0)
        else:
            (dist.send if dist.get_rank() == 0 else dist.recv)(t, other, tag=value)

    # a valid rank or tag runs; anything else is a collsim error naming the value
    check_api(blocking.run, _cluster(2), main, bad=repr(value), timeout=20)


_sizes = st.lists(st.integers(0, 5), min_size=1, max_size=2).map(tuple)


@settings(max_examples=25)
@given(
    out_shape=_sizes,
    in_shape=_sizes,
    call=st.sampled_from(["all_gather_into_tensor", "reduce_scatter_tensor", "all_to_all_single"]),
)
def test_fuzzed_tensor_shapes_run_or_are_refused_naming_them(out_shape, in_shape, call):
    def main():
        dist.init_process_group()
        getattr(dist, call)(np.zeros(out_shape), np.ones(in_shape))

    # either the sizes fit (K = 3 blocks) or the error names the shape the user gave
    bad = str(out_shape) if call != "all_to_all_single" else str(in_shape)
    check_api(blocking.run, _cluster(3), main, bad=bad, timeout=20)


@settings(max_examples=25)
@given(
    out_shape=_sizes,
    in_shapes=st.lists(_sizes, max_size=4),
    call=st.sampled_from(["reduce_scatter", "all_reduce_coalesced"]),
)
def test_fuzzed_tensor_lists_run_or_are_refused_naming_them(out_shape, in_shapes, call):
    def main():
        dist.init_process_group()
        tensors = [np.ones(shape) for shape in in_shapes]
        if call == "reduce_scatter":
            dist.reduce_scatter(np.zeros(out_shape), tensors)
        else:
            dist.all_reduce_coalesced(tensors or [np.zeros(out_shape), 1.5])

    # the lists fit (K = 3 tensors of the output's shape) or the error names what was given
    bad = {"reduce_scatter": "input_list", "all_reduce_coalesced": "tensors"}[call]
    check_api(blocking.run, _cluster(3), main, bad=bad, timeout=20)
