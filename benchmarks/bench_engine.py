"""How fast is the engine?  A K-rank neighbour exchange against a bare heapq loop.

Every rank of a bidirectional ring exchanges a size-only payload with both neighbours
(``rank.exchange``, like NCCL's grouped send/recv), ``rounds`` times.  Each exchange is
two transfers per rank, so one run moves ``2 * K * rounds`` messages; ``rounds`` is chosen
per K so that every K moves about ``--transfers`` messages (the same workload at every K).
The figure of merit is transfers per second of wall-clock time for the whole
``Cluster.run`` (rank programs, rendezvous matching, max-min sharing, trace and accounting
included), and the ratio of that run's wall time to a bare ``heapq`` loop doing the same
number of pushes and pops in the same process: the price of the simulator over its own
event queue.  Each figure is the best of ``--repeat`` runs (every K in turn, so that a
slow spell of a shared machine costs each K one run); the engine and the heapq loop
alternate, so that the machine's load falls on both alike.  Every run checks its answer
(transfer count and simulated time) before it is timed.

Run it from the repository root::

    python benchmarks/bench_engine.py                  # K = 8, 64, 256, 1024, 4096
    python benchmarks/bench_engine.py --ranks 8,4096   # only these K
    python benchmarks/bench_engine.py --quick          # a small run, for a smoke test

The last line is the memory a run's result keeps per transfer (mostly its trace),
measured in a separate run.  The first lines printed are the machine (CPUs, load
average, Python, numpy, collsim) and the exact command, for a README that quotes the
table.  Wall-clock time is only measured
here, never inside collsim: simulated time comes from the engine alone.
"""

import argparse
import gc
import heapq
import os
import platform
import random
import shlex
import sys
import time
import tracemalloc

import numpy as np

import collsim
from collsim import CountOnly

SIZES = (8, 64, 256, 1024, 4096)


def machine_line():
    """One line naming the machine, its load and the software: what a reader needs to
    weigh a table of wall-clock figures (shared by the other benchmark scripts)."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        usable = os.cpu_count()
    try:
        load = "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg()) + " (1/5/15 min)"
    except OSError:
        load = "load average unknown"
    return (
        f"machine: {platform.system()} {platform.machine()}, nproc {usable}, {load}; "
        f"Python {platform.python_version()}, numpy {np.__version__}, "
        f"collsim {collsim.__version__}"
    )


def command_line(argv=None):
    """The command that reproduces this run, as the user typed it (``argv`` when given)."""
    args = sys.argv[1:] if argv is None else list(argv)
    return "command: " + shlex.join(["python", sys.argv[0] or "-", *args])


def parse_ranks(text, smallest=2):
    """``"8,64,4096"`` -> ``(8, 64, 4096)``; raises ValueError naming the bad item."""
    ranks = []
    for item in str(text).split(","):
        try:
            k = int(item.strip())
        except ValueError:
            raise ValueError(
                f"--ranks {text!r}: {item.strip()!r} is not a whole number "
                "(give a comma-separated list such as 8,64,4096)"
            ) from None
        if k < smallest:
            raise ValueError(f"--ranks {text!r}: {k} ranks are too few (at least {smallest})")
        ranks.append(k)
    return tuple(ranks)


def neighbour_exchange(rank, rounds, payload):
    """Exchange ``payload`` with both ring neighbours, ``rounds`` times."""
    left, right = (rank.id - 1) % rank.size, (rank.id + 1) % rank.size
    for step in range(rounds):
        yield rank.exchange(
            sends=[(left, payload, step), (right, payload, step)],
            recvs=[(right, step), (left, step)],
        )


def time_engine(k, rounds, nbytes=1 << 20):
    """(transfers, events, wall seconds) of one neighbour-exchange run on ``k`` ranks."""
    cluster = collsim.Cluster(collsim.topology.bidirectional_ring(k, "100GB/s", "5us"))
    payload = CountOnly(nbytes)
    gc.collect()
    t0 = time.perf_counter()
    result = cluster.run(neighbour_exchange, rounds, payload)
    stats = result.stats  # the accounting is read on demand: timed too, as it always was
    wall = time.perf_counter() - t0
    transfers = sum(stats.messages_sent)
    assert transfers == 2 * k * rounds, transfers
    expected = rounds * (5e-6 + nbytes / 100e9)  # every step is one α–β message per link
    assert abs(result.time - expected) <= 1e-9 * expected, (result.time, expected)
    return transfers, result.events, wall


def trace_bytes(k, rounds, nbytes=1 << 20):
    """Bytes the result of one neighbour-exchange run keeps per transfer (its trace, the
    processes' returns), measured with tracemalloc in a run of its own: tracing
    allocations slows a run several times, so it is never the timed one."""
    cluster = collsim.Cluster(collsim.topology.bidirectional_ring(k, "100GB/s", "5us"))
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        result = cluster.run(neighbour_exchange, rounds, CountOnly(nbytes))
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    return kept / result.trace.transfer_count


def time_heapq(n_events, width, seed=0):
    """Wall seconds of ``n_events`` heappush + heappop pairs on a heap ``width`` deep.

    The entries have the engine's shape, ``(time, order, callback, arg)``, and the heap
    holds about as many pending events as the simulation does (two per rank)."""
    rng = random.Random(seed)
    increments = [rng.random() for _ in range(1024)]
    heap = [(rng.random(), i, None, None) for i in range(width)]
    heapq.heapify(heap)
    push, pop = heapq.heappush, heapq.heappop
    gc.collect()
    t0 = time.perf_counter()
    for i in range(n_events):
        now, _, _, _ = pop(heap)
        push(heap, (now + increments[i & 1023], i, None, None))
    return time.perf_counter() - t0


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Example: python benchmarks/bench_engine.py --ranks 8,4096 --repeat 1",
    )
    parser.add_argument(
        "--quick", action="store_true", help="a small run (smoke test): 4,096 transfers per K"
    )
    parser.add_argument(
        "--ranks",
        type=str,
        default=None,
        help="comma-separated K to run (default 8,64,256,1024,4096)",
    )
    parser.add_argument(
        "--transfers",
        type=int,
        default=None,
        help="about this many transfers per K (default 200,000; 4,096 with "
        "--quick); at least 2K, one round, are always moved",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=5,
        help="best of this many runs of each K, in turn (default 5)",
    )
    args = parser.parse_args(argv)
    try:
        sizes = SIZES if args.ranks is None else parse_ranks(args.ranks)
    except ValueError as error:
        parser.error(str(error))
    if args.transfers is not None and args.transfers < 1:
        parser.error(f"--transfers {args.transfers}: give at least 1")
    if args.repeat < 1:
        parser.error(f"--repeat {args.repeat}: give at least 1")
    target = args.transfers or (4_096 if args.quick else 200_000)
    repeat = 1 if args.quick else args.repeat

    print(machine_line())
    print(command_line(argv))
    print(f"best of {repeat} run(s) each, every K in turn, engine and heapq loop alternating")
    print()
    print("| K ranks | rounds | transfers | events | wall (s) | transfers/s | heapq (s) | ratio |")
    print("|--------:|-------:|----------:|-------:|---------:|------------:|----------:|------:|")
    rounds_of = {k: max(1, target // (2 * k)) for k in sizes}
    runs, bares = {k: [] for k in sizes}, {k: [] for k in sizes}
    # every K once per repeat, in turn: a slow spell of a shared machine (seconds long)
    # then costs each K one of its runs, instead of all the runs of one K
    for _ in range(repeat):
        for k in sizes:
            runs[k].append(time_engine(k, rounds_of[k]))
            bares[k].append(time_heapq(runs[k][-1][1], 2 * k))
    for k in sizes:
        rounds = rounds_of[k]
        transfers, events, wall = min(runs[k], key=lambda run: run[2])
        bare = min(bares[k])
        print(
            f"| {k:>7} | {rounds:>6} | {transfers:>9,} | {events:>6,} | {wall:>8.3f} "
            f"| {transfers / wall:>11,.0f} | {bare:>9.4f} | {wall / bare:>5.0f}x |"
        )
    print()
    print("ratio = engine wall time / bare heapq loop with the same number of pushes and pops")
    k = min(sizes)
    kept = trace_bytes(k, max(1, target // (2 * k)))
    print(
        f"memory kept by the result: {kept:,.0f} B per transfer (K = {k}, tracemalloc, "
        "a separate run)"
    )


if __name__ == "__main__":
    main()
