# %% [markdown]
# # 6. Where scaling stops paying
# Compute 6·N·D/P against communication 2·N·b/BW: N cancels, and tokens per GPU, bandwidth, compute rate and gradient bytes decide.
#
# Think of data-parallel training as a hundred people revising one dictionary:
# writing is easy to split, but everyone's edits must reach everyone's copy, and if every
# change needs a meeting, the meetings outgrow the writing. Past some headcount, adding
# people makes the job slower. The number to estimate is **compute time ÷ communication
# time**.
#
# This lesson uses the planner (`collsim.plan`), whose compute and communication times are
# the closed forms of lessons 4 and 5, to find that ratio, see which quantities it depends
# on, and watch it decide where scaling stops.
#
# As before: replace each `..._answer = None` with your prediction and run the check.

# %%
import math

from collsim import teach
from collsim.plan import plan
from collsim.units import format_flops, format_rate, format_time
from collsim.viz.scaling import DEFAULT_JOB, scaling_figure, scaling_rows

# %% [markdown]
# ## Compute against communication
#
# Training costs about $6N$ FLOPs per token ($2N$ forward, $4N$ backward; Kaplan et al.
# 2020). If
# each GPU processes $D$ tokens per step at an achieved rate of $P$ FLOP/s, its compute
# takes
#
# $$T_\text{compute} = \frac{6 N D}{P}$$
#
# Then the gradient all-reduce: a ring sends $\frac{2(K-1)}{K}N b \approx 2Nb$ bytes per GPU
# (lesson 4), $b$ bytes per gradient element, over a link of bandwidth $\mathrm{BW}$:
#
# $$T_\text{comm} \approx \frac{2 N b}{\mathrm{BW}}$$
#
# The planner's example: a 7B model, 64 GPUs (8 nodes of 8), a global batch of 512
# sequences of 2048 tokens, bf16 gradients, pure data parallelism. (Whether the model
# fits is lesson 1's question; ZeRO would make it fit and send the same bytes. Here only
# time matters.)

# %%
job = dict(params="7B", world_size=64, global_batch=512, seq=2048)
report = plan(**job)
dp = report.communication["dp"]
tokens_per_gpu = report.scaling["tokens_per_dp_rank"]
print(f"D = {report.derived['global_batch']} x {job['seq']} / {report.derived['dp']} "
      f"= {tokens_per_gpu:,.0f} tokens per GPU per step")
print(f"P = {format_flops(report.config.compute_rate)} per GPU, "
      f"BW = {format_rate(dp['bandwidth'])} ({dp['link']}), b = {report.derived['element_bytes']} B")
print(f"compute per step:             {format_time(report.compute['time_s'])}")
print(f"gradient all-reduce per step: {format_time(dp['time_s'])} "
      f"({dp['ops']['gradient_all_reduce']['steps_per_call']} ring steps)")
print(f"compute / communication:      {report.compute['time_s'] / dp['time_s']:.4g}")

# %% [markdown]
# ## N cancels
#
# Divide one by the other:
#
# $$\frac{T_\text{compute}}{T_\text{comm}} = \frac{6ND/P}{2Nb/\mathrm{BW}}
# = \frac{3\,D\,\mathrm{BW}}{P\,b}$$
#
# The parameter count is gone: a bigger model computes more *and* communicates more, in the
# same proportion. The planner, with the model size changed and nothing else:

# %%
print(f"{'N':>6} {'compute':>10} {'all-reduce':>11} {'ratio':>7} {'3·D·BW/(P·b)':>13}")
for size in ("1.3B", "7B", "70B", "175B"):
    r = plan(**{**job, "params": size})
    t_comm = r.communication["dp"]["time_s"]
    print(f"{size:>6} {format_time(r.compute['time_s']):>10} {format_time(t_comm):>11} "
          f"{r.compute['time_s'] / t_comm:>7.4g} {r.scaling['compute_to_communication']:>13.4g}")

# %% [markdown]
# The ratio of the two times sits a little above $3D\,\mathrm{BW}/(Pb)$ because the ring
# sends $\frac{2(K-1)}{K}$ buffers, not quite 2. It barely moves with $N$: the small drift
# is the ring's latency term, $2(K-1)\alpha$, the one part of the all-reduce that does not
# grow with $N$.
#
# **Exercise 6.1.** Write `compute_to_comm(params, global_batch, seq, gpus, bandwidth,
# compute_rate, grad_bytes)`: the ratio $3D\,\mathrm{BW}/(Pb)$ for pure data
# parallelism on `gpus` GPUs. (Do you need every argument?) The check compares it with the
# planner's `scaling["compute_to_communication"]` on several jobs.

# %%
compute_to_comm_answer = None  # your function: def compute_to_comm(params, global_batch, seq, gpus, bandwidth, compute_rate, grad_bytes): ...


# %%
def planner_ratio(params, global_batch, seq, gpus, bandwidth, compute_rate, grad_bytes):
    r = plan(params=params, global_batch=global_batch, seq=seq, world_size=gpus,
             intra_bandwidth=bandwidth, inter_bandwidth=bandwidth, compute_rate=compute_rate,
             precision={2: "bf16", 4: "fp32"}[grad_bytes])
    return r.scaling["compute_to_communication"]


cases = [(7e9, 512, 2048, 64, 25e9, 150e12, 2), (70e9, 512, 2048, 64, 25e9, 150e12, 2),
         (1.3e9, 256, 1024, 32, 50e9, 400e12, 4), (175e9, 1536, 2048, 768, 25e9, 150e12, 2),
         (7e9, 64, 4096, 8, 300e9, 150e12, 2)]
teach.check_function("6.1", compute_to_comm_answer, planner_ratio, cases,
                     compare=lambda got, want: abs(got - want) <= 1e-9 * want, unit="x",
                     given={"global_batch": "sequences per step", "seq": "tokens per sequence",
                            "gpus": "GPUs", "grad_bytes": "bytes per gradient element"},
                     hint="D is the tokens per GPU, global_batch · seq / gpus; P and BW are "
                     "compute_rate and bandwidth")

# %% [markdown]
# ## Four knobs, not three
#
# Three quantities are usually named as deciding the ratio: the tokens per GPU $D$, the
# bandwidth $\mathrm{BW}$ and the gradient precision $b$. The formula has a fourth, the
# compute rate $P$, in the denominator: a faster GPU shortens the compute but not the
# all-reduce, so the same network hides less of it behind compute. Upgrading GPUs without
# upgrading the network *lowers* the ratio.
#
# **Exercise 6.2.** The job above moves to GPUs that compute twice as fast, on the same
# network. Predict the new compute/communication ratio divided by the old one.

# %%
faster_gpu_answer = None  # your prediction: ratio with 2x P / ratio before

# %%
base = report.scaling["compute_to_communication"]
changes = {
    "as above": {},
    "2x tokens per GPU (global batch 1024)": {"global_batch": 1024},
    "2x bandwidth (50 GB/s between nodes)": {"inter_bandwidth": "50GB/s"},
    "2x compute rate (300 TFLOP/s)": {"compute_rate": "300TFLOP/s"},
    "2x gradient bytes (fp32)": {"precision": "fp32"},
}
faster = plan(**job, compute_rate="300TFLOP/s").scaling["compute_to_communication"]
teach.check(
    "6.2",
    faster_gpu_answer,
    expected=faster / base,
    unit="x",
    given=[teach.Quantity("P'/P", 2, "times the compute rate")],
    alternatives=[
        teach.Alternative(
            "no change",
            1,
            "P is in the ratio's denominator: "
            "a faster GPU shortens the compute, not the "
            "all-reduce.",
        )
    ],
    hint="P appears once, in the denominator of 3·D·BW/(P·b)",
)
print(f"{'change':<40} {'ratio':>6} {'x before':>8} {'step':>9} {'efficiency':>10}")
for name, change in changes.items():
    s = plan(**{**job, **change}).scaling
    ratio = s["compute_to_communication"]
    print(f"{name:<40} {ratio:>6.4g} {ratio / base:>8.3g} {format_time(s['step_time_s']):>9} "
          f"{s['efficiency']:>10.1%}")

# %% [markdown]
# The faster GPU still finishes the step sooner (compare the step column), but a larger
# share of it is spent waiting for the network: its efficiency, the useful compute
# $6ND/P$ as a share of the step, falls. The same happens with the other three knobs turned
# the wrong way: fewer tokens per GPU, a slower network, wider gradients.
#
# ## Strong scaling: where it stops
#
# Keep the global batch fixed and add GPUs. Each GPU gets fewer tokens,
# $D = \frac{\text{global batch}\cdot s}{K}$, while its all-reduce stays near $2Nb$: the
# ratio falls like $1/K$. As long as it stays above 1, the all-reduce can hide behind
# compute (lesson 2's buckets); below 1, each added GPU adds mostly waiting.
#
# **Exercise 6.3.** With the job above (global batch 512 of 2048-token sequences,
# 150 TFLOP/s, 25 GB/s between nodes, bf16 gradients), at how many GPUs does
# $3D\,\mathrm{BW}/(Pb)$ fall to exactly 1? (The answer need not be a whole number.)

# %%
break_even_gpus_answer = None  # your prediction: GPUs where the ratio reaches 1

# %%
scalings = {gpus: plan(**{**job, "world_size": gpus}).scaling for gpus in (16, 64, 256, 1024)}
# past one node, ratio x GPUs is the same for every K: the ratio is 1 at K = that product
break_even = scalings[1024]["compute_to_communication"] * 1024
teach.check(
    "6.3",
    break_even_gpus_answer,
    expected=break_even,
    rel=1e-3,
    unit="GPUs",
    given=[
        teach.Quantity("b", 2, "bytes per bf16 gradient element"),
        teach.Quantity("s", 2048, "tokens per sequence"),
    ],
    alternatives=[
        teach.Alternative(
            "the nearest power of two",
            2 ** round(math.log2(break_even)),
            "The ratio is exactly 1 at a GPU count that need "
            "not be a whole number, nor a power of two.",
        )
    ],
    hint="D = 512 · 2048 / K tokens per GPU; solve 3·D·BW/(P·b) = 1 for K",
)
print(f"{'GPUs':>5} {'D (tokens)':>10} {'ratio':>7} {'ratio x GPUs':>12}")
for gpus, s in scalings.items():
    ratio = s["compute_to_communication"]
    print(f"{gpus:>5} {s['tokens_per_dp_rank']:>10,.0f} {ratio:>7.4g} {ratio * gpus:>12.6g}")

# %% [markdown]
# The picture sweeps the GPU count for collsim's default scaling job, the same job as
# above (printed first). Left: the time of each part of a step. Right: the share of the
# step each part takes, and the efficiency. The dotted line is where the data-parallel
# group outgrows one node and its bandwidth drops from the intra-node to the inter-node
# figure.

# %%
print("job:", DEFAULT_JOB)
for row in scaling_rows(DEFAULT_JOB, gpus=[8, 16, 256, 512]):
    print(f"{row['gpus']:>4} GPUs ({row['link']}): compute {format_time(row['compute_s']):>9}, "
          f"communication {format_time(row['comm_bandwidth_s'] + row['comm_latency_s']):>9}, "
          f"efficiency {row['efficiency']:.1%} if nothing overlaps, "
          f"{row['efficiency_overlapped']:.1%} if the all-reduce hides behind compute")
teach.show(scaling_figure(DEFAULT_JOB), "06_strong_scaling")

# %% [markdown]
# Inside one node the all-reduce is almost free. At the node boundary it jumps, because
# the bandwidth drops. Past that, the all-reduce time stays level while compute keeps
# halving, until they cross near the break-even point of exercise 6.3; beyond it, even
# perfect overlap cannot hide the all-reduce (the dashed efficiency line falls). The
# latency term grows with the $2(K-1)$ ring steps but stays small here.
#
# Weak scaling keeps $D$ fixed instead (`batch_per_gpu` sequences per GPU below): the
# ratio, and the efficiency after the node boundary, hold steady as GPUs are added, which
# is why large jobs grow the global batch with the GPU count, as far as the optimizer
# tolerates (scale the learning rate with the effective batch: Goyal et al. 2017).

# %%
teach.show(scaling_figure(DEFAULT_JOB, weak=True, batch_per_gpu=4), "06_weak_scaling")

# %% [markdown]
# ## Takeaways
#
# - Per step, compute is $6ND/P$ and the ring all-reduce about $2Nb/\mathrm{BW}$. Their
#   ratio, $3D\,\mathrm{BW}/(Pb)$, does **not** depend on the model size $N$.
# - Four quantities decide it: tokens per GPU $D$, bandwidth $\mathrm{BW}$, gradient bytes
#   $b$ (the three usually named), and the compute rate $P$: faster GPUs on the same
#   network lower the ratio.
# - Above 1, communication can hide behind compute; below 1, added GPUs mostly wait.
#   Strong scaling (fixed global batch) pushes $D$, and with it the ratio, down like $1/K$;
#   leaving a node drops $\mathrm{BW}$ in one jump.
# - Remedies follow from the formula: more tokens per GPU (larger batch or accumulation),
#   faster links (keep heavy traffic inside a node), fewer gradient bytes (bf16), and
#   overlap (buckets).
# - Next: lesson 7 splits the model itself (tensor parallelism), whose communication
#   does not hide so easily.
