"""collsim's numeric ring all-reduce against what a student would otherwise run on one
machine: ``torch.distributed`` all-reduce with the gloo backend, K processes on loopback.

Both are timed in this run, on this machine.  Skipped with a message when torch is not
installed (``pip install torch==2.13.0`` gives a CPU build here; an unpinned ``torch``
pulls a multi-GB CUDA build).

    python benchmarks/bench_gloo.py [--ranks 8] [--min-exp 10] [--max-exp 24]
"""

import argparse
import os
import sys
import time

import numpy as np

import collsim


def gloo_worker(rank, world, exps, repeats, port, queue):
    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    results = {}
    for e in exps:
        x = torch.ones(2**e, dtype=torch.float32)
        dist.all_reduce(x)  # warm-up
        best = float("inf")
        for _ in range(repeats):
            dist.barrier()
            t = time.perf_counter()
            dist.all_reduce(x)
            best = min(best, time.perf_counter() - t)
        results[e] = best
    if rank == 0:
        queue.put(results)
    dist.destroy_process_group()


def time_gloo(world, exps, repeats):
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = 29500 + os.getpid() % 1000
    procs = [ctx.Process(target=gloo_worker, args=(r, world, exps, repeats, port, queue))
             for r in range(world)]  # fmt: skip
    for p in procs:
        p.start()
    results = queue.get(timeout=600)
    for p in procs:
        p.join()
    return results


def time_collsim(world, e, repeats):
    cluster = collsim.Cluster(collsim.topology.ring(world, "100GB/s", "5us"))
    buffers = [np.ones(2**e, dtype=np.float32) for _ in range(world)]
    cluster.all_reduce(buffers, algorithm="ring")  # warm-up, as gloo gets one
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        cluster.all_reduce(buffers, algorithm="ring")
        best = min(best, time.perf_counter() - t)
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--min-exp", type=int, default=10)
    parser.add_argument("--max-exp", type=int, default=24)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    try:
        import torch  # noqa: F401
    except ImportError:
        print("skipped: torch is not installed (pip install torch==2.13.0 for a CPU build)")
        return 0
    exps = list(range(args.min_exp, args.max_exp + 1, 2))
    gloo = time_gloo(args.ranks, exps, args.repeats)
    print(f"| N (float32) | gloo, {args.ranks} processes | collsim ring, {args.ranks} ranks "
          "| collsim / gloo |")  # fmt: skip
    print("|---|---|---|---|")
    for e in exps:
        ours = time_collsim(args.ranks, e, args.repeats)
        print(f"| 2^{e} | {gloo[e] * 1e3:.2f} ms | {ours * 1e3:.2f} ms | {ours / gloo[e]:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
