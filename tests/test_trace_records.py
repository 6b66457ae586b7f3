"""Typed records in the trace: a pipeline pass is read from its record, never from its label.

Every compute span a pipeline stage runs carries a `PipelinePass` (kind, micro-batch, model
chunk, stage); the bubble, the per-stage spans, the timeline and the Chrome export read its
fields (DESIGN.md, principle 4: meaning in fields, not in strings). The labels (``F3``,
``B3.1``) are for display only, so rewording them must change no measured figure.
"""

import itertools
import json

import pytest

from collsim import Cluster, topology
from collsim.cli import main
from collsim.errors import ConfigError
from collsim.network.trace import Compute, Trace
from collsim.parallel.config import ParallelConfig
from collsim.parallel.mesh import train
from collsim.parallel.pipeline.runner import pipeline_step, toy_batch, toy_model
from collsim.parallel.pipeline.schedules import PASS_KINDS, PipelinePass, PipeOp
from collsim.parallel.pipeline.stage import PipelineMessage
from collsim.viz.timeline import timeline_figure

# every schedule, with a slow link so that transfers shift the passes off the ideal grid
CASES = [("gpipe", 3, 4, 1), ("1f1b", 4, 6, 1), ("interleaved", 2, 4, 2), ("zb-h1", 3, 4, 1)]
LINKS = {"bandwidth": "1GB/s", "latency": "3us"}


def _kind_only(op, show_chunk=False):
    return {"F": "forward", "B": "input grad", "W": "weight grad", "BW": "backward"}[op.kind]


_calls = itertools.count()

# other wordings of the display labels: the brief's "fwd#3" for every kind; the kind alone;
# a fresh text on every call (the trace's label never equals one computed later); and a
# one-to-one rewording
WORDINGS = {
    "fwd#mb": lambda op, show_chunk=False: f"fwd#{op.microbatch}",
    "kind only": _kind_only,
    "fresh each call": lambda op, show_chunk=False: f"pass {next(_calls)}",
    "one-to-one": lambda op, show_chunk=False: f"mb{op.microbatch}/c{op.chunk}/{op.kind}",
}


def pipeline_figures(result):
    """Everything `collsim pipeline` measures, plus every pass's stage, op, start and end."""
    spans = [(s.stage, s.op, s.start, s.end, s.rank) for s in result.spans]
    return result.to_dict(), spans, result.peak_inflight, result.inflight


def mesh_figures(result):
    return {coord: pipeline_figures(p) for coord, p in sorted(result.pipelines.items())}


def small_3d():
    model = toy_model(layers=4, hidden=8, heads=2)
    x, target = toy_batch(batch=8)
    config = ParallelConfig(dp=2, pp=2, tp=2, microbatches=2)
    return train(model, [(x, target)], config, **LINKS)


def cli_json(capsys, name, p, m, v):
    argv = ["pipeline", "--schedule", name, "-p", str(p), "-m", str(m), "--json"]
    argv += ["--virtual", str(v)] if v > 1 else []
    assert main(argv + ["--bandwidth", "1GB/s", "--latency", "3us"]) == 0
    return json.loads(capsys.readouterr().out)


# -- (a) rewording the labels changes no figure ------------------------------------------


@pytest.mark.parametrize("wording", list(WORDINGS))
@pytest.mark.parametrize("name, p, m, v", CASES)
def test_rewording_pass_labels_changes_no_pipeline_figure(
    monkeypatch, capsys, name, p, m, v, wording
):
    plain = pipeline_step(name, p, m, v, **LINKS)
    before = pipeline_figures(plain)
    cli_before = cli_json(capsys, name, p, m, v)
    monkeypatch.setattr(PipeOp, "label", WORDINGS[wording])
    after = pipeline_step(name, p, m, v, **LINKS)

    def first_pass(result):
        return next(c for c in result.trace.computes if isinstance(c.meta, PipelinePass))

    assert first_pass(after).label != first_pass(plain).label  # it did change
    assert pipeline_figures(after) == before
    assert cli_json(capsys, name, p, m, v) == cli_before
    assert len(after.spans) == sum(len(row) for row in after.schedule.ops)
    assert 0 < after.bubble_fraction < 1


@pytest.mark.parametrize("wording", ["fwd#mb", "fresh each call"])
def test_rewording_pass_labels_changes_no_3d_figure(monkeypatch, wording):
    before = mesh_figures(small_3d())
    monkeypatch.setattr(PipeOp, "label", WORDINGS[wording])
    assert mesh_figures(small_3d()) == before


def test_rewording_pass_labels_changes_no_timeline_block(monkeypatch):
    def blocks(result):
        fig = timeline_figure(result)
        return sorted(
            (p.get_x(), p.get_y(), p.get_width(), p.get_facecolor())
            for p in fig.axes[0].patches
            if p.get_gid().startswith(("op ", "idle"))
        )

    before = blocks(pipeline_step("interleaved", 2, 4, 2, **LINKS))
    monkeypatch.setattr(PipeOp, "label", WORDINGS["fwd#mb"])
    assert blocks(pipeline_step("interleaved", 2, 4, 2, **LINKS)) == before


# -- (b) every pass carries its record --------------------------------------------------


@pytest.mark.parametrize("name, p, m, v", CASES)
def test_every_compute_span_of_a_pipeline_run_is_its_schedule_pass(name, p, m, v):
    result = pipeline_step(name, p, m, v, **LINKS)
    sched = result.schedule
    # besides the passes, the layers' own FLOP spans (free here: zero seconds), each typed too
    assert all(c.meta is not None for c in result.trace.computes)
    passes = [c for c in result.trace.computes if isinstance(c.meta, PipelinePass)]
    assert len(passes) == sum(len(row) for row in sched.ops)
    for stage, rank in enumerate(result.stage_ranks):
        ran = sorted((c for c in passes if c.rank == rank), key=lambda c: c.start)
        expected = [
            PipelinePass(PASS_KINDS[op.kind], op.microbatch, op.chunk, stage)
            for op in sched.ops[stage]
        ]
        assert [c.meta for c in ran] == expected  # the schedule's passes, in its order
        assert [c.meta.op for c in ran] == list(sched.ops[stage])
    kinds = {c.meta.kind for c in passes}
    split = name == "zb-h1"
    names = {"forward", "backward_input", "backward_weight"} if split else {"forward", "backward"}
    assert kinds == names
    assert {c.meta.chunk for c in passes} == set(range(v))


def test_every_pass_of_a_3d_run_carries_its_stage_record():
    result = small_3d()
    for coord, pipeline in result.pipelines.items():
        for stage, rank in enumerate(pipeline.stage_ranks):
            computes = result.run.trace.computes
            records = [
                c.meta for c in computes if c.rank == rank and isinstance(c.meta, PipelinePass)
            ]
            assert [r.op for r in records] == list(result.schedule.ops[stage]), coord
            assert {r.stage for r in records} == {stage}


def test_a_rank_program_s_record_reaches_the_trace_and_the_label_stays_text():
    record = PipelinePass("backward_weight", 2, 0, 0)

    def program(rank):
        yield rank.compute(seconds="1us", label="W2", meta=record)
        yield rank.compute(seconds="1us")

    trace = Cluster(topology.switch(1)).run(program).trace
    first, second = trace.computes
    assert first.meta is record and second.meta is None
    assert type(first.label) is str and first.label == "W2"
    assert first[:4] == (0, 0.0, 1e-6, "W2")  # the old positional fields, in their order
    assert Compute(0, 0.0, 1.0, "x").meta is None


def test_a_pass_record_refuses_a_bad_kind_and_index():
    with pytest.raises(ConfigError, match="'fwd'.*nearest valid choice: 'forward'"):
        PipelinePass("fwd", 0, 0, 0)
    with pytest.raises(ConfigError, match="microbatch must be an integer >= 0, got -1"):
        PipelinePass("forward", -1, 0, 0)


# -- (c) the Chrome export ----------------------------------------------------------------


def test_chrome_export_carries_each_pass_record_and_is_byte_identical():
    texts = [pipeline_step("zb-h1", 3, 4, 1, **LINKS).trace.to_chrome() for _ in range(2)]
    assert texts[0] == texts[1]
    result = pipeline_step("zb-h1", 3, 4, 1, **LINKS)
    events = json.loads(texts[0])["traceEvents"]
    computes = [e for e in events if e["ph"] == "X" and e["tid"] == 0]
    assert len(computes) == len(result.trace.computes)
    passes = [c for c in result.trace.computes if isinstance(c.meta, PipelinePass)]
    assert len(passes) == 3 * 4 * 3  # p stages x m micro-batches x (F, B, W)
    pass_events = [e for e in computes if "microbatch" in e["args"]]
    assert len(pass_events) == len(passes)
    by_time = sorted(passes, key=lambda c: (c.rank, c.start))
    exported = sorted(pass_events, key=lambda e: (e["pid"], e["ts"]))
    for event, span in zip(exported, by_time):
        assert event["args"] == {
            "kind": span.meta.kind,
            "microbatch": span.meta.microbatch,
            "chunk": span.meta.chunk,
            "stage": span.meta.stage,
        }
        assert event["args"]["stage"] == event["pid"]  # stage s runs on rank s here
    messages = [e for e in events if e["ph"] == "X" and e["tid"] == 1]
    assert len(messages) == len(result.trace.transfers) == 2 * 4 * 2
    for event in messages:
        tag = PipelineMessage(
            event["args"]["kind"], event["args"]["microbatch"], event["args"]["virtual_stage"]
        )
        assert event["args"]["tag"] == str(tag) and event["pid"] == event["args"]["src"]
        assert event["args"]["dst"] == tag.virtual_stage  # p stages on ranks 0..p-1, v = 1


def test_chrome_export_of_records_without_to_args():
    trace = Trace()
    trace.add_compute(0, 0.0, 1.0, "a", meta=PipeOp("F", 1))  # a dataclass: its fields
    trace.add_compute(0, 1.0, 2.0, "b", meta=("tuple", 1))  # anything else: its repr
    trace.add_compute(0, 2.0, 3.0, "c")
    args = [e["args"] for e in json.loads(trace.to_chrome())["traceEvents"] if e["ph"] == "X"]
    assert args == [{"chunk": 0, "kind": "F", "microbatch": 1}, {"meta": "('tuple', 1)"}, {}]


def test_timeline_of_a_bare_trace_reads_the_records_not_the_labels():
    sched = pipeline_step("gpipe", 2, 2).schedule  # F0 F1 B0 B1 on both stages, 1 s each
    trace = Trace()
    for stage, starts in ((0, [0, 1, 4, 5]), (1, [1, 2, 3, 4])):
        for op, t in zip(sched.ops[stage], starts):
            trace.add_compute(stage, t, t + 1, "same text", meta=PipelinePass.of(op, stage))
    fig = timeline_figure(trace, sched)
    assert len([p for p in fig.axes[0].patches if p.get_gid().startswith("op ")]) == 8
    assert fig.get_suptitle().endswith("bubble 33.3%")  # (p-1)/(m+p-1) = 1/3
    with pytest.raises(ConfigError, match="holds 0 of the schedule's 8 passes"):
        timeline_figure(trace, sched, stage_ranks=[1, 0])  # records say stage 0 ran on rank 0
