# %% [markdown]
# # 7. Tensor parallel: splitting one layer across GPUs
# Column and row splits, Megatron's MLP with one all-reduce each way, and why TP stays inside a node.
#
# Data parallelism copies the whole model to every GPU. When one layer is too big for that,
# **tensor parallelism (TP)** splits each weight matrix over `t` GPUs. Every GPU then sees
# the *whole* batch but holds only `1/t` of the parameters, so the GPUs must talk *during*
# the forward and backward passes, not only once per step (Shoeybi et al. 2019,
# Megatron-LM).
#
# The model-parallel twin of lesson 2's batch-64, dp=4 example: `mp_size = 4`, batch 64, a
# fully connected layer `Y = X·W`.
#
# As before: replace each `..._answer = None` with your prediction and run the check.

# %%
import re

import numpy as np

import collsim
from collsim import teach
from collsim.collectives.formulas import closed_form
from collsim.collectives.records import CollectiveStep
from collsim.nn import GELU, MLP, Linear
from collsim.parallel.accounting import collective_bytes
from collsim.parallel.tensor import (
    ColumnParallelLinear,
    ParallelMLP,
    RowParallelLinear,
    split_along,
)
from collsim.runtime.group import Group, RankGrid
from collsim.topology import path_alpha_beta
from collsim.units import format_rate, format_size, format_time
from collsim.verify import verify
from collsim.viz.traffic import traffic_figure

rng = np.random.default_rng(0)
TP = 4  # mp_size = 4
BATCH = 64  # every GPU sees the whole batch X (64 × d_in)
D_IN, D_OUT = 16, 8
BYTES = 8  # float64: collsim moves real float64 arrays

group = Group(range(TP))  # the TP group: ranks 0..3
cluster = collsim.Cluster(collsim.topology.switch(TP))


def collective_calls(trace, rank=0):
    """How many calls of each collective ``rank`` took part in, read from the trace: a
    collective's transfer carries a typed tag naming its collective, group and call."""
    calls = {}
    for t in trace.transfers:
        if t.src == rank and isinstance(t.tag, CollectiveStep):
            calls.setdefault(t.tag.collective, set()).add((t.tag.group, t.tag.call))
    return {name: len(seen) for name, seen in calls.items()}


# %% [markdown]
# ## The column split: all-gather forward, all-reduce of dX backward
#
# Cut `W` (shape `d_in × d_out`) into column blocks, `W = [W0 | W1 | W2 | W3]`. GPU `i`
# holds `W_i` (shape `d_in × d_out/t`) and computes its slice of the output from the full input:
#
#     Y_i = X · W_i                      Y = [Y0 | Y1 | Y2 | Y3]   ->  all-gather
#
# Backward, with `dY = [dY0 | ... | dY3]`:
#
#     dW_i = Xᵀ · dY_i                   local: GPU i needs only its own slice
#     dX   = Σ_i dY_i · W_iᵀ             every GPU holds one term  ->  all-reduce (sum)
#
# Below, `ColumnParallelLinear.from_full` keeps rank `i`'s columns of a full layer. The
# rank program runs the forward and backward on the virtual cluster; we compare with the
# single-device layer.

# %%
full = Linear.init(D_IN, D_OUT, rng)
x = rng.uniform(-1, 1, (BATCH, D_IN))
dy = rng.uniform(-1, 1, (BATCH, D_OUT))


def column_program(rank):
    fc = ColumnParallelLinear.from_full(full, group, group.index(rank.id), gather_output=True)
    y, ctx = yield from fc.forward(rank, x)  # Y_i = X W_i, then all-gather -> Y
    dx, grads = yield from fc.backward(rank, ctx, dy)  # dX_i = dY_i W_iᵀ, all-reduce -> dX
    return fc.shard.weight.shape, y, dx, grads["weight"]


col = cluster.run(column_program)
y_ref, ctx_ref = full.forward(x)
dx_ref, grads_ref = full.backward(ctx_ref, dy)
per = D_OUT // TP
for r, (shape, y, dx, dw) in enumerate(col.returns):
    same_dw = np.allclose(dw, grads_ref["weight"][:, r * per : (r + 1) * per])
    print(f"rank {r}: holds W_{r} of shape {shape};  Y == X·W: {np.allclose(y, y_ref)};  "
          f"dX == one device's: {np.allclose(dx, dx_ref)};  dW_{r} == columns of dW: {same_dw}")
col_bytes = collective_bytes(col.trace, TP)  # printed after Exercise 7.1, which predicts it

# %% [markdown]
# **Exercise 7.1 — predict, then check.** A ring all-reduce sends `2(K−1)/K · N · b` bytes
# per rank (lesson 4). How many bytes does each rank send in the all-reduce of `dX`?
# (`dX` has the shape of `X`: `BATCH × D_IN` float64 elements.)

# %%
dx_bytes_answer = None  # your prediction, in bytes

teach.check(
    "7.1",
    dx_bytes_answer,
    expected=col_bytes["all_reduce"][0],
    unit="B",
    ranks=TP,
    given=[
        teach.Quantity("b", BYTES, "bytes per float64 element"),
        teach.Quantity("N", BATCH * D_IN, "elements of dX"),
        teach.Quantity("BATCH", BATCH, "rows of X"),
        teach.Quantity("D_IN", D_IN, "columns of X"),
    ],
    hint="N = BATCH · D_IN elements of b = 8 bytes, in 2(K-1) steps of one chunk N/K",
)
print(f"\nbytes each rank sent: {col_bytes}")
print(f"collective calls per rank: {collective_calls(col.trace)}")

# %% [markdown]
# ## The row split: all-reduce forward, nothing to sum backward
#
# Now cut `W` into row blocks, `W = [W0; W1; W2; W3]`, and the input into the matching
# column blocks, `X = [X0 | X1 | X2 | X3]`. Each GPU computes a *partial* output of full size:
#
#     Y = Σ_i X_i · W_i  (+ b, added once)                      ->  all-reduce (sum) forward
#     dX_i = dY · W_iᵀ,  dW_i = X_iᵀ · dY                        local: no communication
#
# The all-reduce moved from the backward (column) to the forward (row).

# %%
row_full = Linear.init(D_IN, D_OUT, rng)


def row_program(rank):
    j = group.index(rank.id)
    fc = RowParallelLinear.from_full(row_full, group, j)  # holds rows of W, the bias once
    x_j = split_along(x, group, j, axis=-1)  # X_j: this rank's columns of X
    y, ctx = yield from fc.forward(rank, x_j)  # all-reduce of the partial sums
    dx_j, grads = yield from fc.backward(rank, ctx, dy)  # dX_j = dY W_jᵀ
    return y, dx_j


row = cluster.run(row_program)
y_ref, ctx_ref = row_full.forward(x)
dx_ref = row_full.backward_input(ctx_ref, dy)
dx_joined = np.concatenate([dx_j for _, dx_j in row.returns], axis=-1)
print(f"Y == X·W on every rank: {all(np.allclose(y, y_ref) for y, _ in row.returns)}")
print(f"[dX_0 | dX_1 | dX_2 | dX_3] == one device's dX: {np.allclose(dx_joined, dx_ref)}")
print(f"bytes each rank sent: {collective_bytes(row.trace, TP)}")
print(f"collective calls per rank: {collective_calls(row.trace)}")

# %% [markdown]
# **Exercise 7.2 — write the split.** Write `row_shards(x, w, tp)` that returns a list of
# `tp` pairs `(X_i, W_i)`: rank `i`'s columns of `x` and rows of `w`, in equal consecutive
# blocks, so that `Σ_i X_i · W_i == x · w`. The check compares your pairs with collsim's
# split on several shapes.

# %%
row_shards_answer = None  # your function: def row_shards(x, w, tp): return [(X_0, W_0), ...]


def reference_row_shards(x, w, tp):
    g = Group(range(tp))
    return [(split_along(x, g, i, axis=-1), split_along(w, g, i, axis=0)) for i in range(tp)]


cases = []
for tp, rows, inner, out in [(2, 3, 8, 5), (4, 2, 12, 3), (3, 5, 6, 6), (1, 4, 4, 2)]:
    cases.append((rng.uniform(-1, 1, (rows, inner)), rng.uniform(-1, 1, (inner, out)), tp))
teach.check_function(
    "7.2",
    row_shards_answer,
    reference_row_shards,
    cases,
    given={"tp": "tensor-parallel ranks"},
    hint="np.split(x, tp, axis=-1) and np.split(w, tp, axis=0), paired up",
)

# %% [markdown]
# ## Megatron's MLP: column, then row — one all-reduce each way
#
# A transformer MLP is `Y = GeLU(X·A)·B` with `A` of shape `h × 4h` and `B` of shape
# `4h × h`. Megatron-LM (Shoeybi et al. 2019, §3) splits `A` by **columns** and `B` by
# **rows**. GeLU acts element by element, so each GPU applies it to its own columns of `X·A`
# and feeds the result straight into its rows of `B` — no gather in between. Communication
# happens only at the two ends, in a pair of conjugate operators:
#
# | operator | forward | backward |
# |---|---|---|
# | `f` (enter the MLP) | identity | all-reduce of `dX` |
# | `g` (leave the MLP) | all-reduce of `Y` | identity |
#
# So one all-reduce forward and one backward, each of `B·S·h` elements. The alternative —
# gather the column layer's output, then let the row layer split it again — moves the
# `4h`-wide hidden activation through the network twice. Let us count both.

# %%
B, S, H = 4, 8, 16  # batch, sequence, hidden (tiny, so it runs in a blink)
mlp = MLP.init(H, rng)  # h -> 4h -> h
xs = rng.uniform(-1, 1, (B, S, H))
dys = rng.uniform(-1, 1, (B, S, H))


def megatron_program(rank):
    layer = ParallelMLP.from_full(mlp, group, group.index(rank.id))
    y, ctx = yield from layer.forward(rank, xs)  # f = identity, g = all-reduce
    dx, grads = yield from layer.backward(rank, ctx, dys)  # g = identity, f = all-reduce
    return y, dx


def unpaired_program(rank):
    """Column layer that gathers its output, GeLU on the full hidden, row layer that splits it."""
    j, gelu = group.index(rank.id), GELU()
    fc1 = ColumnParallelLinear.from_full(mlp.fc1, group, j, gather_output=True)
    fc2 = RowParallelLinear.from_full(mlp.fc2, group, j, input_is_parallel=False)
    h, c1 = yield from fc1.forward(rank, xs)  # all-gather of the (B, S, 4h) hidden
    a, c2 = gelu.forward(h)  # every rank computes all of it
    y, c3 = yield from fc2.forward(rank, a)  # all-reduce of Y
    da = yield from fc2.backward_input(rank, c3, dys)  # all-gather of the (B, S, 4h) dA
    dx = yield from fc1.backward_input(rank, c1, gelu.backward_input(c2, da))  # all-reduce
    return y, dx


y_ref, ctx_ref = mlp.forward(xs)
dx_ref = mlp.backward_input(ctx_ref, dys)
results = {}
for name, program in [("Megatron f/g", megatron_program), ("gather, then split", unpaired_program)]:
    run = cluster.run(program)
    ok = all(np.allclose(y, y_ref) and np.allclose(dx, dx_ref) for y, dx in run.returns)
    results[name] = run
    print(f"{name:>18}: matches one device: {ok};  calls {collective_calls(run.trace)}")

# `collsim verify tp-mlp` does the same for several SGD steps against one device:
report = verify("tp-mlp", tp=TP, batch=B, hidden=H, seq=S, steps=3)
print(f"verify tp-mlp: 3 SGD steps match one device: {report.match} "
      f"(largest relative difference {report.max_rel_diff:.1e})")

# %% [markdown]
# **Exercise 7.3 — predict, then check.** How many bytes does each rank send for one forward
# and one backward of the Megatron MLP above (`t = 4`, activations `B × S × H` float64)?
# Hint: count the all-reduces in the table, then use `2(t−1)/t · N · b` for each.

# %%
mlp_bytes_answer = None  # your prediction, in bytes

teach.check("7.3", mlp_bytes_answer, expected=results["Megatron f/g"].stats.bytes_sent[0],
            unit="B", ranks=TP,
            given=[teach.Quantity("b", 8, "bytes per float64 element"),
                   teach.Quantity("N", B * S * H, "elements of one activation"),
                   teach.Quantity("all-reduces", 2, "all-reduces (g forward, f backward)")],
            hint="two all-reduces (g in the forward, f in the backward), each of B·S·H "
            "elements: 2 × 2(t-1)/t · N · b")
for name, run in results.items():
    print(f"{name:>18}: {format_size(run.stats.bytes_sent[0])} sent per rank")
ratio = (
    results["gather, then split"].stats.bytes_sent[0] / results["Megatron f/g"].stats.bytes_sent[0]
)
print(f"\nthe unpaired version moves {ratio:.3g}× the bytes of Megatron's pairing")

# %% [markdown]
# ## Why TP stays inside a node
#
# A transformer layer has two such blocks (attention and MLP), so TP runs **four all-reduces
# per layer per micro-batch**, two in the forward and two in the backward, each on the
# critical path: the next layer cannot start until the sum has arrived. Megatron-LM
# therefore keeps `tensor_parallel_size <= GPUs per node`, so that TP traffic stays on
# NVLink/NVSwitch (Narayanan et al. 2021, takeaway #1: tensor parallelism up to the GPUs of
# one server), and Hugging Face's Accelerate ND-parallel
# guide says TP works best inside one node with high-bandwidth links and is not
# recommended over PCIe.
#
# Let us see it. `hierarchical(2, 4)` is two machines of four GPUs: a fast switch inside
# each machine and one slower NIC per GPU into a shared fabric. Which ranks form a TP group
# is decided by the **rank grid**: with TP the *innermost* (fastest-varying) dimension,
# neighbouring ranks share a TP group, and neighbouring ranks share a machine. Put TP
# outermost instead and every TP group spans both machines.

# %%
topo = collsim.topology.hierarchical(2, 4, intra="900GB/s", inter="50GB/s",
                                     intra_latency="1us", inter_latency="5us")
alpha_in, beta_in = path_alpha_beta(topo, 0, 1)  # GPU -> node switch -> GPU
alpha_out, beta_out = path_alpha_beta(topo, 0, 4)  # GPU -> NIC -> fabric -> NIC -> GPU
print(f"inside a machine: α = {format_time(alpha_in)}, β = {format_rate(beta_in)}")
print(f"between machines: α = {format_time(alpha_out)}, β = {format_rate(beta_out)}")

placements = {
    "TP inside a node": RankGrid((2, 4), ("dp", "tp")),  # TP innermost
    "TP across nodes": RankGrid((4, 2), ("tp", "dp")),  # TP outermost
}
for name, mesh in placements.items():
    print(f"{name}: TP groups {[list(g.ranks) for g in mesh.groups('tp')]}")

# %% [markdown]
# Run the Megatron MLP on all eight GPUs, two TP groups of four side by side, in each
# placement (a bigger hidden size this time, so bandwidth matters):

# %%
H_BIG = 256
mlp_big = MLP.init(H_BIG, rng)
x_big = rng.uniform(-1, 1, (2, 64, H_BIG))
dy_big = rng.uniform(-1, 1, (2, 64, H_BIG))


def mlp_on_mesh(rank, mesh):
    tp_group = mesh.group("tp", rank.id)
    layer = ParallelMLP.from_full(mlp_big, tp_group, tp_group.index(rank.id))
    y, ctx = yield from layer.forward(rank, x_big)
    dx, grads = yield from layer.backward(rank, ctx, dy_big)
    return np.allclose(y, mlp_big.forward(x_big)[0])


runs = {}
for name, mesh in placements.items():
    runs[name] = collsim.Cluster(topo).run(mlp_on_mesh, mesh)
    print(f"{name:>16}: forward + backward {format_time(runs[name].time):>9} simulated "
          f"(correct: {all(runs[name].returns)}), {format_size(runs[name].stats.bytes_sent[0])} "
          "per rank")
slow = runs["TP across nodes"].time / runs["TP inside a node"].time
print(f"\nsame bytes, same math: crossing machines makes the step {slow:.3g}× slower")

# %%
for name, run in runs.items():
    fig = traffic_figure(topo, run, title=f"Megatron MLP, tp=4: {name}")
    teach.show(fig, "07_" + re.sub(r"\W+", "_", name.lower()))

# %% [markdown]
# In the first picture the TP all-reduces never leave their machine's switch; in the second
# every ring crosses the fabric twice, and each step of the ring waits for its slowest hop.
#
# At real sizes: one activation of GPT-3's shape (sequence 2048, hidden 12288, bf16; one
# sequence per micro-batch) is what each TP all-reduce carries. Below it is all-reduced in
# count-only mode (sizes without data) within a machine and across machines; the times, and
# the four all-reduces of each of GPT-3's 96 layers, are printed after Exercise 7.4.

# %%
SEQ, HIDDEN, LAYERS = 2048, 12288, 96  # GPT-3 175B (Brown et al. 2020)
count = SEQ * HIDDEN  # elements of one (1, S, h) activation
big = collsim.Cluster(topo)
inside = big.all_reduce(count=count, dtype="bfloat16", group=[0, 1, 2, 3])
across = big.all_reduce(count=count, dtype="bfloat16", group=[0, 2, 4, 6])
size = count * 2  # bytes of bf16; the times are printed after Exercise 7.4 predicts one

# %% [markdown]
# **Exercise 7.4 — predict, then check.** The ring all-reduce takes `2(K−1)` steps, and every
# step of the cross-node ring waits for a hop between machines: `T = 2(K−1)(α + S/(K·β))`
# (lesson 5) with the `α`, `β` printed above for "between machines". Predict the time (in
# seconds, or a string such as `"1.5ms"`) of the cross-node all-reduce of `S = count · 2`
# bytes on `K = 4` GPUs.

# %%
cross_node_time_answer = None  # your prediction, in seconds (or a string like "1.5ms")

teach.check(
    "7.4",
    cross_node_time_answer,
    expected=across.time,
    rel=1e-3,
    unit="s",
    ranks=4,
    given=[
        teach.Quantity("2(K-1)α", 6 * alpha_out, "of latency, the ring's steps", "s"),
        teach.Quantity("α", alpha_out, "of latency between machines", "s"),
    ],
    alternatives=[
        teach.Alternative(
            "the inside-a-node α and β",
            inside.time,
            "Every step of the cross-node ring waits for a hop between machines.",
        )
    ],
    hint="six steps, each α + S/(4β), with the α and β between machines",
)
# the closed form collsim's planner uses gives the same number:
formula = closed_form("all_reduce", "ring", ranks=4, size=size, alpha=alpha_out, beta=beta_out)
print(f"closed form: {format_time(formula.time_s)}")
print(f"one all-reduce of {format_size(size)}: inside a node {format_time(inside.time)}, "
      f"across nodes {format_time(across.time)} ({across.time / inside.time:.3g}× slower)")
for name, result in [("inside a node", inside), ("across nodes", across)]:
    total = 4 * LAYERS * result.time
    print(f"  {name}: 4 × {LAYERS} layers × {format_time(result.time)} = {format_time(total)} "
          "of TP all-reduces per micro-batch, on the critical path")

# %% [markdown]
# ## Takeaways
#
# - **Column split** `W = [W0|…|W3]`: `Y_i = X·W_i`; an all-gather assembles `Y` in the
#   forward, and `dX = Σ dY_i·W_iᵀ` needs an **all-reduce in the backward**.
# - **Row split** `W = [W0;…;W3]`: partial outputs `X_i·W_i` are summed by an **all-reduce
#   in the forward**; the backward needs no communication.
# - **Megatron's MLP** puts column before row: the `4h`-wide hidden never travels, and the
#   block costs one all-reduce forward (`g`) and one backward (`f`) of `B·S·h` elements.
# - A transformer layer runs **four** such all-reduces per micro-batch on the critical path,
#   so TP wants the fastest links: keep `tp ≤ GPUs per node` and make TP the innermost
#   dimension of the rank grid (Narayanan et al. 2021; Accelerate's ND-parallel guide).
# - Every result above matched single-device numpy; the bytes matched `2(K−1)/K·N·b`.
#
# Next: lesson 8 splits the model the other way — by layers, into a pipeline.
