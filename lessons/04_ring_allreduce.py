# %% [markdown]
# # 4. Ring all-reduce, step by step
# Reduce-scatter then all-gather: each rank sends 2(K−1)/K·N·b bytes, barely growing with K, while the naive root saturates its link.
#
# Lessons 2 and 3 ended with one all-reduce per training step (or its two halves, a
# reduce-scatter and an all-gather): every rank starts with its own gradient of $N$
# elements of $b$ bytes, and every rank must end with the sum. This lesson opens that
# collective up on a virtual cluster, chunk by chunk, and counts what it costs
# (Patarasuk & Yuan 2009, "Bandwidth optimal all-reduce algorithms for clusters of
# workstations").
#
# Steps are numbered from 1, as `collsim step` prints them ("step 1 of 6"); step 0 is the
# initial state, before any transfer.
#
# As before: replace each `..._answer = None` with your prediction and run the check.

# %%
from functools import lru_cache

import numpy as np

import collsim
from collsim import teach, topology
from collsim.collectives.formulas import closed_form
from collsim.collectives.ring import ring_all_reduce
from collsim.units import format_size, format_time
from collsim.viz.ring import ring_figure
from collsim.viz.traffic import traffic_figure

# %% [markdown]
# ## The obvious way, and its problem
#
# The obvious all-reduce: every rank sends its whole buffer to one root, the root adds
# them up and sends the sum back to everyone. Two steps. But the root receives $K-1$ whole
# buffers and sends $K-1$ whole buffers: all the traffic squeezes through one link,
# and the more ranks, the longer it takes. We measure that at the end.
#
# ## The ring: reduce-scatter, then all-gather
#
# Put the $K$ ranks on a ring (rank $r$ sends only to rank $(r+1) \bmod K$) and cut every
# buffer into $K$ chunks.
#
# - **Reduce-scatter**, steps $1 \ldots K-1$: at each step every rank sends one chunk to its right
#   neighbour, which *adds* it to its own copy of that chunk. A chunk travels round the
#   ring collecting one more rank's contribution per step; after $K-1$ steps each rank
#   holds one chunk that contains the sum over all $K$ ranks.
# - **All-gather**, steps $K \ldots 2(K-1)$: every rank passes finished chunks on to the right, which
#   *copy* them over their own, until every rank has every finished chunk.
#
# Four ranks, each holding eight numbers; collsim records every transfer and what every
# chunk contains after each step (`r0+r3` means "rank 0's and rank 3's values added").

# %%
K = 4
cluster = collsim.Cluster(topology.ring(K, bandwidth="100GB/s", latency="5us"))
buffers = [np.arange(8.0) + 10 * r for r in range(K)]
result = cluster.all_reduce(buffers, algorithm="ring")
for view in result.steps(include_initial=True):
    print(view)
print("every rank's output equals numpy's sum:",
      all(np.array_equal(out, np.sum(buffers, axis=0)) for out in result.outputs))

# %% [markdown]
# The same, drawn. After step 3 of 6 (the last of the reduce-scatter) each rank holds
# one chunk with all 4 contributions (dark); the all-gather then spreads those chunks,
# starting with step 4.

# %%
teach.show(ring_figure(result, step=K - 1), "04_ring_end_of_reduce_scatter")  # step 3 of 6
teach.show(ring_figure(result, step=K), "04_ring_first_all_gather_step")  # step 4 of 6

# %% [markdown]
# ## Bytes per rank: 2(K−1)/K · N · b
#
# Each of the $2(K-1)$ steps, every rank sends one chunk of $N/K$ elements of $b$ bytes:
#
# $$V_\text{rank} = 2(K-1)\cdot\frac{N b}{K} = \frac{2(K-1)}{K}\,N b$$
#
# **Exercise 4.1.** Predict the bytes each rank sends in a ring all-reduce of a 64 MiB
# buffer ($N = 16\,\text{Mi}$ float32 elements, $b = 4$) on $K = 8$ ranks.

# %%
ring_bytes_answer = None  # your prediction: bytes sent per rank

# %%
S = 64 * 2**20  # bytes: N·b
ring8 = collsim.Cluster(topology.ring(8, bandwidth="100GB/s", latency="5us"))
# count-only: the same schedule and network, sizes without data (no 64 MiB arrays needed)
big = ring8.all_reduce(count=S // 4, dtype="float32", algorithm="ring")
teach.check(
    "4.1",
    ring_bytes_answer,
    expected=big.stats.bytes_sent[0],
    unit="B",
    ranks=8,
    given=[
        teach.Quantity("b", 4, "bytes per float32 element"),
        teach.Quantity("N", S // 4, "elements in the buffer"),
    ],
    hint="2(K-1) steps, each sending one chunk of N/K elements of b bytes",
)
print(f"bytes sent per rank: {format_size(big.stats.bytes_sent[0])} on every rank: "
      f"{set(big.stats.bytes_sent) == {big.stats.bytes_sent[0]}} ({big.stats.steps} steps)")

# %% [markdown]
# ## Which chunk does rank r send at step s?
#
# Look at the step-through above: at step 1 rank 0 sends chunk 3, rank 1 chunk 0, ...;
# at the next step each rank sends the chunk it has just received (so it can add its own
# part to it and pass it on).
#
# **Exercise 4.2.** Write `chunk_sent(rank, step, K)`: the chunk index rank `rank` sends at
# step `step` (numbered from 1, as printed above: $1 \le s \le 2(K-1)$, both phases) of the
# ring all-reduce. The check
# compares it with collsim's schedule for every rank and step of several ring sizes.
# (Hint: work out the reduce-scatter first, then look at what the all-gather does.)

# %%
chunk_sent_answer = None  # your function: def chunk_sent(rank, step, K): return ...


# %%
@lru_cache
def _schedule(k):
    return ring_all_reduce(k)  # collsim's ring all-reduce, as data: steps of chunk moves


def schedule_chunk(rank, step, k):
    """The chunk ``rank`` sends at ``step`` (1-based), read from collsim's schedule."""
    move = next(m for m in _schedule(k).steps[step - 1] if m.src == rank)  # a Python list
    return move.chunks.start


cases = [(r, s, k) for k in (4, 2, 3, 5, 8) for s in range(1, 2 * (k - 1) + 1) for r in range(k)]


def from_0(rank, step, k):
    """What a rule that numbers the steps from 0 answers for step ``step`` (numbered from 1)."""
    return schedule_chunk(rank, step + 1, k) if step < 2 * (k - 1) else None


correct_4_2 = teach.check_function(
    "4.2", chunk_sent_answer, schedule_chunk, cases, unit="",
    given={"rank": "the sending rank", "step": "the step (from 1)", "k": "ranks in the ring"},
    alternatives=[teach.Alternative("steps numbered from 0", from_0,
                                    "The step-through numbers them from 1: step 1 is the "
                                    "first send.")],
    hint="at step 1 rank r sends the chunk just before its own; each later step, the chunk "
    "it has just received; keep the index in 0 .. K-1",
)

# %% [markdown]
# That rule is the whole algorithm. Here it is as a **rank program**: a generator that
# every rank runs, yielding sends and receives that the simulated network carries out. It
# uses your `chunk_sent` once it passes the check, otherwise the rule read from the
# schedule.


# %%
def my_ring_all_reduce(rank, x, chunk_rule):
    k, me = rank.size, rank.id
    right, left = (me + 1) % k, (me - 1) % k
    chunks = [c.copy() for c in np.array_split(x, k)]
    for step in range(1, 2 * (k - 1) + 1):  # steps 1 .. 2(K-1)
        outgoing = chunks[chunk_rule(me, step, k)]
        incoming = chunk_rule(left, step, k)  # the chunk my left neighbour sends now
        handle = yield rank.isend(right, outgoing)
        got = yield rank.recv(left)
        yield rank.wait(handle)
        if step <= k - 1:
            chunks[incoming] = chunks[incoming] + got  # reduce-scatter: add it in
        else:
            chunks[incoming] = got  # all-gather: copy the finished chunk
    return np.concatenate(chunks)


rule = chunk_sent_answer if correct_4_2 and chunk_sent_answer is not None else schedule_chunk
mine = cluster.run(lambda rank: my_ring_all_reduce(rank, buffers[rank.id], rule))
print("using", "your chunk_sent" if rule is chunk_sent_answer else "the schedule's rule")
print("outputs equal numpy's sum:",
      all(np.array_equal(out, np.sum(buffers, axis=0)) for out in mine.returns))
print(f"bytes sent per rank: {format_size(mine.stats.bytes_sent[0])} "
      f"(collsim's: {format_size(result.stats.bytes_sent[0])}); "
      f"the same on every rank: {mine.stats.bytes_sent == result.stats.bytes_sent}")
print(f"simulated time: {format_time(mine.time)} (collsim's: {format_time(result.time)})")

# %% [markdown]
# ## Why it barely grows with K
#
# $\frac{2(K-1)}{K}$ is 1 for $K = 2$ and approaches 2 from below: every rank sends about
# **twice its gradient**, whether there are 8 ranks or 1024. That is why ring
# all-reduce became the standard for data parallelism. The step count, $2(K-1)$, does grow
# with $K$, and each step pays the link latency $\alpha$ once. The time on a ring of links
# of bandwidth $\beta$ is
#
# $$T = 2(K-1)\,\alpha + \frac{2(K-1)}{K}\,\frac{N b}{\beta}$$
#
# The table runs the 64 MiB all-reduce on rings of 2 to 64 ranks (count-only) and compares
# the simulated time with that closed form, split into its latency and bandwidth terms.

# %%
alpha, beta = 5e-6, 100e9  # the links above: 5 us, 100 GB/s
print(f"{'K':>3} {'steps':>5} {'bytes/rank':>11} {'/ S':>7} {'simulated':>10} "
      f"{'closed form':>11} {'latency':>9} {'bandwidth':>9}")
for k in (2, 4, 8, 16, 32, 64):
    run = collsim.Cluster(topology.ring(k, "100GB/s", "5us")).all_reduce(
        count=S // 4, dtype="float32"
    )
    form = closed_form("all_reduce", "ring", k, S, alpha, beta)
    latency = form.steps * alpha
    sent = run.stats.bytes_sent[0]
    print(f"{k:>3} {run.stats.steps:>5} {format_size(sent):>11} {sent / S:>7.4g} "
          f"{format_time(run.time):>10} {format_time(form.time_s):>11} "
          f"{format_time(latency):>9} {format_time(form.time_s - latency):>9}")

# %% [markdown]
# The bandwidth column levels off; only the latency column keeps growing with $K$. For a
# large gradient the latency term stays small; lesson 5 shows where it takes over.
#
# ## The naive all-reduce and its saturated root
#
# Back to gather-and-send-back, now on a single **switch**: every rank has one link up to
# the switch and one down from it (100 GB/s each). In the gather step all $K-1$ buffers
# arrive on the same link, the switch's down-link to the root, and share its bandwidth.
#
# **Exercise 4.3.** In the naive all-reduce of the 64 MiB buffer on 8 ranks, how many bytes
# cross the link from the switch down to the root (rank 0)?

# %%
root_link_bytes_answer = None  # your prediction: bytes on the link switch -> r0

# %%
switch8 = topology.switch(8, bandwidth="100GB/s", latency="5us")
naive = collsim.Cluster(switch8).all_reduce(count=S // 4, dtype="float32", algorithm="naive")
ring_on_switch = collsim.Cluster(switch8).all_reduce(
    count=S // 4, dtype="float32", algorithm="ring"
)
teach.check("4.3", root_link_bytes_answer, expected=naive.stats.link_bytes[("switch", 0)],
            unit="B", ranks=8, given=[teach.Quantity("S", S, "bytes in one buffer")],
            hint="in the gather step every rank but the root sends its whole buffer to the root")
print(f"naive: {naive.stats.steps} steps; bytes on switch -> r0: "
      f"{format_size(naive.stats.link_bytes[('switch', 0)])}")
print(f"ring:  {ring_on_switch.stats.steps} steps; bytes on switch -> r0: "
      f"{format_size(ring_on_switch.stats.link_bytes[('switch', 0)])}")
for name, r in (("naive", naive), ("ring", ring_on_switch)):
    loads = r.stats.link_bytes.values()
    print(f"{name:<5}  busiest link {format_size(max(loads))}, all links together "
          f"{format_size(sum(loads))}")

# %% [markdown]
# Both algorithms move the same bytes in total (printed above); what differs is where.
# The pictures colour every link by the bytes it carried. Each picture has its own colour
# scale, so read the numbers in the subtitles: the naive root's two links carry $(K-1)$
# buffers each while every other link carries one; the ring spreads $\frac{2(K-1)}{K}$
# buffers evenly over every link, so its busiest link carries far less.

# %%
teach.show(traffic_figure(switch8, naive), "04_traffic_naive")
teach.show(traffic_figure(switch8, ring_on_switch), "04_traffic_ring")

# %% [markdown]
# And the time, as $K$ grows: the naive root's link carries $(K-1)$ buffers in each of its
# two steps, so its time grows like $2(K-1)\,Nb/\beta$, while the ring's stays near
# $2\,Nb/\beta$.

# %%
print(f"{'K':>3} {'naive':>10} {'ring':>10} {'naive / ring':>12}")
for k in (2, 4, 8, 16, 32, 64):
    c = collsim.Cluster(topology.switch(k, "100GB/s", "5us"))
    t_naive = c.all_reduce(count=S // 4, dtype="float32", algorithm="naive").time
    t_ring = c.all_reduce(count=S // 4, dtype="float32", algorithm="ring").time
    print(f"{k:>3} {format_time(t_naive):>10} {format_time(t_ring):>10} {t_naive / t_ring:>12.3g}")

# %% [markdown]
# ## Takeaways
#
# - Ring all-reduce = **reduce-scatter** ($K-1$ steps, adding) + **all-gather** ($K-1$
#   steps, copying); one rule, the `chunk_sent` of Exercise 4.2, says which chunk rank $r$
#   sends at step $s$ (numbered from 1) in both phases.
# - Each rank sends $\frac{2(K-1)}{K}\,N b$ bytes: under twice its buffer at any $K$
#   (Patarasuk & Yuan 2009), and every link carries the same load.
# - The step count $2(K-1)$ does grow with $K$: each step costs a latency $\alpha$.
# - The naive all-reduce takes 2 steps but pushes $(K-1)$ buffers through the root's link,
#   so its time grows linearly with $K$.
# - Next: lesson 5 puts latency and bandwidth into one cost model and compares algorithms
#   across message sizes.
