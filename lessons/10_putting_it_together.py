# %% [markdown]
# # 10. Putting it together: the rank grid and the rules
# Lay the GPUs on a tp × dp × pp grid, check world = tp·pp·dp and global batch = micro·dp·accum, plan Megatron's 784-GPU error.
#
# Real training jobs combine all three: **tensor parallel** inside a layer (lesson 7),
# **pipeline parallel** across layers (lesson 8) and **data parallel** across copies of the
# model (lesson 2) — "3-D" or PTD-P parallelism (Narayanan et al. 2021). This lesson shows
# how the GPUs are arranged so that each kind of traffic lands on the right links, which
# equations the sizes must satisfy (Megatron-LM's argument checks, `validate_args` in
# megatron/training/arguments.py), and what goes wrong when they don't.
#
# As before: replace each `..._answer = None` with your prediction and run the check.

# %%
import math

from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

import collsim
from collsim import teach
from collsim.parallel.accounting import collective_bytes, mesh_dimension
from collsim.parallel.config import ParallelConfig
from collsim.parallel.mesh import train
from collsim.parallel.pipeline.runner import toy_batch, toy_model
from collsim.plan import plan
from collsim.runtime.group import RankGrid
from collsim.units import format_size, format_time
from collsim.viz.traffic import traffic_figure

# %% [markdown]
# ## The rank grid: TP innermost, then DP, then PP
#
# `world = tp · dp · pp` GPUs are laid on a grid `RankGrid((pp, dp, tp), ("pp", "dp",
# "tp"))` whose **last dimension varies fastest**. Rank `r` sits at
#
#     tp_rank = r mod tp,    dp_rank = (r div tp) mod dp,    pp_rank = r div (tp · dp)
#
# so ranks `0 … tp−1` form the first TP group. Numbered GPUs fill a machine before the next,
# so consecutive ranks share a machine: TP — four all-reduces per layer per micro-batch —
# gets NVLink; the DP gradient all-reduce (once per step) comes next; the pipeline's small
# point-to-point messages go outermost, across machines. This is Megatron-LM's order
# (Narayanan et al. 2021, §3).
#
# A 32-GPU example: 4 machines of 8 GPUs, `tp = 4`, `dp = 2`, `pp = 4`.

# %%
GPUS_PER_NODE = 8
big_mesh = RankGrid((4, 2, 4), ("pp", "dp", "tp"))
print(big_mesh)
for r in (0, 5, 13, 31):
    print(f"rank {r:>2}: {big_mesh.coords(r)}, machine {r // GPUS_PER_NODE};  "
          f"TP group {list(big_mesh.group('tp', r).ranks)},  "
          f"DP group {list(big_mesh.group('dp', r).ranks)},  "
          f"PP group {list(big_mesh.group('pp', r).ranks)}")


def grid_figure(mesh, gpus_per_node):
    """Each machine a row of GPUs; colour = pipeline stage, label = (tp, dp, pp) rank."""
    nodes = math.ceil(mesh.size / gpus_per_node)
    fig = Figure(figsize=(1.25 * gpus_per_node + 1, 1.1 * nodes + 1.2), layout="constrained")
    ax = fig.add_subplot()
    colours = ["#4C72B0", "#55A868", "#DD8452", "#8172B3", "#C44E52", "#937860"]
    for r in range(mesh.size):
        c = mesh.coords(r)
        node, slot = divmod(r, gpus_per_node)
        ax.add_patch(Rectangle((slot, -node), 0.92, 0.85, color=colours[c["pp"] % 6], alpha=0.85))
        ax.text(slot + 0.46, -node + 0.42, f"r{r}\ntp{c['tp']} dp{c['dp']}\npp{c['pp']}",
                ha="center", va="center", fontsize=9, color="white", fontweight="bold")
    for g in mesh.groups("tp"):  # outline each TP group
        first, last = g.ranks[0], g.ranks[-1]
        node = first // gpus_per_node
        ax.add_patch(Rectangle((first % gpus_per_node - 0.04, -node - 0.05),
                               last - first + 1, 0.95, fill=False, lw=2.5, ec="black"))
    for node in range(nodes):
        ax.text(-0.15, -node + 0.42, f"machine {node}", ha="right", va="center", fontsize=10)
    ax.set_xlim(-1.6, gpus_per_node + 0.1)
    ax.set_ylim(-nodes + 0.8, 1.0)
    ax.axis("off")
    shape = ", ".join(f"{n}={s}" for n, s in zip(mesh.names, mesh.shape))
    ax.set_title(f"RankGrid({shape}): black boxes = TP groups, colour = pipeline stage")
    return fig


teach.show(grid_figure(big_mesh, GPUS_PER_NODE), "10_rank_grid")

# %% [markdown]
# **Exercise 10.1 — write the mapping.** Write `coords(rank, pp, dp, tp)` that returns the
# tuple `(pp_rank, dp_rank, tp_rank)` of a global rank on this grid. The check compares it
# with `RankGrid.coords` on several grids, including 96 GPUs with `pp=4, dp=3, tp=8`.

# %%
coords_answer = (
    None  # your function: def coords(rank, pp, dp, tp): return (pp_rank, dp_rank, tp_rank)
)


def mesh_coords(rank, pp, dp, tp):
    c = RankGrid((pp, dp, tp), ("pp", "dp", "tp")).coords(rank)
    return (c["pp"], c["dp"], c["tp"])


cases = [(37, 4, 3, 8), (5, 2, 2, 2), (95, 4, 3, 8), (0, 1, 1, 1), (13, 2, 4, 2), (6, 1, 8, 1)]
teach.check_function(
    "10.1",
    coords_answer,
    mesh_coords,
    cases,
    given={"pp": "pipeline stages", "dp": "data-parallel replicas", "tp": "tensor-parallel ranks"},
    hint="tp varies fastest: tp_rank = rank % tp, then dp_rank = (rank // tp) % dp, ...",
)

# %% [markdown]
# ## All three at once, checked against one device
#
# The mesh trainer, `train(model, batches, ParallelConfig(...))`, runs a small transformer for
# one step on `dp · pp · tp` ranks: TP layers inside each stage, a 1F1B pipeline between
# stages, and the data-parallel gradient all-reduce across replicas, DDP-style. The config is
# one object with Megatron's names (`dp`, `tp`, `pp`, `microbatches`, `schedule`, ...). On two
# machines of four GPUs with `tp = dp = pp = 2`, where does each kind of traffic go?

# %%
topo = collsim.topology.hierarchical(2, 4)
model = toy_model(layers=4, hidden=8, heads=2)
x, target = toy_batch(batch=8)  # dp=2 replicas × m=2 micro-batches × 2 sequences
config = ParallelConfig(dp=2, pp=2, tp=2, microbatches=2)
three_d = train(model, [(x, target)], config, cluster=collsim.Cluster(topo, compute_rate=math.inf))
print(f"mesh {three_d.mesh}; gradients and parameters match one device: {three_d.match}")

per_node = topo.graph["gpus_per_node"]
by_dim = collective_bytes(three_d.run.trace, three_d.mesh.size, three_d.mesh)
crossing = {}  # dimension -> [bytes inside a machine, bytes between machines]
for t in three_d.run.trace.transfers:
    dim = mesh_dimension(three_d.mesh, t.src, t.dst)
    crossing.setdefault(dim, [0, 0])[t.src // per_node != t.dst // per_node] += t.nbytes
print(f"\n{'dimension, collective':<24}sent by rank 0")
for (dim, name), per_rank in sorted(by_dim.items()):
    print(f"{dim + ', ' + name:<24}{format_size(per_rank[0]):>10}")
print(f"\n{'dimension':<10}{'inside a machine':>18}{'between machines':>18}   (all ranks)")
for dim, (inside, between) in sorted(crossing.items()):
    print(f"{dim:<10}{format_size(inside):>18}{format_size(between):>18}")
teach.show(traffic_figure(topo, three_d.run, title="one 3-D step, tp=dp=pp=2"), "10_3d_traffic")

# %% [markdown]
# Only the pipeline's point-to-point messages cross the fabric; TP and DP stay on each
# machine's switch. (Each TP rank sends only its `1/tp` share of an activation to the next
# stage and the receivers all-gather it — Megatron's scatter/gather of pipeline messages,
# which is the small `tp, all_gather` entry.)
#
# ## The rules (Megatron-LM's argument checks)
#
# | rule | why |
# |---|---|
# | `world_size = tp · pp · dp` | every GPU has exactly one place on the grid |
# | `global_batch = micro_batch · dp · accumulation` | the optimizer step sees the same number of samples however it is split |
# | `hidden % tp == 0`, `heads % tp == 0` | TP splits columns and whole attention heads evenly |
# | `layers % pp == 0` (recommended) | otherwise the slowest stage sets the pace |
# | `tp ≤ GPUs per node` (recommended) | TP's all-reduces must stay on NVLink (lesson 7) |
#
# Given `world`, `tp` and `pp`, the grid fixes `dp = world / (tp·pp)`; given the global batch
# and the micro-batch (memory decides it), the rules fix the accumulation steps.
# `collsim.plan.plan` checks every rule at once and estimates memory and time.

# %%
report = plan(world_size=64, tp=4, pp=2, layers=24, hidden=2048, heads=16, seq=2048,
              global_batch=256, micro_batch=2)
d = report.derived
print(f"valid: {report.valid};  dp = {d['dp']},  accumulation = {d['accumulation']},  "
      f"global batch = {d['micro_batch']}·{d['dp']}·{d['accumulation']} = {d['global_batch']}")

# %% [markdown]
# **Exercise 10.2 — predict, then check.** Same job, but the micro-batch no longer fits in
# memory: `micro_batch = 1` with the global batch kept at 256, on 64 GPUs with `tp = 4`,
# `pp = 2`. How many gradient-accumulation steps does each optimizer step need now?

# %%
smaller = plan(world_size=64, tp=4, pp=2, layers=24, hidden=2048, heads=16, seq=2048,
               global_batch=256, micro_batch=1)

accumulation_answer = None  # your prediction: accumulation steps

teach.check("10.2", accumulation_answer, expected=smaller.derived["accumulation"],
            unit="accumulation steps",
            given=[teach.Quantity("dp", smaller.derived["dp"], "data-parallel replicas"),
                   teach.Quantity("tp·pp", 4 * 2, "GPUs per model replica"),
                   teach.Quantity("micro_batch", 1, "sample per pass"),
                   teach.Quantity("world", 64, "GPUs"), teach.Quantity("tp", 4, "TP ranks"),
                   teach.Quantity("pp", 2, "pipeline stages")],
            hint="dp = world / (tp·pp); then global_batch = micro_batch · dp · accumulation")

# %% [markdown]
# A framework stops at its first failed assertion; the planner lists every broken rule with
# the numbers and the nearest valid choices. Here three problems at once:

# %%
bad = plan(world_size=64, tp=16, pp=3, layers=24, hidden=2048, heads=24, seq=2048,
           global_batch=256, micro_batch=2)
for finding in bad.violations + bad.warnings:
    kind = "error" if finding in bad.violations else "warning"
    print(f"[{kind}] {finding.rule}: {finding.message}\n         hint: {finding.hint}")

# %% [markdown]
# ## Megatron's 784-GPU error
#
# A real failure: Megatron-LM started on 784 GPUs with `tp = 8`, `pp = 4` stops in its
# argument checks with `AssertionError: world size (784) is not divisible by tensor parallel
# size (8) times pipeline parallel size (4)` (recent versions add `times context parallel
# size (1)`), because `data_parallel_size = 784 / (8 * 4)` is not a whole number
# (`validate_args` in megatron/training/arguments.py). Let us plan it for a GPT-3-sized model
# (96 layers, hidden 12288, 96 heads, sequence 2048, global batch 1536 sequences; Brown et
# al. 2020), with ZeRO-1 so that memory is not the issue, as `examples/plan_784_gpus.py` does.

# %%
GPT3 = dict(layers=96, hidden=12288, heads=96, seq=2048)
megatron784 = plan(world_size=784, tp=8, pp=4, global_batch=1536, micro_batch=1, zero=1, **GPT3)
print(f"valid: {megatron784.valid};  broken rules: {[v.rule for v in megatron784.violations]}")

# %% [markdown]
# **Exercise 10.3 — predict, then check.** What data-parallel degree does `784 / (8·4)` give?

# %%
dp_answer = None  # your prediction

teach.check(
    "10.3",
    dp_answer,
    expected=megatron784.derived["dp"],
    unit="replicas",
    given=[
        teach.Quantity("tp·pp", 8 * 4, "GPUs per model replica"),
        teach.Quantity("world", 784, "GPUs"),
        teach.Quantity("tp", 8, "tensor-parallel ranks"),
        teach.Quantity("pp", 4, "pipeline stages"),
    ],
    alternatives=[
        teach.Alternative(
            "the whole number below",
            784 // 32,
            "784 / 32 is not a whole number, and that is "
            "Megatron's error: give the exact quotient.",
        )
    ],
    hint="784 divided by 8·4, exactly",
)

# %% [markdown]
# Megatron stops there. The planner's message says the same, and its hint lists what would
# work instead:

# %%
print(f"{megatron784.violations[0].message}\n\nhint: {megatron784.violations[0].hint}")

# %% [markdown]
# **Exercise 10.4 — predict, then check.** The hint offers two world sizes that are multiples
# of `tp·pp`, one on each side of 784 and equally far from it. Keeping `tp = 8`, `pp = 4`
# and the global batch, which one does the planner suggest? (The global batch must split
# too: `global_batch = micro · dp · accumulation` needs `dp` to divide it.)

# %%
fixed_world = megatron784.suggestions[0].config.world_size

world_size_answer = None  # your prediction: a number of GPUs

teach.check(
    "10.4",
    world_size_answer,
    expected=fixed_world,
    unit="GPUs",
    given=[teach.Quantity("tp·pp", 8 * 4, "GPUs per model replica")],
    alternatives=[
        teach.Alternative(
            "800, the multiple above 784",
            800,
            "With 800 GPUs dp = 25, which does not divide the global batch of 1536.",
        )
    ],
    hint="784 ± 16 are the two multiples of 32; which dp divides 1536?",
)

# %% [markdown]
# Why not keep 784 GPUs and change `tp` or `pp` instead? The planner explains, and lists
# the other ways out:

# %%
print("\n".join(megatron784.notes))
print("\nSuggestions, fewest changes first:")
for s in megatron784.suggestions:
    print(f"  {s.describe()}")
fixed = plan(megatron784.suggestions[0].config)
print(f"\nwith {fixed_world} GPUs: valid {fixed.valid}, dp = {fixed.derived['dp']}, "
      f"accumulation = {fixed.derived['accumulation']}, "
      f"{format_size(fixed.memory['total'])} per GPU, step ≈ {format_time(fixed.step_time_s)}")

# %% [markdown]
# ## Accelerate's batch formula, checked against Accelerate
#
# Hugging Face's Accelerate ND-parallel guide (2025) writes the effective batch as
# `micro_batch_size · gradient_accumulation_steps · dp_world_size` with
# `dp_world_size = (dp_shard_size · dp_replicate_size) / tp_size`.
#
# Accelerate's own `ParallelismConfig` defines `data_parallel_size = dp_replicate_size ·
# dp_shard_size` and `total_size = dp_replicate_size · dp_shard_size · tp_size · cp_size`:
# the TP (and CP) ranks are *extra* GPUs that receive the **same** batch. The data-parallel
# degree is `dp_replicate · dp_shard`, not divided by `tp` — the guide's formula divides by
# `tp` a second time. The planner follows Accelerate:
#
#     world = dp_replicate · dp_shard · tp · cp · pp,    global batch = micro · (dp_replicate · dp_shard) · accumulation
#
# Take 16 GPUs: HSDP with `dp_replicate = 2`, `dp_shard = 4`, and `tp = 2`; micro-batch 2,
# 4 accumulation steps.

# %%
acc = dict(dp_replicate=2, dp_shard=4, tp=2, micro_batch=2, accumulation=4)
hsdp = plan(world_size=16, layers=4, hidden=1024, heads=16, seq=1024, **acc)
print(hsdp.notes[0])

# which GPUs get different data? one batch shard per (dp_replicate, dp_shard) coordinate
mesh = RankGrid((2, 4, 2), ("dp_replicate", "dp_shard", "tp"))  # Accelerate's mesh order
shards = {(mesh.coords(r)["dp_replicate"], mesh.coords(r)["dp_shard"]) for r in range(mesh.size)}
print(f"\n{mesh.size} GPUs, {len(shards)} different batch shards "
      f"(each TP pair shares one: ranks {list(mesh.group('tp', 0).ranks)} see the same samples)")

h = hsdp.derived
guide_dp = h["dp_shard"] * h["dp_replicate"] / hsdp.config.tp
guide_batch = h["micro_batch"] * h["accumulation"] * guide_dp  # printed after Exercise 10.5

# %% [markdown]
# **Exercise 10.5 — predict, then check.** How many samples does one optimizer step of this
# 16-GPU job see?

# %%
samples_answer = None  # your prediction: samples per optimizer step

teach.check(
    "10.5",
    samples_answer,
    expected=hsdp.derived["global_batch"],
    unit="samples",
    given=[
        teach.Quantity("tp", 2, "tensor-parallel ranks"),
        teach.Quantity("accumulation", 4, "accumulation steps"),
        teach.Quantity("micro_batch", 2, "samples per pass"),
    ],
    alternatives=[
        teach.Alternative(
            "the Accelerate guide's formula, divided by tp",
            guide_batch,
            "Accelerate's ParallelismConfig gives the TP ranks "
            "the same batch: dp = dp_replicate · dp_shard, not "
            "divided by tp.",
        )
    ],
    hint="micro_batch · (dp_replicate · dp_shard) · accumulation",
)
print(f"valid: {hsdp.valid};  planner: dp = {hsdp.derived['dp']}, "
      f"global batch = {hsdp.derived['global_batch']}")
print(f"the guide's formula: dp_world_size = {guide_dp:g}, effective batch = {guide_batch:g}"
      f"  — {hsdp.derived['global_batch'] / guide_batch:g}× too small (a factor tp)")

# %% [markdown]
# ## Every strategy of Accelerate's ND-parallelism guide
#
# Hugging Face's Accelerate ND-parallel guide (2025) names nine strategies, each a choice of
# the four sizes of its `ParallelismConfig` (`dp_replicate_size`, `dp_shard_size`,
# `cp_size`, `tp_size`; the mesh is laid out in that order, `tp` innermost):
#
# | strategy | sizes that are > 1 | what it splits |
# |---|---|---|
# | DP | `dp_replicate` | the batch; every rank keeps the whole model (lesson 2) |
# | FSDP | `dp_shard` | the batch, and the model state sharded over the ranks (lesson 3) |
# | TP | `tp` | every layer's matrices, inside a node (lesson 7) |
# | CP | `cp` | the sequence: ring attention or all-to-all (lesson 9) |
# | HSDP | `dp_replicate`, `dp_shard` | FSDP inside a node, replicas across nodes (lesson 3) |
# | FSDP+TP | `dp_shard`, `tp` | sharded replicas of a tensor-parallel model |
# | FSDP+CP | `dp_shard`, `cp` | the FSDP shard group spans `dp_shard × cp` |
# | HSDP+TP | `dp_replicate`, `dp_shard`, `tp` | HSDP of a tensor-parallel model |
# | HSDP+TP+CP | all four | all of the above on one mesh |
#
# `collsim strategies` runs all nine on the same model, sequence length and two nodes of 4
# GPUs and prints one row each — whether it matches one device, peak memory per rank, bytes
# on the links inside and between nodes, step time and exposed communication — next to what
# the guide claims. `collsim verify cp` and `collsim verify nd` run one configuration of
# your choice and check it against one device. (They are terminal commands, not run here.)

# %% [markdown]
# ## Takeaways
#
# - The GPUs form a grid `(pp, dp, tp)` with **TP innermost**: TP groups share a machine's
#   NVLink, DP groups come next, and only the pipeline's point-to-point messages need to
#   cross between machines (Narayanan et al. 2021).
# - Megatron-LM's rules: **`world = tp·pp·dp`** and **`global_batch = micro·dp·accumulation`**;
#   `tp` divides the hidden size and the heads; `layers` divisible by `pp`; `tp ≤ GPUs per
#   node`. Fix `tp`, `pp` and the micro-batch, and `dp` and the accumulation follow.
# - 784 GPUs with `tp = 8`, `pp = 4` give a fractional `dp = 784/32`: the planner names
#   every broken rule and suggests whole configurations — here a world size whose `dp` also
#   divides the global batch.
# - Accelerate's data-parallel degree is `dp_replicate · dp_shard`; TP ranks share a batch.
#   The guide's `/ tp` counts the TP split twice and underestimates the effective batch by
#   a factor `tp`.
# - The guide's nine strategies (DP, FSDP, TP, CP, HSDP, FSDP+TP, FSDP+CP, HSDP+TP,
#   HSDP+TP+CP) are choices of these sizes; `collsim strategies` measures them side by side.
#
# Next: lesson 11 — what happens when the ranks of this grid stop agreeing, and the job hangs.
