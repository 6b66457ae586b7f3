"""Ordinary mpi4py programs under `collsim exec`: what mpi4py's helpers read at import, one
small program per area of the API collsim.mpi now covers, the heat-equation stencil on a
Cartesian communicator and the Scatterv/Gatherv program in examples/ against numpy run on
one process, and byte-identical traces run to run."""

import re
import textwrap
from pathlib import Path

import numpy as np
import pytest
from fuzzkit import run_cli

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def lines_of(stdout, rank=0):
    """Rank ``rank``'s lines of ``[1,r]<stdout>:...`` output."""
    return re.findall(rf"^\[1,{rank}\]<stdout>:(.*)$", stdout, flags=re.M)


def collsim_exec(*argv, status=0):
    outcome = run_cli(["exec", *map(str, argv)], timeout=120)
    assert outcome.status == status, outcome.stderr
    return outcome


def script(tmp_path, body):
    path = tmp_path / "program.py"
    path.write_text("import numpy as np\nfrom mpi4py import MPI\n" + textwrap.dedent(body))
    return path


def test_what_mpi4pys_helpers_read_at_import_is_there(tmp_path):
    body = """
        import pickle, mpi4py
        from mpi4py.util import dtlib
        same = lambda handle: pickle.loads(pickle.dumps(handle)) is handle
        print(MPI.get_vendor()[0], MPI.Get_version(),
              MPI.Query_thread() == MPI.THREAD_MULTIPLE)
        print(MPI.LONG_DOUBLE.Get_size(), MPI.WCHAR != MPI.DATATYPE_NULL,
              MPI.REAL2 == MPI.DATATYPE_NULL)
        print(mpi4py.rc.thread_level, mpi4py.__file__.endswith("__init__.py"),
              dtlib.to_numpy_dtype(dtlib.from_numpy_dtype("i4")))
        print(same(MPI.COMM_WORLD), same(MPI.MAX))
        print(MPI.Get_library_version().split()[0], MPI.Request() == MPI.REQUEST_NULL)
    """
    out = collsim_exec("-n", 1, script(tmp_path, body)).stdout
    assert lines_of(out) == [
        "collsim (3, 1) True",
        f"{np.dtype('g').itemsize} True True",
        "multiple True int32",
        "True True",
        "collsim True",
    ]


# area -> (program, what rank 0 prints); each is checked against what MPI defines
AREAS = {
    "every datatype and op on buffers": (
        """
        x = np.array([1 << MPI.COMM_WORLD.rank], np.int8)
        MPI.COMM_WORLD.Allreduce(MPI.IN_PLACE, [x, MPI.SIGNED_CHAR], op=MPI.BXOR)
        flags = np.array([MPI.COMM_WORLD.rank > 0])
        MPI.COMM_WORLD.Allreduce(MPI.IN_PLACE, flags, op=MPI.LOR)
        print(int(x[0]), bool(flags[0]))
    """,
        "7 True",
    ),
    "requests": (
        """
        comm = MPI.COMM_WORLD
        reqs = [comm.irecv(source=r) for r in range(comm.size) if r != comm.rank]
        for r in range(comm.size):
            if r != comm.rank:
                comm.send(comm.rank, dest=r)
        got = sorted(MPI.Request.waitany(reqs)[1] for _ in reqs)
        print(got, all(r == MPI.REQUEST_NULL for r in reqs))
    """,
        "[1, 2] True",
    ),
    "non-blocking and persistent collectives": (
        """
        comm = MPI.COMM_WORLD
        total = np.zeros(2)
        comm.Iallreduce(np.ones(2), total).Wait()
        again = comm.Allreduce_init(np.ones(2), total)
        again.Start(); again.Wait(); again.Free()
        comm.Ibarrier().Wait()
        print(total.tolist())
    """,
        "[3.0, 3.0]",
    ),
    "prefix reductions": (
        """
        comm = MPI.COMM_WORLD
        out = np.zeros(1, np.int64)
        comm.Exscan(np.array([comm.rank + 1]), out)
        prefix, gathered = comm.scan(comm.rank + 1), comm.gather(int(out[0]))
        if comm.rank == 0:
            print(prefix, gathered[1:])
    """,
        "1 [1, 3]",
    ),
    "groups and communicators": (
        """
        world = MPI.COMM_WORLD
        ends = world.Create(world.Get_group().Incl([0, 2]))
        dup = world.Dup_with_info(MPI.INFO_NULL)
        dup.Set_errhandler(MPI.ERRORS_RETURN)
        if ends != MPI.COMM_NULL:
            print(ends.allgather(world.rank), MPI.Comm.Compare(world, dup) == MPI.CONGRUENT,
                  dup.Get_errhandler() == MPI.ERRORS_RETURN)
    """,
        "[0, 2] True True",
    ),
    "probes and send modes": (
        """
        comm = MPI.COMM_WORLD
        if comm.rank == 1:
            comm.Ssend(np.arange(4.0), dest=0, tag=3)
        if comm.rank == 0:
            status = MPI.Status()
            comm.Probe(MPI.ANY_SOURCE, MPI.ANY_TAG, status)
            buf = np.empty(status.Get_count(MPI.DOUBLE))
            comm.Recv(buf, status.source, status.tag)
            print(status.source, status.tag, buf.tolist())
    """,
        "1 3 [0.0, 1.0, 2.0, 3.0]",
    ),
}


@pytest.mark.parametrize("area", list(AREAS))
def test_a_small_program_per_area_prints_what_mpi_defines(tmp_path, area):
    body, expected = AREAS[area]
    out = collsim_exec("-n", 3, script(tmp_path, body)).stdout
    assert lines_of(out) == [expected]


def test_a_rank_that_exits_nonzero_does_not_cut_the_others_short(tmp_path):
    # as under mpirun: rank 1 fails alone (a unittest failure is local), rank 0 still
    # receives and prints, and the job's status is rank 1's
    body = """
        import sys
        comm = MPI.COMM_WORLD
        if comm.rank == 1:
            comm.send("bye", dest=0)
            sys.exit(3)
        print("rank 0 got", comm.recv(source=1))
    """
    outcome = collsim_exec("-n", 2, script(tmp_path, body), status=1)
    assert lines_of(outcome.stdout) == ["rank 0 got bye"]
    assert "rank 1 called sys.exit(3)" in outcome.stderr


def heat_oracle(rows, cols, steps, alpha=0.1):
    """The heat equation on the whole grid in one process: a 5-point stencil with a fixed
    zero border (written here from the equation, not taken from the example)."""
    grid = np.zeros((rows + 2, cols + 2))
    grid[1 + rows // 4 : 1 + 3 * rows // 4, 1 + cols // 4 : 1 + 3 * cols // 4] = 100.0
    for _ in range(steps):
        c = grid[1:-1, 1:-1]
        c += alpha * (grid[:-2, 1:-1] + grid[2:, 1:-1] + grid[1:-1, :-2] + grid[1:-1, 2:] - 4 * c)
    return grid[1:-1, 1:-1]


@pytest.mark.parametrize(
    ("ranks", "layout"), [(1, "1 x 1"), (2, "2 x 1"), (4, "2 x 2"), (6, "3 x 2")]
)
def test_the_heat_stencil_equals_one_process(ranks, layout):
    rows, cols, steps = 12, 24, 30
    out = collsim_exec("-n", ranks, EXAMPLES / "mpi_heat_stencil.py", rows, cols, steps).stdout
    whole = heat_oracle(rows, cols, steps)
    assert lines_of(out) == [
        f"{rows} x {cols} grid on {layout} ranks, {steps} steps",
        f"total heat {whole.sum():.6f}, peak {whole.max():.6f}",
    ]


@pytest.mark.parametrize(("ranks", "n"), [(1, 5), (3, 10), (4, 6), (5, 3)])
def test_scatterv_and_gatherv_split_unevenly_and_put_back_in_order(ranks, n):
    out = collsim_exec("-n", ranks, EXAMPLES / "mpi_scatterv_gatherv.py", n).stdout
    start = 0
    for r in range(ranks):
        count = n // ranks + (r < n % ranks)
        mine = [float(v) for v in range(start, start + count)]
        assert lines_of(out, r)[0] == f"rank {r}: got {count} values from offset {start}: {mine}"
        start += count
    assert lines_of(out)[1:] == [
        f"rank 0: gathered {[float(v * v) for v in range(n)]}",
        "rank 0: equal to squaring on one rank: True",
    ]


@pytest.mark.parametrize("program", ["mpi_heat_stencil.py", "mpi_scatterv_gatherv.py"])
def test_a_program_run_twice_gives_byte_identical_traces(tmp_path, program):
    traces = []
    for i in range(2):
        trace = tmp_path / f"run{i}.json"
        collsim_exec("-n", 4, "--trace", trace, EXAMPLES / program)
        traces.append(trace.read_bytes())
    assert traces[0] == traces[1] and len(traces[0]) > 1000
