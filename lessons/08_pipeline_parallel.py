# %% [markdown]
# # 8. Pipeline parallel: stages, micro-batches and the bubble
# Cut the layers into stages: the bubble (p−1)/(m+p−1), GPipe vs 1F1B memory, interleaving, zero bubble.
#
# Tensor parallelism splits every layer; **pipeline parallelism (PP)** splits the *stack* of
# layers. With `p` stages, GPU `s` holds layers `s·L/p … (s+1)·L/p − 1`; it receives the
# activation of the previous stage, runs its layers, and sends its output on — point-to-point
# messages, not collectives. To keep all GPUs busy, the batch is cut into `m`
# **micro-batches** that follow each other down the pipe (Huang et al. 2019, GPipe).
#
# `pipeline_step(name, stages, microbatches)` builds a schedule, cuts a small transformer into
# stages, and runs one real training step on the virtual cluster: activations and gradients
# are numpy arrays moving between ranks, and the gradients are checked against one device.
# Each pass takes a fixed simulated time: forward `t_f`, input-gradient `t_b`, weight-gradient
# `t_w` (equal by default, so a full backward `t_b + t_w` costs twice a forward), and the links
# are free, so what we see is the schedule itself.
#
# As before: replace each `..._answer = None` with your prediction and run the check.

# %%
from matplotlib.figure import Figure

from collsim import teach
from collsim.parallel.pipeline.runner import pipeline_step
from collsim.units import format_size, format_time
from collsim.viz.timeline import timeline_figure

P, M = 4, 8  # stages, micro-batches

# %% [markdown]
# ## The bubble
#
# GPipe runs all `m` forwards, then all `m` backwards. Stage `s` cannot start before the first
# micro-batch has crossed the `s` stages in front of it, and at the end it idles while the
# last backward drains. Per step every stage is busy `m·(t_f + t_b + t_w)` and idle
# `(p−1)·(t_f + t_b + t_w)`, so the share of the step a stage spends idle — the **bubble
# fraction** — is
#
#     bubble = (p − 1) / (m + p − 1)
#
# (Narayanan et al. 2021 write `(p−1)/m`: the same idle time, divided by the ideal compute
# time instead of the whole step.) collsim measures the bubble from the trace — the time
# inside the step in which a stage computes nothing — and sets the formula next to it.

# %%
gpipe = pipeline_step("gpipe", stages=P, microbatches=M)
print(gpipe.schedule.table())
print(f"\npass times (s): {gpipe.times};  gradients match one device: {gpipe.match}")

# %% [markdown]
# **Exercise 8.1 — predict, then check.** What fraction of the step does a stage spend idle
# with GPipe, `p = 4` stages and `m = 8` micro-batches?

# %%
gpipe_bubble_answer = None  # your prediction, a fraction between 0 and 1

teach.check(
    "8.1",
    gpipe_bubble_answer,
    expected=gpipe.bubble_fraction,
    rel=1e-3,
    unit="fraction",
    given=[teach.Quantity("p", P, "stages"), teach.Quantity("m", M, "micro-batches")],
    alternatives=[
        teach.Alternative(
            "Narayanan et al.'s bubble (p-1)/m",
            (P - 1) / M,
            "It divides the idle time by the ideal compute time; this "
            "exercise asks for the share of the whole step.",
        ),
        teach.Alternative(
            "a percentage",
            100 * gpipe.bubble_fraction,
            "Give the fraction between 0 and 1: 0.25, not 25.",
        ),
    ],
    hint="idle (p-1) pass slots out of the step's m + p - 1",
)
print(f"formula (p-1)/(m+p-1): {gpipe.formula_bubble_fraction():.6g}")
print(f"step {format_time(gpipe.step_time)}; each stage busy {format_time(gpipe.busy_time[0])}, "
      f"idle {format_time(gpipe.idle_time[0])}")
teach.show(timeline_figure(gpipe), "08_gpipe_timeline")

# %% [markdown]
# The bubble shrinks as `m` grows — more micro-batches to overlap with the fill and the drain.
# But the global batch is fixed by the optimizer (lesson 10), so a larger `m` means smaller
# micro-batches, which use the GPU less well.

# %%
print(" m   measured   (p-1)/(m+p-1)")
for m in (1, 2, 4, 8, 16, 32):
    r = pipeline_step("1f1b", stages=P, microbatches=m)
    print(f"{m:>2}   {r.bubble_fraction:8.2%}   {r.formula_bubble_fraction():8.2%}")

# %% [markdown]
# **Exercise 8.2 — predict, then check.** With `p = 4` stages, what is the smallest number of
# micro-batches `m` that brings the bubble down to at most 10 %? Solve the formula for `m`;
# collsim finds it by running the pipeline for `m = 1, 2, …`.

# %%
TARGET = 0.10
m_needed = next(m for m in range(1, 200)
                if pipeline_step("1f1b", P, m).bubble_fraction <= TARGET + 1e-12)

microbatches_needed_answer = None  # your prediction: a number of micro-batches

teach.check(
    "8.2",
    microbatches_needed_answer,
    expected=m_needed,
    unit="micro-batches",
    given=[teach.Quantity("p", P, "stages")],
    hint="solve (p-1)/(m+p-1) <= 0.1 for m, then take the next whole number",
)

# %% [markdown]
# ## GPipe vs 1F1B: same bubble, far less memory
#
# Every forward leaves activations behind that its backward needs. GPipe runs all `m`
# forwards first, so every stage holds **`m`** micro-batches of activations at its peak.
# **1F1B** (one forward, one backward; PipeDream-Flush, Narayanan et al. 2021) lets stage `s`
# run only `p − s` warm-up forwards, then alternate one forward with one backward, so a
# backward frees a micro-batch as soon as a new one arrives: stage `s` holds at most
# `min(p − s, m)` — at most `p`, however large `m` grows. The idle time does not change:
# `(p−1)(t_f + t_b + t_w)` per stage.

# %%
one_f_one_b = pipeline_step("1f1b", stages=P, microbatches=M)
print(one_f_one_b.schedule.table())
for r in (gpipe, one_f_one_b):
    print(f"\n{r.schedule.name:>5}: bubble {r.bubble_fraction:.2%};  peak in-flight micro-batches "
          f"per stage {r.peak_inflight} (formula {r.formula_peak_inflight()});  "
          f"peak activation bytes per stage {r.peak_activation_bytes}")
teach.show(timeline_figure(one_f_one_b), "08_1f1b_timeline")

# %%
fig = Figure(figsize=(9, 3.6), layout="constrained")
ax = fig.add_subplot()
for r, colour in ((gpipe, "#C44E52"), (one_f_one_b, "#4C72B0")):
    times = [0.0] + [t * 1e3 for t, _, _ in r.inflight[0]]
    held = [0] + [n for _, n, _ in r.inflight[0]]
    ax.step(times, held, where="post", color=colour, lw=2.2, label=r.schedule.name)
ax.set_xlabel("simulated time (ms)")
ax.set_ylabel("micro-batches held")
ax.set_title(f"Activations held by stage 0 (p={P}, m={M}), read from the run")
ax.legend()
teach.show(fig, "08_inflight_stage0")

# %% [markdown]
# **Exercise 8.3 — predict, then check.** Double the micro-batches to `m = 16` with 1F1B and
# `p = 4`. At most how many micro-batches of activations does stage 0 hold at once?

# %%
one_f_one_b_16 = pipeline_step("1f1b", stages=P, microbatches=16)

peak_inflight_answer = None  # your prediction: a number of micro-batches

teach.check("8.3", peak_inflight_answer, expected=one_f_one_b_16.peak_inflight[0],
            unit="micro-batches", given=[teach.Quantity("p", P, "stages")],
            alternatives=[teach.Alternative("m, what GPipe holds", 16,
                                            "1F1B starts its backwards after p - s warm-up "
                                            "forwards, and each backward frees one.")],
            hint="stage s holds min(p - s, m); stage 0 is s = 0")
gpipe_16 = pipeline_step("gpipe", stages=P, microbatches=16)
print(f"GPipe with m=16 holds {gpipe_16.peak_inflight[0]} on stage 0")

# %% [markdown]
# ## Interleaving: v model chunks per GPU shrink the bubble v-fold
#
# Megatron's **interleaved 1F1B** (Narayanan et al. 2021, §2.2) gives each GPU `v` smaller
# chunks of layers instead of one block: GPU `s` holds chunks `s, s + p, s + 2p, …` of the
# `p·v` chunks, so a micro-batch loops through the GPUs `v` times. Each pass is `1/v` as
# long, the fill and the drain shrink with it, and the idle time per stage becomes
# `(p−1)(t_f + t_b + t_w)/v`:
#
#     bubble = (p − 1) / (v·m + p − 1)
#
# The price: `v` times more point-to-point messages (`2·m·(p·v − 1)` per step instead of
# `2·m·(p − 1)`), somewhat more activation memory, and Megatron's rule that `m` be a
# multiple of `p`. (Megatron-LM's `--num-layers-per-virtual-pipeline-stage` sets `v`.)

# %%
interleaved = pipeline_step("interleaved", stages=P, microbatches=M, virtual=2)
print(interleaved.schedule.table(), end="\n\n")
for r in (one_f_one_b, interleaved):
    v = r.schedule.virtual
    print(f"{r.schedule.name:>11} v={v}: bubble {r.bubble_fraction:.2%} "
          f"(formula {r.formula_bubble_fraction():.2%});  {len(r.trace.transfers)} messages, "
          f"{format_size(sum(r.run.stats.bytes_sent))};  match {r.match}")
print(f"\npeak in-flight on each stage, counted in chunks (1/v of a stage's activations): "
      f"{interleaved.peak_inflight}")
teach.show(timeline_figure(interleaved), "08_interleaved_timeline")

# %% [markdown]
# **Exercise 8.4 — write the formula.** Write `bubble(p, m, v)` that returns the bubble
# fraction of interleaved 1F1B with `v` chunks per stage (`v = 1` is plain 1F1B). The check
# *runs* each pipeline on the virtual cluster and compares with the bubble it measured.

# %%
bubble_answer = None  # your function: def bubble(p, m, v): return ...


def measured_bubble(p, m, v):
    return pipeline_step("interleaved" if v > 1 else "1f1b", p, m, virtual=v).bubble_fraction


def close(got, want):
    return abs(got - want) <= 1e-9 * abs(want)


teach.check_function("8.4", bubble_answer, measured_bubble,
                     cases=[(4, 8, 1), (4, 8, 2), (2, 4, 4), (8, 8, 2), (3, 6, 3)],
                     compare=close, unit="fraction",
                     given={"p": "stages", "m": "micro-batches", "v": "chunks per stage"},
                     alternatives=[teach.Alternative(
                         "Narayanan et al.'s bubble (p-1)/(v·m)", lambda p, m, v: (p - 1) / (v * m),
                         "It divides the idle time by the ideal compute time; the check measures "
                         "the share of the whole step.")],
                     hint="the idle time shrinks v-fold: (p-1)/v slots out of m + (p-1)/v")

# %% [markdown]
# ## Zero bubble: fill the gaps with weight gradients
#
# The backward of a layer is two matrix products: the **input gradient** `B` (`dX = dY·Wᵀ`),
# which the previous stage is waiting for, and the **weight gradient** `W` (`dW = Xᵀ·dY`),
# which nobody waits for. Qi et al. 2024 split them: send `B` upstream at once, and run the
# `W` passes later, in the places where 1F1B would idle. Their ZB-H1 schedule keeps 1F1B's
# memory (at most `p` micro-batches in flight, now on every stage) and, when
# `t_w ≤ min(t_f, t_b)`, idles only
#
#     (p − 1)·(t_f + t_b − t_w)    per stage, instead of 1F1B's (p − 1)·(t_f + t_b + t_w)
#
# (Their ZB-H2 and ZB-V schedules, with more memory, remove the bubble entirely.)

# %%
zb = pipeline_step("zb-h1", stages=P, microbatches=M)
print(zb.schedule.table())

# %% [markdown]
# **Exercise 8.5 — predict, then check.** With `p = 4`, `m = 8` and the pass times printed
# below (in seconds), how long does each stage idle in a ZB-H1 step? (Seconds, or a string
# such as `"2ms"`.)

# %%
print(f"pass times: {zb.times}")

zb_idle_time_answer = None  # your prediction, in seconds (or a string like "2ms")

teach.check(
    "8.5",
    zb_idle_time_answer,
    expected=zb.bubble_time,
    rel=1e-3,
    unit="s",
    given=[teach.Quantity("p-1", P - 1, "fill-and-drain slots")],
    alternatives=[
        teach.Alternative(
            "1F1B's idle time (p-1)(t_f+t_b+t_w)",
            one_f_one_b.bubble_time,
            "ZB-H1 fills part of it with the W passes.",
        )
    ],
    hint="(p-1)(t_f + t_b - t_w) with the pass times printed above",
)
print(f"\nzb-h1: bubble {zb.bubble_fraction:.2%} (formula {zb.formula_bubble_fraction():.2%}), "
      f"peak in-flight {zb.peak_inflight}, match {zb.match}")
print(f"1f1b : idle per stage {format_time(one_f_one_b.bubble_time)};  "
      f"zb-h1: {format_time(zb.bubble_time)}")
teach.show(timeline_figure(zb), "08_zb_h1_timeline")

# %% [markdown]
# ## All four side by side
#
# The same model and batch, four schedules. Which to use is a trade: GPipe is simplest and
# holds the most; 1F1B holds at most `p`; interleaving buys a smaller bubble with more
# messages; zero-bubble schedules reorder the backward halves. (Interleaved in-flight counts
# are in chunks, each `1/v` of a stage's activations.)

# %%
CLOSED_FORMS = {"gpipe": "(p-1)/(m+p-1)", "1f1b": "(p-1)/(m+p-1)",
                "interleaved": "(p-1)/(v·m+p-1)", "zb-h1": "(p-1)(t_f+t_b-t_w)/step"}
print(
    f"{'schedule':<17}{'bubble':>7}{'formula':>9}  {'closed form':<24}{'peak in-flight':<18}"
    "messages"
)
for r in (gpipe, one_f_one_b, interleaved, zb):
    v = r.schedule.virtual
    label = r.schedule.name + (f" v={v}" if v > 1 else "")
    print(
        f"{label:<17}{r.bubble_fraction:>7.2%}{r.formula_bubble_fraction():>9.2%}  "
        f"{CLOSED_FORMS[r.schedule.name]:<24}{str(r.peak_inflight):<18}{len(r.trace.transfers)}"
    )

# %% [markdown]
# ## Takeaways
#
# - A pipeline of `p` stages idles `(p−1)` passes per stage at fill and drain: the **bubble
#   fraction is `(p−1)/(m+p−1)`** for GPipe and 1F1B (Huang et al. 2019; Narayanan et al.
#   2021). More micro-batches shrink it, but the global batch caps `m`.
# - **1F1B** has the same bubble as GPipe but stage `s` holds `min(p−s, m)` micro-batches of
#   activations instead of `m`.
# - **Interleaving** `v` chunks per GPU divides the bubble by `v` — `(p−1)/(v·m+p−1)` — for
#   `v`-fold more pipeline messages and some more activation memory; `m` must be a multiple
#   of `p`.
# - **Zero bubble (ZB-H1)** splits the backward into `B` and `W` and moves `W` into the gaps:
#   idle `(p−1)(t_f+t_b−t_w)` with 1F1B's memory (Qi et al. 2024).
# - Every number here was measured from the simulated trace, and every run's gradients
#   matched one device.
#
# Next: lesson 9 splits the one dimension left whole so far, the sequence (context
# parallelism); lesson 10 then puts all the dimensions on one rank grid.
