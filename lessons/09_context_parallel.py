# %% [markdown]
# # 9. Long sequences: context parallelism
# Split the sequence: attention's S² scores, ring attention's online softmax step by step, ring vs all-to-all bytes, the causal imbalance and its fix.
#
# Data, tensor and pipeline parallelism (lessons 2, 7 and 8) all leave one dimension whole:
# every GPU sees every token of its sequences. At 32k tokens and beyond that is what runs
# out of memory. **Context parallelism (CP)** splits the sequence over `cp` GPUs: each holds
# `S/cp` tokens of every sample for its whole forward and backward. Everything outside
# attention is per token and needs nothing from the other ranks; attention needs every
# earlier key, and that is where the two ways of doing it differ:
#
# - **ring attention** (Liu et al. 2023, "Ring Attention with Blockwise Transformers for
#   Near-Infinite Context"; Megatron-LM's context parallelism): the K/V blocks travel round
#   a ring of the `cp` ranks while each rank folds them into its queries' attention with an
#   online softmax;
# - **all-to-all** (Jacobs et al. 2023, "DeepSpeed Ulysses"): one all-to-all re-shards
#   Q, K, V from tokens to heads, each rank attends over the full sequence for `H/cp` heads,
#   and a second all-to-all shards the output back to tokens.
#
# Everything below runs on the virtual cluster, in float64, and is checked against one
# device. As in every lesson: replace each `..._answer = None` with your prediction and run
# the check after it.

# %%
import math

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

import collsim
from collsim import teach
from collsim.errors import ConfigError
from collsim.nn import Adam
from collsim.parallel.config import ParallelConfig
from collsim.parallel.context import (
    RingAttention,
    RingMessage,
    RingStep,
    causal_attention_flops,
    causal_balance,
    ring_attention_bytes,
    token_positions,
    ulysses_attention_bytes,
)
from collsim.parallel.mesh import train
from collsim.parallel.pipeline.runner import toy_batch, toy_model
from collsim.runtime.group import Group
from collsim.units import format_size

# %% [markdown]
# ## Why attention's memory grows with S²
#
# A layer's activations are `B·S·D` numbers (batch, sequence, width): linear in `S`.
# Attention computes, for each of `H` heads, a score for every (query, key) pair: a
# `B·H·S·S` matrix, then its softmax, the same size again. Doubling the sequence doubles the
# activations and quadruples the scores. For a 7B-sized layer (`D = 4096`, `H = 32` heads),
# one sequence of 32k tokens in bf16:

# %%
B, S, D, H, BF16 = 1, 32 * 1024, 4096, 32, 2
activations = B * S * D * BF16
scores = B * H * S * S * BF16
print(f"activations B·S·D·b   = {B}·{S}·{D}·{BF16} = {format_size(activations)} per layer")
print(f"scores      B·H·S²·b  = {B}·{H}·{S}²·{BF16} = {format_size(scores)} per layer, "
      f"{scores / activations:g}× the activations (H·S/D)")
for cp in (1, 8):
    block = B * H * (S // cp) ** 2 * BF16  # S/cp queries against one block of S/cp keys
    kv = 2 * B * (S // cp) * D * BF16  # the K and V of S/cp tokens: what travels
    print(f"cp = {cp}: one rank's scores against one K/V block {format_size(block):>9}, "
          f"the block itself {format_size(kv):>9}")

# %% [markdown]
# No single GPU holds 64 GiB of scores for each of 32 layers. FlashAttention (Dao et al.
# 2022) never stores the whole matrix: it walks the keys in blocks and keeps, per query, a
# running maximum, a running sum and a running output — the **online softmax**. Ring
# attention is the same walk with the key blocks on other GPUs: rank `r` keeps its queries,
# and at each of `cp` steps it holds one rank's K/V block, scores against it, folds the
# result in, and passes the block on to rank `r+1`.
#
# ## The online softmax on one query
#
# One query, 16 keys in 4 blocks of 4 (one block per rank of `cp = 4`). After each block the
# running max `m` may grow; what was summed under the old max is then rescaled by
# `exp(m_old − m_new)`. At the end `o / l` is exactly the softmax-weighted sum of the values.

# %%
rng = np.random.default_rng(3)
CP_DEMO = 4
q_scores = rng.normal(0, 2, 16)  # one query's scores q·k/√hd against the 16 keys
values = rng.uniform(-1, 1, 16)  # one value component per key
m, l_sum, o = -math.inf, 0.0, 0.0
print(f"{'step':<13}{'block max':>10}{'m_old':>9}{'m_new':>9}{'rescale':>10}{'l':>10}{'o / l':>10}")
for step, (block, v) in enumerate(zip(np.split(q_scores, CP_DEMO), np.split(values, CP_DEMO))):
    m_new = max(m, block.max())
    rescale = math.exp(m - m_new)  # 0 at step 1: nothing summed yet
    p = np.exp(block - m_new)
    l_sum, o = rescale * l_sum + p.sum(), rescale * o + p @ v
    print(f"{step + 1} of {CP_DEMO:<8}{block.max():>10.3f}{m:>9.3f}{m_new:>9.3f}{rescale:>10.4f}"
          f"{l_sum:>10.4f}{o / l_sum:>10.4f}")
    m = m_new
weights = np.exp(q_scores - q_scores.max())
full = weights @ values / weights.sum()
print(f"softmax over all 16 keys at once: {full:.4f};  online: {o / l_sum:.4f};  "
      f"log-sum-exp m + log l = {m + math.log(l_sum):.4f} (kept for the backward)")
assert abs(full - o / l_sum) < 1e-12

# %% [markdown]
# collsim's `RingAttention` does exactly this for every (sample, head, query) at once, and
# the backward recomputes each block's probabilities from the saved log-sum-exp: no rank
# ever holds an `S × S` matrix.
#
# ## The ring, step by step
#
# A toy transformer (`toy_model`, 2 blocks, width 16, 4 heads), 2 sequences of 16 tokens,
# `cp = 4`, causal attention, one Adam step. `ParallelConfig(cp=4, cp_variant="ring",
# cp_layout=...)` runs it with ring attention; every ring step's compute span carries a
# `RingStep` record (which step, whose K/V block) and every block that travels a
# `RingMessage` tag. Here is the forward of the first layer, read from the trace:

# %%
CP, LAYERS, WIDTH, HEADS, SEQ, BATCH = 4, 2, 16, 4, 16, 2
model = toy_model(layers=LAYERS, hidden=WIDTH, heads=HEADS)
batch = toy_batch(batch=BATCH, seq=SEQ, hidden=WIDTH)
RATE = 1e9  # 1 GFLOP/s per rank: a compute span lasts its FLOPs / RATE


def cp_run(variant, layout, cp=CP, run_model=model, run_batch=batch):
    cluster = collsim.Cluster(collsim.topology.switch(cp, "10GB/s", "5us"), compute_rate=RATE)
    config = ParallelConfig(cp=cp, cp_variant=variant, cp_layout=layout)
    return train(run_model, [run_batch], config, cluster=cluster, optimizer=Adam(lr=1e-2))


runs = {layout: cp_run("ring", layout) for layout in ("contiguous", "balanced")}
ring = runs["contiguous"]
print(f"mesh {ring.mesh}; parameters after the Adam step match one device: {ring.match}\n")
for step in range(1, CP + 1):
    held = sorted((c.rank, c.meta.kv_owner) for c in ring.trace.computes
                  if isinstance(c.meta, RingStep) and c.meta.kind == "forward"
                  and c.meta.layer == "0.attn" and c.meta.step == step)
    sent = sorted((t.src, t.dst) for t in ring.trace.transfers
                  if isinstance(t.tag, RingMessage) and t.tag.kind == "kv"
                  and t.tag.phase == "forward" and t.tag.layer == "0.attn"
                  and t.tag.step == step)
    holds = ", ".join(f"r{r} scores K/V of r{owner}" for r, owner in held)
    sends = ", ".join(f"r{a}->r{b}" for a, b in sent) or "nothing (the last block stays)"
    print(f"step {step} of {CP}: {holds};  sends on: {sends}")

# %% [markdown]
# At step `s` rank `r` holds the block of rank `(r − s + 1) mod cp` — like the ring
# all-reduce of lesson 4, every rank sends to its right neighbour at every step, and after
# `cp − 1` hops every block has visited every rank. The block's send is posted before the
# step's compute, so the transfer overlaps the attention of the block already there.
#
# The pictures below draw the same records for both layouts: a row per rank, a column per
# step, the cell coloured by whose block it is and shaded by how much of it the causal mask
# lets the rank compute (the span's duration × 1 GFLOP/s, against a full block).

# %%
COLOURS = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C"]


def ring_steps(run, layer="0.attn", kind="forward"):
    """{(rank, step): (kv_owner, FLOPs)} of one layer's ring steps, read from the trace."""
    return {(c.rank, c.meta.step): (c.meta.kv_owner, (c.end - c.start) * RATE)
            for c in run.trace.computes if isinstance(c.meta, RingStep)
            and c.meta.layer == layer and c.meta.kind == kind}


full_block = causal_attention_flops(SEQ, CP, "contiguous", batch=BATCH, heads=HEADS,
                                    head_dim=WIDTH // HEADS, causal=False)[0] / CP
fig = Figure(figsize=(11, 4.6), layout="constrained")
for ax, (layout, run) in zip(fig.subplots(1, 2), runs.items()):
    steps = ring_steps(run)
    for (r, s), (owner, flops) in steps.items():
        share = min(flops / full_block, 1.0)  # float rounding can give 1 + 2e-16
        ax.add_patch(Rectangle((s - 0.47, r - 0.45), 0.94, 0.9, color=COLOURS[owner],
                               alpha=0.15 + 0.85 * share))
        ax.text(s - 0.03, r - 0.05, f"K/V of r{owner}\n{share:.0%}", ha="center", va="center",
                fontsize=10, color="black" if share < 0.6 else "white", fontweight="bold")
    for r in range(CP):  # the row's total: the rank's work in the forward of this layer
        total = sum(f for (rank, _), (_, f) in steps.items() if rank == r) / full_block
        ax.text(CP + 0.58, r, f"{total:g}\nblocks", ha="left", va="center", fontsize=10)
    positions = [token_positions(SEQ, CP, r, layout) for r in range(CP)]
    ax.set_yticks(range(CP), [f"r{r}: tokens {p[0]}–{p[-1]}" if layout == "contiguous"
                              else f"r{r}: tokens {p[:2].min()}–{p[:len(p) // 2].max()}, "
                              f"{p[len(p) // 2:].min()}–{p.max()}" for r, p in enumerate(positions)])
    ax.set_xticks(range(1, CP + 1), [f"step {s} of {CP}" for s in range(1, CP + 1)])
    ax.set_xlim(0.45, CP + 1.2)
    ax.set_ylim(CP - 0.45, -0.55)
    ax.set_title(f"{layout} layout", fontsize=12)
fig.suptitle("Ring attention, forward of layer 0 (cp=4, causal): whose K/V block each rank "
             "scores at each step\n(shade and % = the share of the block the causal mask "
             "leaves to compute; right: the row's total)", fontsize=12)
teach.show(fig, "09_ring_steps")

# %% [markdown]
# With the contiguous layout rank 0 holds the first tokens: every other rank's keys are in
# its future, and it computes the lower triangle of its own block and nothing else. That
# triangle includes the diagonal, each query scoring its own key: `L(L+1)/2` of the block's
# `L²` pairs, 10 of 16 for these 4-token tiles, so the cell says 62 %, not 50 %; half is
# only what it tends to as the tiles grow. Rank 3 holds the last tokens and computes every
# block. The balanced layout gives each rank one early and one
# late chunk, and every rank's row adds up to the same work. We come back to it below.
#
# ## The bytes: ring versus all-to-all
#
# One K/V block is K and V for `S/cp` tokens, `2·B·(S/cp)·D·b` bytes. In the forward a rank
# sends its current block on `cp − 1` times; in the backward K/V go round again (`cp − 1`
# hops) and the dK/dV partial sums travel one hop behind their block and go home at the end
# (`cp` hops), so per rank per layer
#
#     forward  2·(cp−1)·B·(S/cp)·D·b        backward  2·(2cp−1)·B·(S/cp)·D·b
#
# (`collsim.parallel.context.formulas.ring_attention_bytes`). The all-to-all variant moves
# q, k, v to heads and the output back, `(cp−1)/cp` of 4 activations of `B·(S/cp)·D·b`,
# and the same again in the backward (`ulysses_attention_bytes`). The table runs both for
# cp = 2 and 4 and compares what the trace measured, `run.bytes_by_group[("cp", ...)]`, per
# layer, with the closed forms. (b = 8: the numerics are float64. The `dp_cp` all-reduce in
# the trace is the weight gradient: each rank's gradient covers only its tokens.)

# %%
b = batch[0].dtype.itemsize
print(
    f"{'cp':>3}  {'variant':<11}{'measured/layer':>15}{'closed form':>13}  match   "
    "(B=2, S=16, D=16, b=8)"
)
bytes_runs = {}
for cp in (2, 4):
    for variant in ("ring", "all-to-all"):
        run = cp_run(variant, "balanced", cp=cp)
        bytes_runs[cp, variant] = run
        sent = sum(per_rank[0] for (dim, _), per_rank in run.bytes_by_group.items()
                   if dim == "cp") / LAYERS
        formula = ring_attention_bytes if variant == "ring" else ulysses_attention_bytes
        closed = sum(formula(BATCH, SEQ, WIDTH, cp, b, pass_=p) for p in ("forward", "backward"))
        print(
            f"{cp:>3}  {variant:<11}{format_size(sent):>15}{format_size(closed):>13}  {run.match}"
        )
        assert sent == closed

print("\nthe 32k-token 7B-sized layer in bf16, per rank per layer (forward + backward):")
for cp in (2, 4, 8, 16):
    ring_b = sum(ring_attention_bytes(B, S, D, cp, BF16, pass_=p) for p in ("forward", "backward"))
    a2a_b = sum(
        ulysses_attention_bytes(B, S, D, cp, BF16, pass_=p) for p in ("forward", "backward")
    )
    print(f"  cp = {cp:>2}: ring {format_size(ring_b):>10}, all-to-all {format_size(a2a_b):>10}"
          f"  ({ring_b / a2a_b:.3g}× as much for the ring)")

# %% [markdown]
# The ring sends `3cp − 2` K/V blocks per layer, `(3cp−2)/cp·2·B·S·D·b`: it *grows* towards
# `6·B·S·D·b` as `cp` grows. The all-to-all sends `8(cp−1)/cp²·B·S·D·b`, which shrinks — the
# DeepSpeed-Ulysses paper's point: constant bytes per link when sequence and GPUs grow
# together. The ring's advantages are elsewhere: its sends overlap compute, go only to a
# neighbour, and work for any `cp`. The all-to-all splits *heads*, so `cp` must divide them:

# %%
try:
    cp_run("all-to-all", "balanced", cp=8)  # 4 heads over 8 ranks
except ConfigError as error:
    print(f"ConfigError: {error}")

# %% [markdown]
# **Exercise 9.1 — write the formula.** Write `ring_layer_bytes(batch, seq, d_model, cp, b)`:
# the bytes one rank sends in one ring-attention layer, forward and backward together. The
# check *runs* the trainer for the toy cases (b = 8) and uses the closed form for the
# 32k-token layer in bf16.

# %%
ring_layer_bytes_answer = None  # your function: def f(batch, seq, d_model, cp, b): return bytes


def measured_ring_layer_bytes(batch_size, seq, d_model, cp, bytes_per_element):
    if bytes_per_element != b:  # the 32k-token layer: the closed form
        return sum(ring_attention_bytes(batch_size, seq, d_model, cp, bytes_per_element, p)
                   for p in ("forward", "backward"))
    one_layer = toy_model(layers=1, hidden=d_model, heads=2)
    run = cp_run("ring", "balanced", cp, one_layer, toy_batch(batch_size, seq, d_model))
    return run.bytes_by_group[("cp", "send")][0]


def same_bytes(got, want):
    return abs(got - want) <= 1e-9 * abs(want)


cases = [(2, 16, 16, 4, 8), (1, 16, 8, 2, 8), (3, 32, 8, 4, 8), (1, S, D, 8, BF16),
         (4, S, D, 16, BF16)]
teach.check_function("9.1", ring_layer_bytes_answer, measured_ring_layer_bytes, cases,
                     compare=same_bytes, unit="B",
                     given={"batch_size": "sequences", "seq": "tokens per sequence",
                            "d_model": "model width", "cp": "context-parallel ranks",
                            "bytes_per_element": "bytes per element"},
                     hint="3cp - 2 K/V blocks a layer (forward and backward), each of "
                     "2·B·(S/cp)·D·b bytes (a K and a V)")

# %% [markdown]
# ## The causal imbalance, and the load-balanced layout
#
# Under a causal mask a query sees only the keys before it and its own. Cut the sequence into
# `cp` contiguous tiles of `L` tokens and rank `i` computes `i` full tiles and the lower
# triangle of its own, diagonal included: `i·L² + L(L+1)/2` (query, key) pairs. The last
# rank does `(cp−1)·L² + L(L+1)/2` against a mean of `(cp−1)/2·L² + L(L+1)/2`: here (cp = 4,
# 4-token tiles) 58 pairs against 34, 1.71 times the mean, and every step waits for it. As
# the tiles grow, `L(L+1)/2` tends to `L²/2` and the ratio to `(cp − 1/2)/(cp/2) =
# (2cp−1)/cp`, 1.75 here: the large-sequence limit, which the exact count stays just below. Megatron-LM's context
# parallelism and Llama 3's training (Dubey et al. 2024, "The Llama 3 Herd of Models",
# §3.3.2) cut the sequence into `2·cp` chunks instead and give rank `i` chunks `i` and
# `2cp−1−i`: one early, one late, the same work on every rank.
#
# Three sources, one number each: the closed form (`causal_attention_flops`), the ring
# module's own count (`RingAttention.attention_flops`), and the ring-step spans of the run's
# trace (durations × 1 GFLOP/s), forward of one layer.

# %%
HEAD_DIM = WIDTH // HEADS
attention = model[0].attn
flops = {}
print(f"{'layout':<12}{'rank':>5}{'closed form':>13}{'module':>10}{'trace':>10}{'÷ mean':>8}")
for layout, run in runs.items():
    closed = causal_attention_flops(SEQ, CP, layout, batch=BATCH, heads=HEADS, head_dim=HEAD_DIM)
    steps = ring_steps(run)
    traced = [sum(f for (r, _), (_, f) in steps.items() if r == rank) for rank in range(CP)]
    flops[layout] = traced
    for rank in range(CP):
        module = RingAttention(attention, Group(range(CP)), rank, layout=layout)
        counted = module.attention_flops((BATCH, SEQ // CP, WIDTH))["forward"]
        print(f"{layout:<12}{rank:>5}{closed[rank]:>13,.0f}{counted:>10,.0f}{traced[rank]:>10,.0f}"
              f"{traced[rank] / np.mean(traced):>8.3f}")
        assert math.isclose(closed[rank], counted) and math.isclose(counted, traced[rank])
balance = causal_balance(SEQ, CP, "contiguous")
print(f"contiguous, exact count of kept pairs: max/mean {balance.max_over_mean:.4f}, min/mean "
      f"{balance.min_over_mean:.4f}; as the tiles grow (2cp-1)/cp = {balance.max_limit} and "
      f"1/(2cp) = {balance.min_limit}")
assert math.isclose(balance.max_over_mean, flops["contiguous"][-1] / np.mean(flops["contiguous"]))

fig = Figure(figsize=(9, 4), layout="constrained")
ax = fig.add_subplot()
width = 0.38
for k, (layout, colour) in enumerate((("contiguous", "#C44E52"), ("balanced", "#4C72B0"))):
    xs = np.arange(CP) + (k - 0.5) * width
    bars = ax.bar(xs, np.array(flops[layout]) / 1e3, width, color=colour, label=layout)
    ratios = np.array(flops[layout]) / np.mean(flops[layout])
    ax.bar_label(bars, [f"{r:.2f}×" for r in ratios], padding=2, fontsize=9)
mean = np.mean(flops["contiguous"]) / 1e3
ax.axhline(mean, color="black", ls="--", lw=1.2, label=f"mean, {mean:.2f} thousand (1.00×)")
ax.set_xticks(range(CP), [f"cp rank {r}" for r in range(CP)])
ax.set_ylabel("attention FLOPs, forward of one layer (thousands)")
ax.set_title(f"Causal attention work per rank, cp={CP}, S={SEQ}: contiguous last rank = "
             f"{flops['contiguous'][-1] / np.mean(flops['contiguous']):.2f}× the mean",
             fontsize=11)
ax.set_ylim(0, 1.12 * max(flops["contiguous"]) / 1e3)
ax.legend(loc="upper left", bbox_to_anchor=(0.0, 0.9))
teach.show(fig, "09_causal_work_per_rank")

# %% [markdown]
# **Exercise 9.2 — predict, then check.** With the contiguous layout, `cp = 8` and the
# lesson's 16-token sequence (2-token tiles), how many times the mean attention work does the
# last rank do? Count the pairs the causal mask keeps, diagonal included: at this size the
# answer is not yet the large-tile `(2cp−1)/cp`. (A ratio; the check runs ring attention on
# 8 ranks and reads the trace.)

# %%
last_rank_share_answer = None  # your prediction: last rank's work ÷ the mean, a ratio

# %%
eight = cp_run("ring", "contiguous", cp=8)
work8 = [sum(f for (r, _), (_, f) in ring_steps(eight).items() if r == rank) for rank in range(8)]
teach.check(
    "9.2",
    last_rank_share_answer,
    expected=work8[-1] / np.mean(work8),
    unit="x",
    ranks=8,
    given=[teach.Quantity("L", SEQ // 8, "tokens per tile")],
    alternatives=[
        teach.Alternative(
            "the large-tile ratio (2cp-1)/cp",
            15 / 8,
            "With 2-token tiles the diagonal's L(L+1)/2 is not yet L²/2.",
        )
    ],
    hint="rank i keeps i·L² + L(L+1)/2 pairs; divide the last rank's by the mean",
)

# %% [markdown]
# **Exercise 9.3 — write the layout.** Write `balanced_positions(seq, cp, i)`: the global
# token positions rank `i` holds in the load-balanced layout, as a list in its local order
# (chunk `i` of `2·cp`, then chunk `2cp−1−i`). The check compares with collsim's
# `token_positions`, which the ring's causal mask is built from.

# %%
balanced_positions_answer = None  # your function: def f(seq, cp, i): return [positions]


def reference_positions(seq, cp, i):
    return token_positions(seq, cp, i, "balanced").tolist()


teach.check_function("9.3", balanced_positions_answer, reference_positions,
                     cases=[(8, 2, 0), (8, 2, 1), (16, 4, 3), (32, 4, 0), (24, 3, 1)],
                     given={"seq": "tokens", "cp": "context-parallel ranks", "i": "the rank"},
                     hint="cut range(seq) into 2·cp equal chunks; rank i takes chunk i, then "
                     "chunk 2cp-1-i")

# %% [markdown]
# ## Takeaways
#
# - Attention's scores are `B·H·S²`, the activations `B·S·D`: at 32k tokens a 7B-sized layer
#   would need 64 GiB of scores against 256 MiB of activations. The online softmax (running
#   max, sum and output, rescaled by `exp(m_old − m_new)`) never stores them.
# - **Context parallelism** splits the sequence over `cp` ranks. **Ring attention** (Liu et
#   al. 2023) passes K/V blocks round the ring: `cp` steps, at step `s` rank `r` holds the
#   block of rank `r − s + 1`; per layer it sends `2(cp−1)` blocks of `B·(S/cp)·D·b` forward
#   and `2(2cp−1)` backward, overlapped with the compute.
# - **All-to-all** (DeepSpeed-Ulysses, Jacobs et al. 2023) re-shards to heads and back:
#   `4(cp−1)/cp²·B·S·D·b` per pass, fewer bytes as `cp` grows, but `cp` must divide the heads.
# - Causal masking makes the contiguous layout unfair: the last rank does nearly `(2cp−1)/cp`
#   times the mean (exactly the pairs the mask keeps, diagonal included; the ratio reaches
#   `(2cp−1)/cp` as the tiles grow). The **load-balanced layout** (chunks `i` and `2cp−1−i`; Megatron-LM, Llama 3)
#   gives every rank the same work.
# - Every run matched one device; `collsim verify cp` runs these checks from the terminal.
#
# Next: lesson 10 puts every dimension — data, sharding, tensor, pipeline and context — on
# one rank grid.
