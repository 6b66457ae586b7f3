"""Trace labels are for display only: every figure is read from the typed records.

Issue 12's must-show: "changing the wording of any trace label changes no accounting figure
and fails no test except those that check the display text". A collective's transfer carries
a `CollectiveStep` tag (collective, algorithm, group, call, step, mesh dimension) and its
schedule's `ChunkMove` (which chunks); a rank module's compute span a `LayerPass` (which
pass of which layer); a pipeline pass a `PipelinePass`. Here each source of label text is
reworded in turn -- the collectives' step labels, the layer passes' labels, the pipeline
passes' labels, then all of them -- and a data-parallel, a dp x tp (with and without
sequence parallelism), a pipeline run and a collective step-through must measure exactly
what they measured before (DESIGN.md, principle 4).
"""

import functools
import itertools
import json
import re
from dataclasses import dataclass

import numpy as np
import pytest

import collsim
from collsim import topology
from collsim.collectives import executor
from collsim.collectives.records import CollectiveStep
from collsim.collectives.registry import ALGORITHMS
from collsim.collectives.schedule import ChunkMove, chunk_bounds
from collsim.errors import ConfigError, DeadlockError
from collsim.nn import Linear, Sequential
from collsim.parallel.accounting import collective_bytes, mesh_dimension
from collsim.parallel.modules import LAYER_PASS_KINDS, LayerPass, Local, units_of
from collsim.parallel.pipeline.runner import pipeline_step
from collsim.parallel.pipeline.schedules import PipelinePass, PipeOp
from collsim.runtime.group import Group, RankGrid
from collsim.verify import verify

SMALL = {"hidden": 8, "heads": 2, "seq": 4, "layers": 1, "steps": 1}
LINKS = {"bandwidth": "1GB/s", "latency": "3us"}
STEP_THROUGH = [
    ("all_reduce", "ring", 4),
    ("reduce_scatter", "halving_doubling", 4),
    ("all_gather", "ring", 3),
    ("broadcast", "tree", 5),
    ("all_to_all", "direct", 3),
]

# -- the runs and what they measure -----------------------------------------------------


def mesh_program(rank, mesh):
    """A collective along each dimension of a (dp, tp) mesh, then one on plain ranks."""
    x = np.arange(8.0) + rank.id
    y = yield from rank.all_reduce(x, group=mesh.group("tp", rank.id))
    z = yield from rank.all_gather(y[:2], group=mesh.group("dp", rank.id))
    w = yield from rank.all_reduce(z, group=Group(mesh.group("dp", rank.id).ranks))
    return w


def step_through_figures():
    """The step-through of several collectives: rows, holdings, text, bytes, time."""
    out = {}
    for name, algorithm, k in STEP_THROUGH:
        cluster = collsim.Cluster(topology.ring(k, "10GB/s", "1us"))
        count = 4 * k
        result = cluster.collective(
            name, [np.arange(float(count)) + r for r in range(k)], algorithm=algorithm
        )
        views = [
            (v.number, v.phase, v.phase_step, v.transfers, v.labels(), str(v))
            for v in result.steps(include_initial=True)
        ]
        outputs = [o.tolist() for o in result.outputs if o is not None]
        out[(name, algorithm)] = (views, collective_bytes(result.trace, k), result.time, outputs)
    return out


def mesh_figures():
    mesh = RankGrid((2, 2), ("dp", "tp"))
    run = collsim.Cluster(topology.switch(4, "10GB/s", "1us")).run(mesh_program, mesh)
    return (
        collective_bytes(run.trace, 4, mesh),
        collective_bytes(run.trace, 4),
        run.time,
        [r.tolist() for r in run.returns],
    )


def pipeline_figures():
    result = pipeline_step("1f1b", 2, 4, **LINKS)
    spans = [(s.stage, s.op, s.start, s.end, s.rank) for s in result.spans]
    return result.to_dict(), spans, collective_bytes(result.trace, 2)


def figures():
    """Everything the runs measure (none of it may depend on a label's wording)."""
    return {
        "step-through": step_through_figures(),
        "mesh collectives": mesh_figures(),
        "dp": verify("dp", dp=2, batch=4, **SMALL).to_dict(),
        "dp-tp": verify("dp-tp", dp=2, tp=2, **SMALL).to_dict(),
        "dp-tp with sp": verify("dp-tp", dp=2, tp=2, sequence_parallel=True, **SMALL).to_dict(),
        "pipeline": pipeline_figures(),
    }


def labels():
    """The display text the runs produce: what a rewording must change."""
    collective = collsim.Cluster(topology.ring(4)).all_reduce([np.ones(8)] * 4)
    layer = Local(Linear(np.eye(2), np.zeros(2)), name="fc")

    def one_layer(rank):
        y, ctx = yield from layer.forward(rank, np.ones((3, 2)))
        yield from layer.backward(rank, ctx, y)

    layers = collsim.Cluster(topology.switch(1)).run(one_layer)
    pipe = pipeline_step("1f1b", 2, 2, **LINKS)
    passes = [c for c in pipe.trace.computes if isinstance(c.meta, PipelinePass)]
    return {
        "collective steps": [t.label for t in collective.trace.transfers],
        "layer passes": [c.label for c in layers.trace.computes],
        "pipeline passes": [c.label for c in passes] + [t.label for t in pipe.trace.transfers],
    }


@functools.cache
def plain():
    """The figures and labels of the runs with today's wording (computed once)."""
    return figures(), labels()


# -- the rewordings ------------------------------------------------------------------------

_fresh = itertools.count()
WORDINGS = {
    # the words in another order: the collective's name is no longer the first word
    "reordered": {
        "collective steps": lambda collective, number, moves: [
            f"step {number} of {collective.replace('_', '-')}: {m.src}->{m.dst}" for m in moves
        ],
        "layer passes": property(lambda self: f"{self.layer} ({self.kind})"),
        "pipeline passes": lambda op, show_chunk=False: f"mb{op.microbatch}/c{op.chunk}/{op.kind}",
    },
    # no text at all
    "empty": {
        "collective steps": lambda collective, number, moves: [""] * len(moves),
        "layer passes": property(lambda self: ""),
        "pipeline passes": lambda op, show_chunk=False: "",
    },
    # a new text on every call: a label never equals one computed again later
    "fresh each call": {
        "collective steps": lambda collective, number, moves: [f"t{next(_fresh)}" for _ in moves],
        "layer passes": property(lambda self: f"span {next(_fresh)}"),
        "pipeline passes": lambda op, show_chunk=False: f"pass {next(_fresh)}",
    },
}
TARGETS = {
    "collective steps": (executor, "step_labels"),
    "layer passes": (LayerPass, "label"),
    "pipeline passes": (PipeOp, "label"),
}


@pytest.mark.parametrize("wording", list(WORDINGS))
@pytest.mark.parametrize("source", [*TARGETS, "every label"])
def test_rewording_labels_changes_no_figure(monkeypatch, source, wording):
    before, before_labels = plain()
    sources = list(TARGETS) if source == "every label" else [source]
    for name in sources:
        owner, attribute = TARGETS[name]
        monkeypatch.setattr(owner, attribute, WORDINGS[wording][name])
    after_labels = labels()
    for name in sources:  # the rewording took effect ...
        assert after_labels[name] != before_labels[name], name
    for name in set(TARGETS) - set(sources):  # ... and only where it was asked for
        assert after_labels[name] == before_labels[name], name
    after = figures()
    for run in before:  # one run at a time, so that a failure names it
        assert after[run] == before[run], run


# -- the records themselves ----------------------------------------------------------------

PAIRS = [(c, a) for c, algorithms in ALGORITHMS.items() for a in algorithms]


@pytest.mark.parametrize("collective, algorithm", PAIRS)
def test_every_collective_transfer_carries_its_step_and_its_move(collective, algorithm):
    k, itemsize = 4, 4
    cluster = collsim.Cluster(topology.switch(6))
    group = Group([5, 1, 3, 0])  # group ranks differ from global ranks
    out = cluster.collective(
        collective, count=8 * k, dtype="float32", algorithm=algorithm, group=group, root=1
    )
    schedule = out.schedule
    bounds = chunk_bounds(schedule.buffer_elements(out.count), schedule.n_chunks)
    # a pair may carry two moves in one step (PAT's wrapped chunk ranges): key by chunk too
    moves = {(s, m.src, m.dst, m.chunks.start): m for s, m in schedule.moves()}
    assert len(out.trace.transfers) == len(moves)
    for t in out.trace.transfers:
        tag, move = t.tag, t.meta
        assert type(tag) is CollectiveStep
        assert (tag.collective, tag.algorithm) == (collective, algorithm)
        assert (tag.call, tag.dim) == (0, None)  # the run's first call, on plain ranks
        assert tag.number == tag.step + 1 and 0 <= tag.step < schedule.n_steps
        assert move is moves[(tag.step, move.src, move.dst, move.chunks.start)]  # its own object
        assert (group.ranks[move.src], group.ranks[move.dst]) == (t.src, t.dst)
        first, last = move.chunks[0], move.chunks[-1]
        assert t.nbytes == (bounds[last][1] - bounds[first][0]) * itemsize
    # one tag per step, shared by every rank's transfers of that step
    tags = [t.tag for t in out.trace.transfers]
    assert len({id(tag) for tag in tags}) == len(set(tags))


def test_mesh_groups_name_their_dimension_and_accounting_reads_it():
    mesh = RankGrid((2, 2), ("dp", "tp"))
    assert mesh.group("tp", 3) == Group([2, 3]) and mesh.group("tp", 3).dim == "tp"
    assert hash(mesh.group("dp", 3)) == hash(Group([1, 3]))  # equal by ranks, whatever the dim
    assert {g.dim for g in mesh.groups("dp")} == {"dp"}
    run = collsim.Cluster(topology.switch(4)).run(mesh_program, mesh)
    dims = [(t.tag.collective, t.tag.call, t.tag.dim) for t in run.trace.transfers]
    assert set(dims) == {("all_reduce", 0, "tp"), ("all_gather", 0, "dp"), ("all_reduce", 1, None)}
    # the tag's dimension and the ranks' coordinates agree, so the totals are the same
    by_coordinates = {}
    for t in run.trace.transfers:
        key = (mesh_dimension(mesh, t.src, t.dst), t.tag.collective)
        by_coordinates.setdefault(key, [0] * 4)[t.src] += t.nbytes
    assert collective_bytes(run.trace, 4, mesh) == by_coordinates
    assert set(by_coordinates) == {("tp", "all_reduce"), ("dp", "all_gather"), ("dp", "all_reduce")}


@pytest.mark.parametrize("dim", ["", 3, ("tp",)])
def test_a_group_dimension_is_a_name(dim):
    with pytest.raises(ConfigError, match=re.escape(f"group dim {dim!r}")):
        Group([0, 1], dim=dim)


def test_layer_passes_carry_their_records():
    model = Sequential(Linear(np.eye(3), np.zeros(3)), Linear(np.eye(3), np.zeros(3)))
    units = units_of(model)

    def program(rank):
        x, ctxs = np.ones((2, 3)), []
        for _, unit in units:
            x, ctx = yield from unit.forward(rank, x)
            ctxs.append(ctx)
        for (_, unit), ctx in zip(reversed(units), reversed(ctxs)):
            x, _ = yield from unit.backward(rank, ctx, x)

    trace = collsim.Cluster(topology.switch(1)).run(program).trace
    records = [c.meta for c in trace.computes]
    assert records == [
        LayerPass("forward", "0 Linear"),
        LayerPass("forward", "1 Linear"),
        LayerPass("backward_input", "1 Linear"),
        LayerPass("backward_weight", "1 Linear"),
        LayerPass("backward_input", "0 Linear"),
        LayerPass("backward_weight", "0 Linear"),
    ]
    assert [c.label for c in trace.computes][:2] == ["F 0 Linear", "F 1 Linear"]  # display


def test_tensor_parallel_spans_carry_layer_records():
    report_trace = _tp_block_trace()
    assert report_trace.computes
    assert all(isinstance(c.meta, LayerPass) for c in report_trace.computes)
    assert {c.meta.kind for c in report_trace.computes} == set(LAYER_PASS_KINDS)
    assert LayerPass("forward", "residual") in {c.meta for c in report_trace.computes}


def _tp_block_trace():
    from collsim.nn import TransformerBlock
    from collsim.parallel.tensor.attention import ParallelTransformerBlock

    block = TransformerBlock.init(8, 2, np.random.default_rng(0), hidden=16)

    def program(rank):
        shard = ParallelTransformerBlock.from_full(block, Group([0, 1]), rank.id)
        x = np.ones((1, 4, 8))
        y, ctx = yield from shard.forward(rank, x)
        yield from shard.backward(rank, ctx, y)

    return collsim.Cluster(topology.switch(2)).run(program).trace


@pytest.mark.parametrize("kind", ["F", "fwd", "backward"])
def test_a_layer_pass_kind_is_checked(kind):
    with pytest.raises(ConfigError, match=rf"LayerPass kind '{kind}'.*nearest valid choice"):
        LayerPass(kind, "0 Linear")


def test_the_chrome_export_carries_the_records():
    out = collsim.Cluster(topology.ring(3)).all_reduce([np.ones(6)] * 3, algorithm="ring")
    events = json.loads(out.trace.to_chrome())["traceEvents"]
    sends = [e for e in events if e.get("ph") == "X" and e["tid"] == 1]
    assert len(sends) == len(out.trace.transfers)
    for event, t in zip(sends, out.trace.transfers):
        args = event["args"]
        assert (args["collective"], args["algorithm"], args["call"]) == ("all_reduce", "ring", 0)
        assert args["step"] == t.tag.number  # people count steps from 1
        assert (args["first_chunk"], args["last_chunk"]) == (t.meta.chunks[0], t.meta.chunks[-1])
        assert (args["src"], args["dst"], args["reduce"]) == (t.src, t.dst, t.meta.reduce)
    move = ChunkMove(0, 1, range(2, 4), False, to=range(0, 2))
    assert move.to_args()["first_dst_chunk"] == 0 and move.to_args()["last_dst_chunk"] == 1


def test_a_hang_names_the_collective_step_from_one():
    def program(rank):
        if rank.id != 2:  # rank 2 never joins
            yield from rank.all_reduce(np.ones(3))

    with pytest.raises(DeadlockError, match=r"recv from rank 2: all_reduce call #0, step 1\n"):
        collsim.Cluster(topology.ring(3)).run(program)


@dataclass(frozen=True)
class Bucket:
    """A record of the user's own, as a trainer might attach to its sends."""

    index: int
    layers: tuple


def test_a_send_keeps_its_record_on_the_trace_and_in_the_chrome_export():
    def program(rank):
        if rank.id == 0:
            yield rank.send(1, np.ones(4), tag=7, label="any text", meta=Bucket(2, ("fc",)))
        else:
            yield rank.recv(0, tag=7)

    trace = collsim.Cluster(topology.switch(2)).run(program).trace
    (t,) = trace.transfers
    assert t.meta == Bucket(2, ("fc",)) and t.tag == 7
    events = json.loads(trace.to_chrome())["traceEvents"]
    (event,) = [e for e in events if e["ph"] == "X" and e["tid"] == 1]  # the send
    assert event["args"]["index"] == 2 and event["args"]["layers"] == ["fc"]
    trace.add_transfer(0, 1, 0, 8, 0.0, 1.0, (), "no record")  # meta is optional
    assert trace.transfers[-1].meta is None
