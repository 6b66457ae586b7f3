# %% [markdown]
# # 2. Data parallel and all-reduce
# The batch-64, dp=4 example: the averaged gradient equals one device's; gradient accumulation adds compute, not communication (Megatron-LM's batch rule).
#
# Lesson 1 showed that a large model's memory must be split. The simplest split, and the
# first choice whenever the model still fits on one GPU, is to split the **data**: every
# GPU keeps a full copy of the model and works on its own slice of the batch. The only
# thing the GPUs must then agree on is the gradient. This lesson runs that on a virtual
# cluster of 4 ranks with collsim's small numpy network kit (`collsim.nn`) and checks it
# against one device.
#
# As in every lesson: replace each `..._answer = None` with your prediction and run the
# check after it (left as `None`, the check prints the file and line to edit).

# %%
import copy

import numpy as np

import collsim
from collsim import teach, topology
from collsim.nn import GELU, SGD, Linear, Sequential, mse_loss
from collsim.parallel.data import resolve_batch, train_data_parallel
from collsim.units import format_size, format_time
from collsim.viz.utilization import time_unit, utilization_figure

# %% [markdown]
# ## The batch-64, dp=4 example
#
# The classic data-parallel example sets `dp_size = 4`, `batch = 64`, `mp_size = 1` (no
# model parallelism), the recipe PyTorch's DistributedDataParallel implements (Li et al.
# 2020, "PyTorch Distributed: Experiences on Accelerating Data Parallel Training"):
#
# 1. cut the batch into 4 parts of 16 samples; GPU $r$ takes part $r$;
# 2. each GPU, holding the whole model, computes its local gradient $g_r = \nabla_\theta L_r$,
#    where $L_r$ is the mean loss over its 16 samples;
# 3. an **all-reduce** (sum) gives every GPU $g_\text{global} = g_0 + g_1 + g_2 + g_3$;
# 4. divide by `dp_size`: $g_\text{avg} = g_\text{global} / 4$;
# 5. every GPU takes the same step $\theta \leftarrow \theta - \text{lr}\cdot g_\text{avg}$,
#    so the copies stay identical.
#
# Why does this equal training on one device? The full-batch loss is the mean over 64
# samples, which is the mean of the four 16-sample means, and the gradient of a mean is the
# mean of the gradients:
#
# $$\nabla \frac{1}{64}\sum_{i=1}^{64} \ell_i = \frac{1}{4}\sum_{r=0}^{3} \nabla
# \underbrace{\frac{1}{16}\sum_{i \in \text{part } r} \ell_i}_{L_r} = \frac{1}{4}\sum_r g_r$$
#
# First the single-device reference: a small MLP and one batch of 64 samples.

# %%
DP, BATCH, FEATURES, HIDDEN = 4, 64, 16, 64
rng = np.random.default_rng(4)
model = Sequential(Linear.init(FEATURES, HIDDEN, rng), GELU(), Linear.init(HIDDEN, HIDDEN, rng),
                   GELU(), Linear.init(HIDDEN, FEATURES, rng))
x = rng.uniform(-1, 1, (BATCH, FEATURES))
target = rng.uniform(-1, 1, (BATCH, FEATURES))


def gradient(model, x, target):
    """One device: forward, mean-squared-error loss, backward; {name: gradient}."""
    y, ctx = model.forward(x)
    loss, dy = mse_loss(y, target)  # dy is the gradient of the *mean* loss
    return model.backward(ctx, dy)[1]


def flat(grads):
    """All gradients as one vector (a fixed order, the same on every rank)."""
    return np.concatenate([grads[name].ravel() for name in sorted(grads)])


g_single = flat(gradient(model, x, target))
n_params = g_single.size
print(f"{n_params:,} parameters; single-device gradient norm {np.linalg.norm(g_single):.6g}")

# %% [markdown]
# Now the batch-64, dp=4 example by hand: four local gradients on 16 rows each, then a real all-reduce on a
# virtual cluster of 4 ranks on one switch. `cluster.all_reduce(buffers)` takes one array
# per rank and returns every rank's output (plus the bytes and the time it took).
#
# **Exercise 2.1.** Step 4 divides the all-reduced sum by 4. Suppose someone forgets it and
# steps with $g_\text{global}$ itself: by what factor is their gradient larger than the
# single-device one?

# %%
forgot_division_answer = None  # your prediction: |g_global| / |g_single|

# %%
cluster = collsim.Cluster(topology.switch(DP, bandwidth="100GB/s", latency="5us"))
per_rank = BATCH // DP
local = [flat(gradient(model, x[r * per_rank : (r + 1) * per_rank],
                       target[r * per_rank : (r + 1) * per_rank])) for r in range(DP)]
result = cluster.all_reduce(local, op="sum")
g_global = result.outputs[0]
g_avg = g_global / DP
teach.check("2.1", forgot_division_answer,
            expected=np.linalg.norm(g_global) / np.linalg.norm(g_single), unit="x",
            given=[teach.Quantity("dp", DP, "data-parallel ranks"),
                   teach.Quantity("B", BATCH, "samples in the batch"),
                   teach.Quantity("B/dp", BATCH // DP, "samples per rank")],
            hint="the all-reduce adds dp local gradients, each about as large as the mean one")
print(f"every rank got the same sum: {all(np.array_equal(o, g_global) for o in result.outputs)}")
print(f"max |g_avg - g_single| = {np.max(np.abs(g_avg - g_single)):.3g} (float64 rounding)")
print(f"all-reduce: {format_size(result.stats.bytes_sent[0])} sent per rank, "
      f"{format_time(result.time)} simulated")

# %% [markdown]
# (Lesson 4 explains those bytes: how a ring all-reduce moves them and why the number per
# rank barely depends on the number of GPUs.)
#
# ## The same as a training loop on the cluster
#
# `train_data_parallel` does all of that inside *rank programs*: every rank trains its own
# copy of the model on its rows, and the gradients are all-reduced with the average op, as
# PyTorch's DistributedDataParallel (DDP) does. It returns each rank's gradient and
# parameters, so we can compare them with one device taking the same SGD step.

# %%
run = train_data_parallel(cluster, model, [(x, target)], dp=DP, optimizer=SGD(lr=0.1))
print(f"global batch {BATCH} = micro-batch {run.micro_batch} x dp {run.dp} x "
      f"accumulation {run.accumulation}")
g_run = flat(run.steps[0]["grads"])
print(f"max |g_rank0 - g_single| = {np.max(np.abs(g_run - g_single)):.3g}")

reference = copy.deepcopy(model)
SGD(lr=0.1).step(reference.params, gradient(reference, x, target))
worst = max(np.max(np.abs(p[k] - reference.params[k])) for p in run.replicas for k in p)
same = all(np.array_equal(p[k], run.replicas[0][k]) for p in run.replicas for k in p)
print(f"after one step: max |theta_replica - theta_1_device| = {worst:.3g}; "
      f"the 4 replicas are bitwise identical: {same}")

# %% [markdown]
# The replicas are *bitwise* identical, not just close: the all-reduce hands every rank the
# very same sums, so every rank takes the very same step. Data parallelism never lets the
# copies drift apart; it only has to pay for the all-reduce every step.
#
# ## Gradient accumulation: global = micro · dp · accumulation
#
# Megatron-LM enforces this batch rule in its argument checks (`validate_args` in
# megatron/training/arguments.py; Narayanan et al. 2021):
#
# $$\text{global\_batch} = \text{micro\_batch} \cdot \text{dp} \cdot \text{accumulation}$$
#
# The micro-batch is what one GPU pushes through forward and backward at once, which sets
# its activation memory (lesson 1). If memory caps the micro-batch, each GPU runs several
# micro-batches one after another, **adds up** their gradients, and only then all-reduces
# and steps. The global batch, the number that matters for the optimizer, stays the same.
#
# **Exercise 2.2.** Write `accumulation_steps(global_batch, dp, micro_batch)`: how many
# micro-batches each GPU runs per optimizer step. The check compares it with collsim's
# `resolve_batch` on several configurations. One is the planner's repair of Megatron's
# 784-GPU error (lesson 10): 784 GPUs are not divisible by tp·pp = 8·4, 768 are, leaving
# dp = 768/(8·4); with a global batch of 1536 and micro-batch 1.

# %%
accumulation_steps_answer = None  # your function: def f(global_batch, dp, micro_batch): ...


# %%
def reference_accumulation(global_batch, dp, micro_batch):
    return resolve_batch(global_batch, dp, micro_batch=micro_batch)[1]


cases = [(64, 4, 16), (64, 4, 4), (64, 4, 1), (1536, 768 // (8 * 4), 1), (512, 8, 2), (96, 3, 8)]
teach.check_function("2.2", accumulation_steps_answer, reference_accumulation, cases,
                     unit="micro-batches",
                     given={"global_batch": "samples per optimizer step",
                            "dp": "data-parallel replicas", "micro_batch": "samples per pass"},
                     hint="global_batch = micro_batch · dp · accumulation, solved for accumulation")

# %% [markdown]
# A configuration that breaks the rule is refused with all four numbers and the choices
# that work:

# %%
try:
    resolve_batch(64, 4, micro_batch=3, accumulation=2)
except collsim.ConfigError as error:
    print(error)

# %% [markdown]
# Now run it: the same batch of 64 on dp = 4, but in micro-batches of 4, so each rank
# accumulates 4 micro-batches before the all-reduce (DDP's `no_sync`).
#
# **Exercise 2.3.** Each rank now runs 4 forward/backward passes per step instead of 1.
# Predict the bytes each rank sends per step with accumulation, divided by the bytes
# without it.

# %%
accumulation_bytes_answer = None  # your prediction: bytes (accumulation 4) / (accumulation 1)

# %%
accumulated = train_data_parallel(cluster, model, [(x, target)], dp=DP, micro_batch=4)
g_acc = flat(accumulated.steps[0]["grads"])
sent_one = run.bytes_by_collective["all_reduce"][0]
sent_acc = accumulated.bytes_by_collective["all_reduce"][0]
teach.check(
    "2.3",
    accumulation_bytes_answer,
    expected=sent_acc / sent_one,
    unit="x",
    given=[
        teach.Quantity("dp", DP, "data-parallel ranks"),
        teach.Quantity(
            "accumulation",
            accumulated.accumulation,
            "micro-batches a rank adds up before the all-reduce",
        ),
    ],
    hint="count the all-reduces per optimizer step, and the bytes of each",
)
print(f"global batch {BATCH} = micro-batch {accumulated.micro_batch} x dp {accumulated.dp} x "
      f"accumulation {accumulated.accumulation}")
print(f"max |g_accumulated - g_single| = {np.max(np.abs(g_acc - g_single)):.3g}")
print(f"all-reduce bytes per rank: {format_size(sent_one)} (accumulation 1), "
      f"{format_size(sent_acc)} (accumulation 4)")

# %% [markdown]
# ## Hiding the all-reduce behind backward
#
# Backward produces gradients from the last layer to the first. DDP does not wait for the
# whole gradient: it packs gradients into **buckets** (25 MiB by default) as they appear
# and starts each bucket's all-reduce at once, while backward computes the earlier layers.
# Only what is still in flight when backward ends delays the step.
#
# Our model is tiny, so the next cell scales the cluster down to match (1 GFLOP/s per
# rank, 1 GB/s links, 1 µs latency: compute and communication then take comparable
# time, as they do for a real model on real GPUs) and uses 2 KiB buckets. The picture
# shows each link's load over the step (dashed lines: where rank 0's forward and backward
# end). The coloured bands are the bucket all-reduces: the first starts as soon as the
# last layer's gradients exist, in the middle of backward; during forward the links have
# nothing to do.

# %%
slow_topology = topology.switch(DP, bandwidth="1GB/s", latency="1us")
slow = collsim.Cluster(slow_topology, compute_rate=1e9)
one_bucket = train_data_parallel(slow, model, [(x, target)], dp=DP)
buckets = train_data_parallel(slow, model, [(x, target)], dp=DP, bucket_bytes="2KiB")
spans = [c for c in buckets.result.trace.computes if c.rank == 0]
# each span carries a record of its layer pass (its label is only for display)
forward_end = max(c.end for c in spans if c.meta.kind == "forward")
backward_end = max(c.end for c in spans)
print(f"rank 0: forward 0 s .. {format_time(forward_end)}, backward {format_time(forward_end)}"
      f" .. {format_time(backward_end)}")
for name, r in (("one bucket", one_bucket), ("2 KiB buckets", buckets)):
    o = r.overlap[0]
    print(f"{name:<14} bucket sizes {r.buckets!s:<19} step {format_time(r.time):>9}, "
          f"all-reduce {format_time(o.comm_s):>9} of which exposed {format_time(o.exposed_s):>9}")
fig = utilization_figure(slow_topology, buckets.result,
                         title="data-parallel step on 4 ranks: gradient buckets on the links")
# mark rank 0's forward and backward (from the same trace) on the time axis
ax, scale = fig.axes[0], time_unit(buckets.time)[0]
for start, end, name in ((0, forward_end, "forward"), (forward_end, backward_end, "backward")):
    ax.axvline(end / scale, color="black", ls="--", lw=1.2)
    ax.text((start + end) / 2 / scale, 7.3, name, ha="center", va="center", fontsize=12,
            bbox={"fc": "white", "ec": "#999999"})
teach.show(fig, "02_dp_buckets_utilization")

# %% [markdown]
# ## Takeaways
#
# - Data parallelism: every GPU holds the whole model and a slice of the batch; an
#   **all-reduce** of the gradients, divided by dp, gives every GPU the full-batch gradient
#   (the batch-64, dp=4 example), equal to one device's up to float rounding, and the replicas stay bitwise
#   identical.
# - Forgetting the division by dp makes the step dp times too large: the all-reduce sums.
# - **global_batch = micro_batch · dp · accumulation** (Megatron-LM's batch rule).
#   Accumulation adds compute, not communication: the all-reduce still runs once per
#   optimizer step.
# - Bucketing lets the all-reduce of the last layers' gradients run while backward is
#   still computing the first layers; only the rest is exposed.
# - Data parallelism still needs the whole model on each GPU (lesson 1's 16 bytes per
#   parameter), and it pays one gradient all-reduce per step. Lesson 3 shards that model
#   state over the replicas (ZeRO, FSDP); lesson 4 opens the all-reduce up.
