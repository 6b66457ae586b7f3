"""Serving (issue 31, items 4 and 5): the HBM bandwidth of the presets, the roofline's
formulas against figures worked out by hand from the datasheets, the decode run timed by
the roofline, vLLM's metrics, and continuous batching colocated and disaggregated with
each request's tokens equal to one device's."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import collsim
from collsim import hardware
from collsim.nn import Decoder, DecoderConfig
from collsim.parallel.inference import InferenceSplit, generate_on_cluster
from collsim.parallel.inference.metrics import RequestTimes, serving_metrics
from collsim.parallel.inference.roofline import (
    Roofline,
    ServedShape,
    decode_step,
    kv_cache_elements,
    prefill,
    weight_elements,
)
from collsim.parallel.inference.serving import Deployment, ServingPass, serve, workload

# Llama-2-7B's attention shape (Touvron et al. 2023: 32 layers, d_model 4096)
LLAMA_7B = ServedShape(layers=32, hidden=4096, heads=32, vocab=32000, ffn_hidden=11008)


def test_the_presets_carry_the_datasheets_hbm_bandwidth():
    assert hardware.preset("dgx-a100").hbm_bandwidth == 2.039e12  # A100 80GB SXM
    assert hardware.preset("dgx-h100").hbm_bandwidth == 3.35e12  # H100 SXM
    for name in ("dgx-a100", "dgx-h100", "pcie-8gpu"):
        assert any("HBM" in line for line in hardware.preset(name).sources)
    assert "HBM 3.35 TB/s" in hardware.preset("dgx-h100").describe()


def test_b_crit_is_peak_over_hbm_times_bytes_over_two():
    # by hand: 989e12 / 3.35e12 = 295.2 FLOP/B; 312e12 / 2.039e12 = 153.0
    h100 = Roofline.of_machine(hardware.preset("dgx-h100"))
    a100 = Roofline.of_machine(hardware.preset("dgx-a100"))
    assert h100.critical_batch == pytest.approx(295.22, abs=0.01)
    assert a100.critical_batch == pytest.approx(153.02, abs=0.01)
    fp8 = Roofline.of_machine(hardware.preset("dgx-h100"), bytes_per_element=1)
    assert fp8.critical_batch == pytest.approx(295.22 / 2, abs=0.01)


@pytest.mark.parametrize("preset", ["dgx-h100", "dgx-a100"])
def test_a_decode_step_turns_compute_bound_at_b_crit(preset):
    """Found by stepping the batch of the formula, not by the same division."""
    roofline = Roofline.of_machine(hardware.preset(preset))
    bounds = [decode_step(LLAMA_7B, roofline, batch, context=1).bound for batch in range(1, 600)]
    turn = bounds.index("compute") + 1
    assert bounds[:2] == ["memory", "memory"]
    assert turn == pytest.approx(roofline.critical_batch, rel=0.02)


def test_decode_reads_weights_and_kv_cache_and_prefill_is_compute_bound():
    h100 = Roofline(989e12, 3.35e12, 2)
    short, long = decode_step(LLAMA_7B, h100, 8, 16), decode_step(LLAMA_7B, h100, 8, 4096)
    # 8 sequences x 4080 more tokens x 2 (K, V) x 32 layers x 4096 x 2 B, read once a step
    assert long.bytes_read - short.bytes_read == 8 * 4080 * 2 * 32 * 4096 * 2
    assert long.bound == "memory" and long.seconds == long.memory_seconds
    assert prefill(LLAMA_7B, h100, 1, 2048).bound == "compute"
    # batch 1: 5.2e9 weights (a two-matrix MLP) x 2 B over 3.35 TB/s, about 3.1 ms
    assert decode_step(LLAMA_7B, h100, 1, 1).seconds == pytest.approx(3.1e-3, rel=0.05)


def test_kv_cache_is_half_a_mebibyte_a_token_for_llama_7b_in_fp16():
    # the figure usually quoted: 2 x 32 layers x 4096 x 2 bytes = 512 KiB a token
    assert kv_cache_elements(LLAMA_7B, 1, 1) * 2 == 512 * 1024
    assert kv_cache_elements(LLAMA_7B, 1, 1, tp=4, pp=2) * 2 == 512 * 1024 // 8


def small(layers=2, hidden=16, heads=2, max_len=40, seed=0):
    return Decoder.init(DecoderConfig(32, hidden, heads, layers, max_len=max_len, seed=seed))


def test_the_decode_run_is_timed_by_the_roofline():
    model = small(hidden=32, heads=4, layers=2)
    prompt = np.random.default_rng(0).integers(0, 32, (8, 12))
    roofline = Roofline(1e12, 1e9, 2)  # a slow HBM: every step memory-bound
    run = generate_on_cluster(
        model,
        prompt,
        4,
        InferenceSplit(tp=1),
        collsim.Cluster(collsim.topology.switch(1)),
        roofline,
    )
    shape = ServedShape.of(model.config)
    # step s (2..4) attends over 12 + s - 1 positions; its time is the formula's
    for s, seconds in enumerate(run.decode_step_seconds, start=2):
        expected = decode_step(shape, roofline, 8, 12 + s - 1).seconds
        assert seconds == pytest.approx(expected, rel=0.01)
    assert run.token_times[0] == pytest.approx(prefill(shape, roofline, 8, 12).seconds, rel=0.01)
    assert np.array_equal(run.tokens, model.generate(prompt, 4).tokens)


def test_metrics_follow_vllms_definitions():
    times = [RequestTimes(0, 0.0, 5, (2.0, 3.0, 5.0)), RequestTimes(1, 1.0, 5, (4.0,))]
    m = serving_metrics(times)
    assert m.ttft.mean == 2.5  # (2 - 0 + 4 - 1) / 2
    assert m.itl.mean == 1.5 and m.itl.max == 2.0  # gaps 1 and 2
    assert m.tpot.count == 1 and m.tpot.mean == 1.5  # (5 - 2) / 2; a 1-token request has none
    assert m.e2e.max == 5.0 and m.generation_tokens == 4 and m.tokens_per_second == 0.8
    assert m.as_vllm()["vllm:time_to_first_token_seconds"]["mean"] == 2.5


def fast_switch(gpus):
    return collsim.Cluster(collsim.topology.switch(gpus, "10TB/s", "10ns"), compute_rate=100e12)


@settings(max_examples=8, deadline=None)
@given(
    prefill_gpus=st.integers(0, 2),
    decode_gpus=st.integers(1, 3),
    batch=st.integers(1, 3),
    n=st.integers(1, 7),
    prompt_len=st.integers(1, 6),
    output_len=st.integers(1, 6),
)
def test_every_request_generates_what_one_device_does(
    prefill_gpus, decode_gpus, batch, n, prompt_len, output_len
):
    model = small(max_len=prompt_len + 9)
    requests = workload(n, prompt_len, output_len, 32, seed=n)
    deployment = Deployment(prefill_gpus, decode_gpus, batch)
    run = serve(model, requests, deployment, fast_switch(deployment.gpus), Roofline(1e12, 1e9))
    assert run.matches(model)
    assert [len(t) for t in run.tokens] == [r.output_tokens for r in requests]
    for times in run.times:  # one time a token, in order
        assert len(times.token_times) == requests[times.request].output_tokens
        assert list(times.token_times) == sorted(times.token_times)
    for span in run.result.trace.computes:
        if isinstance(span.meta, ServingPass):
            assert len(span.meta.requests) <= (1 if span.meta.phase == "prefill" else batch)


def test_the_kv_cache_moves_as_a_flow_of_its_real_bytes():
    model = small(layers=3, hidden=16, max_len=20)
    requests = workload(6, 7, 4, 32, seed=1)
    run = serve(model, requests, Deployment(2, 2, 2), fast_switch(4), Roofline(1e12, 1e9))
    moved = {t.request: t for t in run.kv_transfers}
    assert sorted(moved) == [r.id for r in requests if r.output_tokens > 1]
    for r in requests:
        if r.id in moved:
            t = moved[r.id]
            assert t.nbytes == 2 * 3 * 7 * 16 * 8  # (K, V) x layers x prompt x hidden x float64
            assert t.src == r.id % 2 and t.dst == 2 + r.id % 2  # prefill pool -> decode pool
            assert t.end > t.start
    assert run.matches(model)


def test_colocated_prefills_interrupt_the_running_batch():
    """Continuous batching: a request waits for a free slot, its prefill then runs between
    two decode steps of the others, so their inter-token gap holds a prefill."""
    model = small(max_len=24)
    requests = workload(6, 8, 6, 32, seed=2)
    run = serve(model, requests, Deployment(0, 1, 2), fast_switch(1), Roofline(1e12, 1e9))
    spans = [s.meta for s in run.result.trace.computes if isinstance(s.meta, ServingPass)]
    phases = [m.phase for m in spans]
    first_decode = phases.index("decode")
    assert "prefill" in phases[first_decode:]  # a refill after decoding began
    decoded = {r for m in spans if m.phase == "decode" for r in m.requests}
    assert decoded == {r.id for r in requests if r.output_tokens > 1}


def test_disaggregation_removes_the_prefill_stalls_from_tpot():
    """With prompts well past B_crit (prefill compute-bound, several decode steps long)
    and a link fast enough that the KV cache costs little, TPOT falls when prefill and
    decode are apart (DistServe's and Splitwise's direction); colocated, every refill
    stalls the running batch for a whole prefill."""
    model = small(hidden=16, heads=2, layers=2, max_len=48)
    requests = workload(12, 32, 8, 32, seed=3)
    roofline = Roofline(1e12, 1e12, 2)  # B_crit = 1 token: a 32-token prefill is compute-bound
    colocated = serve(model, requests, Deployment(0, 4, 2), fast_switch(4), roofline)
    split = serve(model, requests, Deployment(1, 3, 2), fast_switch(4), roofline)
    assert split.metrics.tpot.mean < colocated.metrics.tpot.mean
    assert colocated.matches(model) and split.matches(model)


def test_a_machine_file_gives_its_hbm_bandwidth_or_is_refused_on_the_roofline():
    machine = hardware.loads('base = "dgx-a100"\nhbm_bandwidth = "1.6TB/s"\n')
    assert Roofline.of_machine(machine).hbm_bandwidth == 1.6e12
    with pytest.raises(collsim.errors.ConfigError, match="hbm_bandwidth"):
        hardware.loads('base = "dgx-a100"\nhbm_bandwidth = "-1TB/s"\n')
    bare = hardware.loads(
        'name = "mine"\ngpu = "X"\ngpus_per_node = 2\ncompute_rate = "100TFLOP/s"\n'
        '[intra]\nkind = "nvswitch"\nlink_rate = "25GB/s"\n'
    )
    with pytest.raises(collsim.errors.ConfigError, match="gives no hbm_bandwidth.*preset"):
        Roofline.of_machine(bare)


@settings(max_examples=15, deadline=None)
@given(
    hidden_per_head=st.sampled_from([2, 4]),
    heads=st.sampled_from([2, 4]),
    layers=st.sampled_from([2, 4]),
    tp=st.sampled_from([1, 2]),
    pp=st.sampled_from([1, 2]),
    batch=st.integers(1, 3),
    tokens=st.integers(1, 9),
)
def test_the_formulas_count_the_arrays_a_rank_holds(
    hidden_per_head, heads, layers, tp, pp, batch, tokens
):
    """weight_elements and kv_cache_elements against the arrays of the last stage's rank
    (layers/pp blocks of its TP share, the final LayerNorm and the head)."""
    from collsim.parallel.inference.program import elements
    from collsim.parallel.inference.shard import RankWeights

    config = DecoderConfig(16, hidden_per_head * heads, heads, layers, max_len=16)
    model, split = Decoder.init(config), InferenceSplit(tp=tp, pp=pp)
    weights = RankWeights.from_model(model, split, split.world_size - 1)
    held = sum(elements(*layer) for layer in weights.layers)
    held += elements(weights.ln_f, weights.head)
    shape = ServedShape.of(config)
    assert weight_elements(shape, tp, pp) == held
    cache = weights.new_cache(batch, tokens)
    cached = sum(c.keys.size + c.values.size for c in cache)
    assert kv_cache_elements(shape, batch, tokens, tp, pp) == cached


def test_a_serving_run_is_the_same_twice():
    model = small(max_len=20)
    requests = workload(5, 6, 4, 32, seed=4)

    def once():
        run = serve(model, requests, Deployment(1, 2, 2), fast_switch(3), Roofline(1e12, 1e9))
        return run.times, [(t.src, t.dst, t.start, t.end) for t in run.result.trace.transfers]

    assert once() == once()
