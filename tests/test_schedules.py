"""Pipeline schedules: structure, deadlock freedom, bubble and memory against the closed forms.

The oracle here is a tiny list scheduler written only for these tests: each stage runs its
passes strictly in order, a pass starts as soon as its stage is free and the passes it depends
on (worked out here from first principles, not with `Schedule.dependencies`) have finished.
Times are exact fractions, so "equal to the formula" means equal to rounding of the formula.
"""

import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collsim.errors import CollsimError, ConfigError
from collsim.parallel.pipeline.schedules import (
    PipeOp,
    Schedule,
    build_schedule,
    gpipe,
    interleaved,
    one_f_one_b,
    split_layers,
    zb_h1,
)

# --------------------------------------------------------------------------- test-only oracle


def needs(p, v, stage, op):
    """What (stage, kind, microbatch, chunk) must finish before ``op``, from first principles."""
    here = op.chunk * p + stage  # virtual stage
    if op.kind == "F":
        return [] if here == 0 else [((here - 1) % p, "F", op.microbatch, (here - 1) // p)]
    if op.kind == "W":
        return [(stage, "B", op.microbatch, op.chunk)]
    own_forward = [(stage, "F", op.microbatch, op.chunk)]
    if here == p * v - 1:
        return own_forward
    return [((here + 1) % p, op.kind, op.microbatch, (here + 1) // p), *own_forward]


def simulate(sched, t_f, t_b, t_w):
    """Run ``sched`` with uniform times and free communication; return idle time per stage.

    Each chunk pass takes 1/v of the stage time; a full backward takes t_b + t_w.
    """
    p, v = sched.stages, sched.virtual
    t_f, t_b, t_w = (Fraction(t) for t in (t_f, t_b, t_w))
    duration = {"F": t_f / v, "B": t_b / v, "W": t_w / v, "BW": (t_b + t_w) / v}
    finished = {}  # (stage, kind, microbatch, chunk) -> finish time
    free_at = [Fraction(0)] * p
    cursor = [0] * p
    progress = True
    while progress:
        progress = False
        for s in range(p):
            while cursor[s] < len(sched.ops[s]):
                op = sched.ops[s][cursor[s]]
                deps = needs(p, v, s, op)
                if any(d not in finished for d in deps):
                    break  # the stage blocks on its next pass, like a real rank would
                start = max([free_at[s], *(finished[d] for d in deps)])
                free_at[s] = start + duration[op.kind]
                finished[(s, op.kind, op.microbatch, op.chunk)] = free_at[s]
                cursor[s] += 1
                progress = True
    stuck = {s: sched.ops[s][cursor[s]] for s in range(p) if cursor[s] < len(sched.ops[s])}
    assert not stuck, f"deadlock: stages wait at {stuck}"
    makespan = max(free_at)
    return [makespan - sum(duration[op.kind] for op in row) for row in sched.ops]


def assert_bubble_matches(sched, t_f, t_b, t_w):
    expected = sched.formula_bubble_time(t_f, t_b, t_w)
    busy = sched.microbatches * (t_f + t_b + t_w)
    for stage, idle in enumerate(simulate(sched, t_f, t_b, t_w)):
        assert math.isclose(float(idle), expected, rel_tol=1e-12, abs_tol=1e-12 * busy), (
            sched,
            stage,
            float(idle),
            expected,
        )


def all_schedules():
    for p in range(1, 6):
        for m in range(1, 10):
            yield gpipe(p, m)
            yield one_f_one_b(p, m)
            if m >= p:
                yield zb_h1(p, m)
    for p in range(2, 5):
        for m in (p, 2 * p, 3 * p):
            for v in (2, 3):
                yield interleaved(p, m, v)


SCHEDULES = list(all_schedules())
TIMES = [(1.0, 1.0, 1.0), (1.0, 2.0, 0.5), (3.0, 2.0, 1.0), (0.3, 0.7, 0.1)]

# --------------------------------------------------------------------------- structure


@pytest.mark.parametrize("sched", SCHEDULES, ids=repr)
def test_every_pass_runs_exactly_once_in_local_order(sched):
    p, m, v = sched.stages, sched.microbatches, sched.virtual
    backward = ("B", "W") if sched.name == "zb-h1" else ("BW",)
    expected = {(kind, mb, c) for kind in ("F", *backward) for mb in range(m) for c in range(v)}
    for row in sched.ops:
        keys = [(op.kind, op.microbatch, op.chunk) for op in row]
        assert len(keys) == len(set(keys)) and set(keys) == expected
        slot = {key: i for i, key in enumerate(keys)}
        for _, mb, c in expected:
            assert slot[("F", mb, c)] < slot[(backward[0], mb, c)]
            if len(backward) == 2:
                assert slot[("B", mb, c)] < slot[("W", mb, c)]
    counts = sched.counts()
    assert sum(counts.values()) == p * m * v * (1 + len(backward))
    assert all(counts[kind] == p * m * v for kind in ("F", *backward))
    assert sched.counts(stage=p - 1) == {k: n // p for k, n in counts.items()}


@pytest.mark.parametrize("sched", SCHEDULES, ids=repr)
def test_dependencies_agree_with_first_principles(sched):
    for stage, row in enumerate(sched.ops):
        for op in row:
            got = [(s, d.kind, d.microbatch, d.chunk) for s, d in sched.dependencies(stage, op)]
            assert sorted(got) == sorted(needs(sched.stages, sched.virtual, stage, op))


def test_dependencies_examples():
    sched = interleaved(p=4, m=4, v=2)
    # chunk 1 of stage 0 is virtual stage 4: it takes its input from stage 3, chunk 0
    assert sched.dependencies(0, PipeOp("F", 2, 1)) == [(3, PipeOp("F", 2, 0))]
    # the last virtual stage (stage 3, chunk 1) starts its backward from the loss
    assert sched.dependencies(3, PipeOp("BW", 2, 1)) == [(3, PipeOp("F", 2, 1))]
    assert sched.dependencies(3, PipeOp("BW", 2, 0)) == [
        (0, PipeOp("BW", 2, 1)),
        (3, PipeOp("F", 2, 0)),
    ]
    split = zb_h1(p=4, m=4)
    assert split.dependencies(1, PipeOp("B", 0)) == [(2, PipeOp("B", 0)), (1, PipeOp("F", 0))]
    assert split.dependencies(1, PipeOp("W", 0)) == [(1, PipeOp("B", 0))]
    with pytest.raises(ConfigError, match="stages are 0..3"):
        split.dependencies(4, PipeOp("F", 0))


# --------------------------------------------------------------------------- deadlock + bubble


@pytest.mark.parametrize("times", TIMES)
@pytest.mark.parametrize("sched", SCHEDULES, ids=repr)
def test_schedule_completes_with_formula_bubble(sched, times):
    assert_bubble_matches(sched, *times)


def test_oracle_catches_a_deadlock():
    # stage 0 skips warmup: its BW0 waits for stage 1's BW0, which waits behind F1, which
    # waits for stage 0's F1, which waits behind stage 0's BW0.
    ops = [
        [PipeOp("F", 0), PipeOp("BW", 0), PipeOp("F", 1), PipeOp("BW", 1)],
        [PipeOp("F", 0), PipeOp("F", 1), PipeOp("BW", 0), PipeOp("BW", 1)],
    ]
    with pytest.raises(AssertionError, match="deadlock"):
        simulate(Schedule("bad", 2, 2, 1, ops), 1, 1, 1)


positive = st.fractions(Fraction(1, 10), 10, max_denominator=100)


@given(p=st.integers(1, 6), m=st.integers(1, 12), t_f=positive, t_b=positive, t_w=positive)
def test_gpipe_and_1f1b_bubble_hypothesis(p, m, t_f, t_b, t_w):
    for sched in (gpipe(p, m), one_f_one_b(p, m)):
        assert_bubble_matches(sched, float(t_f), float(t_b), float(t_w))
        assert math.isclose(sched.formula_bubble_fraction(), (p - 1) / (m + p - 1))


@given(
    p=st.integers(2, 5),
    groups=st.integers(1, 3),
    v=st.integers(2, 4),
    t_f=positive,
    t_b=positive,
    t_w=positive,
)
def test_interleaved_bubble_hypothesis(p, groups, v, t_f, t_b, t_w):
    assert_bubble_matches(interleaved(p, groups * p, v), float(t_f), float(t_b), float(t_w))


@given(
    p=st.integers(1, 6),
    extra=st.integers(0, 6),
    t_f=positive,
    t_b=positive,
    share=st.fractions(0, 1, max_denominator=100),
)
def test_zb_h1_bubble_hypothesis(p, extra, t_f, t_b, share):
    t_w = float(share * min(t_f, t_b))  # the formula's premise: t_w <= min(t_f, t_b)
    assert_bubble_matches(zb_h1(p, p + extra), float(t_f), float(t_b), t_w)


def test_bubble_fraction_orders_the_schedules():
    p, m = 4, 8
    frac = {
        name: build_schedule(
            name, p, m, v=2 if name == "interleaved" else 1
        ).formula_bubble_fraction()
        for name in ("1f1b", "interleaved", "zb-h1")
    }
    assert math.isclose(frac["1f1b"], 3 / 11)
    assert frac["zb-h1"] < frac["interleaved"] < frac["1f1b"]


# --------------------------------------------------------------------------- memory


@pytest.mark.parametrize("sched", SCHEDULES, ids=repr)
def test_peak_inflight_matches_closed_form(sched):
    assert sched.peak_inflight() == sched.formula_peak_inflight()


@pytest.mark.parametrize(("p", "m"), [(1, 1), (4, 2), (4, 4), (4, 8), (5, 3)])
def test_peak_inflight_gpipe_and_1f1b(p, m):
    assert gpipe(p, m).peak_inflight() == (m,) * p
    assert one_f_one_b(p, m).peak_inflight() == tuple(min(p - s, m) for s in range(p))


def test_peak_inflight_interleaved_and_zb_h1():
    # stage 0 holds p*v + p - 1 chunk activations: 11 chunks = 5.5 stages' worth > 1F1B's 4
    assert interleaved(4, 8, 2).peak_inflight() == (11, 9, 7, 5)
    assert interleaved(4, 4, 2).peak_inflight() == (8, 8, 7, 5)  # warmup capped at m*v
    assert zb_h1(4, 8).peak_inflight() == (4, 4, 4, 4)  # = 1F1B's stage 0 on every stage
    assert max(zb_h1(4, 8).peak_inflight()) == max(one_f_one_b(4, 8).peak_inflight())


# --------------------------------------------------------------------------- rendering

ONE_F_ONE_B_4x8 = """\
stage 0 | F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7
stage 1 | F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7
stage 2 | F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7
stage 3 | F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7"""

ZB_H1_3x4 = """\
stage 0 | F0 F1 F2 B0 W0 F3 B1 W1 B2 W2 B3 W3
stage 1 | F0 F1 B0 F2 B1 W0 F3 B2 W1 B3 W2 W3
stage 2 | F0 B0 F1 B1 F2 B2 W0 F3 B3 W1 W2 W3"""


def test_table_1f1b_4x8():
    sched = one_f_one_b(4, 8)
    assert sched.table() == ONE_F_ONE_B_4x8
    assert str(sched) == ONE_F_ONE_B_4x8


def test_table_zb_h1_3x4():
    assert zb_h1(3, 4).table() == ZB_H1_3x4


def test_table_pads_cells_and_stage_labels():
    lines = gpipe(11, 10).table().splitlines()
    assert lines[0].startswith("stage 0  | F0 F1")
    assert lines[10].startswith("stage 10 | F0 F1")
    assert lines[0].endswith("B8 B9")
    assert "F0 " in lines[0] and "F9 " in lines[0]  # 2-char cells, single spaces


# --------------------------------------------------------------------------- rules


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (
            lambda: build_schedule("1fib", 4, 8),
            ["'1fib'", "'gpipe'", "'zb-h1'", "did you mean '1f1b'"],
        ),
        (lambda: build_schedule("zbh1", 4, 8), ["did you mean 'zb-h1'"]),
        (lambda: build_schedule("gpipe", 4, 8, v=2), ["v=2", "'interleaved'", "v=1"]),
        (lambda: gpipe(0, 8), ["p=0", ">= 1", "p=1"]),
        (lambda: one_f_one_b(4, 0), ["m=0", ">= 1", "m=1"]),
        (lambda: one_f_one_b(2.5, 4), ["p must be an integer", "2.5"]),
        (lambda: zb_h1(4, True), ["m must be an integer", "True"]),
        (lambda: interleaved(1, 4, 2), ["p=1", "p >= 2", "p=2"]),
        (lambda: interleaved(4, 8, 1), ["v=1", "v >= 2", "v=2", "'1f1b'"]),
        (lambda: interleaved(4, 6, 2), ["m=6", "p=4", "multiple", "m=4 or m=8"]),
        (lambda: interleaved(4, 3, 2), ["m=3", "p=4", "m=4"]),
        (lambda: zb_h1(4, 3), ["m=3", "p=4", "m=4"]),
        (lambda: split_layers(3, 2, 2), ["n_layers=3", "p*v=2*2=4", "n_layers=4"]),
        (lambda: split_layers(10, 2, 2), ["n_layers=10", "v=2", "n_layers=8 or n_layers=12"]),
        (lambda: split_layers(0, 2), ["n_layers=0", "n_layers=1"]),
        (
            lambda: zb_h1(4, 8).formula_bubble_time(1.0, 1.0, 1.5),
            ["t_w=1.5", "min(t_f, t_b)", "t_w=1.0"],
        ),
        (lambda: gpipe(2, 2).formula_bubble_time(-1.0, 1.0, 1.0), ["t_f=-1.0", ">= 0"]),
        (lambda: gpipe(2, 2).formula_bubble_time(0, 0, 0), ["all 0"]),
        (lambda: PipeOp("Fw", 0), ["'Fw'", "F, B, W, BW"]),
        (lambda: PipeOp("F", -1), ["microbatch", "-1"]),
    ],
)
def test_rules_raise_config_error_naming_the_values(make, words):
    with pytest.raises(ConfigError) as info:
        make()
    assert isinstance(info.value, CollsimError) and isinstance(info.value, ValueError)
    for word in words:
        assert word in str(info.value)


def _hand(ops, p=2, m=1, name="mine"):
    return Schedule(name, stages=p, microbatches=m, virtual=1, ops=ops)


@pytest.mark.parametrize(
    ("ops", "words"),
    [
        ([[PipeOp("F", 0), PipeOp("BW", 0)]], ["ops for 1 stages", "stages=2"]),
        ([[PipeOp("F", 0), PipeOp("BW", 0)], [PipeOp("F", 0)]], ["stage 1 never runs BW0;"]),
        (
            [[PipeOp("F", 0), PipeOp("F", 0), PipeOp("BW", 0)], [PipeOp("F", 0), PipeOp("BW", 0)]],
            ["twice"],
        ),
        (
            [[PipeOp("BW", 0), PipeOp("F", 0)], [PipeOp("F", 0), PipeOp("BW", 0)]],
            ["stage 0", "order F, BW"],
        ),
        (
            [[PipeOp("F", 0), PipeOp("BW", 0)], [PipeOp("F", 0), PipeOp("B", 0), PipeOp("W", 0)]],
            ["mixes"],
        ),
        ([[PipeOp("F", 0), PipeOp("W", 0), PipeOp("B", 0)]] * 2, ["order F, B, W"]),
        ([[PipeOp("F", 1), PipeOp("BW", 1)]] * 2, ["out of range", "micro-batches are 0..0"]),
    ],
)
def test_hand_built_schedule_is_checked(ops, words):
    with pytest.raises(ConfigError) as info:
        _hand(ops)
    for word in words:
        assert word in str(info.value)


def test_hand_built_schedule_checks_its_shape():
    with pytest.raises(ConfigError, match="'F0', which is not a PipeOp"):
        _hand([["F0", "B0"], ["F0", "B0"]])
    with pytest.raises(ConfigError, match="stages=0"):
        Schedule("mine", stages=0, microbatches=1, virtual=1, ops=[])


def test_hand_built_schedule_has_no_closed_form():
    sched = _hand([[PipeOp("F", 0), PipeOp("BW", 0)]] * 2)
    assert sched.peak_inflight() == (1, 1)
    for formula in (sched.formula_bubble_time, sched.formula_peak_inflight):
        with pytest.raises(ConfigError, match="'mine' has no closed form"):
            formula()


def test_build_schedule_names():
    assert build_schedule("GPipe", 2, 4) == gpipe(2, 4)
    assert build_schedule("1F1B", 2, 4) == one_f_one_b(2, 4)
    assert build_schedule("zb_h1", 2, 4) == zb_h1(2, 4)
    assert build_schedule("interleaved", 2, 4, v=2) == interleaved(2, 4, 2)
    assert repr(zb_h1(2, 4)) == "Schedule(name='zb-h1', stages=2, microbatches=4, virtual=1)"
    assert hash(one_f_one_b(2, 4)) == hash(one_f_one_b(2, 4))  # frozen, plain data


# --------------------------------------------------------------------------- layers


def test_split_layers_even_and_interleaved():
    assert split_layers(8, 4) == tuple((range(2 * s, 2 * s + 2),) for s in range(4))
    layout = split_layers(16, 4, v=2)
    assert layout[0] == (range(0, 2), range(8, 10))  # chunk c of stage s is block c*p + s
    assert layout[3] == (range(6, 8), range(14, 16))
    covered = sorted(i for stage in layout for chunk in stage for i in chunk)
    assert covered == list(range(16))


def test_split_layers_uneven_warns_but_is_valid():
    with pytest.warns(UserWarning, match=r"n_layers=10 is not a multiple of p=4.*3, 3, 2, 2"):
        layout = split_layers(10, 4)
    assert [len(stage[0]) for stage in layout] == [3, 3, 2, 2]
    assert [i for stage in layout for i in stage[0]] == list(range(10))
