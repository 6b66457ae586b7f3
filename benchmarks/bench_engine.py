"""How fast is the engine?  A K-rank neighbour exchange against a bare heapq loop.

Every rank of a bidirectional ring exchanges a size-only payload with both neighbours
(``rank.exchange``, like NCCL's grouped send/recv), ``rounds`` times.  Each exchange is
two transfers per rank, so one run moves ``2 * K * rounds`` messages.  The figure of
merit is transfers per second of wall-clock time for the whole ``Cluster.run`` (rank
programs, rendezvous matching, max-min sharing, trace and accounting included), and the
ratio of that run's wall time to a bare ``heapq`` loop doing the same number of pushes
and pops in the same process: the price of the simulator over its own event queue.

Run it from the repository root::

    python benchmarks/bench_engine.py           # K = 8, 64, 256, 1024
    python benchmarks/bench_engine.py --quick   # a small run, for a smoke test

Wall-clock time is only measured here, never inside collsim: simulated time comes from
the engine alone.
"""

import argparse
import gc
import heapq
import random
import sys
import time

import collsim
from collsim import CountOnly

SIZES = (8, 64, 256, 1024)


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
    wall = time.perf_counter() - t0
    transfers = sum(result.stats.messages_sent)
    assert transfers == 2 * k * rounds, transfers
    expected = rounds * (5e-6 + nbytes / 100e9)  # every step is one α–β message per link
    assert abs(result.time - expected) <= 1e-9 * expected, (result.time, expected)
    return transfers, result.events, wall


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
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small run (smoke test)")
    parser.add_argument("--transfers", type=int, default=None,
                        help="transfers per K (default 200,000; 4,096 with --quick)")  # fmt: skip
    parser.add_argument("--repeat", type=int, default=3, help="best of this many runs")
    args = parser.parse_args(argv)
    target = args.transfers or (4_096 if args.quick else 200_000)
    repeat = 1 if args.quick else args.repeat

    print(f"collsim {collsim.__version__}, Python {sys.version.split()[0]}, best of {repeat}")
    print()
    print("| K ranks | rounds | transfers | events | wall (s) | transfers/s | heapq (s) | ratio |")
    print("|--------:|-------:|----------:|-------:|---------:|------------:|----------:|------:|")
    for k in SIZES:
        rounds = max(1, target // (2 * k))
        runs = [time_engine(k, rounds) for _ in range(repeat)]
        transfers, events, wall = min(runs, key=lambda run: run[2])
        bare = min(time_heapq(events, 2 * k) for _ in range(repeat))
        print(
            f"| {k:>7} | {rounds:>6} | {transfers:>9,} | {events:>6,} | {wall:>8.3f} "
            f"| {transfers / wall:>11,.0f} | {bare:>9.4f} | {wall / bare:>5.0f}x |"
        )
    print()
    print("ratio = engine wall time / bare heapq loop with the same number of pushes and pops")


if __name__ == "__main__":
    main()
