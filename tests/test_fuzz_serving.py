"""Fuzz the serving API (the rules of tests/fuzzkit.py): Deployment, Roofline, serve and
plan_inference take bad numbers and either run or raise a collsim error naming the value."""

import math

from fuzzkit import check_api
from hypothesis import given, settings
from hypothesis import strategies as st

import collsim
from collsim.nn import Decoder, DecoderConfig
from collsim.parallel.inference.roofline import Roofline, ServedShape
from collsim.parallel.inference.serving import Deployment, serve, workload
from collsim.plan.inference import plan_inference

BAD = st.sampled_from([-1, 0, 1, 2, 1.5, math.nan, math.inf, True, "2", None, 2**62])
MODEL = Decoder.init(DecoderConfig(16, 8, 2, 1, max_len=12))
SHAPE = ServedShape(2, 64, 4, 100, 256)


@settings(max_examples=30, deadline=None)
@given(field=st.sampled_from(["prefill", "decode", "batch"]), value=BAD)
def test_serve_takes_bad_deployments(field, value):
    sizes = {"prefill": 1, "decode": 2, "batch": 2, field: value}
    requests = workload(3, 4, 3, 16, seed=0)
    cluster = collsim.Cluster(collsim.topology.switch(5))

    def call():
        deployment = Deployment(**sizes)
        return serve(MODEL, requests, deployment, cluster, Roofline(1e12, 1e9))

    outcome = check_api(call, bad=repr(value), timeout=30)
    if outcome.error is None:
        assert outcome.value.matches(MODEL)


@settings(max_examples=30, deadline=None)
@given(peak=BAD, hbm=BAD, width=BAD)
def test_roofline_and_plan_take_bad_numbers(peak, hbm, width):
    def call():
        roofline = Roofline(peak, hbm, width).check()
        return plan_inference(SHAPE, roofline, batch=2, tokens=64, gpu_memory=80e9)

    check_api(call, bad=None, timeout=10)
    for name, value in (("batch", peak), ("tokens", hbm), ("tp", width)):
        kwargs = {"batch": 2, "tokens": 64, name: value}
        check_api(
            plan_inference, SHAPE, Roofline(1e12, 1e12), gpu_memory=80e9, **kwargs, bad=repr(value)
        )
