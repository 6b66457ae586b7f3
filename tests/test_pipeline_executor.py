"""Pipeline schedules executed on the virtual cluster: bubble, memory, bytes and gradients.

Two oracles: the closed forms on `Schedule` (bubble, peak in-flight) and one device running
the whole batch (gradients, parameters after the step). Everything measured comes from the
executor's trace or from what its stages actually held.
"""

import contextlib
import json
import math
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from collsim import Cluster, topology
from collsim.cli import main
from collsim.errors import ConfigError
from collsim.nn import SGD, Adam, Linear, Sequential, ctx_nbytes, mse_loss
from collsim.parallel.pipeline.runner import (
    run_pipeline,
    single_device_step,
    toy_batch,
    toy_model,
)
from collsim.parallel.pipeline.schedules import (
    build_schedule,
    gpipe,
    interleaved,
    one_f_one_b,
    zb_h1,
)
from collsim.parallel.pipeline.stage import PipelineMessage

# small enough that the numerics cost little: (B, S, H) = (1, 2, 4) per micro-batch
SHAPE = {"seq": 2, "hidden": 4}


def run(sched, layers=None, mb_size=1, **options):
    model = toy_model(layers or sched.stages * sched.virtual, hidden=4, heads=1)
    x, target = toy_batch(sched.microbatches * mb_size, **SHAPE)
    return run_pipeline(sched, model, x, target, **options)


def grid():
    for p in (1, 2, 3, 4):
        for m in (1, 2, 3, 5, 8):
            yield gpipe(p, m)
            yield one_f_one_b(p, m)
            if m >= p:
                yield zb_h1(p, m)
    for p in (2, 3, 4):
        for m in (p, 2 * p):
            for v in (2, 3):
                yield interleaved(p, m, v)


GRID = list(grid())

# --------------------------------------------------------------------------- bubble


@pytest.mark.parametrize("sched", GRID, ids=repr)
def test_measured_bubble_equals_formula_with_free_links(sched):
    times = {"t_f": 1.0, "t_b": 2.0, "t_w": 0.5} if sched.name != "gpipe" else {"t_f": 0.3}
    result = run(sched, check=False, **times)
    expected = sched.formula_bubble_time(**result.times)
    busy = sched.microbatches * sum(result.times.values())
    for stage, idle in enumerate(result.idle_time):
        assert math.isclose(idle, expected, rel_tol=1e-12, abs_tol=1e-12 * busy), (stage, idle)
        assert math.isclose(result.busy_time[stage], busy, rel_tol=1e-12)
    assert math.isclose(result.bubble_time, expected, rel_tol=1e-12, abs_tol=1e-12 * busy)
    assert math.isclose(
        result.bubble_fraction, sched.formula_bubble_fraction(**result.times), abs_tol=1e-12
    )
    assert math.isclose(result.step_time, expected + busy, rel_tol=1e-12)


@pytest.mark.parametrize("p, m", [(2, 2), (4, 4), (4, 8), (3, 7)])
def test_gpipe_and_1f1b_bubble_fraction_is_p_minus_1_over_m_plus_p_minus_1(p, m):
    for sched in (gpipe(p, m), one_f_one_b(p, m)):
        result = run(sched, check=False, t_f=1e-3, t_b=3e-3, t_w=2e-3)
        assert result.bubble_fraction == pytest.approx((p - 1) / (m + p - 1), rel=1e-12)


@pytest.mark.parametrize("v", [2, 3, 4])
def test_interleaving_divides_the_bubble_by_v(v):
    base = run(one_f_one_b(4, 8), check=False)
    inter = run(interleaved(4, 8, v), check=False)
    assert inter.bubble_time == pytest.approx(base.bubble_time / v, rel=1e-12)


@pytest.mark.parametrize("t_w", [1.0, 0.5, 0.0])
def test_zero_bubble_beats_1f1b_by_2_p_minus_1_t_w(t_w):
    p, m = 4, 8
    one = run(one_f_one_b(p, m), check=False, t_f=1.0, t_b=1.0, t_w=t_w)
    zb = run(zb_h1(p, m), check=False, t_f=1.0, t_b=1.0, t_w=t_w)
    assert one.bubble_time - zb.bubble_time == pytest.approx(2 * (p - 1) * t_w, abs=1e-12)


def test_zb_h1_with_slow_w_has_no_closed_form_but_is_still_measured():
    result = run(zb_h1(3, 4), t_f=1.0, t_b=1.0, t_w=2.0)
    assert result.formula_bubble_time() is None and result.formula_bubble_fraction() is None
    assert result.bubble_time > 0 and result.match
    assert result.to_dict()["formula_bubble_fraction"] is None


def test_passes_respect_every_dependency_and_never_overlap_on_a_stage():
    for sched in (interleaved(3, 6, 2), zb_h1(3, 5), one_f_one_b(4, 6)):
        result = run(sched, check=False, t_f=1.0, t_b=1.5, t_w=0.5)
        spans = {(s.stage, s.op): s for s in result.spans}
        assert len(spans) == sum(len(row) for row in sched.ops)  # every pass ran once
        for stage in range(sched.stages):
            ran = result.stage_spans(stage)
            assert [s.op for s in ran] == list(sched.ops[stage])  # in the schedule's order
            assert all(a.end <= b.start for a, b in zip(ran, ran[1:]))
        for (stage, op), span in spans.items():
            for dep in sched.dependencies(stage, op):
                assert spans[dep].end <= span.start


def test_same_inputs_give_the_same_trace():
    a = run(interleaved(2, 4, 2), bandwidth="1GB/s", latency="3us")
    b = run(interleaved(2, 4, 2), bandwidth="1GB/s", latency="3us")
    assert a.trace.transfers == b.trace.transfers and a.trace.computes == b.trace.computes


# --------------------------------------------------------------------------- memory


@pytest.mark.parametrize("p, m", [(4, 8), (4, 2), (3, 3), (1, 4)])
def test_peak_inflight_gpipe_holds_m_and_1f1b_holds_min_p_minus_s_m(p, m):
    assert run(gpipe(p, m), check=False).peak_inflight == (m,) * p
    held = run(one_f_one_b(p, m), check=False).peak_inflight
    assert held == tuple(min(p - s, m) for s in range(p))


@pytest.mark.parametrize("sched", [s for s in GRID if s.name in ("interleaved", "zb-h1")], ids=repr)
def test_peak_inflight_interleaved_and_zb_h1_as_the_papers_give(sched):
    result = run(sched, check=False)
    assert result.peak_inflight == sched.formula_peak_inflight() == sched.peak_inflight()


def test_peak_activation_bytes_are_peak_count_times_one_microbatch():
    result = run(one_f_one_b(4, 6), check=False)
    model = toy_model(1, hidden=4, heads=1)
    x, _ = toy_batch(1, **SHAPE)
    one = ctx_nbytes(model.forward(x)[1])  # one micro-batch through one block
    assert result.peak_activation_bytes == tuple(n * one for n in result.peak_inflight)
    gp = run(gpipe(4, 6), check=False)
    assert gp.peak_activation_bytes == (6 * one,) * 4  # GPipe holds every micro-batch
    held = [n for _, n, _ in gp.inflight[0]]  # after each pass: fills up, then drains
    assert held == [1, 2, 3, 4, 5, 6, 5, 4, 3, 2, 1, 0]


# --------------------------------------------------------------------------- gradients


@st.composite
def valid_configs(draw):
    name = draw(st.sampled_from(["gpipe", "1f1b", "interleaved", "zb-h1"]))
    p = draw(st.integers(2 if name == "interleaved" else 1, 4))
    v = draw(st.integers(2, 3)) if name == "interleaved" else 1
    if name == "interleaved":
        m = p * draw(st.integers(1, 2))
        layers = p * v
    else:
        m = draw(st.integers(p if name == "zb-h1" else 1, 6))
        layers = draw(st.integers(p, 2 * p + 1))  # uneven splits too (with a warning)
    mb_size = draw(st.integers(1, 2))
    return name, p, m, v, layers, mb_size


@given(valid_configs(), st.sampled_from(["sgd", "adam"]))
def test_gradients_and_parameters_match_one_device(config, opt):
    name, p, m, v, layers, mb_size = config
    sched = build_schedule(name, p, m, v)
    model = toy_model(layers, hidden=4, heads=1, seed=p * 10 + m)
    x, target = toy_batch(m * mb_size, **SHAPE)
    reference = toy_model(layers, hidden=4, heads=1, seed=p * 10 + m)
    # Adam divides by |g| + eps: the attention key bias has an exactly-zero gradient, whose
    # ~1e-17 rounding noise Adam would scale to lr * 1e-17 / eps; eps=1e-6 keeps that < 1e-12
    make = (lambda: SGD(lr=0.1, momentum=0.9)) if opt == "sgd" else (lambda: Adam(1e-2, eps=1e-6))
    ref_loss, ref_grads = single_device_step(reference, x, target, optimizer=make())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # uneven layer splits warn
        result = run_pipeline(sched, model, x, target, optimizer=make())
    assert result.match is True and result.max_error < 1e-10
    assert result.loss == pytest.approx(ref_loss, rel=1e-12)
    assert set(result.grads) == set(ref_grads)
    for key, grad in ref_grads.items():
        np.testing.assert_allclose(result.grads[key], grad, rtol=1e-10, atol=1e-12)
    for key, param in reference.params.items():
        np.testing.assert_allclose(model.params[key], param, rtol=1e-10, atol=1e-12)


def test_a_loss_summed_over_the_batch_is_caught():
    """The executor divides each micro-batch's loss by m: right for a mean, wrong for a sum."""
    sched = one_f_one_b(2, 2)
    model = toy_model(2, hidden=4, heads=1)
    x, target = toy_batch(2, **SHAPE)

    def summed(pred, tgt):
        return mse_loss(pred, tgt, reduction="sum")

    result = run_pipeline(sched, model, x, target, loss=summed)
    assert result.match is False and result.max_error > 1e-6


# --------------------------------------------------------------------------- bytes on the wire


@pytest.mark.parametrize("sched", [gpipe(3, 4), zb_h1(4, 4), interleaved(3, 3, 2)], ids=repr)
def test_each_microbatch_crosses_every_boundary_once_each_way(sched):
    B, S, H, b = 2, SHAPE["seq"], SHAPE["hidden"], 8  # float64
    result = run(sched, mb_size=B, bandwidth="10GB/s", latency="2us")
    p, v, m = sched.stages, sched.virtual, sched.microbatches
    transfers = result.trace.transfers
    assert len(transfers) == 2 * m * (p * v - 1)
    assert {t.nbytes for t in transfers} == {B * S * H * b}
    tags = [t.tag for t in transfers]
    assert all(isinstance(tag, PipelineMessage) for tag in tags)
    forward = {(tag.microbatch, tag.virtual_stage) for tag in tags if tag.kind == "act"}
    backward = {(tag.microbatch, tag.virtual_stage) for tag in tags if tag.kind == "grad"}
    # activation into virtual stage k = 1..pv-1, gradient into k = 0..pv-2: once per micro-batch
    assert forward == {(mb, k) for mb in range(m) for k in range(1, p * v)}
    assert backward == {(mb, k) for mb in range(m) for k in range(p * v - 1)}
    neighbours = {(s, s + 1) for s in range(p - 1)} | {(s + 1, s) for s in range(p - 1)}
    if v > 1:
        neighbours |= {(p - 1, 0), (0, p - 1)}  # chunk c on the last stage -> chunk c+1 on stage 0
    assert set(result.boundary_transfers()) == neighbours
    for t in transfers:
        assert t.links == ((t.src, t.dst),)  # one hop: neighbours are wired to each other
    assert result.match


def test_link_costs_delay_the_step_and_show_in_the_bubble():
    free = run(one_f_one_b(4, 4), t_f=1e-3)
    slow = run(one_f_one_b(4, 4), t_f=1e-3, bandwidth="1MB/s", latency="50us")
    assert slow.step_time > free.step_time
    assert slow.bubble_fraction > slow.formula_bubble_fraction()
    assert slow.busy_time == pytest.approx(free.busy_time)


def test_a_switch_topology_can_carry_the_pipeline():
    cluster = Cluster(topology.switch(3, bandwidth="10GB/s", latency="1us"))
    result = run(one_f_one_b(3, 3), cluster=cluster)
    assert result.match and all(len(t.links) == 2 for t in result.trace.transfers)


# --------------------------------------------------------------------------- rules


def test_errors_are_clear():
    model, (x, target) = toy_model(2, hidden=4, heads=1), toy_batch(4, **SHAPE)
    with pytest.raises(ConfigError, match="fewer than p\\*v"):
        run_pipeline(one_f_one_b(3, 4), model, x, target)
    with pytest.raises(ConfigError, match="fewer than p\\*v"):
        run_pipeline(interleaved(2, 4, 2), model, x, target)  # 2 layers, 4 chunks
    with pytest.raises(ConfigError, match="multiple of p\\*v|divide"):
        run_pipeline(interleaved(2, 2, 2), toy_model(6, hidden=4, heads=1), *toy_batch(2, **SHAPE))
    with pytest.raises(ConfigError, match="p >= 2"):
        build_schedule("interleaved", 1, 4, 2)
    with pytest.raises(ConfigError, match="multiple of the pipeline stages"):
        build_schedule("interleaved", 4, 6, 2)
    with pytest.raises(ConfigError, match="m=2 < p=4"):
        build_schedule("zb-h1", 4, 2)
    with pytest.raises(ConfigError, match="valid names are 'gpipe', '1f1b'"):
        build_schedule("pipedream", 4, 8)
    with pytest.raises(ConfigError, match="m=3 equal micro-batches.*3 or 6"):
        run_pipeline(one_f_one_b(2, 3), model, x, target)
    with pytest.raises(ConfigError, match="Sequential"):
        run_pipeline(one_f_one_b(1, 1), Linear.init(4, 4, np.random.default_rng(0)), x, target)
    with pytest.raises(ConfigError, match="exactly 2 ranks"):
        run_pipeline(one_f_one_b(2, 2), model, x, target, cluster=Cluster(topology.ring(3)))
    with pytest.raises(ConfigError, match="t_f"):
        run_pipeline(one_f_one_b(2, 2), model, x, target, t_f=-1.0)


def test_uneven_layers_warn_and_still_match():
    model = toy_model(5, hidden=4, heads=1)
    x, target = toy_batch(4, **SHAPE)
    with pytest.warns(UserWarning, match="not a multiple of p=2"):
        result = run_pipeline(one_f_one_b(2, 4), model, x, target, t_f=1.0)
    assert result.match
    assert result.busy_time[0] > result.busy_time[1]  # 3 layers against 2: the slow stage


def test_a_plain_sequential_of_linears_works_too():
    rng = np.random.default_rng(0)
    model = Sequential(*[Linear.init(3, 3, rng) for _ in range(4)])
    x, target = rng.normal(size=(6, 3)), rng.normal(size=(6, 3))
    assert run_pipeline(zb_h1(2, 3), model, x, target).match


# --------------------------------------------------------------------------- CLI


def cli(*argv):
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = main(["pipeline", *argv])
    return status, out.getvalue()


def test_cli_json_has_the_documented_keys():
    args = ("--stages", "4", "--microbatches", "8", "--schedule", "1f1b")
    status, text = cli(*args, "--latency", "0", "--bandwidth", "inf", "--json")
    data = json.loads(text)
    assert status == 0
    keys = """schedule stages microbatches bubble_time_s bubble_fraction formula_bubble_fraction
              peak_inflight_microbatches step_time_s match""".split()
    assert set(keys) <= set(data)
    assert data["schedule"] == "1f1b" and data["stages"] == 4 and data["microbatches"] == 8
    assert data["bubble_fraction"] == pytest.approx(3 / 11, rel=1e-12)
    assert data["formula_bubble_fraction"] == pytest.approx(3 / 11, rel=1e-12)
    assert data["bubble_time_s"] == pytest.approx(3 * 3e-3, rel=1e-12)
    assert data["step_time_s"] == pytest.approx(11 * 3e-3, rel=1e-12)
    assert data["peak_inflight_microbatches"] == [4, 3, 2, 1]
    assert data["match"] is True


def test_cli_human_output_shows_table_bubble_memory_and_match():
    status, text = cli("-p", "4", "-m", "8", "--schedule", "interleaved", "--virtual", "2")
    assert status == 0
    assert "stage 0 | F0.0 F1.0" in text
    assert "bubble (measured)" in text
    assert "bubble (formula)   (p-1)(t_f+t_b+t_w)/v = 4.5 ms" in text
    assert "peak 11 (formula 11)" in text and "KiB" in text
    assert "gradients match one device: yes" in text


def test_cli_reports_rule_errors():
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        status, _ = cli("--stages", "4", "--microbatches", "2", "--schedule", "zb-h1")
    assert status == 2 and "m=2 < p=4" in err.getvalue()


def test_cli_out_saves_the_timeline(tmp_path):
    path = tmp_path / "timeline.svg"
    status, text = cli("-p", "2", "-m", "2", "--schedule", "gpipe", "--out", str(path))
    assert status == 0 and path.read_text().lstrip().startswith("<?xml")
    assert f"wrote {path}" in text
