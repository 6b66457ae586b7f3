"""collsim's numeric ring all-reduce against what a student would otherwise run on one
machine: ``torch.distributed`` all-reduce with the gloo backend, K processes on loopback.

Both are timed in this run, on this machine, on the same integer-valued float32 buffers
(rank r holds ``rank_buffer(r, N)``), each checked for the exact sum before it is timed.
The gloo processes stay up for the whole run and all-reduce on command
(:class:`GlooWorld`, also used by ``bench_peers.py``); each gloo figure is rank 0's wall
time from a ``dist.barrier()`` to the end of its ``dist.all_reduce``.  The rounds
alternate gloo and collsim and the table gives the median of each.  Skipped with a
message when torch is not installed (``pip install torch==2.13.0`` gives a CPU build
here; an unpinned ``torch`` pulls a multi-GB CUDA build).

    python benchmarks/bench_gloo.py                      # K = 8, N = 2^10, 2^12, ..., 2^24
    python benchmarks/bench_gloo.py --ranks 4 --min-exp 16 --max-exp 20 --repeats 5
    python benchmarks/bench_gloo.py --quick              # K = 2, N = 2^10, 2^12
"""

import argparse
import os
import queue as queue_module
import socket
import statistics
import sys
import time

import numpy as np

import collsim
from collsim.units import format_time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_engine import command_line, machine_line


def rank_buffer(rank, n):
    """Rank ``rank``'s input of ``n`` float32: small integers, so every sum is exact."""
    return np.random.default_rng(rank).integers(-4, 5, size=n).astype(np.float32)


def expected_sum(world, n):
    """What every rank holds after an all-reduce (sum) of the ``world`` rank buffers."""
    total = rank_buffer(0, n)
    for rank in range(1, world):
        total += rank_buffer(rank, n)
    return total


def gloo_worker(rank, world, port, commands, results):
    """One gloo rank: all-reduce ``rank_buffer(rank, n)`` for every ``n`` it is sent.

    The first time it sees an ``n`` it runs one untimed all-reduce (the warm-up, where
    gloo sets up its buffers) and rank 0 checks that result; then, and for every later
    command, it restores its input, meets the others at a barrier and times one
    all-reduce.  ``None`` ends it."""
    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    tensors = {}
    while (n := commands.get()) is not None:
        correct = True
        if n not in tensors:
            source = torch.from_numpy(rank_buffer(rank, n))
            x = source.clone()
            dist.all_reduce(x)  # warm-up
            if rank == 0:
                correct = bool(np.array_equal(x.numpy(), expected_sum(world, n)))
            tensors[n] = (source, x)
        source, x = tensors[n]
        x.copy_(source)
        dist.barrier()
        t = time.perf_counter()
        dist.all_reduce(x)
        seconds = time.perf_counter() - t
        if rank == 0:
            results.put((n, seconds, correct))
    dist.destroy_process_group()


def free_port():
    """A loopback TCP port nobody listens on now (for gloo's rendezvous)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class GlooWorld:
    """``world`` gloo processes on loopback, kept up to all-reduce on command.

    >>> with GlooWorld(2) as gloo:  # doctest: +SKIP
    ...     seconds = gloo.all_reduce_seconds(1024)
    """

    def __init__(self, world, timeout=600):
        import torch.multiprocessing as mp

        ctx = mp.get_context("spawn")
        self.timeout = timeout
        self.results = ctx.Queue()
        self.commands = [ctx.Queue() for _ in range(world)]
        port = free_port()
        self.procs = [
            ctx.Process(target=gloo_worker, args=(r, world, port, self.commands[r], self.results))
            for r in range(world)
        ]
        for p in self.procs:
            p.start()

    def all_reduce_seconds(self, n, expected=None):
        """Rank 0's wall seconds of one timed all-reduce of ``n`` float32, checked (by rank
        0 against ``expected_sum``: ``expected`` is taken for a common signature only)."""
        for queue in self.commands:
            queue.put(n)
        got, seconds, correct = self._result()
        assert got == n and correct, f"gloo's all-reduce of 2^{n.bit_length() - 1} is wrong"
        return seconds

    def _result(self):
        """Rank 0's next result; fails at once when a rank has died, not after the timeout."""
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            try:
                return self.results.get(timeout=1)
            except queue_module.Empty:
                dead = [p.exitcode for p in self.procs if p.exitcode is not None]
                if dead:
                    raise RuntimeError(f"a gloo rank ended (exit {dead[0]})") from None
        raise TimeoutError(f"gloo gave no result in {self.timeout} s")

    def close(self):
        for queue in self.commands:
            queue.put(None)
        for p in self.procs:
            p.join(timeout=60)
            if p.is_alive():
                p.kill()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def collsim_seconds(cluster, buffers):
    t = time.perf_counter()
    cluster.all_reduce(buffers, algorithm="ring")
    return time.perf_counter() - t


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Every round runs gloo once and collsim once; medians over --repeats rounds.",
    )
    parser.add_argument("--quick", action="store_true", help="K = 2, N = 2^10 and 2^12")
    parser.add_argument("--ranks", type=int, help="K, processes and ranks (8; 2 with --quick)")
    parser.add_argument("--min-exp", type=int, default=10, help="smallest N is 2^this (10)")
    parser.add_argument("--max-exp", type=int, help="largest N is 2^this (24; 12 with --quick)")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds (3)")
    args = parser.parse_args(argv)
    args.ranks = args.ranks if args.ranks is not None else (2 if args.quick else 8)
    args.max_exp = args.max_exp if args.max_exp is not None else (12 if args.quick else 24)
    if args.ranks < 2 or args.repeats < 1 or not 0 <= args.min_exp <= args.max_exp <= 30:
        parser.error(
            f"--ranks {args.ranks} --repeats {args.repeats} --min-exp "
            f"{args.min_exp} --max-exp {args.max_exp}: give K >= 2, at least one "
            "round and 0 <= min-exp <= max-exp <= 30"
        )
    print(machine_line())
    print(command_line(argv))
    try:
        import torch
    except ImportError:
        print("skipped: torch is not installed (pip install torch==2.13.0 for a CPU build)")
        return 0
    print(f"torch {torch.__version__}; median of {args.repeats} interleaved round(s)")
    print()
    print(
        f"| N (float32) | gloo, {args.ranks} processes | collsim ring, {args.ranks} ranks "
        "| collsim / gloo |"
    )
    print("|---|---|---|---|")
    cluster = collsim.Cluster(collsim.topology.ring(args.ranks, "100GB/s", "5us"))
    with GlooWorld(args.ranks) as gloo:
        for e in range(args.min_exp, args.max_exp + 1, 2):
            n = 2**e
            buffers = [rank_buffer(r, n) for r in range(args.ranks)]
            expected = expected_sum(args.ranks, n)
            outputs = cluster.all_reduce(buffers, algorithm="ring").outputs  # warm-up, checked
            assert all(np.array_equal(out, expected) for out in outputs), "collsim"
            gloo.all_reduce_seconds(n)  # gloo's warm-up and check
            theirs, ours = [], []
            for _ in range(args.repeats):
                theirs.append(gloo.all_reduce_seconds(n))
                ours.append(collsim_seconds(cluster, buffers))
            g, c = statistics.median(theirs), statistics.median(ours)
            print(f"| 2^{e} | {format_time(g)} | {format_time(c)} | {c / g:.2f}x |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
