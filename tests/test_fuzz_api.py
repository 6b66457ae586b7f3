"""Hypothesis over the public runtime, topology and units API (issue 11, item 12).

Every call either succeeds or raises a collsim error whose message contains the value as
it was given (``fuzzkit.check_api``); any other exception, or a call running past a few
seconds, fails.  Strategies mix well-formed values with bad types, bad numbers (negative,
zero, nan, inf, huge), non-numeric and empty text, and unknown units.  Drawn ints that
would be valid stay small, so that a call that succeeds is quick.
"""

import math

import numpy as np
from fuzzkit import check_api
from hypothesis import given
from hypothesis import strategies as st

import collsim
from collsim import topology, units
from collsim.errors import UnyieldedOperationError
from collsim.runtime.group import Group, RankGrid

TIMEOUT = 5.0

# text that reads the same through str() and repr(), so a message quoting it contains it
TEXT = st.text(
    alphabet=st.characters(
        codec="ascii", categories=["L", "N", "P", "S", "Zs"], exclude_characters="'\"\\"
    ),
    max_size=12,
)
BAD_NUMBERS = st.sampled_from(
    [
        0,
        -1,
        -7,
        0.0,
        -0.5,
        2.5,
        4.0,
        math.nan,
        math.inf,
        -math.inf,
        2**62,
        2**70,
        1e300,
        -1e300,
        5e-324,
        True,
        False,
        np.float64("nan"),
        np.int64(-3),
    ]
)
JUNK = st.one_of(st.none(), TEXT, st.lists(st.integers(-3, 3), max_size=3), st.just({}))
NUMBER_TEXT = st.builds(
    lambda n, unit: f"{n}{unit}",
    st.one_of(st.integers(-10, 10**6), st.floats(allow_nan=True, allow_infinity=True)),
    st.sampled_from(
        [
            "",
            "B",
            "KiB",
            "MB",
            "GB/s",
            "Gbit/s",
            "us",
            "ms",
            "s",
            "XB",
            "min",
            "/s",
            "parsecs",
            " GiB",
            "e400",
            "TFLOP/s",
        ]
    ),
)
QUANTITY = st.one_of(BAD_NUMBERS, NUMBER_TEXT, TEXT, JUNK, st.floats(), st.integers())
RANK_COUNT = st.one_of(
    st.integers(1, 12),
    st.integers(max_value=0),
    st.integers(min_value=topology.MAX_RANKS + 1, max_value=2**80),
    BAD_NUMBERS,
    TEXT,
    JUNK,
)
PRESETS = st.sampled_from(["ring", "bidirectional_ring", "fully_connected", "switch"])


def shown(value):
    """The value as a message should quote it."""
    return str(value)


def whole(value):
    return isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)


def refused(outcome, value):
    assert outcome.error is not None, f"{value!r} was accepted"


@given(PRESETS, RANK_COUNT)
def test_presets_take_a_rank_count_or_name_it(name, k):
    check_api(topology.PRESETS[name], k, bad=shown(k), timeout=TIMEOUT)


@given(RANK_COUNT, RANK_COUNT)
def test_torus_and_hierarchical_sizes(a, b):
    valid = type(a) is int and 1 <= a <= 12  # then the message is about b
    bad = shown(b) if valid else shown(a)
    check_api(topology.torus2d, a, b, bad=bad, timeout=TIMEOUT)
    check_api(topology.hierarchical, a, b, bad=bad, timeout=TIMEOUT)


@given(PRESETS, QUANTITY, st.sampled_from(["bandwidth", "latency"]))
def test_link_values(name, value, which):
    check_api(topology.PRESETS[name], 3, **{which: value}, bad=shown(value), timeout=TIMEOUT)


@given(
    st.sampled_from([units.parse_size, units.parse_rate, units.parse_time, units.parse_flops]),
    QUANTITY,
)
def test_units_parse_or_name_the_value(parse, value):
    check_api(parse, value, bad=shown(value), timeout=TIMEOUT)


@given(st.sampled_from([units.format_size, units.format_rate, units.format_time]), QUANTITY)
def test_units_format_numbers_or_name_the_value(fmt, value):
    check_api(fmt, value, bad=shown(value), timeout=TIMEOUT)


@given(
    st.sampled_from(["max_time", "max_events", "max_ops", "model", "compute_rate"]),
    st.one_of(QUANTITY, st.sampled_from(["maxmin", "ideal", "1ms", "100TFLOP/s"])),
)
def test_cluster_options(option, value):
    outcome = check_api(
        collsim.Cluster, topology.ring(2), **{option: value}, bad=shown(value), timeout=TIMEOUT
    )
    # a count guard is a whole number > 0 (max_ops=1e7 too), or math.inf
    count = whole(value) or (isinstance(value, float) and math.isfinite(value) and value % 1 == 0)
    if option in ("max_events", "max_ops") and not (
        (count and value > 0) or value == math.inf or (option == "max_ops" and value is None)
    ):
        refused(outcome, value)
    if option == "max_time" and not isinstance(value, str):
        number = isinstance(value, float | int) and not isinstance(value, bool)
        if not (number and value > 0):  # nan, zero, negative: never a guard
            refused(outcome, value)


@given(st.one_of(JUNK, BAD_NUMBERS, st.just(topology.ring(2).to_undirected())))
def test_cluster_topology(value):
    check_api(collsim.Cluster, value, bad=None, timeout=TIMEOUT)


def build_op(make):
    """Build one operation on rank 0 of a 3-rank cluster (not yielded: no deadlock, but
    the run says it never ran; any other error is the method refusing its arguments)."""
    built = []

    def program(rank):
        if rank.id == 0:
            built.append(make(rank))
        return None
        yield

    try:
        collsim.Cluster(topology.switch(3)).run(program)
    except UnyieldedOperationError:
        pass
    return built[0]


PEER = st.one_of(st.integers(-3, 5), BAD_NUMBERS, TEXT, JUNK, st.just(np.int64(1)))
TAG = st.one_of(st.integers(), TEXT, st.tuples(st.integers()), st.lists(st.integers(), max_size=2))
OUT = st.sampled_from(
    [
        None,
        [0.0],
        (0.0,),
        "buf",
        3,
        np.zeros(2),
        np.zeros(2).view(np.ndarray)[::-1],
        np.frombuffer(b"\0" * 16),
    ]
)


@given(PEER, st.sampled_from(["send", "isend", "recv", "irecv"]))
def test_point_to_point_peers(peer, verb):
    x = np.zeros(2)
    make = {
        "send": lambda r: r.send(peer, x),
        "isend": lambda r: r.isend(peer, x),
        "recv": lambda r: r.recv(peer),
        "irecv": lambda r: r.irecv(peer),
    }[verb]
    outcome = check_api(build_op, make, bad=shown(peer), timeout=TIMEOUT)
    if not (whole(peer) and 0 <= peer < 3):
        refused(outcome, peer)  # bools, floats and strings are not ranks


@given(TAG)
def test_tags(tag):
    hashable = not isinstance(tag, list)
    for make in (lambda r: r.send(1, np.zeros(1), tag=tag), lambda r: r.irecv(1, tag=tag)):
        outcome = check_api(build_op, make, bad=shown(tag), timeout=TIMEOUT)
        if not hashable:
            refused(outcome, tag)


@given(OUT)
def test_recv_buffers(out):
    # a read-only array has no value to quote: the message names its shape instead
    bad = "shape (2,)" if isinstance(out, np.ndarray) and not out.flags.writeable else shown(out)
    check_api(build_op, lambda r: r.recv(1, out=out), bad=bad, timeout=TIMEOUT)


@given(QUANTITY, st.sampled_from(["seconds", "flops"]))
def test_compute(value, which):
    check_api(build_op, lambda r: r.compute(**{which: value}), bad=shown(value), timeout=TIMEOUT)


@given(st.one_of(QUANTITY, JUNK))
def test_wait(value):
    outcome = check_api(build_op, lambda r: r.wait(value), bad=shown(value), timeout=TIMEOUT)
    refused(outcome, value)  # nothing drawn here is a handle


@given(
    st.one_of(
        st.lists(st.one_of(st.integers(-2, 6), BAD_NUMBERS), max_size=5), TEXT, JUNK, BAD_NUMBERS
    )
)
def test_groups(ranks):
    outcome = check_api(Group, ranks, bad=shown(ranks), timeout=TIMEOUT)
    valid = isinstance(ranks, list) and ranks and all(whole(r) and r >= 0 for r in ranks)
    if not (valid and len(set(ranks)) == len(ranks)):
        refused(outcome, ranks)  # 1.5 is never truncated to 1, nor True taken as 1
    check_api(Group.of, ranks, 4, bad=None, timeout=TIMEOUT)


@given(
    st.one_of(st.lists(st.one_of(st.integers(-1, 4), BAD_NUMBERS), max_size=3), TEXT, JUNK),
    st.one_of(st.lists(st.sampled_from(["dp", "tp", "pp", ""]), max_size=3), TEXT, JUNK),
)
def test_device_meshes(shape, names):
    check_api(RankGrid, shape, names, bad=None, timeout=TIMEOUT)
