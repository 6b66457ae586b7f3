"""collsim.mpi's uppercase ``Gather`` and ``Scatter`` (and ``Gatherv``, ``Scatterv``) run
the linear schedules of collsim.collectives.linear, the ones the lowercase ``gather`` and
``scatter`` run on pickles: one algorithm, two front ends (issue 26, item 5).  Every
transfer is a chunk move of the schedule, with the bytes of that chunk's block."""

import numpy as np
import pytest
from test_mpi_object_schedules import CASES, _one_move_a_step, moves_of, run, steps_of

import collsim.mpi.buffers as buffers_module
from collsim import mpi as MPI
from collsim.collectives.linear import linear_gather, linear_scatter

CALLS = ["Gather", "Scatter", "Gatherv", "Scatterv"]


def _counts(k):
    """Gatherv's and Scatterv's blocks: rank r's holds r + 1 elements."""
    return [r + 1 for r in range(k)]


def _call(name, k, root):
    """A program that runs ``name`` once on doubles, rank r's block holding r's values,
    and returns what each rank ends with."""
    vector = name.endswith("v")
    counts = _counts(k) if vector else [3] * k
    offsets = np.cumsum([0] + counts)

    def block(r):
        return np.full(counts[r], 10.0 * r)

    def main():
        comm = MPI.COMM_WORLD
        me = comm.rank
        if name.startswith("Gather"):
            out = np.zeros(offsets[-1]) if me == root else None
            spec = [out, counts, MPI.DOUBLE] if vector and me == root else out
            getattr(comm, name)(block(me), spec, root=root)
            return None if out is None else out.tolist()
        full = np.concatenate([block(r) for r in range(k)]) if me == root else None
        spec = [full, counts, MPI.DOUBLE] if vector and me == root else full
        out = np.zeros(counts[me])
        getattr(comm, name)(spec, out, root=root)
        return out.tolist()

    everything = np.concatenate([block(r) for r in range(k)]).tolist()
    expected = [
        (everything if r == root else None) if name.startswith("Gather") else block(r).tolist()
        for r in range(k)
    ]
    return main, expected, [8 * c for c in counts]


def _schedule(name, k, root):
    return (linear_gather if name.startswith("Gather") else linear_scatter)(k, root)


@pytest.mark.parametrize("name", CALLS)
@pytest.mark.parametrize("k, root", CASES)
def test_the_buffer_calls_move_the_linear_schedules_chunks(name, k, root):
    main, expected, block_bytes = _call(name, k, root)
    result = run(k, main)
    assert result.returns == expected
    schedule = _schedule(name, k, root)
    assert steps_of(result.trace) == moves_of(schedule)
    moved = sorted((t.src, t.dst, t.nbytes) for t in result.trace.transfers)
    chunks = sorted((m.src, m.dst, block_bytes[m.chunks.start]) for _, m in schedule.moves())
    assert moved == chunks


@pytest.mark.parametrize("name", CALLS)
def test_the_buffer_calls_follow_whatever_linear_schedule_they_are_given(monkeypatch, name):
    # one move a step in the builder's place: the run's transfers change with it, so the
    # call has no loop of its own
    k, root = 5, 2
    builder = _schedule(name, k, root)
    swapped = f"linear_{'gather' if name.startswith('Gather') else 'scatter'}"
    original = getattr(buffers_module, swapped)
    monkeypatch.setattr(
        buffers_module, swapped, lambda k, root: _one_move_a_step(original(k, root))
    )
    main, expected, _ = _call(name, k, root)
    result = run(k, main)
    assert result.returns == expected
    assert steps_of(result.trace) == moves_of(_one_move_a_step(builder))
    assert len(moves_of(_one_move_a_step(builder))) == k - 1  # not the one step it replaced


@pytest.mark.parametrize("k, root", CASES)
def test_upper_and_lowercase_gather_and_scatter_make_the_same_moves(k, root):
    def main():
        comm = MPI.COMM_WORLD
        comm.gather(comm.rank, root=root)
        comm.Gather(np.ones(2), np.zeros(2 * k) if comm.rank == root else None, root=root)
        comm.scatter(list(range(k)) if comm.rank == root else None, root=root)
        comm.Scatter(np.ones(2 * k) if comm.rank == root else None, np.zeros(2), root=root)

    steps = steps_of(run(k, main).trace)
    one = len(moves_of(linear_gather(k, root)))  # a step, or none on one rank
    assert steps[:one] == steps[one : 2 * one]  # gather, then Gather
    assert steps[2 * one : 3 * one] == steps[3 * one :]  # scatter, then Scatter
