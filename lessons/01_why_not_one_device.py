# %% [markdown]
# # 1. Why one device is not enough
# 16 bytes per parameter for mixed-precision Adam, activations growing as L·B·s·d, and what checkpointing trades.
#
# A single GPU has a fixed amount of memory (80 GiB for an A100 or H100). Training a model
# needs far more than the weights themselves, and this lesson counts where it goes, with
# collsim's planner (`collsim.plan`): a closed-form calculator that answers at once for any
# model. The numbers follow Rajbhandari et al. 2020 (ZeRO) for the model states and
# Korthikanti et al. 2022 for the activations.
#
# **How the exercises work.** Each exercise has its own answer slot, such as
# `model_state_bytes_answer = None`. Replace `None` with your prediction (a number, a string
# with a unit such as `"64GiB"`, or a function where asked), run the cell and the check
# after it: it prints `Correct!` or how your answer is off (a factor of 2? a unit?). Left as
# `None`, the check prints the file and line of the slot to edit. Every number printed here is computed by collsim when
# you run the lesson; none is typed in.

# %%
from collsim import teach
from collsim.course.width import ljust  # pads by display width: a kanji takes two columns
from collsim.plan import plan
from collsim.units import format_size
from collsim.viz.memory import memory_figure

# %% [markdown]
# ## Model states: 16 bytes per parameter
#
# Take a model with $N$ parameters, trained in mixed precision (bf16) with Adam, the usual
# setup (Rajbhandari et al. 2020, ZeRO, section 3.1). For every parameter the GPU keeps
#
# | what | precision | bytes |
# |---|---|---|
# | the parameter used in forward and backward | bf16 | 2 |
# | its gradient | bf16 | 2 |
# | an fp32 master copy (updates too small for bf16 still add up) | fp32 | 4 |
# | Adam's first moment $m$ | fp32 | 4 |
# | Adam's second moment $v$ | fp32 | 4 |
#
# $$M_\text{state} = (2 + 2 + 4 + 4 + 4)\,N = 16N \text{ bytes}$$
#
# The last three rows are the optimizer states, $12N$. They stay in memory for the whole
# run, before a single activation is stored.
#
# **Exercise 1.1.** The 7B mixed-precision Adam memory example: $N = 7 \times 10^9$.
# Predict the bytes of model state (parameters + gradients + optimizer states) it needs.

# %%
model_state_bytes_answer = None  # your prediction: bytes of model state for a 7B model

# %%
report = plan(params="7B")  # only the parameter count: the planner counts model states
mem = report.memory
states = mem["params"] + mem["grads"] + mem["optimizer"]
n_params = report.derived["params"]
teach.check(
    "1.1",
    model_state_bytes_answer,
    expected=states,
    rel=1e-3,
    unit="B",
    given=[teach.Quantity("N", n_params, "parameters")],
    alternatives=[
        teach.Alternative(
            "the optimizer states alone (12N)",
            12 * n_params,
            "Add the bf16 parameters and gradients, 2 + 2 bytes each.",
        ),
        teach.Alternative(
            "the bf16 parameters alone (2N)",
            2 * n_params,
            "Training also keeps gradients and Adam's states.",
        ),
        teach.Alternative(
            "parameters and gradients only (4N)",
            4 * n_params,
            "Adam adds an fp32 copy, m and v: 12 more bytes each.",
        ),
    ],
    hint="bytes per parameter (one number per row of the table, added) times N",
)
print(f"parameters (bf16)            {format_size(mem['params']):>10}")
print(f"gradients (bf16)             {format_size(mem['grads']):>10}")
print(f"optimizer (fp32 copy, m, v)  {format_size(mem['optimizer']):>10}")
print(f"model states                 {format_size(states):>10} = {states:,} B")
print(f"= {states / n_params:g} bytes per parameter")
print(f"one GPU holds {format_size(mem['gpu_memory'])}: fits? {states <= mem['gpu_memory']}")

# %% [markdown]
# Plain fp32 training (no mixed precision) keeps 4 + 4 bytes of parameter and gradient and
# 8 bytes of Adam $m$ and $v$, again 16 bytes per parameter: mixed precision speeds up the
# arithmetic, it does not shrink the model states. The next cell asks the planner.

# %%
fp32 = plan(params="7B", precision="fp32").memory
fp32_states = fp32["params"] + fp32["grads"] + fp32["optimizer"]
print(f"fp32 Adam: {fp32_states / n_params:g} bytes per parameter")

# %% [markdown]
# ## Activations: L · B · s · d
#
# Backward needs the intermediate outputs of forward (the *activations*) to compute
# gradients, so forward keeps them. Their order of magnitude is
#
# $$M_\text{act} \sim L \cdot B \cdot s \cdot d$$
#
# for $L$ layers, micro-batch $B$, sequence length $s$ and hidden size $d$: a product, so
# doubling any one of them doubles the memory. Korthikanti et al. 2022 (Table 2) count the
# bytes exactly for one GPT layer with 16-bit activations, $a$ attention heads and hidden
# size $h$ (the $d$ above):
#
# $$M_\text{layer} = s\,B\,h\left(34 + \frac{5\,a\,s}{h}\right) \text{ bytes}$$
#
# The 34 collects every activation a layer stores (inputs of the matmuls, layer norms,
# GELU, dropout masks); the $5as/h$ term is the attention scores, an $s \times s$ matrix
# per head, so it grows with $s^2$. (Flash attention never stores the scores and drops that
# term; the planner keeps it, as the paper does.)
#
# **Exercise 1.2.** Write `activation_bytes(L, B, s, h, a)`: the activation bytes of $L$
# such layers. The check runs it against the planner on several models.

# %%
activation_bytes_answer = None  # your function: def activation_bytes(L, B, s, h, a): ...


# %%
def planner_activation_bytes(L, B, s, h, a):
    """The planner's activation bytes of the L transformer layers (one micro-batch)."""
    memory = plan(layers=L, hidden=h, heads=a, seq=s, micro_batch=B, global_batch=B).memory
    return memory["activations_layers"]


cases = [(32, 1, 2048, 4096, 32), (24, 4, 1024, 2048, 16), (2, 8, 512, 768, 12), (96, 1, 2048, 12288, 96)]
teach.check_function("1.2", activation_bytes_answer, planner_activation_bytes, cases,
                     compare=lambda got, want: abs(got - want) <= 1e-9 * want, unit="B",
                     given={"L": "layers", "B": "samples in the micro-batch",
                            "s": "tokens per sequence", "h": "hidden size", "a": "heads"},
                     hint="L times one layer's s·B·h·(34 + 5·a·s/h)")

# %% [markdown]
# Now a concrete model: a GPT of about 7B parameters (32 layers, hidden 4096, 32 heads,
# 2048-token sequences), micro-batch 1, on one GPU. The planner also counts the embedding's
# dropout mask and the output layer's logits, which sit outside the layers.

# %%
shape = dict(layers=32, hidden=4096, heads=32, seq=2048)
one_gpu = plan(**shape, micro_batch=1, global_batch=1)
m1 = one_gpu.memory
print(f"{one_gpu.derived['params'] / 1e9:.3g}B parameters (counted from the shape)")
print(f"activations per layer   {format_size(m1['activations_per_layer'])}")
print(f"activations, all layers {format_size(m1['activations_layers'])}")
print(f"activations in total    {format_size(m1['activations'])} (with embedding and logits)")
print(f"model states            {format_size(m1['params'] + m1['grads'] + m1['optimizer'])}")
print(f"total                   {format_size(m1['total'])} of {format_size(m1['gpu_memory'])}")
for name, change in (("micro-batch", dict(micro_batch=2, global_batch=2)),
                     ("layers", dict(layers=64))):
    m2 = plan(**{**shape, "micro_batch": 1, "global_batch": 1, **change}).memory
    print(
        f"double the {ljust(name, 14)} -> layers' activations x{m2['activations_layers'] / m1['activations_layers']:.3g}"
    )

# %% [markdown]
# Doubling the micro-batch or the depth doubles the activations, as $L \cdot B \cdot s \cdot d$
# says. What about the sequence length?
#
# **Exercise 1.3.** With the formula above, predict the factor by which one layer's
# activations grow when $s$ goes from 2048 to 4096 ($h = 4096$, $a = 32$, $B = 1$). The
# check compares with the planner.

# %%
seq_growth_answer = None  # your prediction: M_layer(s=4096) / M_layer(s=2048)

# %%
short = plan(**shape, micro_batch=1, global_batch=1).memory["activations_per_layer"]
long = plan(**{**shape, "seq": 4096}, micro_batch=1, global_batch=1).memory["activations_per_layer"]
teach.check(
    "1.3",
    seq_growth_answer,
    expected=long / short,
    rel=1e-3,
    unit="x",
    given=[teach.Quantity("s", shape["seq"], "tokens per sequence")],
    alternatives=[
        teach.Alternative(
            "2, the tokens alone", 2, "Each token's attention term 5as/h doubles as well."
        ),
        teach.Alternative(
            "4, all of it growing with s²",
            4,
            "Only the 5as/h term grows with s²; the 34 grows with s.",
        ),
    ],
    hint="M_layer(4096) / M_layer(2048) = 2·(34 + 5as'/h) / (34 + 5as/h), s' = 2s",
)
print(f"activations per layer: {format_size(short)} at s = {shape['seq']}, "
      f"{format_size(long)} at s = {2 * shape['seq']}")

# %% [markdown]
# More than double: the tokens double, and so does each token's attention-score term
# $5as/h$, which makes that term grow with $s^2$.
#
# ## What checkpointing trades
#
# Activation checkpointing (full recomputation) keeps only each layer's input, $2sBh$ bytes,
# and throws the rest away; backward runs the layer's forward again to get them back
# (Chen et al. 2016, "Training deep nets with sublinear memory cost"). Memory falls a lot,
# compute rises by one extra forward pass: forward costs about $2N$ FLOPs per token,
# backward $4N$ (the $6N$ per token of Kaplan et al. 2020), recomputation adds another $2N$.
#
# **Exercise 1.4.** By what factor does full recomputation multiply the FLOPs of a training
# step?

# %%
recompute_flops_answer = None  # your prediction: FLOPs with full recompute / FLOPs without

# %%
full = plan(**shape, micro_batch=1, global_batch=1, recompute="full")
mf = full.memory
ratio = full.compute["flops_per_step"] / one_gpu.compute["flops_per_step"]
teach.check(
    "1.4",
    recompute_flops_answer,
    expected=ratio,
    rel=1e-3,
    unit="x",
    given=[teach.Quantity("F", 6, "FLOPs per token and parameter without recompute")],
    alternatives=[
        teach.Alternative(
            "2, forward and backward again",
            2,
            "Recomputation re-runs only the forward, 2N of the 6N.",
        ),
    ],
    hint="(forward + backward + one more forward) / (forward + backward), in N",
)
print(f"activations per layer: {format_size(m1['activations_per_layer'])} -> "
      f"{format_size(mf['activations_per_layer'])} "
      f"({m1['activations_per_layer'] / mf['activations_per_layer']:.3g}x less)")
print(
    f"activations in total:  {format_size(m1['activations'])} -> {format_size(mf['activations'])}"
)
print(f"FLOPs per token per parameter: {one_gpu.compute['flop_per_token_per_param']} -> "
      f"{full.compute['flop_per_token_per_param']}")
print(
    f"total on one GPU: {format_size(mf['total'])} of {format_size(mf['gpu_memory'])}: fits? {mf['fits']}"
)

# %% [markdown]
# Hugging Face's Accelerate ND-parallel guide (2025) quotes practical figures for gradient
# checkpointing: 60-80 % less activation memory for 20-30 % more training time. Full recomputation as counted here is the extreme
# end (the most memory saved, the most compute added); Megatron's *selective*
# recomputation re-runs only the attention scores (`recompute="selective"` in the planner).
#
# Even with every activation recomputed, this 7B model does not fit on one GPU: the
# $16N$ of model states alone is too much. That part can only shrink by being **split
# across GPUs**. The picture shows one way, ZeRO (Rajbhandari et al. 2020): on 8 GPUs
# doing data parallelism, shard the optimizer states (ZeRO-1), then the gradients too
# (ZeRO-2), then the parameters (ZeRO-3, which PyTorch calls FSDP; lesson 3 runs them). The leftmost bar is
# what every GPU holds when nothing is sharded, the same as the single GPU above.

# %%
fig = memory_figure(**shape, world_size=8, micro_batch=1, global_batch=8)
teach.show(fig, "01_memory_by_zero_stage")

# %% [markdown]
# Sharding divides the three model-state parts, but not the activations: each GPU still
# runs its own micro-batch through every layer. With full recomputation as well:

# %%
fig = memory_figure(**shape, world_size=8, micro_batch=1, global_batch=8, recompute="full")
teach.show(fig, "01_memory_by_zero_stage_recompute")

# %% [markdown]
# ## Takeaways
#
# - Mixed-precision Adam keeps **16 bytes per parameter** ($2N$ bf16 parameters, $2N$
#   gradients, $12N$ fp32 master copy and Adam moments; ZeRO paper): a 7B model's states
#   exceed one 80 GiB GPU before any activation is stored.
# - Activations grow as the product $L \cdot B \cdot s \cdot d$; per layer
#   $sBh(34 + 5as/h)$ bytes (Korthikanti et al. 2022), so long sequences cost more than
#   linearly through the attention scores.
# - The two parts have different cures: **split** the $16N$ across GPUs (ZeRO,
#   tensor and pipeline parallelism), and **recompute** or shrink the micro-batch for the
#   activations. Full recomputation keeps $2sBh$ per layer and costs one more forward pass:
#   $8N$ FLOPs per token instead of $6N$.
# - Next: lesson 2 splits the *data* across GPUs and shows what they must communicate.
