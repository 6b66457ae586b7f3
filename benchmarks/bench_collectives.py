"""Wall time of collsim's numeric ring all-reduce against the plain numpy work it emulates.

Baseline, in the same process: add the K buffers into one and copy the sum back to all K
(what an all-reduce computes, with no schedule, network or trace).  Also times a
count-only ring all-reduce on 1,024 ranks (no data: the same schedule and network).

    python benchmarks/bench_collectives.py            # docs/performance.md's figures
    python benchmarks/bench_collectives.py --quick    # small sizes, a few seconds
"""

import argparse
import time

import numpy as np
from bench_numpy_limit import loop as numpy_baseline  # add K buffers, copy the sum K times

import collsim


def best_of(repeats, fn):
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def numeric(k, n, model, repeats):
    rng = np.random.default_rng(0)
    buffers = [rng.integers(-4, 5, size=n).astype(np.float32) for _ in range(k)]
    cluster = collsim.Cluster(collsim.topology.ring(k, "100GB/s", "5us"), model=model)
    base = best_of(repeats, lambda: numpy_baseline(buffers))
    sim = best_of(repeats, lambda: cluster.all_reduce(buffers, algorithm="ring"))
    return base, sim


def count_only(k):
    cluster = collsim.Cluster(collsim.topology.ring(k, "100GB/s", "5us"))
    t = time.perf_counter()
    out = cluster.all_reduce(count=k * 256, dtype="float32", algorithm="ring")
    return time.perf_counter() - t, out.trace.transfer_count  # without building the records


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes only")
    args = parser.parse_args()
    cases = [(8, 2**16), (64, 2**12)] if args.quick else [(8, 2**24), (64, 2**20)]
    print("| K | N (float32) | model | numpy baseline | collsim ring | ratio |")
    print("|---|---|---|---|---|---|")
    for k, n in cases:
        for model in ("maxmin", "ideal"):
            base, sim = numeric(k, n, model, 1 if args.quick else 3)
            print(
                f"| {k} | 2^{int(np.log2(n))} | {model} | {base * 1e3:.1f} ms | "
                f"{sim * 1e3:.1f} ms | {sim / base:.2f}x |"
            )
    k = 64 if args.quick else 1024
    seconds, transfers = count_only(k)
    print(
        f"\ncount-only ring all-reduce on {k} ranks: {seconds:.1f} s wall, "
        f"{transfers:,} transfers ({transfers / seconds:,.0f} transfers/s)"
    )


if __name__ == "__main__":
    main()
