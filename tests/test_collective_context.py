"""Per-run state of the collectives is a named, typed field of the execution (issue 12,
item 2): runs are deterministic, two runs share nothing, schedules stay unchanged plain
data, and no module writes state into another object's ``__dict__``."""

import ast
import dataclasses
import pathlib

import numpy as np
import pytest

import collsim
from collsim import topology
from collsim.collectives import build
from collsim.collectives.context import CollectiveContext, KeptPlan, StepPlan

PACKAGE = pathlib.Path(collsim.__file__).parent


def traced(result):
    return [
        (t.src, t.dst, t.tag, t.label, t.nbytes, t.start, t.end) for t in result.trace.transfers
    ]


def two_collectives(rank):
    x = np.arange(8.0) * (rank.id + 1)
    y = yield from rank.all_reduce(x)
    z = yield from rank.all_gather(y[:2])
    context = rank._execution.collectives
    return y, z, context


def test_the_execution_holds_one_typed_context_per_run():
    cluster = collsim.Cluster(topology.switch(4))
    first = cluster.run(two_collectives)
    contexts = {id(r[2]) for r in first.returns}
    assert len(contexts) == 1  # one per run, shared by its ranks
    context = first.returns[0][2]
    assert isinstance(context, CollectiveContext)
    assert context.seq == {(r, (0, 1, 2, 3)): 2 for r in range(4)}  # two collectives each
    assert len(context.plans) == 2  # one plan per schedule the run used
    for kept in context.plans.values():  # typed records, read by name (issue 26)
        assert type(kept) is KeptPlan and id(kept.schedule) in context.plans
        assert len(kept.steps) == kept.schedule.n_steps
        assert all(type(step) is StepPlan for step in kept.steps)
        ring = kept.steps[0]  # every rank sends one move and receives one, each a step
        assert [m.src for m in ring.sends] == [m.dst for m in ring.recvs] == [0, 1, 2, 3]
        assert list(ring.send_ptr) == list(ring.recv_ptr) == [0, 1, 2, 3, 4]
    second = cluster.run(two_collectives)
    assert second.returns[0][2] is not context  # a new run, a new context
    assert second.returns[0][2].seq == context.seq  # counted from 0 again, not 2..3


def test_two_runs_in_sequence_share_no_state():
    cluster = collsim.Cluster(topology.ring(4, "10GB/s", "1us"))
    xs = [np.full(12, float(r)) for r in range(4)]
    a = cluster.all_reduce(xs)
    b = cluster.all_reduce(xs)
    # the second run's tags start at position 0 again, with the same group id
    assert {t.tag.call for t in b.trace.transfers} == {0}
    assert traced(a) == traced(b)


@pytest.mark.parametrize("collective", ["all_reduce", "reduce_scatter", "all_gather"])
def test_the_same_run_twice_gives_the_same_trace(collective):
    def run():
        cluster = collsim.Cluster(topology.switch(5, "25GB/s", "3us"))
        return cluster.collective(collective, count=40, dtype="float32")

    assert traced(run()) == traced(run())


def test_a_run_leaves_its_schedule_unchanged():
    schedule = build("all_reduce", "ring", 4)
    before = {f.name: getattr(schedule, f.name) for f in dataclasses.fields(schedule)}
    # no field may hold a mutable container a run could fill in (a cache, notes)
    mutable = [name for name, v in before.items() if isinstance(v, dict | list | set)]
    assert mutable == []

    def program(rank):
        from collsim.collectives.executor import run_schedule

        return (yield from run_schedule(rank, schedule, np.ones(8), op="sum"))

    collsim.Cluster(topology.ring(4)).run(program)
    after = {f.name: getattr(schedule, f.name) for f in dataclasses.fields(schedule)}
    assert after == before
    assert not hasattr(schedule, "__dict__") or not vars(schedule).keys() - before.keys()


def _foreign_dict_uses(tree):
    """``x.__dict__`` / ``vars(x)`` where ``x`` is not a class defined in the module."""
    own_classes = {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    # a module the file makes itself (types.ModuleType(...)): its namespace is where a
    # script's code runs, which is what that dict is for
    own_modules = {
        target.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign)
        and isinstance(n.value, ast.Call)
        and getattr(n.value.func, "attr", getattr(n.value.func, "id", None)) == "ModuleType"
        for target in n.targets
        if isinstance(target, ast.Name)
    }
    # an object's own dict (``self.__dict__``), and a copy constructor that shares another
    # handle's state on that line (mpi4py's ``Comm(comm)``: two handles, one communicator),
    # keep nothing in a third object
    own_lines = {
        n.lineno
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute)
        and n.attr == "__dict__"
        and isinstance(n.value, ast.Name)
        and n.value.id == "self"
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "__dict__":
            name = node.value.id if isinstance(node.value, ast.Name) else None
            if name not in own_classes | own_modules and node.lineno not in own_lines:
                found.append(node.lineno)
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "vars":
            found.append(node.lineno)
    return found


def test_no_module_keeps_state_in_another_objects_dict():
    offenders = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        lines = _foreign_dict_uses(ast.parse(path.read_text(), str(path)))
        if lines:
            offenders[str(path.relative_to(PACKAGE))] = lines
    assert offenders == {}


def test_the_dict_check_finds_what_it_looks_for():
    code = "def f(rank):\n    rank._execution.__dict__.setdefault('seq', {})\n"
    assert _foreign_dict_uses(ast.parse(code)) == [2]
    own = "class A:\n    pass\n\nSET = A.__dict__['x']\n"
    assert _foreign_dict_uses(ast.parse(own)) == []
    copy = "class H:\n    def __init__(self, other):\n        self.__dict__ = other.__dict__\n"
    assert _foreign_dict_uses(ast.parse(copy)) == []
    stash = "def f(a, b):\n    a.__dict__.update(b.__dict__)\n"
    assert _foreign_dict_uses(ast.parse(stash)) == [2, 2]
