# %% [markdown]
# # 15. Serving a model
# Why decode is memory-bound and its all-reduces latency-bound, one-shot and two-shot all-reduce predicted from α and β, the KV cache per GPU, and what moving prefill to its own GPUs buys.
#
# Training runs the same large batches over and over; serving answers requests. A request's
# **prefill** runs its whole prompt through the model at once and gives the first token;
# then every **decode** step runs one new token per sequence, reading the keys and values
# of the tokens before it from the **KV cache**, until the answer is done. Users feel two
# numbers, in vLLM's names: the **time to first token** (TTFT, the prefill and any wait
# before it) and the **time per output token** (TPOT, one decode step).
#
# collsim's decoder (`collsim.nn.Decoder`) is a small transformer with a KV cache;
# `collsim.parallel.inference.generate_on_cluster` runs its greedy decode on virtual GPUs,
# split as Megatron-LM splits a layer for tensor parallelism (lesson 7): every layer ends
# its attention and its MLP with an all-reduce over the TP group, two a layer a token. Each
# compute span takes the time the **roofline** gives it (Williams, Waterman and Patterson,
# 2009): the longer of its FLOPs at the GPU's peak and its bytes read at the GPU's HBM
# bandwidth.
#
# As before: replace each `..._answer = None` with your prediction and run the check.

# %%
import numpy as np

import collsim
from collsim import hardware, teach, topology
from collsim.collectives.formulas import closed_form
from collsim.collectives.small_messages import choice_grid
from collsim.nn import Decoder, DecoderConfig
from collsim.parallel.inference import InferenceSplit, generate_on_cluster
from collsim.parallel.inference.roofline import Roofline, ServedShape, weight_elements
from collsim.parallel.inference.serving import Deployment, serve, workload
from collsim.plan import PlanConfig
from collsim.plan.inference import plan_serving
from collsim.units import format_size, format_time
from collsim.viz.all_reduce_choice import all_reduce_choice_figure
from collsim.viz.decode_step import decode_step_figure

H100 = hardware.preset("dgx-h100")
A100 = hardware.preset("dgx-a100")
H100_GPU = Roofline.of_machine(H100)  # 989 TFLOP/s dense bf16, 3.35 TB/s of HBM

# a small decoder on one DGX H100, tensor-parallel over its 8 GPUs
model = Decoder.init(DecoderConfig(vocab=64, hidden=256, heads=8, layers=1, max_len=8))
prompt = np.random.default_rng(0).integers(0, 64, (1, 4))  # one sequence of 4 tokens
runs = {}
for algorithm in ("ring", "one_shot"):
    cluster = collsim.Cluster(hardware.topology(H100))
    split = InferenceSplit(tp=8, algorithm=algorithm)
    runs[algorithm] = generate_on_cluster(model, prompt, 3, split, cluster, H100_GPU)
alone = model.generate(prompt, 3)
print(f"tokens on 8 GPUs: {runs['ring'].tokens[0].tolist()}; on one device: "
      f"{alone.tokens[0].tolist()}")

# %% [markdown]
# ## 1. A decode step reads every weight for one token
#
# A decode step multiplies every weight by one token's activations: 2 FLOP per weight (a
# multiply and an add) per sequence in the batch. And it reads every weight from HBM once,
# whatever the batch. Llama 2 7B in bf16 (Touvron et al. 2023), at batch 1 on an H100: a
# step reads the weights below (all but the input embedding table, of which it reads one
# row).

# %%
LLAMA_7B = ServedShape.of(PlanConfig(model="llama2-7b"))
READ = weight_elements(LLAMA_7B)  # weights a decode step reads
print(f"Llama 2 7B: a decode step reads {READ / 1e9:.3g} billion weights, "
      f"{format_size(READ * H100_GPU.bytes_per_element)} in bf16")
print(f"H100: {H100_GPU.peak_flops / 1e12:g} TFLOP/s, HBM {H100_GPU.hbm_bandwidth / 1e12:g} TB/s")

# %% [markdown]
# **Exercise 15.1 — predict, then check.** How long does one decode step of Llama 2 7B
# take at batch 1 on one H100, by the roofline (the weights alone; the KV cache of a short
# context is small beside them)? Work out both sides, the arithmetic at the peak and the
# bytes at the HBM bandwidth, and take the one that decides.

# %%
decode_step_answer = None  # your prediction, in seconds (or a string such as "2ms")

# %%
step = H100_GPU.cost_of(flops=2 * READ, elements_read=READ)
teach.check(
    "15.1",
    decode_step_answer,
    expected=step.seconds,
    rel=2e-3,
    unit="s",
    given=[teach.Quantity("bytes", 2, "bytes a bf16 weight")],
    alternatives=[
        teach.Alternative(
            "the arithmetic's time 2N / peak",
            step.compute_seconds,
            "At batch 1 the GPU's multipliers wait for the weights to arrive: the step "
            "takes the longer of the two times, and the HBM reads are much longer.",
        )
    ],
    hint="max(2·N / peak FLOP/s, N · 2 B / HBM bytes/s), N the weights read",
)
print(f"compute {format_time(step.compute_seconds)}, HBM {format_time(step.memory_seconds)}: "
      f"{step.bound}-bound")

# %% [markdown]
# The multipliers idle for more than 99 % of the step. A larger batch shares the same read
# among more tokens: the step's time stays put while its arithmetic grows, until the two
# meet. That batch is **B_crit**: 2·B FLOP per weight at the peak against the weight's
# bytes at the HBM bandwidth, `B_crit = peak / HBM · bytes / 2` tokens a step
# (`Roofline.critical_batch`). Below it a decode step is **memory-bound**; a prefill of P
# tokens does P tokens' arithmetic over one read, so a long prompt is **compute-bound**.
#
# **Exercise 15.2 — predict, then check.** B_crit of an A100 SXM in bf16: 312 TFLOP/s
# dense, 2.039 TB/s of HBM (`hardware.preset("dgx-a100")`: `.compute_rate`,
# `.hbm_bandwidth`)?

# %%
a100_critical_batch_answer = None  # your prediction: tokens a decode step

# %%
A100_GPU = Roofline.of_machine(A100)
teach.check(
    "15.2",
    a100_critical_batch_answer,
    expected=A100_GPU.critical_batch,
    rel=5e-3,
    unit="tokens",
    alternatives=[
        teach.Alternative(
            "the H100's B_crit",
            H100_GPU.critical_batch,
            "The A100's ratio of peak to HBM bandwidth is its own: 312 TFLOP/s over 2.039 TB/s.",
        )
    ],
    hint="peak / HBM · 2 B / 2: in bf16 the twos cancel",
)
print(f"B_crit: A100 {A100_GPU.critical_batch:.0f}, H100 {H100_GPU.critical_batch:.0f} tokens")

# %% [markdown]
# Serving a few users at a time sits far below B_crit, so the weights' read sets the TPOT;
# that is why servers batch many requests into each decode step (continuous batching), and
# why the KV cache's memory, which bounds that batch, matters (section 3).
#
# ## 2. The decode all-reduces: tiny, so α decides
#
# Under tensor parallelism each of those steps ends every attention and every MLP with an
# all-reduce of `batch · hidden` values: for Llama 2 70B (hidden 8192) at batch 1 in bf16,
# 16 KiB. Lesson 5's ring takes `2(K−1)` steps, each paying α. vLLM's custom all-reduce and
# NCCL's symmetric-memory kernels use two other algorithms inside an NVLink node, where
# every GPU can read its peers' memory:
#
# - **one-shot**: every GPU reads every peer's whole buffer and adds: one step,
#   `(K−1)·S` bytes received;
# - **two-shot**: a reduce-scatter and an all-gather, each with all peers at once: two
#   steps, the ring's `2(K−1)/K·S` bytes.
#
# Take 8 GPUs on a switch with the H100's NVLink hop: α = 0.5 µs a message (two links of
# 0.25 µs), β = 370.8 GB/s.

# %%
K, S = 8, 16 * 2**10  # GPUs; bytes of one decode all-reduce (Llama 2 70B, batch 1, bf16)
ALPHA, BETA = 0.5e-6, 370.8e9
switch = collsim.Cluster(topology.switch(K, "370.8GB/s", "0.25us"))


def all_reduce_time(algorithm, size=S):
    """One all-reduce of ``size`` bytes of bf16 on the switch, simulated (count-only)."""
    return switch.all_reduce(count=size // 2, dtype="bfloat16", algorithm=algorithm).time


# %% [markdown]
# **Exercise 15.3 — predict, then check.** How long does the one-shot all-reduce of 16 KiB
# on these 8 GPUs take? Build it from α, β, K and S: how many steps, and how many bytes
# does a GPU take in?

# %%
one_shot_answer = None  # your prediction, in seconds (or a string such as "3us")

# %%
formula = {a: closed_form("all_reduce", a, K, S, ALPHA, BETA).time_s
           for a in ("one_shot", "two_shot", "ring")}
teach.check(
    "15.3",
    one_shot_answer,
    expected=formula["one_shot"],
    rel=2e-3,
    unit="s",
    ranks=K,
    alternatives=[
        teach.Alternative("two-shot's time", formula["two_shot"],
                          "Two-shot pays two steps; one-shot pays one α and takes in every "
                          "peer's whole buffer, (K−1)·S bytes."),
        teach.Alternative("the ring's time", formula["ring"],
                          "The ring's 2(K−1) steps each pay α; one-shot has one step."),
        teach.Alternative("the bytes alone, (K−1)·S/β", (K - 1) * S / BETA,
                          "Every message also pays α, and at 16 KiB α is most of the time."),
        teach.Alternative("one peer's buffer, α + S/β", ALPHA + S / BETA,
                          "Each GPU reads all K−1 peers' buffers, not one."),
    ],
    hint="one step: α + (K−1)·S/β",
)
for algorithm, seconds in formula.items():
    print(f"{algorithm:>8}: closed form {format_time(seconds)}, simulated "
          f"{format_time(all_reduce_time(algorithm))}")

# %% [markdown]
# One-shot moves `(K−1)/2` times the bytes of two-shot but pays one α less, so it wins
# while the message is small. Setting their closed forms equal gives the size where they
# cross.
#
# **Exercise 15.4 — predict, then check.** Above what message size does two-shot beat
# one-shot on these 8 GPUs?

# %%
crossover_answer = None  # your prediction, in bytes (or a string such as "100KiB")

# %%
one_vs_two = ALPHA * BETA * K / ((K - 1) * (K - 2))
one_vs_ring = (2 * K - 3) * ALPHA * BETA * K / ((K - 1) * (K - 2))
teach.check(
    "15.4",
    crossover_answer,
    expected=one_vs_two,
    rel=2e-3,
    unit="B",
    ranks=K,
    alternatives=[
        teach.Alternative("where one-shot meets the ring", one_vs_ring,
                          "The exercise asks for two-shot, which beats the ring at every size: "
                          "the ring's bytes in 2 steps instead of 2(K−1)."),
    ],
    hint="α + (K−1)S/β = 2α + 2(K−1)S/(Kβ), solved for S",
)
for size in (24 * 2**10, 48 * 2**10):  # either side of the crossover, simulated
    print(f"{format_size(size)}: one-shot {format_time(all_reduce_time('one_shot', size))}, "
          f"two-shot {format_time(all_reduce_time('two_shot', size))}")

# %% [markdown]
# The picture does this for every size and every number of GPUs of one DGX H100 node, on
# its NVLink hop, and adds NVLS (the NVSwitch adds the buffers itself), which takes over
# for large messages. The dashed lines are where vLLM's custom all-reduce changes its
# choice (vLLM's `custom_all_reduce.cuh`: one-shot for 2 GPUs, for up to 4 below 512 KiB
# and up to 8 below 256 KiB; NCCL from 8 MiB). vLLM switches at sizes several times larger:
# each of its steps also waits on a barrier across the GPUs, flags written and polled over
# NVLink, a few microseconds that the model's α of one hop does not hold. A larger α moves
# the crossover up in proportion.

# %%
teach.show(all_reduce_choice_figure(choice_grid("dgx-h100")), "15_all_reduce_choice")

# %% [markdown]
# Back to the 8-GPU decode run of the first cell. Its ring run is what NCCL itself runs on
# this preset (its ring, with the LL protocol the preset picks for small messages), which
# pays 14 hops of NVLink latency an all-reduce. The picture draws one decode step of the
# one-shot run from its trace: a row per GPU, the roofline's compute, each all-reduce.

# %%
for algorithm, run in runs.items():
    call = run.all_reduces[-1]
    print(f"{algorithm:>8}: {call.message_bytes} B an all-reduce, {format_time(call.seconds)} "
          f"each; decode step {format_time(run.decode_step_seconds[-1])}")
teach.show(decode_step_figure(runs["one_shot"]), "15_decode_step")

# %% [markdown]
# The toy's layer is small, so its compute is a sliver beside even one-shot's all-reduce. A
# real layer is not: one layer of Llama 2 70B on 8 H100s reads about 216 MB of weights a GPU,
# about 66 µs at batch 1 by the roofline; its two all-reduces add about 30 µs with NCCL's
# ring and about 2 µs with one-shot. That difference, on every layer of every token, is why
# vLLM and TensorRT-LLM ship their own small-message all-reduce.
#
# ## 3. The KV cache per GPU
#
# Every decode step attends over the keys and values of all the tokens before it, so they
# stay in HBM: 2 (keys and values) · layers · kv_heads · head_dim · tokens · bytes per
# sequence. Under tensor parallelism each GPU holds its heads' share, under pipeline
# parallelism its stage's layers. Llama 2 70B uses **grouped-query attention** (Ainslie et
# al. 2023): its 64 query heads share 8 key/value heads of 128 values each, so its cache
# is 8 times smaller than its 64 heads would need.
#
# **Exercise 15.5 — predict, then check.** With Llama 2 70B (80 layers) on 8 GPUs of
# tensor parallelism in bf16, how many bytes of KV cache does one GPU hold for each token of
# each sequence?

# %%
kv_per_token_answer = None  # your prediction, in bytes (or a string such as "1MiB")

# %%
LLAMA_70B = PlanConfig(model="llama2-70b", tp=8, gpu_memory="80GB")
plan = plan_serving(LLAMA_70B, H100_GPU, batch=16, prompt=4000, new_tokens=96)
teach.check(
    "15.5",
    kv_per_token_answer,
    expected=plan.kv_bytes_per_token,
    unit="B",
    ranks=8,
    given=[teach.Quantity("layers", 80, "layers")],
    alternatives=[
        teach.Alternative(
            "8 times too many: 64 heads' keys and values, or the whole group's",
            8 * plan.kv_bytes_per_token,
            "Only the 8 key/value heads are cached, and 8 TP ranks split them: one each.",
        )
    ],
    hint="2 · layers · (kv_heads / tp) · head_dim · 2 B",
)
print(f"16 sequences of 4096 tokens: {format_size(plan.kv_cache_bytes)} of KV cache and "
      f"{format_size(plan.weight_bytes)} of weights a GPU; {plan.max_batch} such sequences "
      f"fit in {format_size(plan.gpu_memory)}")

# %% [markdown]
# `collsim plan --inference --model llama2-70b --tp 8 --machine dgx-h100 --batch 16
# --prompt-len 4000 --new-tokens 96` prints the same plan, with the prefill's and the
# decode step's roofline times. What is left beside the weights decides how many sequences
# a decode step can batch, and so how close it gets to B_crit.
#
# ## 4. Prefill and decode on separate GPUs
#
# A GPU that serves many requests has to fit each new prompt's prefill between its decode
# steps. vLLM's scheduler (before chunked prefill) ran a waiting prefill first, so every
# running sequence waited for it: a gap between two tokens that holds a whole prefill.
# DistServe (Zhong et al. 2024) and Splitwise (Patel et al. 2024) give prefill its own
# GPUs: a prefill GPU runs the prompt and sends the request's KV cache over the network to
# a decode GPU, which adds the request to its running batch.
#
# `serve` runs both on 4 GPUs, one model instance each, with continuous batching of up to
# 4 sequences a decode step: **colocated** (every GPU prefills and decodes its own share)
# and **disaggregated** 1:3 (one GPU prefills, three decode), on 12 requests arriving at
# once, prompts of 64 tokens. The toy is scaled so that a prefill lasts as many decode
# steps as a 700-token prompt of a 13B model on an A100 (prompt ÷ B_crit, about 5), and
# the KV cache is a real array, moved as a flow over the network.

# %%
SMALL = DecoderConfig(vocab=64, hidden=64, heads=4, layers=1, max_len=80)
small_model = Decoder.init(SMALL)
TOY_GPU = Roofline(25e12, 2e12)  # 25 TFLOP/s, 2 TB/s of HBM: B_crit = 12.5 tokens
requests = workload(12, prompt_len=64, output_len=8, vocab=64, seed=0)
served = {}
for name, deployment in (("colocated", Deployment(0, 4, 4)), ("1:3", Deployment(1, 3, 4))):
    cluster = collsim.Cluster(topology.switch(4, "10TB/s", "0.01us"))
    served[name] = serve(small_model, requests, deployment, cluster, TOY_GPU)

# %% [markdown]
# **Exercise 15.6 — predict, then check.** How many bytes does the disaggregated run send
# for one request's KV cache? The toy's arrays are float64 (8 bytes a value), 1 layer,
# hidden 64, a 64-token prompt.

# %%
kv_transfer_answer = None  # your prediction, in bytes (or a string such as "1MiB")

# %%
moved = served["1:3"].kv_transfers[0]
teach.check(
    "15.6",
    kv_transfer_answer,
    expected=moved.nbytes,
    unit="B",
    given=[teach.Quantity("tokens", 64, "prompt tokens"), teach.Quantity("hidden", 64, "width")],
    alternatives=[
        teach.Alternative(
            "the cache in bf16 (2 bytes a value)",
            moved.nbytes // 4,
            "A real server sends bf16; the simulation sends the float64 arrays it computed.",
        )
    ],
    hint="2 (keys and values) · layers · prompt tokens · hidden · 8 B",
)
print(f"{len(served['1:3'].kv_transfers)} KV caches moved, "
      f"{format_time(moved.end - moved.start)} each on the network")
for name, run in served.items():
    m = run.metrics
    print(f"{name:>9}: TTFT mean {format_time(m.ttft.mean)}, TPOT mean {format_time(m.tpot.mean)}"
          f", ITL p99 {format_time(m.itl.p99)}, {m.tokens_per_second / 1e6:.3g} M tokens/s")
# each request generated alone on one device: the tokens that crossed the network agree
print(f"disaggregated tokens equal one device's: {served['1:3'].matches(small_model)}")

# %% [markdown]
# Disaggregated, no gap between two tokens holds a prefill any more: the TPOT falls, the
# tail of the inter-token gaps (ITL p99) most. The TTFT rises: one GPU prefills all twelve
# prompts in a row, where four shared them. Both papers size the two pools to meet a TTFT
# and a TPOT target together; with this burst of requests, the lone prefill GPU is the
# queue. `collsim infer --requests 24 --disaggregate 1:3 ...` runs the larger workload of
# docs/inference.md, and `--disaggregate 2:2` moves the balance.

# %% [markdown]
# ## Takeaways
#
# - A **decode step reads every weight for one token a sequence**: below B_crit =
#   peak / HBM · bytes / 2 tokens a step (295 on an H100, 153 on an A100 in bf16) it is
#   memory-bound, and batching is free until it reaches B_crit (Exercises 15.1, 15.2).
# - Its **tensor-parallel all-reduces are tiny**, so α decides: one-shot (α + (K−1)S/β)
#   beats two-shot below αβ·K/((K−1)(K−2)), and both beat the ring's 2(K−1) steps
#   (Exercises 15.3, 15.4); vLLM's thresholds are higher because its steps also wait on a
#   barrier.
# - The **KV cache per GPU** is 2 · layers/pp · kv_heads/tp · head_dim · tokens · bytes;
#   grouped-query attention divides it by heads/kv_heads (Exercise 15.5), and the memory
#   left beside the weights bounds the batch (`collsim plan --inference`).
# - **Disaggregation** takes the prefills out of the decode GPUs' gaps (TPOT, and its tail,
#   fall) at the cost of a KV-cache transfer (Exercise 15.6) and of a prefill pool that
#   must keep up (TTFT).
#
# Try `collsim viz decode-step --tp 4 --pp 2 -a one_shot` for a decode step with pipeline
# stages, `collsim infer --crossovers` for the crossovers on both presets, and
# docs/inference.md for the numbers set beside vLLM's, NCCL's and the papers'.
