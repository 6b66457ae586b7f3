# %% [markdown]
# # 14. Mixture of experts
# Route a batch by hand, predict the all-to-all's bytes (one row per expert, or one per rank), find the tokens capacity drops, catch two gradient bugs with a property test, and compare dispatch inside a node and across nodes.
#
# A mixture-of-experts (MoE) layer replaces a transformer block's MLP with `E` MLPs, the
# **experts**, and a small **router** that sends each token to `k` of them. Mixtral has 8
# experts and sends a token to 2; DeepSeek-V3 has 256 and sends it to 8. A token costs the
# compute of `k` experts while the layer holds the weights of `E`, so the model grows
# without its FLOPs per token growing.
#
# The experts are too many for one GPU, so **expert parallelism** (`ep`) puts `E/ep` of them
# on each rank. Each rank routes its own tokens, and then every token has to travel to the
# ranks that hold its experts (the **dispatch**, an all-to-all with uneven splits) and its
# outputs have to come back (the **combine**). This lesson runs that on collsim with real
# token values, checks it against the same layer on one device, and counts every byte.
#
# As before: replace each `..._answer = None` with your prediction and run the check.

# %%
import numpy as np

from collsim import hardware, teach
from collsim.nn import MoE, RouterConfig
from collsim.nn.routing import route
from collsim.parallel.experts.deepep import DeepEPConfig, deepep_bandwidth, deepep_routing
from collsim.parallel.experts.formulas import (
    dispatch_bytes,
    expected_destination_ranks,
    rank_counts,
)
from collsim.parallel.experts.generators import routing_prior
from collsim.parallel.experts.step import dense_step, expert_parallel_step
from collsim.units import format_rate, format_size, format_time
from collsim.viz.moe import load_figure, traffic_figure, traffic_matrix


def softmax(row):
    """Softmax of one row of logits."""
    z = np.exp(row - row.max())
    return z / z.sum()


# %% [markdown]
# ## 1. Route a batch by hand
#
# The router is one matrix `W_r` of shape `(d, E)`. A token `x` gets a logit per expert,
# `x · W_r`; a softmax turns them into scores; the token goes to the `k` experts with the
# highest scores. Mixtral and DeepSeek-V3 then **renormalise** the `k` chosen scores to sum to
# 1, and those are the **gates**: the token's output is its input plus the `k` experts'
# outputs, each times its gate (`k` is Megatron-Core's `--moe-router-topk`). Here are four tokens' logits for four experts, routed top-2.

# %%
LOGITS = np.array(
    [
        [2.0, 1.0, 0.0, -1.0],
        [0.5, 0.0, 3.0, 1.0],
        [1.0, 1.0, 0.0, 2.5],
        [0.0, 2.0, 2.0, -0.5],
    ]
)  # (tokens, experts)
TOY = RouterConfig(experts=4, top_k=2)
toy = route(LOGITS, TOY)
for token, (logits, chosen) in enumerate(zip(LOGITS, toy.selected)):
    print(f"token {token}: logits {logits.tolist()} -> experts {chosen.tolist()}")

# %% [markdown]
# **Exercise 14.1 — by hand.** What is token 0's gate for expert 0, its first choice?
# Work it out from the logits alone (a calculator is fine, `np.exp` too).

# %%
first_gate_answer = None  # your prediction: token 0's gate for expert 0, a fraction

# %%
teach.check(
    "14.1",
    first_gate_answer,
    expected=toy.gates[0, 0],
    unit="fraction",
    alternatives=[
        teach.Alternative(
            "the softmax over all four experts",
            softmax(LOGITS[0])[0],
            "That is the score before the top-k; the gate renormalises the two chosen "
            "scores so that they sum to 1.",
        )
    ],
    hint="the two chosen scores, renormalised: e^2 / (e^2 + e^1) for logits 2 and 1",
)
print(f"every gate: {toy.gates.round(3).tolist()} (each row sums to 1)")

# %% [markdown]
# ## 2. How many rows a token sends: one per expert, or one per rank
#
# Megatron-Core's all-to-all dispatcher sends a token once **per chosen expert**: `k` rows,
# some of them to the rank that holds two of its experts, some to itself. DeepEP, the
# library DeepSeek-V3 trained with, sends it once **per rank** that holds one of its
# experts, and that rank hands the row to each of its experts. How many rows is that?
#
# With uniform routing a token picks `k` distinct experts of `E`, and a rank holds `E/ep` of
# them. Count the ranks a token does **not** reach: a given rank misses it when all `k` of
# its experts are among the `E − E/ep` held elsewhere.
#
# **Exercise 14.2 — predict, then check.** With DeepSeek-V3's 256 experts, top-8, on 8 ranks
# (one DGX), how many distinct ranks does a token reach on average? (`math.comb(n, k)`
# counts the ways to choose `k` of `n`.)

# %%
destination_ranks_answer = None  # your prediction: distinct ranks a token reaches, on average

# %%
E_V3, K_V3, EP8 = 256, 8, 8
teach.check(
    "14.2",
    destination_ranks_answer,
    expected=expected_destination_ranks(E_V3, EP8, K_V3),
    rel=1e-3,
    unit="ranks",
    given=[teach.Quantity("k", K_V3, "experts a token"), teach.Quantity("ep", EP8, "ranks")],
    alternatives=[
        teach.Alternative(
            "k rows, one per chosen expert",
            K_V3,
            "That is Megatron-Core's count; DeepEP sends a token to a rank once, however many "
            "of its experts are there, so two experts on one rank share a row.",
        ),
        teach.Alternative(
            "ep·(1 − (1 − 1/ep)^k), choices drawn with replacement",
            EP8 * (1 - (1 - 1 / EP8) ** K_V3),
            "Close, but a token's k experts are distinct: once one is taken, the next is "
            "drawn from the others. Count the ways all k avoid a rank: C(E − E/ep, k) out "
            "of C(E, k).",
        )
    ],
    hint="a rank is missed with chance C(E − E/ep, k) / C(E, k); ep ranks times the chance "
    "of not being missed",
)
reaches = deepep_routing(DeepEPConfig(tokens=512), nodes=1, gpus_per_node=EP8)
print(f"measured over 8 x 512 routed tokens: {reaches.sum(axis=2).mean():.3f} ranks a token, "
      f"so DeepEP's rows are {reaches.sum(axis=2).mean() / K_V3:.0%} of one row per expert")

# %% [markdown]
# ## 3. One MoE step on four ranks
#
# Now the whole layer, with real numbers: 8 experts of hidden size 16 on `ep = 4` ranks, 2
# a rank, top-2, and 64 tokens, 16 a rank. A routing generator makes the tokens prefer the
# first experts (a Zipf skew, as trained models' routers tend to). One dispatch is:
#
# 1. an all-to-all of the per-expert counts, so that each rank knows what it will receive;
# 2. the **all-to-allv** of the token rows, one row per (token, expert), with uneven splits;
# 3. the experts compute; the **combine** sends the outputs back the same way, transposed,
#    and each rank adds them to its tokens, weighted by the gates.
#
# `expert_parallel_step` runs this forward and backward on a simulated cluster and
# `dense_step` the same layer on one device. The table shows the rows each rank sends each
# rank (the diagonal stays home: a rank's own experts).

# %%
EP, EXPERTS, TOP_K, HIDDEN, TOKENS = 4, 8, 2, 16, 64
rng = np.random.default_rng(14)
moe = MoE.init(HIDDEN, 2 * HIDDEN, RouterConfig(EXPERTS, TOP_K), rng)
x = rng.normal(size=(TOKENS, HIDDEN))
target = rng.normal(size=(TOKENS, HIDDEN))
prior = routing_prior("zipf", TOKENS, EXPERTS, TOP_K, EP, rng)
step = expert_parallel_step(moe, x, target, EP, prior)
rows = np.array(rank_counts(step.expert_counts, EP))
print("rows sent (row: from rank, column: to rank); each row is 16 float64 values")
for r in range(EP):
    print(f"  rank {r}: {rows[r].tolist()}")

# %% [markdown]
# **Exercise 14.3 — predict, then check.** How many bytes does rank 0 send in the dispatch?
# The rows it keeps for its own experts do not cross the network.

# %%
dispatch_bytes_answer = None  # your prediction: bytes rank 0 sends in the dispatch

# %%
ROW_BYTES = HIDDEN * 8  # float64
closed = dispatch_bytes(step.expert_counts, EP, ROW_BYTES)
teach.check(
    "14.3",
    dispatch_bytes_answer,
    expected=closed.sent[0],
    unit="B",
    given=[teach.Quantity("d", HIDDEN, "values a row"), teach.Quantity("b", 8, "bytes a value")],
    alternatives=[
        teach.Alternative(
            "rank 0's rows for its own experts counted too",
            rows[0].sum() * ROW_BYTES,
            "The diagonal of the table stays home: a rank's own experts read its rows in place.",
        )
    ],
    hint="the off-diagonal entries of rank 0's row, times 16 values of 8 bytes",
)
moved = traffic_matrix(step.trace, EP, "dispatch")
print(f"the trace: rank 0 sent {format_size(int(moved[0].sum()))}; every rank, sent / "
      f"received: {moved.sum(axis=1).tolist()} / {moved.sum(axis=0).tolist()} B")
oracle = dense_step(moe, x, target, EP, prior)
print(f"and the output equals one device's: {np.allclose(step.result.y, oracle.y, rtol=0, atol=1e-12)}")
teach.show(traffic_figure(moved, traffic_matrix(step.trace, EP, "combine")), "14_traffic")

# %% [markdown]
# The skew shows as a bright first column: rank 0 holds the popular experts, so it receives
# most, computes most, and every rank's combine waits for it.
#
# ## 4. Capacity: which tokens are dropped
#
# To bound that wait (and the memory of the busiest rank), Megatron-Core can give each expert
# a **capacity**: of a rank's `T` tokens, an expert takes at most
# `capacity = ceil(T·k/E · capacity_factor)`. The choices over it are **dropped**, the
# lowest gates first; a dropped choice adds nothing, and a token dropped by all its experts
# passes through on its residual alone. Here is the same step with a capacity factor of 1.1,
# and the choices rank 0's 16 tokens made, per expert.

# %%
CAPACITY_FACTOR = 1.1
capped = MoE(moe.router, moe.experts, RouterConfig(EXPERTS, TOP_K, capacity_factor=CAPACITY_FACTOR))
capped_step = expert_parallel_step(capped, x, target, EP, prior)
# one device routes each rank's block of tokens on its own, as the ranks do: the same drops
routing = capped.forward(x, ranks=EP, prior=prior)[1]["routing"]
print(f"rank 0's choices per expert: {routing.tokens_per_expert[0].tolist()}")

# %% [markdown]
# **Exercise 14.4 — predict, then check.** How many of rank 0's choices are dropped?

# %%
dropped_answer = None  # your prediction: rank 0's dropped choices

# %%
per_rank = TOKENS // EP
whole_batch = int(np.ceil(TOKENS * TOP_K / EXPERTS * CAPACITY_FACTOR))
floored = int(TOP_K * per_rank / EXPERTS * CAPACITY_FACTOR)
choices = routing.tokens_per_expert[0]
teach.check(
    "14.4",
    dropped_answer,
    expected=capped_step.loads[0].dropped,
    unit="choices",
    alternatives=[
        teach.Alternative(
            "a capacity from all 64 tokens",
            int(np.maximum(choices - whole_batch, 0).sum()),
            "Each rank routes its own tokens and counts its own capacity: T is a rank's 16.",
        ),
        teach.Alternative(
            "a capacity rounded down",
            int(np.maximum(choices - floored, 0).sum()),
            "Megatron-Core rounds the capacity up (ceil): a fractional slot is a whole slot.",
        ),
    ],
    hint="capacity = ceil(16·2/8 · 1.1); add up what each expert's count is over it",
)
print(f"every rank's dropped choices: {[load.dropped for load in capped_step.loads]}; the "
      f"capacity was {routing.capacity} a rank, {routing.capacity * EP} an expert in all")
teach.show(load_figure(routing, EP, capped_step.loads), "14_load")

# %% [markdown]
# ## 5. Two gradient bugs, and the property test that catches them
#
# After backward each rank holds gradients of its loss (the mean over its own tokens). Which
# must be reduced, and how?
#
# - The **router** is replicated: each rank's router gradient comes from its tokens only, a
#   part of the whole, and the ranks must average them (an all-reduce over the ep group).
# - Each **expert** lives on one rank, and its gradient already adds up the contributions of
#   every source rank's tokens, each scaled by that rank's `1/T`: it counts each of the `ep`
#   token shards at full weight, where the model's loss averages them.
#
# Both mistakes were reported in open MoE training code in 2025: expert gradients exactly
# twice too large with `ep = 2`, and router gradient parts that were never summed. A
# **property test** catches them: for many random layers, sizes and routings, the
# cluster's gradients must equal one device's. Here are two gradient syncs, one with both
# bugs and one that averages the router and leaves the experts alone, and that test.

# %%
def buggy_sync(rank, layer, grads):
    """Returns the gradients as they came out of backward: nothing reduced, nothing scaled."""
    return grads
    yield  # a rank program: collsim runs it with `yield from`


def router_only_sync(rank, layer, grads):
    """Averages the router's gradient over the ep group; the experts' stay as they came."""
    router = yield from rank.all_reduce(grads["router"], group=layer.group, op="avg")
    return {**grads, "router": router}


CASES = [(2, "uniform", 1), (4, "zipf", 2), (4, "adversarial", 3)]  # (ep, routing, seed)


def random_case(ep, kind, seed):
    """A random layer (2 experts a rank, top-2), 4 tokens a rank, their targets and a routing."""
    r = np.random.default_rng(seed)
    layer = MoE.init(8, 16, RouterConfig(2 * ep, 2), r)
    tokens, goal = r.normal(size=(4 * ep, 8)), r.normal(size=(4 * ep, 8))
    return layer, tokens, goal, routing_prior(kind, 4 * ep, 2 * ep, 2, ep, r)


def cluster_grads(sync, ep, kind, seed):
    """The gradients on ``ep`` ranks, reduced by ``sync``."""
    layer, tokens, goal, bias = random_case(ep, kind, seed)
    return expert_parallel_step(layer, tokens, goal, ep, bias, sync=sync).result.grads


def one_device_grads(ep, kind, seed):
    """The same layer's gradients on one device: the oracle."""
    layer, tokens, goal, bias = random_case(ep, kind, seed)
    return dense_step(layer, tokens, goal, ep, bias).grads


def property_test(sync):
    """The parameters whose gradients differ from one device's in any case."""
    wrong = set()
    for case in CASES:
        got, want = cluster_grads(sync, *case), one_device_grads(*case)
        wrong |= {k for k in want if not np.allclose(got[k], want[k], rtol=1e-10, atol=1e-14)}
    return sorted(wrong)


for sync in (buggy_sync, router_only_sync):
    print(f"{sync.__name__} differs from one device in: {property_test(sync)}")

# %% [markdown]
# **Exercise 14.5 — predict, then check.** With `ep = 2`, by what factor are `buggy_sync`'s
# expert gradients off from one device's (cluster / one device)?

# %%
expert_grad_factor_answer = None  # your prediction: expert gradient, cluster / one device

# %%
got, want = cluster_grads(buggy_sync, *CASES[0]), one_device_grads(*CASES[0])
teach.check(
    "14.5",
    expert_grad_factor_answer,
    expected=float(np.linalg.norm(got["w_up"]) / np.linalg.norm(want["w_up"])),
    rel=1e-9,
    unit="x",
    given=[teach.Quantity("ep", CASES[0][0], "ranks")],
    hint="each of the ep source ranks' tokens weighs 1/T_rank = ep/T, not 1/T",
)
router_ratio = np.linalg.norm(got["router"] - want["router"]) / np.linalg.norm(want["router"])
print(f"measured: w_up {np.linalg.norm(got['w_up']) / np.linalg.norm(want['w_up']):.6f}x; "
      f"the router is off by {router_ratio:.0%} of its norm (rank 0's part alone)")

# %% [markdown]
# **Exercise 14.6 — fix it.** Write `fixed_sync(rank, layer, grads)`, a rank program (use
# `yield from`): average `grads["router"]` over `layer.group` with
# `rank.all_reduce(..., group=layer.group, op="avg")`, and scale the experts' gradients
# (`"w_gate"`, `"w_up"`, `"w_down"`) so that they equal one device's. Return the dict. The
# check runs the property test's cases with it.

# %%
fixed_sync_answer = None  # your function: def fixed_sync(rank, layer, grads): ... yield from ...


# %%
def as_list(grads):
    return [grads[k] for k in ("router", "w_gate", "w_up", "w_down")]


teach.check_function(
    "14.6",
    fixed_sync_answer,
    lambda ep, kind, seed: as_list(one_device_grads(ep, kind, seed)),
    CASES,
    compare=lambda got, want: all(np.allclose(g, w, rtol=1e-10, atol=1e-14) for g, w in zip(got, want)),
    adapt=lambda sync: lambda ep, kind, seed: as_list(cluster_grads(sync, ep, kind, seed)),
    given={"ep": "ranks"},
    hint="the experts' gradients divided by layer.ep; the router's averaged",
)
from collsim.parallel.experts.sync import sync_grads  # the sync collsim's trainer runs

print(f"collsim's own sync_grads differs from one device in: {property_test(sync_grads)} "
      "(nothing)")

# %% [markdown]
# ## 6. Inside a node or across nodes
#
# On one DGX H100 the dispatch crosses NVLink: 18 links, 370.8 GB/s per direction at NCCL's
# efficiency. With 16 ranks on two nodes most tokens also have experts on the other node, and
# DeepEP sends each such token across **once per node**: over InfiniBand to the GPU with the
# same local index there (its rail: one 400 Gbit/s NIC, 47 GB/s effective), which forwards
# it over NVLink to each GPU of its node holding one of its experts. DeepEP's dispatch sends
# FP8 (one byte a value, plus one 4-byte scale per 128 values); the combine returns BF16.
#
# Below: DeepSeek-V3's shapes (hidden 7,168, 256 experts, top-8) with 512 tokens a GPU,
# moved count-only on the `dgx-h100` preset, one node and two. First, what rank 0 sends to
# the other node.

# %%
SMALL = DeepEPConfig(tokens=512)
across = deepep_routing(SMALL, nodes=2, gpus_per_node=8).reshape(16, SMALL.tokens, 2, 8)
crossing = int(across[0, :, 1].any(axis=1).sum())  # rank 0's tokens with an expert on node 1
FP8_ROW = round(SMALL.hidden * SMALL.dispatch_element)
print(f"rank 0 sends {crossing} of its {SMALL.tokens} tokens to node 1, each {FP8_ROW} B in FP8")

# %% [markdown]
# **Exercise 14.7 — predict, then check.** How long does rank 0's InfiniBand leg of the
# dispatch take, by bytes over the NIC's effective rate (`hardware.preset("dgx-h100")
# .inter.effective_rate`; leave the latency out)?

# %%
rdma_leg_answer = None  # your prediction: seconds (or a string like "100us")

# %%
H100 = hardware.preset("dgx-h100")
by_bytes = crossing * FP8_ROW / H100.inter.effective_rate
teach.check(
    "14.7",
    rdma_leg_answer,
    expected=by_bytes,
    rel=1e-3,
    unit="s",
    alternatives=[
        teach.Alternative(
            "over NVLink's rate",
            crossing * FP8_ROW / H100.intra.effective_rate,
            "Inside the node the token moves on NVLink, but this leg leaves the node through "
            "its NIC.",
        ),
        teach.Alternative(
            "the rows in BF16",
            crossing * SMALL.hidden * 2 / H100.inter.effective_rate,
            "The dispatch sends FP8: 1 byte a value and a 4-byte scale per 128.",
        ),
        teach.Alternative(
            "the NIC's line rate",
            crossing * FP8_ROW / H100.inter.nic_rate,
            "400 Gbit/s is the line rate; NCCL reaches about 47 GB/s of its 50.",
        ),
    ],
    hint="tokens crossing x bytes a row / 47 GB/s",
)
inside, two_nodes = deepep_bandwidth(SMALL, nodes=1), deepep_bandwidth(SMALL, nodes=2)
print(f"simulated InfiniBand leg: {format_time(two_nodes.dispatch_legs['dispatch-inter'])}; "
      f"NVLink leg after it: {format_time(two_nodes.dispatch_legs['dispatch-intra'])}")
for bw in (inside, two_nodes):
    print(f"EP{bw.ep}: dispatch {format_time(bw.dispatch_time)}, "
          f"{format_rate(bw.dispatch)} as DeepEP counts ({bw.link})")

# %% [markdown]
# Across nodes the dispatch takes several times longer, and the InfiniBand leg is most of
# it: the NIC is about an eighth of NVLink. That is why DeepSeek-V3 limits each token to 4
# nodes and sends it to each node once, and why DeepEP forwards inside the node over NVLink.
# docs/moe.md sets collsim's figures for DeepEP's full setting (4,096 tokens a GPU) beside
# the ones DeepEP published, and explains the gap (what each counts, the H800's slower
# NVLink, the legs overlapping in DeepEP's kernels).

# %% [markdown]
# ## Takeaways
#
# - The router's **gates** are the chosen scores renormalised over the `k` experts
#   (Exercise 14.1).
# - A token sends `k` rows with one row per expert, fewer with one per rank: the **ragged
#   top-k form** `ep·(1 − C(E − E/ep, k)/C(E, k))` (Exercise 14.2).
# - The dispatch's bytes are the routing's: only rows for experts on other ranks cross,
#   `d·b` each (Exercise 14.3); skewed routing makes one rank the straggler.
# - **Capacity** is counted per rank, rounded up; the choices over it are dropped
#   (Exercise 14.4).
# - Expert gradients are divided by `ep`, router gradients averaged over the group; a
#   property test against one device catches both mistakes (Exercises 14.5 and 14.6).
# - Across nodes the NIC sets the dispatch's time (Exercise 14.7).
#
# On the command line:
#
#     collsim verify moe --ep 4 --experts 8 --top-k 2 --capacity-factor 1.25 --routing zipf
#     collsim viz moe-routing --out routing.png
#     collsim viz moe-load --out load.png
#     collsim viz moe-timeline --out timeline.png
#     python benchmarks/deepep_bandwidth.py
