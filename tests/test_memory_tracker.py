"""The memory tracker: rank.alloc / rank.free / rank.allocated, the trace's memory events,
the timeline and peaks read from them, and their Chrome/Perfetto counters.

DESIGN.md, principle 5: every array a rank holds is registered with its category and
charged at its declared precision (the ZeRO paper's 2 + 2 + 12 bytes per parameter for
mixed-precision Adam, Rajbhandari et al. 2020); peaks and timelines are read from the run.
"""

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from collsim import Cluster, topology
from collsim.errors import CollsimError, ConfigError
from collsim.network.trace import Trace
from collsim.runtime.memory import (
    CATEGORIES,
    PRECISION,
    MemoryBlock,
    MemoryEvent,
    MemoryPeak,
    MemoryTracker,
    busiest,
    memory_peaks,
    memory_timeline,
)

US = 1e-6


def two_phase(rank):
    """Parameters, then per rank a different activation / gradient pattern in time.

    Rank 0: activations peak (300 elements) while nothing else is big; later, once they
    are freed, gradients (200) arrive: the peak of the sum (params + 300 acts) differs
    from the sum of the category peaks (params + 300 acts + 200 grads).
    Rank 1: everything held at once, so the two agree.
    """
    params = rank.alloc("params", "weights", 100)  # 200 B
    yield rank.compute(seconds=1 * US)
    acts = rank.alloc("activations", "saved x", 300)  # 600 B
    yield rank.compute(seconds=2 * US)
    if rank.id == 0:
        rank.free(acts)
    yield rank.compute(seconds=1 * US)
    grads = rank.alloc("grads", "dW", 200)  # 400 B
    yield rank.compute(seconds=1 * US)
    rank.free(grads)
    if rank.id == 1:
        rank.free(acts)
    return rank.allocated(), rank.allocated("params"), params.freed


def run(program, n=2):
    return Cluster(topology.switch(n)).run(program)


def test_timeline_follows_alloc_and_free_on_the_simulated_clock():
    result = run(two_phase)
    assert result.returns == [(200, 200, False), (200, 200, False)]
    points = memory_timeline(result.trace, 0)
    assert [p.time for p in points] == pytest.approx([0, 1 * US, 3 * US, 4 * US, 5 * US])
    assert [p.total for p in points] == [200, 800, 200, 600, 200]
    time, by_category = points[1]  # unpacks as (time, {category: bytes})
    assert by_category == {**dict.fromkeys(CATEGORIES, 0), "params": 200, "activations": 600}
    assert [p.total for p in memory_timeline(result.trace, 1)] == [200, 800, 1200, 800, 200]


def test_events_are_in_the_trace_in_recording_order():
    trace = run(two_phase).trace
    assert all(isinstance(e, MemoryEvent) for e in trace.memory)
    assert trace.memory[0] == MemoryEvent(0, 0.0, "params", "weights", 200)
    assert trace.memory[1] == MemoryEvent(1, 0.0, "params", "weights", 200)
    frees = [e for e in trace.memory if e.nbytes < 0]
    assert [(e.rank, e.name, e.nbytes) for e in frees] == [
        (0, "saved x", -600),
        (0, "dW", -400),
        (1, "dW", -400),
        (1, "saved x", -600),
    ]
    assert "10 memory events" in repr(trace)


def test_peak_of_the_sum_differs_from_the_sum_of_category_peaks_where_it_should():
    peaks = memory_peaks(run(two_phase).trace, 2)
    zero, one = peaks
    assert zero == MemoryPeak(0, 800, zero.by_category, 1 * US)
    assert zero.by_category == {
        **dict.fromkeys(CATEGORIES, 0),
        "params": 200,
        "activations": 600,
        "grads": 400,
    }
    assert sum(zero.by_category.values()) == 1200 > zero.total  # not at the same time
    assert one.total == sum(one.by_category.values()) == 1200  # all held at once
    assert busiest(peaks) is one
    assert one.to_dict() == {
        "params": 200,
        "grads": 400,
        "optimizer": 0,
        "activations": 600,
        "gathered_params": 0,
        "comm_buffers": 0,
        "total": 1200,
    }
    assert all(type(v) is int for v in one.to_dict().values())


def test_busiest_takes_the_lowest_rank_on_ties_and_a_silent_rank_has_zero_peaks():
    def program(rank):
        if rank.id > 0:
            rank.alloc("optimizer", "m", 10)
        yield rank.compute(seconds=0)

    peaks = memory_peaks(run(program, 3).trace, 3)
    assert [p.total for p in peaks] == [0, 40, 40]
    assert peaks[0].by_category == dict.fromkeys(CATEGORIES, 0) and peaks[0].time is None
    assert busiest(peaks).rank == 1
    assert busiest(reversed(peaks)).rank == 1


@pytest.mark.parametrize(
    "category, elements, expected",
    [
        ("optimizer", 10, 40),
        ("params", 10, 20),
        ("grads", 10, 20),
        ("activations", 10, 20),
        ("gathered_params", 10, 20),
        ("comm_buffers", 10, 20),
    ],
)
def test_precision_defaults(category, elements, expected):
    def program(rank):
        block = rank.alloc(category, "x", elements)
        return block.nbytes, rank.allocated(category), rank.allocated()

    assert run(program, 1).returns == [(expected, expected, expected)]
    assert PRECISION[category] * elements == expected


def test_sixteen_bytes_per_parameter_for_mixed_precision_adam():
    psi = 1000

    def program(rank):
        rank.alloc("params", "bf16 weights", psi)
        rank.alloc("grads", "bf16 grads", psi)
        for state in ("fp32 master", "Adam m", "Adam v"):
            rank.alloc("optimizer", state, psi)
        return rank.allocated()

    assert run(program, 1).returns == [16 * psi]


def test_bytes_per_element_overrides_the_precision():
    def program(rank):
        return rank.alloc("params", "fp32 weights", 10, bytes_per_element=4).nbytes

    assert run(program, 1).returns == [40]


def test_an_empty_block_records_no_event():
    def program(rank):
        block = rank.alloc("comm_buffers", "empty", 0)
        rank.free(block)
        return block.freed

    result = run(program, 1)
    assert result.returns == [True] and result.trace.memory == []


def _refused(program, *words):
    with pytest.raises(CollsimError) as info:
        run(program, 1)
    for word in words:
        assert word in str(info.value), str(info.value)
    return info.value


@pytest.mark.parametrize(
    "category, nearest",
    [
        ("optimiser", "'optimizer'"),
        ("param", "'params'"),
        ("gathered", "'gathered_params'"),
        ("activation", "'activations'"),
        ("Grads", "'grads'"),
        ("", "nearest valid"),
        (3, "nearest valid"),
    ],
)
def test_an_unknown_category_names_the_value_and_the_nearest_choice(category, nearest):
    exc = _refused(lambda rank: rank.alloc(category, "w", 1), repr(category), nearest)
    assert isinstance(exc, ConfigError)


@pytest.mark.parametrize("elements", [-1, 2.5, 3.0, True, "10", None, np.float64(1.0)])
def test_bad_elements_name_the_value(elements):
    _refused(lambda rank: rank.alloc("params", "w", elements), repr(elements), "whole number")


@pytest.mark.parametrize("width", [0, -2, 2.0, False])
def test_bad_bytes_per_element_name_the_value(width):
    def program(rank):
        rank.alloc("params", "w", 1, bytes_per_element=width)

    _refused(program, repr(width), "whole number >= 1")


def test_a_huge_block_is_refused_with_its_size():
    _refused(lambda rank: rank.alloc("params", "w", 2**62), "4,611,686,018,427,387,904")


def test_numpy_integers_are_whole_numbers():
    def program(rank):
        return rank.alloc("params", "w", np.int64(5)).nbytes

    assert run(program, 1).returns == [10]


def test_a_second_free_names_the_block():
    def program(rank):
        block = rank.alloc("activations", "block 3 input", 8)
        yield rank.compute(seconds=1 * US)
        rank.free(block)
        rank.free(block)

    _refused(program, "'block 3 input'", "freed twice", "rank 0")


def test_yielding_an_alloc_says_to_call_it_without_yield():
    def program(rank):
        yield rank.alloc("params", "w", 4)

    _refused(program, "MemoryBlock(rank 0, params 'w', 8 B)", "call them without yield")


def test_freeing_what_is_not_a_block_or_another_ranks_block_is_refused():
    _refused(lambda rank: rank.free("w"), "'w'", "MemoryBlock")
    blocks = {}

    def program(rank):
        if rank.id == 0:
            blocks[0] = rank.alloc("params", "shard", 4)
        yield rank.compute(seconds=1 * US)
        if rank.id == 1:
            rank.free(blocks[0])

    with pytest.raises(ConfigError, match="allocated by rank 0"):
        run(program, 2)


def test_a_block_of_another_run_is_refused():
    kept = run(lambda rank: rank.alloc("params", "w", 1), 1).returns[0]
    assert isinstance(kept, MemoryBlock)
    _refused(lambda rank: rank.free(kept), "another run")


@pytest.mark.parametrize("category", ["optimiser", None, 0])
def test_allocated_checks_its_category(category):
    _refused(lambda rank: rank.allocated(category or "bogus"), "not a memory category")


def test_reading_functions_check_their_arguments():
    trace = run(two_phase).trace
    with pytest.raises(ConfigError, match="n_ranks=2"):
        memory_peaks(trace, 1)
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ConfigError, match=repr(bad)):
            memory_peaks(trace, bad)
    with pytest.raises(ConfigError, match="-1"):
        memory_timeline(trace, -1)
    with pytest.raises(ConfigError, match="busiest"):
        busiest([])


def _counters(text):
    return [e for e in json.loads(text)["traceEvents"] if e["ph"] == "C"]


def test_chrome_export_has_a_memory_counter_per_rank_at_every_event():
    trace = run(two_phase).trace
    counters = _counters(trace.to_chrome())
    assert len(counters) == len(trace.memory) == 10
    assert {c["name"] for c in counters} == {"memory (bytes)"}
    rank1 = [c for c in counters if c["pid"] == 1]
    assert [sum(c["args"].values()) for c in rank1] == [200, 800, 1200, 800, 200]
    assert rank1[2]["ts"] == pytest.approx(4.0) and set(rank1[2]["args"]) == set(CATEGORIES)
    names = [e for e in json.loads(trace.to_chrome())["traceEvents"] if e["ph"] == "M"]
    assert {e["pid"] for e in names} == {0, 1}  # a rank that only computes is named too


def test_same_run_same_events_and_same_chrome_bytes():
    first, second = run(two_phase).trace, run(two_phase).trace
    assert first.memory == second.memory
    assert first.to_chrome() == second.to_chrome()


def test_a_run_that_never_allocates_exports_as_before():
    """No memory events: no counter, no process named for memory, the same repr."""
    trace = Trace()
    trace.add_transfer(0, 1, 0, 800, 0.0, 1e-6, ((0, 1),), "send")
    assert _counters(trace.to_chrome()) == []
    assert repr(trace) == "Trace(1 transfer, 0 compute spans, 800 B sent, 0 s .. 1 us)"


def test_the_tracker_is_a_field_of_the_execution():
    def program(rank):
        rank.alloc("params", "w", 3)
        return rank._execution.memory

    trackers = run(program, 2).returns
    assert isinstance(trackers[0], MemoryTracker) and trackers[0] is trackers[1]
    assert trackers[0].allocated(1, "params") == 6


# a random program: ("alloc", category, elements) or ("free", index of a live block),
# with a compute step of random length before each
ACTIONS = st.lists(
    st.tuples(
        st.sampled_from(["alloc", "alloc", "free"]),
        st.sampled_from(CATEGORIES),
        st.integers(0, 1000),
        st.integers(0, 3),
    ),
    max_size=30,
)


@given(actions=st.lists(ACTIONS, min_size=1, max_size=3))
def test_random_alloc_free_sequences(actions):
    def program(rank):
        live = []
        for kind, category, elements, wait in actions[rank.id]:
            yield rank.compute(seconds=wait * US)
            if kind == "free" and live:
                rank.free(live.pop(elements % len(live)))
            else:
                live.append(rank.alloc(category, f"b{len(live)}", elements))
        return live

    n = len(actions)
    result = run(program, n)
    peaks = memory_peaks(result.trace, n)
    for r, live in enumerate(result.returns):
        held = {c: sum(b.nbytes for b in live if b.category == c) for c in CATEGORIES}
        points = memory_timeline(result.trace, r)
        mine = [e for e in result.trace.memory if e.rank == r]
        assert sum(e.nbytes for e in mine) == sum(held.values())
        assert (points[-1].by_category if points else dict.fromkeys(CATEGORIES, 0)) == held
        assert all(e.nbytes != 0 for e in mine)
        times = [p.time for p in points]
        assert times == sorted(times)
        for point in points:
            assert peaks[r].total >= point.total
            for c in CATEGORIES:
                assert peaks[r].by_category[c] >= point.by_category[c] >= 0
        assert peaks[r].total == max((p.total for p in points), default=0)
    assert run(program, n).trace.memory == result.trace.memory
