"""Fuzz `collsim verify moe`'s flags, and the MoE layer's public functions, by the fuzz
rules (tests/fuzzkit.py): succeed, or fail with a collsim or argparse error naming the
value; a traceback or a hang fails."""

import numpy as np
from fuzzkit import check_api, run_cli
from hypothesis import given
from hypothesis import strategies as st

from collsim.collectives.all_to_allv import direct_all_to_allv
from collsim.nn import RouterConfig

HUGE = str(2**62)
BAD = st.sampled_from(
    ["-1", "0", "nan", "inf", "-inf", HUGE, "1e300", "1.5", "abc", "", "softmx", "zipff"]
)
BASE = ["verify", "moe", "--ep", "2", "--experts", "4", "--batch", "2", "--seq", "2"]
FLAGS = [
    "--ep",
    "--experts",
    "--top-k",
    "--capacity-factor",
    "--drop-policy",
    "--routing",
    "--router-score",
    "--batch",
    "--seq",
    "--hidden",
    "--ffn-hidden",
    "--seed",
]


@given(flag=st.sampled_from(FLAGS), value=BAD, joined=st.booleans())
def test_every_moe_flag_takes_bad_values_without_a_traceback(flag, value, joined):
    argv = list(BASE)
    if flag in argv:
        i = argv.index(flag)
        del argv[i : i + 2]
    argv += [f"{flag}={value}"] if joined else [flag, value]
    run_cli(argv, bad=value, timeout=20)


ND = ["verify", "nd", "--hidden", "8", "--heads", "2", "--seq", "4", "--steps", "1"]


@given(flag=st.sampled_from(["--ep", "--etp", "--dp-shard"]), value=BAD, joined=st.booleans())
def test_nd_folding_flags_take_bad_values_without_a_traceback(flag, value, joined):
    argv = ND + ["--dp-replicate", "2", "--ep", "2"]
    if flag in argv:
        i = argv.index(flag)
        del argv[i : i + 2]
    argv += [f"{flag}={value}"] if joined else [flag, value]
    run_cli(argv, bad=value, timeout=20)


SMALL = st.sampled_from([1, 2, 3, 4])


@given(
    ep=SMALL, etp=SMALL, shard=SMALL, replicate=st.sampled_from([1, 2]), tp=st.sampled_from([1, 2])
)
def test_any_folding_runs_like_one_device_or_is_refused_by_its_flags(ep, etp, shard, replicate, tp):
    """Exit 0 with a match, or 2 naming --ep or --etp and the nearest valid choice; never
    1 (a wrong gradient) and never a traceback."""
    argv = ND + ["--dp-replicate", replicate, "--dp-shard", shard, "--tp", tp, "--ep", ep]
    argv += ["--etp", etp] + (["--sp", "--seq", "8"] if tp > 1 else [])
    outcome = run_cli(argv, timeout=30)
    assert outcome.status in (0, 2), outcome
    if outcome.status == 2:
        assert "nearest valid" in outcome.stderr, outcome.stderr


ODD = st.sampled_from([-1, 0, 2**62, 1.5, float("nan"), "2", None, True])


@given(experts=ODD, top_k=ODD, factor=ODD)
def test_router_config_refuses_by_value(experts, top_k, factor):
    for key, value in (("experts", experts), ("top_k", top_k), ("capacity_factor", factor)):
        options = {"experts": 4, "top_k": 2, key: value}
        check_api(RouterConfig, bad=value, **options)


@given(count=ODD)
def test_all_to_allv_refuses_bad_counts(count):
    check_api(direct_all_to_allv, [[1, count], [0, np.int64(2)]], bad=count)
