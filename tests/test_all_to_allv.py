"""The all-to-allv (uneven all-to-all) schedule: structure written from its description,
values against a plain-Python exchange, and bytes against the closed form."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import collsim
from collsim.collectives.all_to_allv import RaggedTransfer, direct_all_to_allv, run_all_to_allv
from collsim.collectives.formulas import all_to_allv_bytes
from collsim.errors import ConfigError


def expected_moves(counts):
    """From the description: in step s rank r sends its block for (r+s) mod K, unless it
    is empty; blocks in destination order at the sender, source order at the receiver."""
    k, moves = len(counts), set()
    for s in range(1, k):
        for r in range(k):
            d = (r + s) % k
            if counts[r][d]:
                first = sum(counts[r][:d])
                at = sum(counts[q][d] for q in range(r))
                moves.add((s - 1, r, d, first, first + counts[r][d], at, at + counts[r][d]))
    return moves


def run(counts, width=3):
    k = len(counts)
    schedule = direct_all_to_allv(counts)

    def rows_of(r):  # row i of rank r's block for d is 1000·r + 100·d + i
        return np.concatenate(
            [1000 * r + 100 * d + np.arange(counts[r][d], dtype=float) for d in range(k)]
        )[:, None] * np.ones(width)

    def program(rank):
        return (yield from run_all_to_allv(rank, schedule, rows_of(rank.id)))

    result = collsim.Cluster(collsim.topology.switch(k)).run(program)
    return schedule, result


counts_tables = st.integers(1, 6).flatmap(
    lambda k: st.lists(st.lists(st.integers(0, 4), min_size=k, max_size=k), min_size=k, max_size=k)
)


@given(counts_tables)
def test_structure_values_and_bytes(counts):
    k = len(counts)
    schedule, result = run(counts)
    got = {
        (s, m.src, m.dst, m.rows.start, m.rows.stop, m.to.start, m.to.stop)
        for s, m in schedule.moves()
    }
    assert got == expected_moves(counts)
    assert schedule.n_steps == k - 1
    for d in range(k):  # what rank d holds: every source's block for d, sources in order
        want = [1000 * r + 100 * d + i for r in range(k) for i in range(counts[r][d])]
        assert result.returns[d][:, 0].tolist() == want
    closed = all_to_allv_bytes(counts, row_bytes=3 * 8)
    assert result.stats.bytes_sent == list(closed.sent)
    assert result.stats.bytes_received == list(closed.received)
    for t in result.trace.transfers:  # each transfer carries its move as a typed record
        assert isinstance(t.meta, RaggedTransfer) and t.nbytes == 24 * len(t.meta.move.rows)


def test_by_hand():
    schedule = direct_all_to_allv([[0, 2], [1, 5]])
    assert [str(m) for _, m in schedule.moves()] == [
        "RowMove(src=0, dst=1, rows=range(0, 2), to=range(0, 2))",  # before 1's own 5
        "RowMove(src=1, dst=0, rows=range(0, 1), to=range(0, 1))",
    ]
    assert all_to_allv_bytes([[0, 2], [1, 5]], 10).sent == (20, 10)


def test_empty_blocks_send_nothing():
    _, result = run([[3, 0, 0], [0, 2, 0], [0, 0, 1]])
    assert result.trace.transfer_count == 0 and result.time == 0.0


@pytest.mark.parametrize(
    "counts, words",
    [([[1, 2], [3]], ["K x K"]), ([[1, -1], [0, 0]], ["counts[0][1]=-1"])],
)
def test_bad_counts_are_refused(counts, words):
    with pytest.raises(ConfigError) as info:
        direct_all_to_allv(counts)
    assert all(w in str(info.value) for w in words)
