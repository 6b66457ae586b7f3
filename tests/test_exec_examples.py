"""The MPI examples under examples/ run unchanged under `collsim exec`, and print the values
real mpi4py prints: pi to its error, the parallel sum, the token's journey, the grid's row
and column communicators, and a ping-pong whose MPI.Wtime() differences are the α–β closed
form of the configured link."""

import re
from pathlib import Path

import numpy as np
import pytest
from fuzzkit import run_cli

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def per_rank(stdout):
    """``{rank: [line, ...]}`` from ``[1,r]<stdout>:line`` lines."""
    lines = {}
    for line in stdout.splitlines():
        match = re.fullmatch(r"\[1,(\d+)\]<stdout>:(.*)", line)
        assert match, f"an untagged line: {line!r}"
        lines.setdefault(int(match.group(1)), []).append(match.group(2))
    return lines


def collsim_exec(*argv, timeout=30):
    outcome = run_cli(["exec", *map(str, argv)], timeout=timeout)
    assert outcome.status == 0, outcome.stderr
    assert "# collsim exec:" in outcome.stderr  # the summary, on stderr
    return per_rank(outcome.stdout)


def test_every_example_is_plain_mpi4py():
    for path in sorted(EXAMPLES.glob("mpi_*.py")):
        imports = re.findall(r"^\s*(?:from|import) (\S+)", path.read_text(), flags=re.M)
        assert "mpi4py" in imports and not [m for m in imports if "collsim" in m], path.name


@pytest.mark.parametrize(("latency", "bandwidth"), [("2us", "25GB/s"), ("5us", "100GB/s")])
def test_ping_pong_measures_the_alpha_beta_closed_form_of_the_link(latency, bandwidth):
    lines = collsim_exec(
        "-n",
        2,
        "--latency",
        latency,
        "--bandwidth",
        bandwidth,
        EXAMPLES / "mpi_ping_pong.py",
        2**20,
    )
    alpha, beta = float(latency[:-2]) * 1e-6, float(bandwidth[:-4]) * 1e9
    rows = [r.split() for r in lines[0][1:-1]]
    assert [int(r[0]) for r in rows] == [4**i for i in range(11)]  # 1 B .. 1 MiB
    for size, one_way_us, gbps in rows:
        t = alpha + int(size) / beta
        assert float(one_way_us) == pytest.approx(t * 1e6, abs=5e-4)
        assert float(gbps) == pytest.approx(int(size) / t / 1e9, abs=5e-4)
    assert lines[0][-1] == (f"fit: latency {alpha * 1e6:.3f} us, bandwidth {beta / 1e9:.3f} GB/s")
    assert 1 not in lines  # only rank 0 prints


def test_ping_pong_on_one_rank_says_it_needs_two():
    outcome = run_cli(["exec", "-n", "1", str(EXAMPLES / "mpi_ping_pong.py")], bad="2 ranks")
    assert outcome.status == 1
    assert "[1,0]<stderr>:ping-pong needs 2 ranks" in outcome.stderr


@pytest.mark.parametrize("ranks", [1, 3, 4])
def test_pi_by_integration_reduces_the_partial_sums_on_rank_0(ranks):
    n = 10_000
    lines = collsim_exec("-n", ranks, EXAMPLES / "mpi_pi.py", n)
    h = 1.0 / n
    partials = []
    for r in range(ranks):
        x = h * (np.arange(r, n, ranks) + 0.5)
        partials.append(h * np.sum(4.0 / (1.0 + x * x)))
        assert lines[r][0] == (
            f"rank {r}: {len(x)} of {n} intervals, partial sum {partials[-1]:.12f}"
        )
    pi = float(re.search(r"approximately (\S+),", lines[0][1]).group(1))
    assert pi == pytest.approx(sum(partials), abs=1e-12)
    assert abs(pi - np.pi) < 1e-8 and "error" in lines[0][1]


SUM_RUNS = [(4, "ring"), (3, "ring"), (8, "tree"), (4, "halving_doubling"), (2, "naive")]


@pytest.mark.parametrize(("ranks", "algorithm"), SUM_RUNS)
def test_parallel_sum_gives_every_rank_the_total(ranks, algorithm):
    lines = collsim_exec(
        "-n", ranks, "--algorithm", algorithm, EXAMPLES / "mpi_parallel_sum.py", 1000
    )
    slices = np.array_split(np.arange(1, 1001), ranks)
    assert sorted(lines) == list(range(ranks))
    for r in range(ranks):
        assert lines[r] == [
            f"rank {r}: {len(slices[r])} numbers sum to {slices[r].sum()}; "
            "the total is 500500 (correct)"
        ]


@pytest.mark.parametrize("ranks", [2, 5])
def test_ring_pass_carries_the_token_around_once(ranks):
    lines = collsim_exec("-n", ranks, EXAMPLES / "mpi_ring_pass.py")
    token = 0
    for r in range(1, ranks):
        assert lines[r] == [
            f"rank {r}: received {token} from rank {r - 1}, passing "
            f"{token + r} to rank {(r + 1) % ranks}"
        ]
        token += r
    total = ranks * (ranks - 1) // 2
    assert lines[0] == [
        f"rank 0: the token is back after {ranks} hops: {total} "
        f"(0 + 1 + ... + {ranks - 1} = {total})"
    ]


@pytest.mark.parametrize(("rows", "cols"), [(2, 3), (3, 2), (1, 4)])
def test_split_makes_row_and_column_communicators(rows, cols):
    size = rows * cols
    lines = collsim_exec("-n", size, "--topology", "switch", EXAMPLES / "mpi_split.py", rows, cols)
    for r in range(size):
        row, col = divmod(r, cols)
        row_sum = sum(range(row * cols, (row + 1) * cols))
        col_sum = sum(range(col, size, cols))
        assert lines[r] == [
            f"world rank {r} at ({row}, {col}): row rank {col} of {cols}, "
            f"column rank {row} of {rows}; row sum {row_sum}, column sum "
            f"{col_sum}"
        ]


def test_split_on_a_grid_that_does_not_fit_exits_with_the_scripts_message():
    outcome = run_cli(["exec", "-n", "4", str(EXAMPLES / "mpi_split.py"), "3", "3"], bad="sys.exit")
    assert outcome.status == 1
    assert "[1,0]<stderr>:a 3 x 3 grid needs 9 ranks, not 4" in outcome.stderr


# ---- the same per-rank output as real mpi4py under mpirun ---------------------------------

# Recorded with mpi4py 4.1.2 on MPICH 5.0.2 (`mpiexec -n K -outfile-pattern out.%r python
# examples/<file> <args>`, one file per rank; tools/record_mpirun.py does the same for the
# programs in tools/mpirun_programs/): "[rank] line", every rank's lines in rank order.
MPIRUN = {
    ("mpi_pi.py", 4, ("10000",)): [
        "[0] rank 0: 2500 of 10000 intervals, partial sum 0.785473161107",
        "[0] pi is approximately 3.141592654423, error 8.333e-10",
        "[1] rank 1: 2500 of 10000 intervals, partial sum 0.785423166107",
        "[2] rank 2: 2500 of 10000 intervals, partial sum 0.785373166105",
        "[3] rank 3: 2500 of 10000 intervals, partial sum 0.785323161105",
    ],
    ("mpi_parallel_sum.py", 3, ("1000",)): [
        "[0] rank 0: 334 numbers sum to 55945; the total is 500500 (correct)",
        "[1] rank 1: 333 numbers sum to 166833; the total is 500500 (correct)",
        "[2] rank 2: 333 numbers sum to 277722; the total is 500500 (correct)",
    ],
    ("mpi_ring_pass.py", 5, ()): [
        "[0] rank 0: the token is back after 5 hops: 10 (0 + 1 + ... + 4 = 10)",
        "[1] rank 1: received 0 from rank 0, passing 1 to rank 2",
        "[2] rank 2: received 1 from rank 1, passing 3 to rank 3",
        "[3] rank 3: received 3 from rank 2, passing 6 to rank 4",
        "[4] rank 4: received 6 from rank 3, passing 10 to rank 0",
    ],
    ("mpi_split.py", 6, ("2", "3")): [
        "[0] world rank 0 at (0, 0): row rank 0 of 3, column rank 0 of 2; row sum 3, column sum 3",
        "[1] world rank 1 at (0, 1): row rank 1 of 3, column rank 0 of 2; row sum 3, column sum 5",
        "[2] world rank 2 at (0, 2): row rank 2 of 3, column rank 0 of 2; row sum 3, column sum 7",
        "[3] world rank 3 at (1, 0): row rank 0 of 3, column rank 1 of 2; row sum 12, column sum 3",
        "[4] world rank 4 at (1, 1): row rank 1 of 3, column rank 1 of 2; row sum 12, column sum 5",
        "[5] world rank 5 at (1, 2): row rank 2 of 3, column rank 1 of 2; row sum 12, column sum 7",
    ],
}


@pytest.mark.parametrize(("name", "ranks", "argv"), list(MPIRUN), ids=lambda x: str(x))
def test_each_rank_prints_what_it_prints_under_mpirun(name, ranks, argv):
    lines = collsim_exec("-n", ranks, EXAMPLES / name, *argv)
    got = [f"[{r}] {line}" for r in sorted(lines) for line in lines[r]]
    assert got == MPIRUN[(name, ranks, argv)]
