"""The batch-64, dp=4 data-parallel example, run for real: 16 samples per rank.

The textbook recipe (mp_size = 1, batch = 64, dp_size = 4), as PyTorch's
DistributedDataParallel implements it (Li et al. 2020, "PyTorch Distributed: Experiences on
Accelerating Data Parallel Training")::

    GPU0: 16 samples ... GPU3: 16 samples        every GPU holds the whole model
    g_r = grad L_r                               each computes its local gradient
    g_global = g0 + g1 + g2 + g3                 all-reduce (sum)
    g_avg = g_global / 4                         divide by dp
    theta <- theta - lr * g_avg                  the same step on every GPU

This script trains a small MLP that way on a virtual cluster of 4 ranks and checks every
line of that against numpy on one device: each rank's forward really covers 16 rows, the
averaged gradient is the full-batch gradient, the replicas stay bitwise identical, and
each rank sends 2(K-1)/K·P·b bytes per step, the ring all-reduce's closed form.  Then it
turns on gradient bucketing with a slow compute rate, to show the all-reduce of the last
layers running while backward still computes the first ones.

Run it with ``python examples/dp_batch64.py``; the same from the command line
(with transformer blocks as the model)::

    collsim verify dp --dp 4 --batch 64
"""

import copy

import numpy as np

from collsim import Cluster, topology
from collsim.nn import GELU, SGD, Linear, Sequential, mse_loss
from collsim.parallel.data import train_data_parallel
from collsim.parallel.modules import LayerPass
from collsim.units import format_time

DP, BATCH, FEATURES, HIDDEN, STEPS = 4, 64, 16, 64, 3

rng = np.random.default_rng(4)
model = Sequential(
    Linear.init(FEATURES, HIDDEN, rng),
    GELU(),
    Linear.init(HIDDEN, HIDDEN, rng),
    GELU(),
    Linear.init(HIDDEN, FEATURES, rng),
)
batches = [
    (rng.uniform(-1, 1, (BATCH, FEATURES)), rng.uniform(-1, 1, (BATCH, FEATURES)))
    for _ in range(STEPS)
]
cluster = Cluster(topology.switch(DP, bandwidth="100GB/s", latency="5us"), compute_rate=1e12)
run = train_data_parallel(cluster, model, batches, dp=DP, optimizer=SGD(lr=0.1))

print(
    f"global batch {BATCH} = micro batch {run.micro_batch} × dp {run.dp} × accumulation "
    f"{run.accumulation}: each rank takes {BATCH // DP} samples"
)
first_pass = LayerPass("forward", "0 Linear")  # the record of the first layer's forward
first = next(c for c in run.result.trace.computes if c.rank == 0 and c.meta == first_pass)
rows = (first.end - first.start) * cluster.compute_rate / (2 * FEATURES * HIDDEN)
print(f"rank 0's first forward matmul covers {rows:.0f} rows (its FLOPs / (2·in·out))")

# the single-device oracle: the whole batch, one numpy model
reference, optimizer = copy.deepcopy(model), SGD(lr=0.1)
print("\nstep  loss (4 ranks)  loss (1 device)  max|g_avg - g|  max|θ_replica - θ_1 device|")
for s, (x, target) in enumerate(batches):
    y, ctx = reference.forward(x)
    loss, dy = mse_loss(y, target)
    grads = reference.backward(ctx, dy)[1]
    # the recipe by hand: each rank's local gradient, summed, divided by 4
    local = []
    for r in range(DP):
        rows_r = slice(r * BATCH // DP, (r + 1) * BATCH // DP)
        y_r, ctx_r = reference.forward(x[rows_r])
        local.append(reference.backward(ctx_r, mse_loss(y_r, target[rows_r])[1])[1])
    g_avg = {k: sum(g[k] for g in local) / DP for k in grads}
    assert all(np.allclose(g_avg[k], grads[k], rtol=1e-12, atol=1e-15) for k in grads)
    optimizer.step(reference.params, grads)
    step = run.steps[s]
    diff = max(float(np.max(np.abs(step["grads"][k] - grads[k]))) for k in grads)
    print(f"{s + 1:>4}  {step['loss']:<14.10f}  {float(loss):<15.10f}  {diff:<14.3g}", end="  ")
    if s == STEPS - 1:
        worst = max(
            float(np.max(np.abs(p[k] - reference.params[k]))) for p in run.replicas for k in grads
        )
        print(f"{worst:.3g}")
    else:
        print("(checked at the end)")
    assert diff < 1e-12

identical = all(np.array_equal(p[k], run.replicas[0][k]) for p in run.replicas for k in p)
print(f"\nthe 4 replicas are bitwise identical after {STEPS} steps: {identical}")
assert identical

P = sum(v.size for v in model.params.values())
formula = 2 * (DP - 1) / DP * P * 8 * STEPS
sent = run.bytes_by_collective["all_reduce"]
print(f"P = {P} parameters; all-reduce bytes sent per rank over {STEPS} steps: {sent}")
print(f"formula 2(K-1)/K·P·b·steps = 2·3/4·{P}·8·{STEPS} = {formula:.0f}")
assert all(b == formula for b in sent)

# bucketing: 2 KiB buckets (PyTorch DDP uses 25 MiB, for models a million times larger),
# on a cluster scaled down 1e5 times in compute (1 GFLOP/s) and bandwidth (1 GB/s) so the
# tiny model's backward and all-reduce take comparable time, as a real model's do
slow = Cluster(topology.switch(DP, bandwidth="1GB/s", latency="1us"), compute_rate=1e9)
one = train_data_parallel(slow, model, batches[:1], dp=DP)
many = train_data_parallel(slow, model, batches[:1], dp=DP, bucket_bytes="2KiB")
print("\none step at 1 GFLOP/s per rank, 1 GB/s and 1 us per link:")
for name, r in (("one 25 MiB bucket", one), ("2 KiB buckets", many)):
    o = r.overlap[0]
    print(
        f"  {name:<18} buckets {str(r.buckets):<19} step {format_time(r.time):>9}, "
        f"communication {format_time(o.comm_s):>9}, "
        f"exposed {format_time(o.exposed_s):>9}"
    )
assert many.overlap[0].exposed_s < one.overlap[0].exposed_s
assert many.steps[0]["grads"].keys() == one.steps[0]["grads"].keys()
