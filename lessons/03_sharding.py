# %% [markdown]
# # 3. Sharding the model state: ZeRO, FSDP and HSDP
# The 16 bytes per parameter split over the data-parallel ranks, measured: ZeRO-1/2/3, FSDP's gathers and prefetch, HSDP between nodes.
#
# Lesson 2's data parallelism keeps a whole copy of the model on every GPU: its parameters,
# its gradients and its optimizer state, 16 bytes per parameter (lesson 1). The copies are
# identical, so most of that memory is redundant. **ZeRO** (Rajbhandari et al. 2020, "ZeRO:
# Memory Optimizations Toward Training Trillion Parameter Models") removes the redundancy
# by *sharding* the model state over the `N` data-parallel ranks: each rank keeps `1/N` of
# it and the ranks exchange what they need with collectives. PyTorch's
# FullyShardedDataParallel (FSDP; the `torch.distributed.fsdp` documentation, and Zhao et
# al. 2023, "PyTorch FSDP") is ZeRO stage 3 with a schedule of its own; HSDP shards inside a
# node and replicates across nodes.
#
# Everything below runs on the virtual cluster: a small transformer is trained with Adam,
# every rank's shards and gathers are real arrays, every array a rank holds is charged to
# its memory at its training precision, and every run is checked against one device.
#
# As in every lesson: replace each `..._answer = None` with your prediction and run the
# check after it (left as `None`, the check prints the file and line to edit).

# %%
from matplotlib.figure import Figure

import collsim
from collsim import teach, topology
from collsim.collectives.formulas import closed_form
from collsim.network.memory import busiest, memory_peaks, memory_timeline
from collsim.nn import Adam
from collsim.parallel.config import ParallelConfig
from collsim.parallel.mesh import train
from collsim.parallel.pipeline.runner import toy_batch, toy_model
from collsim.plan.memory import model_state_bytes
from collsim.units import format_size, format_time, parse_size
from collsim.viz.memory_timeline import memory_timeline_figure
from collsim.viz.utilization import time_unit

# %% [markdown]
# ## 16 bytes per parameter, and what sharding leaves of them
#
# Mixed-precision Adam keeps, for each of the model's $\Psi$ parameters (the ZeRO paper's
# notation, section 3.1 and Figure 1):
#
# | what | precision | bytes per parameter | ZeRO shards it from stage |
# |---|---|---|---|
# | parameters used in forward and backward | bf16 | 2 | 3 |
# | gradients | bf16 | 2 | 2 |
# | fp32 master weights, Adam's $m$ and $v$ (the optimizer state, $K = 12$) | fp32 | 12 | 1 |
#
# so on each of the `N` data-parallel ranks
#
# | stage | each rank keeps | model state per rank |
# |---|---|---|
# | 0 (DDP) | everything | $16\Psi$ |
# | 1 | $1/N$ of the optimizer state | $4\Psi + 12\Psi/N$ |
# | 2 | ... and of the gradients | $2\Psi + 14\Psi/N$ |
# | 3 (FSDP) | ... and of the parameters | $16\Psi/N$ |
#
# The 7B memory example: $7 \times 10^9$ parameters need $112 \times 10^9$ bytes of model
# state, more than an 80 GiB GPU holds. `collsim.plan.memory.model_state_bytes` is the
# planner's formula (the same one lesson 1's planner used); here it is for 8 GPUs, and then
# for the ZeRO paper's own Figure 1 example, $\Psi = 7.5 \times 10^9$ on $N = 64$ GPUs,
# for which the paper gives 120, 31.4, 16.6 and 1.9 (in $10^9$ bytes).

# %%
PSI_7B, GPUS = 7e9, 8
GPU_MEMORY = parse_size("80GiB")
whole = sum(model_state_bytes(PSI_7B, zero=0, shard_degree=1))
print(f"7e9 parameters x 16 B = {whole:,.0f} B = {format_size(whole)}")
print(f"the 7B model on {GPUS} data-parallel GPUs (one GPU holds {format_size(GPU_MEMORY)}):")
for stage in range(4):
    params, grads, optimizer = model_state_bytes(PSI_7B, zero=stage, shard_degree=GPUS)
    state = params + grads + optimizer
    print(f"  ZeRO-{stage}: {format_size(params):>10} + {format_size(grads):>10} + "
          f"{format_size(optimizer):>10} = {format_size(state):>10} per GPU "
          f"({state / PSI_7B:5.2f} B per parameter), fits: {state <= GPU_MEMORY}")

PSI_FIGURE_1, GPUS_FIGURE_1 = 7.5e9, 64
print(f"\nthe ZeRO paper's Figure 1: Ψ = 7.5e9 parameters on {GPUS_FIGURE_1} GPUs")
for stage in range(4):
    state = sum(model_state_bytes(PSI_FIGURE_1, zero=stage, shard_degree=GPUS_FIGURE_1))
    print(f"  ZeRO-{stage}: {state:>17,.0f} B = {state / 1e9:5.3g} x 10^9 B ({format_size(state)})")

# %% [markdown]
# ## What each stage shards, measured
#
# Now for real: a toy transformer of 6 blocks (`toy_model`), a batch of 8 sequences, data
# parallel over `N = 4` ranks with one Adam step, `ParallelConfig(dp=4, zero=stage)` for
# stages 0 to 3. Each rank registers every array it holds with its category; the peaks are
# read from the run (`memory_peaks`), and `busiest` picks the rank with the largest total.
# (The numerics run in float64 so that the check against one device is exact; memory is
# charged at the training precisions above, bf16 and fp32.)

# %%
DP, LAYERS, HIDDEN = 4, 6, 32
model = toy_model(layers=LAYERS, hidden=HIDDEN, heads=2)
batch = toy_batch(batch=8, hidden=HIDDEN)
PSI = sum(p.size for p in model.params.values())
UNIT_PSI = PSI // LAYERS  # parameters of one block, FSDP's wrapping unit
print(f"Ψ = {PSI:,} parameters, {UNIT_PSI:,} per block")

runs = {}
for stage in range(4):
    config = ParallelConfig(dp=DP, zero=stage)
    runs[stage] = train(model, [batch], config, optimizer=Adam(lr=1e-2))


def model_state(peak):
    """Parameters + gradients + optimizer state, bytes (the rank's own, not what it gathers)."""
    held = peak.to_dict()
    return held["params"] + held["grads"] + held["optimizer"]


FORMULAS = {0: "16Ψ", 1: "4Ψ + 12Ψ/N", 2: "2Ψ + 14Ψ/N", 3: "16Ψ/N"}
print(f"\nbusiest rank of {DP}, peak bytes per category (model state = params + grads + optimizer)")
print(f"{'stage':<7}{'params':>11}{'grads':>11}{'optimizer':>11}{'model state':>13}  "
      f"{'formula':<12}{'formula value':>13}{'gathered':>11}  match")
for stage, run in runs.items():
    peak = busiest(memory_peaks(run.trace, run.mesh.size))
    held = peak.to_dict()
    formula = sum(model_state_bytes(PSI, zero=stage, shard_degree=DP))
    print(f"ZeRO-{stage}{format_size(held['params']):>12}{format_size(held['grads']):>11}"
          f"{format_size(held['optimizer']):>11}{format_size(model_state(peak)):>13}  "
          f"{FORMULAS[stage]:<12}{format_size(formula):>13}"
          f"{format_size(held['gathered_params']):>11}  {run.match}")
    assert model_state(peak) == formula  # measured = the ZeRO paper's formula, to the byte
print(f"\none block in bf16: 2 × {UNIT_PSI:,} = {format_size(2 * UNIT_PSI)}")

# %% [markdown]
# The measured model state equals the formula to the byte at every stage, and every run's
# parameters after the Adam step equal one device's (`match`). Stage 3 holds one more thing:
# the **gathered parameters** of the block it is computing, all-gathered just before the
# block's forward (and again before its backward) and freed right after: one block, 2 bytes
# per parameter of it. That is the price of sharding the parameters: at any moment a rank
# needs one whole unit to compute with.
#
# **Exercise 3.1 — write the formula.** Write `model_state_per_rank(stage, n, psi)`: the
# bytes of model state (parameters + gradients + optimizer state, not the gathered unit)
# that each of `n` data-parallel ranks keeps with ZeRO stage `stage` for a model of `psi`
# parameters under mixed-precision Adam. The check *runs* the trainer for the toy model's
# cases (other `n` too) and uses the planner for the 7B model on 8 and 64 GPUs.

# %%
model_state_per_rank_answer = None  # your function: def f(stage, n, psi): return bytes


def measured_model_state(stage, n, psi):
    if psi != PSI:  # the 7B model: the planner's formula
        return sum(model_state_bytes(psi, zero=stage, shard_degree=n))
    run = train(model, [batch], ParallelConfig(dp=n, zero=stage), optimizer=Adam(lr=1e-2))
    return model_state(busiest(memory_peaks(run.trace, run.mesh.size)))


def same_bytes(got, want):
    return abs(got - want) <= 1e-9 * abs(want)


cases = [(0, 4, PSI), (1, 4, PSI), (2, 4, PSI), (3, 4, PSI), (1, 2, PSI), (2, 8, PSI),
         (3, 8, PSI), (3, 8, PSI_7B), (1, 64, PSI_7B), (2, 64, PSI_7B)]
teach.check_function("3.1", model_state_per_rank_answer, measured_model_state, cases,
                     compare=same_bytes, unit="B",
                     given={"n": "data-parallel ranks", "psi": "parameters"},
                     hint="16Ψ at stage 0; stage 1 shards the 12Ψ of optimizer state over n, "
                     "stage 2 the 2Ψ of gradients too, stage 3 the 2Ψ of parameters too")

# %% [markdown]
# ## The bytes: ZeRO-3 sends 1.5× what data parallel sends
#
# Sharding is paid for in communication. A ring **all-reduce** is a reduce-scatter followed
# by an all-gather (lesson 4 opens it up), each sending $(N-1)/N \cdot \Psi b$ bytes per rank,
# so plain data parallel sends $2(N-1)/N \cdot \Psi b$ per step. Stages 1 and 2 send exactly
# that too: they reduce-scatter the gradients (each rank needs only its shard to update)
# and all-gather the updated parameters. Stage 3 all-gathers every unit's parameters
# **twice** (before its forward and again before its backward, since they were freed in
# between) and reduce-scatters its gradients once: $3(N-1)/N \cdot \Psi b$, 1.5× more.
#
# `run.bytes_by_group[("dp", collective)]` is the bytes each rank sent along the
# data-parallel dimension, read from the trace. The bytes count the arrays that moved, here
# float64 ($b = 8$ bytes per element); a real bf16 run sends a quarter of it, in the same
# ratios. `closed_form` is the α–β model's byte count for a ring of `N`.

# %%
b = batch[0].dtype.itemsize  # bytes per element the numerics move (float64)
ring = {name: closed_form(name, "ring", DP, PSI * b, alpha=0.0, beta=1.0).bytes_per_rank
        for name in ("all_reduce", "reduce_scatter", "all_gather")}
expected = {0: ring["all_reduce"], 1: ring["reduce_scatter"] + ring["all_gather"],
            2: ring["reduce_scatter"] + ring["all_gather"],
            3: ring["reduce_scatter"] + 2 * ring["all_gather"]}
print(f"bytes rank 0 sends in one step (b = {b} B per element, Ψ·b = {format_size(PSI * b)})")
for stage, run in runs.items():
    sent = {name: per_rank[0] for (dim, name), per_rank in run.bytes_by_group.items()}
    total = sum(sent.values())
    parts = ", ".join(f"{name} {format_size(n)}" for name, n in sorted(sent.items()))
    print(f"ZeRO-{stage}: {format_size(total):>10} (closed form {format_size(expected[stage]):>10})"
          f" = {total / runs[0].bytes_by_group[('dp', 'all_reduce')][0]:.2f}× DDP:  {parts}")
    assert total == expected[stage]

# %% [markdown]
# **Exercise 3.2 — predict, then check.** How many all-gathers does rank 0 run in one
# ZeRO-3 step of this 6-block model (FSDP's default, each block its own unit, freed after
# its forward)? The check counts the distinct all-gather calls in the trace.

# %%
all_gathers_answer = None  # your prediction: all-gather calls per step

# %%
calls = {(t.tag.group, t.tag.call) for t in runs[3].trace.transfers
         if t.src == 0 and t.tag.collective == "all_gather"}
teach.check(
    "3.2",
    all_gathers_answer,
    expected=len(calls),
    unit="all-gathers",
    given=[
        teach.Quantity("blocks", LAYERS, "blocks, each its own unit"),
        teach.Quantity("N", DP, "data-parallel ranks"),
    ],
    alternatives=[
        teach.Alternative(
            "one all-gather per block",
            LAYERS,
            "ZeRO-3 frees a unit after its forward, so its backward gathers it again.",
        )
    ],
    hint="each unit is gathered before its forward, freed, and gathered again before its backward",
)

# %% [markdown]
# (PyTorch FSDP's `reshard_after_forward=False`, the `SHARD_GRAD_OP` strategy, keeps each
# unit gathered from its forward to its backward: half the all-gathers, ZeRO-2's bytes, and
# the gathered units stay in memory. `ParallelConfig(reshard_after_forward=False)` runs it.)
#
# ## FSDP over time: the gathers, and prefetch
#
# Which memory a rank holds, and when, is easiest to see on a timeline. On a cluster where
# communication and compute take time (4 ranks on a 10 GB/s switch, 1 GFLOP/s of compute
# each, so that this toy model's gathers and its compute take comparable time, as a real
# model's do on real GPUs), FSDP's step is a sequence of *gather a unit, compute with it,
# free it*. Without prefetch each all-gather starts only when its unit is needed, and the
# rank waits for it. With prefetch (PyTorch's `forward_prefetch=True` and
# `backward_prefetch=BackwardPrefetch.BACKWARD_PRE`) the next unit's all-gather runs on the
# communication stream while the current unit computes: less waiting, but **two** units are
# gathered at once. (`t_f=0`: the passes cost only their FLOPs at the cluster's rate.)
#
# The pictures stack what rank 0 holds: its shards at the bottom (they stay all step), then
# the activations saved for backward, the gathered unit and the reduce-scatter buffers; the
# strip on top marks the collectives.

# %%
switch4 = topology.switch(DP, "10GB/s", "5us")
fsdp = {}
for prefetch in ("none", "both"):
    cluster = collsim.Cluster(switch4, compute_rate="1GFLOP/s")
    config = ParallelConfig(dp=DP, zero=3, prefetch=prefetch, t_f=0)
    fsdp[prefetch] = train(model, [batch], config, cluster=cluster, optimizer=Adam(lr=1e-2))
unit_bytes = 2 * UNIT_PSI
for prefetch, run in fsdp.items():
    gathered = busiest(memory_peaks(run.trace, run.mesh.size)).by_category["gathered_params"]
    print(f"prefetch={prefetch:<5} step {format_time(run.time):>9}; rank 0 communicates "
          f"{format_time(run.overlap[0].comm_s):>9}, exposed {format_time(run.overlap[0].exposed_s):>9};"
          f" gathered peak {format_size(gathered)} = {gathered / unit_bytes:g} block(s); "
          f"match {run.match}")
longest = max(run.time for run in fsdp.values())  # one time axis for both pictures
for prefetch, how in (("none", "without"), ("both", "with")):
    title = f"FSDP on 4 ranks {how} prefetch: rank 0's memory over the step"
    fig = memory_timeline_figure(fsdp[prefetch].trace, ranks=[0], title=title,
                                 window=(0, longest))
    # mark where this run's step ends (the picture's time axis is in time_unit's unit)
    scale, ax = time_unit(longest)[0], fig.axes[0]
    ax.axvline(fsdp[prefetch].time / scale, color="black", ls="--", lw=1.2)
    ax.annotate("step ends", (fsdp[prefetch].time / scale, 0.3), xycoords=("data", "axes fraction"),
                xytext=(-6, 0), textcoords="offset points", ha="right", fontsize=10,
                bbox={"fc": "white", "ec": "#999999"})
    teach.show(fig, f"03_fsdp_memory_timeline_prefetch_{prefetch}")

# %% [markdown]
# The shards (parameters, gradients and the optimizer state, the bottom three layers) hold
# most of the memory all step long; what changes is thinner. Below, only the gathered
# parameters of rank 0, in units of one block, for both runs, with the all-gathers that
# bring them:

# %%
fig = Figure(figsize=(10, 4.2), layout="constrained")
axes = fig.subplots(2, 1, sharex=True, sharey=True)
for ax, (prefetch, run) in zip(axes, fsdp.items()):
    points = memory_timeline(run.trace, 0)
    times = [0.0] + [p.time * 1e3 for p in points]
    units = [0] + [p.by_category["gathered_params"] / unit_bytes for p in points]
    ax.step(times, units, where="post", color="#2A6F97", lw=2)
    ax.fill_between(times, units, step="post", color="#64B5CD", alpha=0.5)
    for t in run.trace.transfers:
        if t.src == 0 and t.tag.collective == "all_gather":
            ax.axvspan(t.start * 1e3, t.end * 1e3, ymin=0.92, ymax=1.0, color="#2A6F97", lw=0)
    ax.set_ylim(0, 2.6)
    ax.set_yticks([0, 1, 2])
    ax.set_ylabel("blocks gathered")
    ax.set_title(f"prefetch={prefetch!r}: step {format_time(run.time)}, exposed communication "
                 f"{format_time(run.overlap[0].exposed_s)} (bars on top: rank 0's all-gathers)",
                 fontsize=11, loc="left")
axes[-1].set_xlabel("simulated time (ms)")
fig.suptitle("FSDP, rank 0: gathered parameters without and with prefetch", fontweight="bold")
teach.show(fig, "03_fsdp_gathered_units")

# %% [markdown]
# Prefetch trades memory for time: one more unit gathered at once, less communication left
# exposed. FSDP's `limit_all_gathers` (here `max_inflight_gathers`, default 2) caps how far
# ahead it may gather, so the extra memory stays one unit.
#
# ## HSDP: shard inside a node, replicate across nodes
#
# Within a node GPUs talk over NVLink (hundreds of GB/s); between nodes over a NIC, several
# times slower. Full sharding over all the GPUs of several nodes puts the slow links inside
# every all-gather and reduce-scatter ring, and a ring runs at the pace of its slowest link. **HSDP** (FSDP's `HYBRID_SHARD`; Accelerate's
# ND-parallel guide calls the two dimensions `dp_shard_size` and `dp_replicate_size`) shards
# the model over the GPUs of one node and keeps one replica of that sharded model per node:
# the gathers and reduce-scatters stay inside the node, and only each shard's gradient
# **all-reduce** across the replicas crosses between nodes, once per step.
#
# Two nodes of 4 GPUs (`topology.hierarchical(2, 4)`: 900 GB/s inside a node, 50 GB/s per
# NIC), 8 ranks: FSDP over all 8, against HSDP with `dp_replicate=2` (one replica per node)
# and `dp_shard=4`. Bytes between nodes are the transfers whose two ends sit in different
# nodes (rank `r` is in node `r // 4`).
#
# **Exercise 3.3 — predict, then check.** In the HSDP run (`dp_replicate = 2` replicas of
# `dp_shard = 4` shards, the toy model's Ψ printed above, `b = 8` bytes per element), how
# many bytes cross between the two nodes in the step, all 8 ranks together? Each rank
# all-reduces its shard of the gradient (Ψ/4 elements) with its replica on the other node,
# by a ring all-reduce of 2 ranks; the gathers and reduce-scatters stay inside the nodes.

# %%
hsdp_inter_node_answer = None  # your prediction: bytes between nodes, all 8 ranks together

# %%
NODES, PER_NODE = 2, 4
two_nodes = topology.hierarchical(NODES, PER_NODE)
layouts = {"FSDP, shard over 8": ParallelConfig(dp=8, zero=3, t_f=0),
           "HSDP, 2 replicas x 4 shards": ParallelConfig(dp=8, zero=3, dp_replicate=2, t_f=0)}
hsdp_runs = {name: train(model, [batch], config, cluster=collsim.Cluster(two_nodes),
                         optimizer=Adam(lr=1e-2)) for name, config in layouts.items()}


def inter_node_bytes(run):
    return sum(t.nbytes for t in run.trace.transfers if t.src // PER_NODE != t.dst // PER_NODE)


hsdp = hsdp_runs["HSDP, 2 replicas x 4 shards"]
teach.check(
    "3.3",
    hsdp_inter_node_answer,
    expected=inter_node_bytes(hsdp),
    unit="B",
    given=[
        teach.Quantity("ranks", NODES * PER_NODE, "ranks in all"),
        teach.Quantity("b", b, "bytes per element"),
        teach.Quantity("Ψ", PSI, "parameters"),
        teach.Quantity("dp_shard", PER_NODE, "shards of the model"),
    ],
    hint="each rank sends 2(2-1)/2 · (Ψ/4) · b bytes in its 2-rank ring all-reduce, "
    "all of it to the other node; then add up the 8 ranks",
)
print(f"{'':<29}{'between nodes':>14}{'all bytes':>12}{'model state/rank':>18}{'step':>10}  match")
for name, run in hsdp_runs.items():
    state = model_state(busiest(memory_peaks(run.trace, run.mesh.size)))
    total = sum(t.nbytes for t in run.trace.transfers)
    print(f"{name:<29}{format_size(inter_node_bytes(run)):>14}{format_size(total):>12}"
          f"{format_size(state):>18}{format_time(run.time):>10}  {run.match}")
print("\nHSDP bytes per rank by mesh dimension:")
for (dim, name), per_rank in sorted(hsdp.bytes_by_group.items()):
    print(f"  {dim:<13}{name:<15}{format_size(per_rank[0]):>10}")

# %% [markdown]
# HSDP sends a fraction of FSDP's bytes between nodes, and its step is faster here, but each
# rank keeps twice the model state: shards of 1/4 of the model instead of 1/8. HSDP wins
# when the model state of 1/(GPUs per node) still fits and the links between nodes are the
# bottleneck; when memory is what limits, shard over more GPUs.

# %% [markdown]
# ## Takeaways
#
# - Mixed-precision Adam keeps **16 bytes per parameter**: 2 (bf16 parameters) + 2 (bf16
#   gradients) + 12 (fp32 master weights, Adam's m and v). The 7B memory example needs
#   $112 \times 10^9$ bytes, more than one 80 GiB GPU.
# - ZeRO shards it over the `N` data-parallel ranks: **16Ψ → 4Ψ + 12Ψ/N (stage 1) →
#   2Ψ + 14Ψ/N (stage 2) → 16Ψ/N (stage 3)**, plus, with stage 3, the unit being computed
#   (Rajbhandari et al. 2020). collsim measures exactly these bytes.
# - Stages 1 and 2 send what data parallel sends, $2(N-1)/N \cdot \Psi b$ per rank; stage 3
#   (FSDP) all-gathers each unit twice and reduce-scatters once: $3(N-1)/N \cdot \Psi b$,
#   **1.5×**.
# - FSDP's prefetch gathers the next unit while the current one computes: less exposed
#   communication, one more unit in memory.
# - **HSDP** shards inside a node and replicates across nodes: only the shards' gradient
#   all-reduce crosses the slow links, for `dp_shard`-fold shards instead of the whole
#   cluster's.
# - Next: lesson 4 opens the ring all-reduce, reduce-scatter and all-gather that all of this
#   is built on, step by step.
