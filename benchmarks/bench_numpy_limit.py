"""collsim's numeric ring all-reduce against the numpy limit, interleaved, in one process.

The limit is the fastest of a few plain numpy ways to do the additions and copies an
all-reduce on K buffers of N elements must do (no schedule, network or trace):

* ``loop``: add the K buffers into one in a Python loop, then copy the sum K times;
* ``stack``: stack the K buffers into a (K, N) array and ``sum(axis=0)``, then copy K times;
* ``reduce``: ``np.add.reduce`` over the list, then copy K times;
* ``prealloc``: add into and copy into K output buffers allocated once, before the rounds
  (no allocation and no first-touch page faults are timed: a floor that collsim, which
  allocates its buffers on every call, cannot reach).

Each round runs every variant and collsim once, in turn, so that the machine's load falls on
all of them alike; the table gives the median over the rounds and collsim / the fastest
variant. Sizes whose K buffers and their copies would not fit in half of the free memory are
left out and said so.

    python benchmarks/bench_numpy_limit.py            # K in {2, 8, 64}, N in 2^10..2^24
    python benchmarks/bench_numpy_limit.py --quick    # K in {2, 8}, N in 2^10, 2^16
"""

import argparse
import os
import statistics
import time

import numpy as np
from bench_engine import command_line, machine_line

import collsim

KS = (2, 8, 64)
NS = (2**10, 2**16, 2**20, 2**24)


def loop(buffers):
    total = buffers[0].copy()
    for b in buffers[1:]:
        total += b
    return [total.copy() for _ in buffers]


def stack(buffers):
    total = np.stack(buffers).sum(axis=0)
    return [total.copy() for _ in buffers]


def reduce(buffers):
    total = np.add.reduce(buffers)
    return [total.copy() for _ in buffers]


def preallocated(k, n, dtype=np.float32):
    """The ``prealloc`` variant: a function of the buffers that adds into and copies into
    K outputs made here, once."""
    outputs = [np.empty(n, dtype=dtype) for _ in range(k)]

    def prealloc(buffers):
        total = outputs[0]
        np.add(buffers[0], buffers[1], out=total) if k > 1 else np.copyto(total, buffers[0])
        for b in buffers[2:]:
            np.add(total, b, out=total)
        for out in outputs[1:]:
            np.copyto(out, total)
        return outputs

    return prealloc


VARIANTS = {"loop": loop, "stack": stack, "reduce": reduce}


def _seconds(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def measure(k, n, rounds):
    """``{name: median seconds}`` for every numpy variant and for collsim (``"collsim"``)."""
    rng = np.random.default_rng(0)
    buffers = [rng.integers(-4, 5, size=n).astype(np.float32) for _ in range(k)]
    cluster = collsim.Cluster(collsim.topology.ring(k, "100GB/s", "5us"))
    variants = {**VARIANTS, "prealloc": preallocated(k, n)}
    # the same answer first: a timing of a wrong result would mean nothing
    expected = loop(buffers)[0]
    for name, fn in variants.items():
        assert all(np.array_equal(out, expected) for out in fn(buffers)), name
    outputs = cluster.all_reduce(buffers, algorithm="ring").outputs
    assert all(np.array_equal(out, expected) for out in outputs), "collsim"
    runs = {name: [] for name in [*variants, "collsim"]}
    for _ in range(rounds):
        for name, fn in variants.items():
            runs[name].append(_seconds(lambda fn=fn: fn(buffers)))
        runs["collsim"].append(_seconds(lambda: cluster.all_reduce(buffers, algorithm="ring")))
    return {name: statistics.median(times) for name, times in runs.items()}


def fits(k, n):
    """Whether K inputs, K outputs and the working copies (about 4K buffers) fit in half
    of the free memory."""
    try:
        free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return True
    return 4 * k * n * 4 < free / 2


def _format(seconds):
    return f"{seconds * 1e3:.3f} ms" if seconds < 1 else f"{seconds:.2f} s"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="K in {2, 8}, N in 2^10, 2^16")
    parser.add_argument(
        "--rounds",
        type=int,
        default=None,
        help="interleaved rounds (default 7, or 3 for N >= 2^20)",
    )
    args = parser.parse_args(argv)
    if args.rounds is not None and args.rounds < 1:
        parser.error(f"--rounds {args.rounds}: give at least 1")
    ks, ns = ((2, 8), (2**10, 2**16)) if args.quick else (KS, NS)
    print(machine_line())
    print(command_line(argv))
    print("median of interleaved rounds")
    print()
    print(
        "| K | N (float32) | numpy loop | numpy stack | numpy reduce | numpy prealloc "
        "| collsim ring | collsim / fastest numpy |"
    )
    print("|--:|--:|--:|--:|--:|--:|--:|--:|")
    for k in ks:
        for n in ns:
            if not fits(k, n):
                print(
                    f"| {k} | 2^{n.bit_length() - 1} | (left out: needs about "
                    f"{4 * k * n * 4 / 2**30:.1f} GiB) | | | | | |"
                )
                continue
            rounds = args.rounds or (3 if n >= 2**20 else 7)
            times = measure(k, n, rounds)
            fastest = min(times[name] for name in [*VARIANTS, "prealloc"])
            cells = " | ".join(_format(times[name]) for name in [*VARIANTS, "prealloc", "collsim"])
            print(f"| {k} | 2^{n.bit_length() - 1} | {cells} | {times['collsim'] / fastest:.1f}x |")


if __name__ == "__main__":
    main()
