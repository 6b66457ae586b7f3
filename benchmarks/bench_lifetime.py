"""Are dropped clusters freed?  Clusters alive and resident memory over N fresh clusters.

A property test or a sweep builds a cluster per case.  Each of ``--clusters`` fresh
clusters runs one numeric ring all-reduce of ``--size`` a rank on ``--ranks`` ranks (its
answer checked: the exact sum) and is dropped; the script counts the clusters still alive
(weak references) with the cyclic collector off, so that reference counting alone must
free them, and again after ``gc.collect()``, and reads the process's resident memory
(``/proc/self/statm``) before and after.  The baseline, taken first in the same process,
is what one cluster kept alive holds: its working block, K x size (the block a group
keeps for its next call).  Growth over N dropped clusters should be a small fraction of
one kept cluster, not N of them; the first and last calls' wall times show what memory
pressure costs.

    python benchmarks/bench_lifetime.py                 # 50 clusters of 8 ranks, 4 MiB a rank
    python benchmarks/bench_lifetime.py --quick         # 8 clusters of 4 ranks, 64 KiB a rank
"""

import argparse
import gc
import os
import time
import weakref

import numpy as np
from bench_engine import command_line, machine_line

import collsim
from collsim import units


def resident_bytes():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def one_call(k, n):
    """A fresh cluster after one checked all-reduce, and the call's wall time (s)."""
    cluster = collsim.Cluster(collsim.topology.ring(k))
    buffers = [np.full(n, r, dtype=np.float32) for r in range(k)]
    start = time.perf_counter()
    out = cluster.all_reduce(buffers).outputs
    seconds = time.perf_counter() - start
    assert all(o[0] == o[-1] == sum(range(k)) for o in out), "wrong sum"
    return cluster, seconds


def kept_baseline(k, n):
    """Resident growth while one cluster (and so its working block) is kept alive."""
    gc.collect()
    before = resident_bytes()
    cluster, _ = one_call(k, n)
    grown = resident_bytes() - before
    del cluster
    gc.collect()
    return grown


def fresh_clusters(count, k, n):
    """``(alive without the collector, alive after it, resident growth, first and last
    call's seconds)`` over ``count`` fresh clusters, each dropped after its call."""
    gc.collect()
    before = resident_bytes()
    was_enabled = gc.isenabled()
    gc.disable()  # reference counting alone must free a dropped cluster
    try:
        refs, seconds = [], []
        for _ in range(count):
            cluster, took = one_call(k, n)
            refs.append(weakref.ref(cluster))
            seconds.append(took)
            del cluster
        alive = sum(ref() is not None for ref in refs)
        grown = resident_bytes() - before
    finally:
        if was_enabled:
            gc.enable()
    gc.collect()
    collected = sum(ref() is not None for ref in refs)
    return alive, collected, grown, seconds[0], seconds[-1]


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1],
    )
    parser.add_argument("--clusters", type=int, default=50, help="fresh clusters (default 50)")
    parser.add_argument("--ranks", type=int, default=8, help="ranks per cluster (default 8)")
    parser.add_argument("--size", default="4MiB", help="float32 buffer per rank (default 4MiB)")
    parser.add_argument("--quick", action="store_true", help="8 clusters, 4 ranks, 64 KiB")
    args = parser.parse_args(argv)
    if args.clusters < 1 or args.ranks < 2:
        parser.error(f"--clusters {args.clusters} --ranks {args.ranks}: give >= 1 and >= 2")
    try:
        size = units.parse_size(args.size)
    except collsim.errors.CollsimError as exc:
        parser.error(f"--size {args.size!r}: {exc}")
    count, k = args.clusters, args.ranks
    if args.quick:
        count, k, size = 8, 4, 64 << 10
    n = max(1, size // 4)
    print(machine_line())
    print(command_line(argv))
    print()
    baseline = kept_baseline(k, n)
    alive, collected, grown, first, last = fresh_clusters(count, k, n)
    mib = units.format_size
    print(
        "| clusters | K | per rank | alive, collector off | alive after gc.collect() "
        "| resident growth | one cluster kept (baseline) | growth / baseline "
        "| first call | last call |"
    )
    print("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    print(
        f"| {count} | {k} | {mib(n * 4)} | {alive} | {collected} | {mib(max(grown, 0))} "
        f"| {mib(baseline)} | {grown / max(baseline, 1):.2f}x | {units.format_time(first)} "
        f"| {units.format_time(last)} |"
    )


if __name__ == "__main__":
    main()
