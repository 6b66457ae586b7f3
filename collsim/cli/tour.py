"""``collsim tour``: five minutes from a point-to-point send to why ring all-reduce wins."""

import numpy as np

from .. import topology, units
from ..runtime import Cluster
from .common import Formatter
from .console import pause

__all__ = ["register", "run"]

DESCRIPTION = """\
A five-minute tour of collsim (the short version of lessons 2 and 4):

  1. four ranks exchange arrays point to point; every transfer is in the trace
  2. data parallel, the batch-64, dp=4 example: the averaged gradient is one device's
  3. a ring all-reduce on four ranks, step by step
  4. bytes each rank sends: ring 2(K-1)/K of the buffer whatever K is, naive (K-1)x at the root
  5. time on one switch: ring against naive, simulated and by the closed form

Pauses between parts when standard input is a terminal (--no-pause to run straight through;
with standard input closed or redirected it never waits).  Steps are numbered from 1, as in
`collsim step`: "step 1 of 6"; the initial state, before any transfer, is shown first.
"""


def register(subparsers):
    p = subparsers.add_parser("tour", help="a five-minute tour: start here",
                              description=DESCRIPTION, formatter_class=Formatter)  # fmt: skip
    p.add_argument("--no-pause", action="store_true", help="do not wait for Enter")
    p.set_defaults(func=run)


def _title(text):
    print(f"\n== {text} " + "=" * max(0, 74 - len(text)))


def _exchange(rank):
    # every rank sends its id to the right neighbour and receives from the left one
    right, left = (rank.id + 1) % rank.size, (rank.id - 1) % rank.size
    handle = yield rank.isend(right, np.full(4, float(rank.id)))
    got = yield rank.recv(left)
    yield rank.wait(handle)
    return float(got[0])


def _data_parallel():
    from ..nn import GELU, SGD, Linear, Sequential, mse_loss
    from ..parallel.data import train_data_parallel

    _title("2. data parallel: batch 64 on dp=4, 16 samples per rank")
    rng = np.random.default_rng(4)
    model = Sequential(Linear.init(16, 64, rng), GELU(), Linear.init(64, 16, rng))
    x, target = rng.uniform(-1, 1, (64, 16)), rng.uniform(-1, 1, (64, 16))
    cluster = Cluster(topology.switch(4, "100GB/s", "5us"))
    run = train_data_parallel(cluster, model, [(x, target)], dp=4, optimizer=SGD(lr=0.1))
    y, ctx = model.forward(x)  # one device, the whole batch
    grads = model.backward(ctx, mse_loss(y, target)[1])[1]
    diff = max(float(np.max(np.abs(run.steps[0]["grads"][k] - grads[k]))) for k in grads)
    params = sum(p.size for p in model.params.values())
    sent = run.result.stats.bytes_sent[0]
    print("each rank: forward and backward on its 16 rows, then all-reduce(sum) / 4")
    print(f"largest |averaged gradient - one-device gradient| = {diff:.2g}")
    formula = 2 * 3 / 4 * params * 8
    print(f"rank 0 sent {sent:,} B ({units.format_size(sent)}) for {params:,} float64 "
          f"gradients: 2(K-1)/K * P * 8 B = {formula:,.0f} B")  # fmt: skip


def run(args):
    _title("1. point to point: four ranks on a ring, 100 GB/s links, 5 us latency")
    cluster = Cluster(topology.bidirectional_ring(4, "100GB/s", "5us"))
    result = cluster.run(_exchange)
    print("each rank sends np.full(4, rank) to its right neighbour and receives from its left")
    print(f"values received: {result.returns}")
    for t in result.trace.transfers:
        print(f"  r{t.src} -> r{t.dst}  {units.format_size(t.nbytes)}  "
              f"{units.format_time(t.start)} .. "
              f"{units.format_time(t.end)}  via {' -> '.join(str(u) for u, _ in t.links)}"
              f" -> {t.links[-1][1]}")  # fmt: skip
    print(f"simulated time {units.format_time(result.time)} = 5 us latency + 32 B / 100 GB/s")
    pause(args)

    _data_parallel()
    pause(args)

    _title("3. ring all-reduce on 4 ranks: reduce-scatter, then all-gather")
    ring4 = Cluster(topology.ring(4, "100GB/s", "5us"))
    buffers = [np.full(8, float(r + 1)) for r in range(4)]
    out = ring4.all_reduce(buffers, algorithm="ring")
    for view in out.steps(include_initial=True):
        print(view)
        pause(args)
    print(f"every rank ends with {out.outputs[0][:4].tolist()}... = 1+2+3+4")

    _title("4. bytes each rank sends for a 64 MiB buffer")
    size = 64 * 2**20
    print(f"{'K':>5} {'ring, per rank':>16} {'fraction of S':>14} {'naive, at root':>16}")
    for k in (2, 4, 8, 16, 64):
        c = Cluster(topology.switch(k, "100GB/s", "5us"))
        ring = c.all_reduce(count=size // 4, dtype="float32", algorithm="ring")
        naive = c.all_reduce(count=size // 4, dtype="float32", algorithm="naive")
        per = ring.stats.bytes_sent[0]
        print(f"{k:>5} {units.format_size(per):>16} {per / size:>14.3f} "
              f"{units.format_size(max(naive.stats.bytes_sent)):>16}")  # fmt: skip
    print("ring: 2(K-1)/K -> 2 whatever K is; naive: the root sends (K-1) whole buffers")
    pause(args)

    _title("5. time on one switch (8 ranks, 100 GB/s, 5 us per link), 64 MiB")
    from ..collectives import analytical

    c8 = Cluster(topology.switch(8, "100GB/s", "5us"))
    for algorithm in ("ring", "halving_doubling", "tree", "naive"):
        sim = c8.all_reduce(count=size // 4, dtype="float32", algorithm=algorithm)
        form = analytical(c8, "all_reduce", size, algorithm)
        print(
            f"  {algorithm:>17}: {sim.stats.steps:>2} steps, simulated "
            f"{units.format_time(sim.time):>10}, closed form {units.format_time(form.time_s):>10}"
        )
    print("\nnext: collsim step all-reduce --ranks 4 | collsim run all-reduce --help | "
          "collsim plan --help")  # fmt: skip
    return 0
