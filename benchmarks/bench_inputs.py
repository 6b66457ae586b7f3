"""Wall time of the integer-valued inputs `collsim run` makes, against the usual numpy way.

Baseline, in the same process: ``rng.integers(-4, 4, size=n).astype(dtype)`` per rank
(bounded int64 draws, then a conversion), which is what a 64 MiB run used to spend most of
its time on.  collsim's generator shifts random bytes instead (values -4..3, exact in
every dtype).

    python benchmarks/bench_inputs.py            # K x N = 8 x 2^24 and 64 x 2^20
    python benchmarks/bench_inputs.py --quick    # 8 x 2^16 and 64 x 2^12, for a smoke test
"""

import argparse

import numpy as np
from bench_collectives import best_of  # the same timing rule as the other benchmarks
from bench_engine import command_line, machine_line

from collsim.collectives.executor import integer_inputs


def numpy_baseline(k, n, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(-4, 4, size=n).astype(dtype) for _ in range(k)]


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1],
    )
    parser.add_argument("--quick", action="store_true", help="sizes 2^8 times smaller")
    args = parser.parse_args(argv)
    shrink = 8 if args.quick else 0
    print(machine_line())
    print(command_line(argv))
    print("best of 3")
    print()
    print("| K | N | dtype | numpy integers() | collsim integer_inputs | ratio |")
    print("|---|---|---|---|---|---|")
    for k, n, dtype in [(8, 2**24, "float32"), (64, 2**20, "float32"), (8, 2**24, "int64")]:
        n >>= shrink
        base = best_of(3, lambda: numpy_baseline(k, n, dtype))  # noqa: B023
        ours = best_of(3, lambda: integer_inputs(k, n, dtype))  # noqa: B023
        print(
            f"| {k} | 2^{n.bit_length() - 1} | {dtype} | {base * 1e3:.1f} ms "
            f"| {ours * 1e3:.1f} ms | {ours / base:.2f}x |"
        )


if __name__ == "__main__":
    main()
