"""Fuzz `collsim infer` (the rules of tests/fuzzkit.py): every flag gets bad numbers,
names and text; it may run or be refused by name, never a traceback or a hang."""

from fuzzkit import run_cli
from hypothesis import given
from hypothesis import strategies as st

BASE = [
    "infer",
    "--tp",
    "2",
    "--layers",
    "2",
    "--hidden",
    "16",
    "--heads",
    "2",
    "--prompt-len",
    "3",
    "--new-tokens",
    "2",
]
FLAGS = [
    "--tp",
    "--pp",
    "--layers",
    "--hidden",
    "--heads",
    "--vocab",
    "--batch",
    "--prompt-len",
    "--new-tokens",
    "--seed",
    "--preset",
    "--algorithm",
    "--bandwidth",
    "--latency",
]
BAD = ["-1", "0", "3", "nan", "inf", str(2**62), "1.5", "abc", "", "ring ", "dgx", "-5GB/s"]


@given(flag=st.sampled_from(FLAGS), value=st.sampled_from(BAD))
def test_every_flag_takes_bad_values_without_a_traceback(flag, value):
    outcome = run_cli([*BASE, flag, value], bad=value or None)
    assert outcome.status in (0, 2)
