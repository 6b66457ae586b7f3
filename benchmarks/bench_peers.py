"""collsim's numeric ring all-reduce next to the peers a student would run on one machine.

K ranks all-reduce (sum) N float32 each; rank r holds the same small-integer buffer in
every contender (``bench_gloo.rank_buffer``), and each result is checked for the exact sum
before anything is timed.  The contenders:

* numpy limit: the fastest of ``bench_numpy_limit``'s plain numpy variants (loop, stack,
  reduce: the additions and copies, no schedule, network or trace); always runs;
* collsim: ``cluster.all_reduce(buffers, algorithm="ring")`` on ``topology.ring(K)``;
  always runs;
* threaded PG: PyTorch's multi-threaded process group (the one its own distributed tests
  use, ``torch.testing._internal.distributed.multi_threaded_pg``), K threads calling
  ``dist.all_reduce``; rank 0's time from a barrier that releases all K threads to the end
  of its all-reduce (rank 0 does the sum and the copies there);
* gloo: ``torch.distributed`` with gloo, K processes on loopback (``bench_gloo.GlooWorld``);
  rank 0's time from a barrier to the end of its all-reduce; left out at a K whose K
  processes with torch loaded (about 170 MiB each) would not fit in half the free memory;
* MPI: mpi4py's ``Allreduce`` under ``mpirun`` (MPICH from ``pip install mpi4py mpich``),
  K processes, rank 0's time from a barrier; only for K <= --mpi-max-ranks, because MPI
  ranks spin while they wait and many more of them than cores measure the scheduler.

The peers stay up for all N of one K and run on command; every round runs each contender
once, the order rotating from round to round so the machine's load falls on all alike,
and the table gives medians over the rounds, collsim / the best peer and collsim / the
numpy limit.  Peers that are not installed are skipped with the pip command that brings
them; sizes whose copies would not fit in half the free memory are left out, and said so.

    python benchmarks/bench_peers.py                  # K in {2, 8, 64}, N in 2^10..2^24
    python benchmarks/bench_peers.py --ranks 8 --sizes 2^10,2^16 --rounds 11
    python benchmarks/bench_peers.py --peers threaded # numpy, collsim and one peer
    python benchmarks/bench_peers.py --quick          # K in {2, 8}, N in 2^10, 2^16

Wall-clock time is only measured here, never inside collsim.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

import collsim
from collsim.units import format_size, format_time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_engine import command_line, machine_line, parse_ranks
from bench_gloo import GlooWorld, expected_sum, rank_buffer
from bench_numpy_limit import VARIANTS

KS = (2, 8, 64)
NS = (2**10, 2**16, 2**20, 2**24)
PEERS = ("threaded", "gloo", "mpi")
TITLES = {"threaded": "threaded PG", "gloo": "gloo", "mpi": "MPI"}
INSTALL = {
    "threaded": "pip install torch==2.13.0 for a CPU build",
    "gloo": "pip install torch==2.13.0 for a CPU build",
    "mpi": "pip install mpi4py mpich",
}


class ThreadedWorld:
    """K threads in PyTorch's multi-threaded process group, all-reducing on command."""

    def __init__(self, world, timeout=600):
        import torch
        import torch.distributed as dist
        from torch.testing._internal.distributed import multi_threaded_pg

        self._torch, self._dist, self._pg = torch, dist, multi_threaded_pg
        torch._C._distributed_c10d._set_thread_isolation_mode(True)
        multi_threaded_pg._install_threaded_pg()
        store = dist.HashStore()
        self.world, self.n, self.expected = world, None, None
        self.go, self.start, self.done = (
            threading.Barrier(world + 1, timeout=timeout) for _ in range(3)
        )
        self.correct, self.errors = [True] * world, []
        self.threads = [
            threading.Thread(target=self._rank, args=(r, store), daemon=True) for r in range(world)
        ]
        for t in self.threads:
            t.start()

    def _rank(self, rank, store):
        dist = self._dist
        tensors = {}
        try:
            dist.init_process_group("threaded", rank=rank, world_size=self.world, store=store)
            while True:
                self.go.wait()
                if (n := self.n) is None:
                    break
                if n not in tensors:
                    source = self._torch.from_numpy(rank_buffer(rank, n))
                    x = source.clone()
                    dist.all_reduce(x)  # warm-up, checked
                    self.correct[rank] = bool(np.array_equal(x.numpy(), self.expected))
                    tensors[n] = (source, x)
                source, x = tensors[n]
                x.copy_(source)
                self.start.wait()
                t = time.perf_counter()
                dist.all_reduce(x)
                if rank == 0:
                    self.seconds = time.perf_counter() - t
                self.done.wait()
        except BaseException as error:
            self.errors.append(error)
            for barrier in (self.go, self.start, self.done):
                barrier.abort()
        finally:
            if dist.is_initialized():
                dist.destroy_process_group()

    def all_reduce_seconds(self, n, expected):
        """Rank 0's wall seconds of one all-reduce of ``n`` float32 by all K threads, from
        the barrier that releases them to the end of its ``dist.all_reduce`` (checked)."""
        self.n, self.expected = n, expected
        self.go.wait()
        self.start.wait()
        self.done.wait()
        assert not self.errors and all(self.correct), ("threaded PG", self.errors)
        return self.seconds

    def close(self):
        self.n = None
        if not self.errors:
            self.go.wait()
        for t in self.threads:
            t.join(timeout=60)
        self._pg.ProcessLocalGroup.reset()
        self._pg._uninstall_threaded_pg()
        self._torch._C._distributed_c10d._set_thread_isolation_mode(False)


def mpi_worker(commands):
    """One rank under mpirun: read N from this rank's FIFO in ``commands`` (a blocking
    read, so an idle rank does not spin while the others are timed) and time one
    Allreduce of it; rank 0 prints the result as a JSON line.  N = 0 ends it."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank, world = comm.Get_rank(), comm.Get_size()
    buffers = {}
    with open(os.path.join(commands, str(rank))) as fifo:
        while n := int(fifo.readline() or 0):
            correct = True
            if n not in buffers:
                source = rank_buffer(rank, n)
                x = source.copy()
                comm.Allreduce(MPI.IN_PLACE, x, op=MPI.SUM)  # warm-up, checked
                if rank == 0:
                    correct = bool(np.array_equal(x, expected_sum(world, n)))
                buffers[n] = (source, x)
            source, x = buffers[n]
            x[:] = source
            comm.Barrier()
            t = time.perf_counter()
            comm.Allreduce(MPI.IN_PLACE, x, op=MPI.SUM)
            seconds = time.perf_counter() - t
            if rank == 0:
                print(json.dumps({"n": n, "seconds": seconds, "correct": correct}), flush=True)


def mpirun_path():
    beside = os.path.join(os.path.dirname(sys.executable), "mpirun")
    return beside if os.path.exists(beside) else shutil.which("mpirun")


class MpiWorld:
    """``mpirun -n K`` ranks of :func:`mpi_worker`, all-reducing on command (one FIFO a
    rank: mpirun forwards stdin to rank 0 only, and a broadcast from it would spin)."""

    def __init__(self, world):
        self.folder = tempfile.mkdtemp(prefix="bench_peers_mpi_")
        for rank in range(world):
            os.mkfifo(os.path.join(self.folder, str(rank)))
        cmd = [
            mpirun_path(),
            "-n",
            str(world),
            sys.executable,
            os.path.abspath(__file__),
            "--mpi-worker",
            self.folder,
        ]
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True
        )
        # opening a FIFO for writing waits for its reader: every rank is up after this
        self.fifos = [open(os.path.join(self.folder, str(r)), "w") for r in range(world)]

    def all_reduce_seconds(self, n, expected=None):
        """Rank 0's wall seconds of one timed Allreduce of ``n`` float32, checked (by rank
        0 against ``expected_sum``: ``expected`` is taken for a common signature only)."""
        for fifo in self.fifos:
            fifo.write(f"{n}\n")
            fifo.flush()
        line = self.proc.stdout.readline()
        assert line, f"mpirun ended (exit {self.proc.poll()})"
        got = json.loads(line)
        assert got["n"] == n and got["correct"], f"MPI's all-reduce of {n} is wrong"
        return got["seconds"]

    def close(self):
        for fifo in self.fifos:
            fifo.close()  # end of file: every rank leaves its loop
        self.proc.communicate(timeout=60)
        shutil.rmtree(self.folder, ignore_errors=True)


def available(peers):
    """``{peer: why it is skipped}`` for the asked-for peers that cannot run here."""
    skipped = {}
    if {"threaded", "gloo"} & set(peers):
        try:
            import torch.distributed  # noqa: F401
        except ImportError:
            skipped.update({p: "torch is not installed" for p in ("threaded", "gloo")})
    if "mpi" in peers:
        try:
            import mpi4py  # noqa: F401
        except ImportError:
            skipped["mpi"] = "mpi4py is not installed"
        else:
            if mpirun_path() is None:
                skipped["mpi"] = "mpirun is not on PATH"
    return {p: why for p, why in skipped.items() if p in peers}


GLOO_RANK_BYTES = 180 * 2**20  # proportional set size of one gloo rank, torch loaded (~167 MiB)


def free_bytes():
    """Free physical memory now (None where the system cannot tell)."""
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def fits(k, n, contenders):
    """(whether, bytes needed): the contenders' buffers in half the free memory: numpy's
    inputs and outputs and collsim's outputs and working copies (about 4K buffers), and
    an input and a result per rank in every peer (2K each)."""
    need = (4 + 2 * contenders) * k * n * 4
    free = free_bytes()
    return free is None or need < free / 2, need


def seconds_of(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def measure(k, n, rounds, worlds):
    """``{contender: median seconds}`` of one (K, N); numpy variants under their names."""
    buffers = [rank_buffer(r, n) for r in range(k)]
    expected = expected_sum(k, n)
    cluster = collsim.Cluster(collsim.topology.ring(k, "100GB/s", "5us"))
    for name, fn in VARIANTS.items():
        assert np.array_equal(fn(buffers)[0], expected), name
    outputs = cluster.all_reduce(buffers, algorithm="ring").outputs  # warm-up, checked
    assert all(np.array_equal(out, expected) for out in outputs), "collsim"
    for world in worlds.values():
        world.all_reduce_seconds(n, expected)  # warm-up, checked
    timers = {
        name: (lambda fn=fn: seconds_of(lambda: fn(buffers))) for name, fn in VARIANTS.items()
    }
    timers["collsim"] = lambda: seconds_of(lambda: cluster.all_reduce(buffers, algorithm="ring"))
    for peer, world in worlds.items():
        timers[peer] = lambda world=world: world.all_reduce_seconds(n, expected)
    order = list(timers)
    runs = {name: [] for name in order}
    for i in range(rounds):
        for name in order[i % len(order) :] + order[: i % len(order)]:
            runs[name].append(timers[name]())
    return {name: statistics.median(times) for name, times in runs.items()}


def open_worlds(k, peers, mpi_max_ranks, notes):
    """The peers' worlds of ``k`` ranks; why a peer does not run at ``k`` goes to ``notes``."""
    worlds = {}
    if "threaded" in peers:
        worlds["threaded"] = ThreadedWorld(k)
    if "gloo" in peers:
        free = free_bytes()
        if free is not None and k * GLOO_RANK_BYTES > free / 2:
            need = format_size(k * GLOO_RANK_BYTES)
            notes.append(
                f"left out: gloo at K = {k}: {k} processes with torch need about "
                f"{need}, over half the free memory"
            )
        else:
            worlds["gloo"] = GlooWorld(k)
    if "mpi" in peers:
        if k <= mpi_max_ranks:
            worlds["mpi"] = MpiWorld(k)
        else:
            notes.append(f"left out: MPI at K = {k}: above --mpi-max-ranks {mpi_max_ranks}")
    return worlds


def parse_sizes(text):
    """``"2^10,65536"`` -> ``(1024, 65536)``; raises ValueError naming the bad item."""
    sizes = []
    for item in str(text).split(","):
        item = item.strip()
        try:
            n = 2 ** int(item[2:]) if item.startswith("2^") else int(item)
        except ValueError:
            raise ValueError(
                f"--sizes {text!r}: {item!r} is neither 2^e nor a whole number (e.g. 2^10,2^16)"
            ) from None
        if not 1 <= n <= 2**30:
            raise ValueError(f"--sizes {text!r}: {item!r} elements is outside 1..2^30")
        sizes.append(n)
    return tuple(sizes)


def parse_peers(text):
    peers = () if text.strip() == "none" else tuple(p.strip() for p in text.split(","))
    bad = [p for p in peers if p not in PEERS]
    if bad:
        raise ValueError(
            f"--peers {text!r}: no peer {bad[0]!r}; choose from {','.join(PEERS)} or none"
        )
    return peers


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Example: python benchmarks/bench_peers.py --ranks 8 --sizes 2^10,2^16,2^20",
    )
    parser.add_argument("--quick", action="store_true", help="K in {2, 8}, N in 2^10, 2^16")
    parser.add_argument("--ranks", help="comma-separated K (default 2,8,64)")
    parser.add_argument(
        "--sizes",
        help="comma-separated N, float32 per rank, as 2^e or a "
        "number (default 2^10,2^16,2^20,2^24)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        help="interleaved rounds (default 7, or 3 for N >= 2^20; 3 with --quick)",
    )
    parser.add_argument(
        "--peers",
        default=",".join(PEERS),
        help="comma-separated peers to run next to numpy and collsim: "
        "threaded, gloo, mpi or none (default: all installed)",
    )
    parser.add_argument(
        "--mpi-max-ranks",
        type=int,
        default=8,
        help="run MPI only up to this K (default 8: MPICH ranks poll "
        "while they wait, so far more ranks than cores time the "
        "scheduler)",
    )
    parser.add_argument("--mpi-worker", metavar="FOLDER", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.mpi_worker:
        return mpi_worker(args.mpi_worker)
    try:
        ks = parse_ranks(args.ranks) if args.ranks else ((2, 8) if args.quick else KS)
        ns = parse_sizes(args.sizes) if args.sizes else ((2**10, 2**16) if args.quick else NS)
        peers = parse_peers(args.peers)
    except ValueError as error:
        parser.error(str(error))
    if args.rounds is not None and args.rounds < 1:
        parser.error(f"--rounds {args.rounds}: give at least 1")

    print(machine_line())
    print(command_line(argv))
    skipped = available(peers)
    for peer, why in skipped.items():
        print(f"skipped: {TITLES[peer]}: {why} ({INSTALL[peer]})")
    peers = tuple(p for p in peers if p not in skipped)
    if "threaded" in peers or "gloo" in peers:
        import torch

        print(
            f"torch {torch.__version__}, {torch.get_num_threads()} intra-op threads "
            "(gloo ranks: 1 each)"
        )
    print("median of interleaved rounds")
    print()
    columns = ["numpy limit", "collsim ring", *(TITLES[p] for p in PEERS)]
    print(
        f"| K | N (float32) | {' | '.join(columns)} | collsim / best peer | collsim / numpy limit |"
    )
    print("|--:|--:|" + "--:|" * (len(columns) + 2))
    notes = []
    for k in ks:
        worlds = open_worlds(k, peers, args.mpi_max_ranks, notes)
        try:
            for n in ns:
                ok, need = fits(k, n, len(worlds))
                label = f"2^{n.bit_length() - 1}" if n & (n - 1) == 0 else f"{n:,}"
                if not ok:
                    print(
                        f"| {k} | {label} | (left out: needs about {format_size(need)}, "
                        "over half the free memory) |" + " |" * (len(columns) + 1)
                    )
                    continue
                rounds = args.rounds or (3 if args.quick or n >= 2**20 else 7)
                times = measure(k, n, rounds, worlds)
                print(row(k, label, times), flush=True)
        finally:
            for world in worlds.values():
                world.close()
    print()
    print(
        "numpy limit = the fastest of numpy loop / stack / reduce (named in brackets); "
        "best peer = the fastest of the peers that ran; - = not run"
    )
    for note in notes:
        print(note)
    return 0


def row(k, label, times):
    fastest = min(VARIANTS, key=times.get)
    cells = [f"{format_time(times[fastest])} ({fastest})", format_time(times["collsim"])]
    cells += [format_time(times[p]) if p in times else "-" for p in PEERS]
    ran = [p for p in PEERS if p in times]
    best = min(ran, key=times.get) if ran else None
    vs_peer = f"{times['collsim'] / times[best]:.2f}x ({TITLES[best]})" if best else "-"
    vs_numpy = f"{times['collsim'] / times[fastest]:.1f}x"
    return f"| {k} | {label} | {' | '.join(cells)} | {vs_peer} | {vs_numpy} |"


if __name__ == "__main__":
    sys.exit(main())
