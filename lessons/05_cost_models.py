# %% [markdown]
# # 5. Cost models: latency, bandwidth and congestion
# α + n/β: latency- vs bandwidth-bound, where tree and ring cross, and what congestion on a shared link costs.
#
# Lesson 4 counted bytes. Time needs two more numbers per link: its **latency** $\alpha$
# (seconds before the first byte arrives) and its **bandwidth** $\beta$ (bytes per
# second). This is the cost model MPI and NCCL developers reason with (Hockney's model, as
# Thakur, Rabenseifner & Gropp 2005 use it for MPICH's collectives), and the closed forms in
# `collsim.collectives.formulas` are written in it. The simulator uses the same $\alpha$ and
# $\beta$ per link and adds what the closed forms leave out: links shared by several
# transfers at once.
#
# As before: replace each `..._answer = None` with your prediction and run the check. Times
# may be given in seconds or as strings such as `"15us"`, sizes in bytes or as `"64KiB"`.

# %%
from collections import Counter

import collsim
from collsim import CountOnly, teach, topology
from collsim.collectives.formulas import closed_form
from collsim.topology import path_alpha_beta, route
from collsim.units import format_rate, format_size, format_time
from collsim.viz.sweep import sweep, sweep_figure
from collsim.viz.utilization import utilization_figure

# %% [markdown]
# ## One message: α + n/β
#
# $$T(n) = \alpha + \frac{n}{\beta}$$
#
# Small messages cost about $\alpha$ whatever their size (**latency-bound**); large ones
# cost about $n/\beta$ (**bandwidth-bound**). The two terms are equal at $n = \alpha\beta$.
#
# **Exercise 5.1.** Predict the time to send 1 MiB over one link with $\alpha = 5\,\mu s$
# and $\beta = 100$ GB/s ($10^{11}$ bytes/s), in seconds.

# %%
send_time_answer = None  # your prediction: seconds for 1 MiB (or a string like "12us")


# %%
def send_time(cluster, nbytes):
    """Simulated time for rank 0 to send ``nbytes`` to rank 1 (a payload with no data)."""

    def program(rank):
        if rank.id == 0:
            yield rank.send(1, CountOnly(nbytes))
        elif rank.id == 1:
            yield rank.recv(0)

    return cluster.run(program).time


pair = collsim.Cluster(topology.ring(2, bandwidth="100GB/s", latency="5us"))
alpha, beta = path_alpha_beta(pair.topology, 0, 1)
teach.check(
    "5.1",
    send_time_answer,
    expected=send_time(pair, 2**20),
    rel=1e-3,
    unit="s",
    **teach.one_message_slips(alpha, beta, 2**20),
    hint="α + n/β with n = 2^20 bytes and β = 10^11 bytes/s",
)
print(f"alpha = {format_time(alpha)}, beta = {format_rate(beta)}, "
      f"alpha*beta = {format_size(alpha * beta)}")
print(f"{'n':>10} {'simulated':>10} {'n/beta':>10} {'(n/beta)/alpha':>14}")
for n in (8, 1024, 64 * 1024, int(alpha * beta), 2**20, 64 * 2**20):
    t = send_time(pair, n)
    bound = (
        "latency-bound"
        if n / beta < alpha
        else "bandwidth-bound"
        if n / beta > alpha
        else "balanced"
    )
    print(f"{format_size(n):>10} {format_time(t):>10} {format_time(n / beta):>10} "
          f"{n / beta / alpha:>14.3g}  {bound}")

# %% [markdown]
# ## A collective: steps · α + bytes / β
#
# A collective is a sequence of steps; each step pays $\alpha$ once and moves its bytes at
# $\beta$. The ring all-reduce of lesson 4 on $K$ ranks:
#
# $$T_\text{ring} = \underbrace{2(K-1)\,\alpha}_\text{latency term}
# + \underbrace{\frac{2(K-1)}{K}\,\frac{S}{\beta}}_\text{bandwidth term}$$
#
# **Exercise 5.2.** On a ring of $K = 8$ ranks ($\alpha = 5\,\mu s$,
# $\beta = 100$ GB/s), at what buffer size $S$ (bytes) are the two terms equal? Below it
# the all-reduce is latency-bound, above it bandwidth-bound.

# %%
balance_size_answer = None  # your prediction: S in bytes where latency term = bandwidth term

# %%
k = 8
one_byte = closed_form("all_reduce", "ring", k, 1, alpha, beta)
latency_term = one_byte.steps * alpha  # steps·α, the part that does not grow with S
per_byte = one_byte.time_s - latency_term
balance = latency_term / per_byte
teach.check(
    "5.2",
    balance_size_answer,
    expected=balance,
    rel=1e-3,
    unit="B",
    ranks=k,
    given=[
        teach.Quantity("αβ", alpha * beta, "a link moves in one latency", "B"),
        teach.Quantity("2(K-1)", 2 * (k - 1), "steps"),
    ],
    hint="set 2(K-1)·α equal to 2(K-1)/K · S/β and solve for S",
)
print(f"latency term {format_time(latency_term)}; bandwidth term {format_time(per_byte)} "
      f"per byte, {format_time(per_byte * 2**20)} per MiB")
ring8 = collsim.Cluster(topology.ring(k, bandwidth="100GB/s", latency="5us"))
for size in (balance / 64, balance, 64 * balance):
    t = ring8.all_reduce(count=int(size) // 4, dtype="float32").time
    print(f"S = {format_size(size):>10}: simulated {format_time(t):>10} = "
          f"{t / latency_term:6.3g} x the latency term")

# %% [markdown]
# ## Tree against ring
#
# A binomial tree all-reduce (reduce to a root, then broadcast) needs only
# $2\lceil\log_2 K\rceil$ steps, but every step moves the **whole** buffer:
#
# $$T_\text{tree} = 2\lceil\log_2 K\rceil\left(\alpha + \frac{S}{\beta}\right)$$
#
# Fewer steps, more bytes: the tree wins for small buffers, the ring for large ones.
# Libraries choose the algorithm by message size for exactly this reason (Thakur et al.
# 2005 describe MPICH's choices).
#
# **Exercise 5.3.** Write `crossover(K, alpha, beta)`: the buffer size $S$ (bytes) at which
# $T_\text{tree} = T_\text{ring}$. The check compares it with a numerical solution of
# collsim's closed forms on several clusters ($K \ge 4$).

# %%
crossover_answer = None  # your function: def crossover(K, alpha, beta): return ...


# %%
def closed_form_crossover(K, alpha, beta):
    """Bisection on collsim's closed forms: the S where tree and ring take equal time."""

    def tree_minus_ring(size):
        tree = closed_form("all_reduce", "tree", K, size, alpha, beta).time_s
        return tree - closed_form("all_reduce", "ring", K, size, alpha, beta).time_s

    low, high = 0.0, 1.0
    while tree_minus_ring(high) < 0:
        high *= 2
    for _ in range(200):
        middle = (low + high) / 2
        low, high = (middle, high) if tree_minus_ring(middle) < 0 else (low, middle)
    return (low + high) / 2


cases = [(4, 5e-6, 100e9), (8, 5e-6, 100e9), (16, 10e-6, 100e9), (64, 2e-6, 25e9),
         (12, 1e-6, 300e9), (1000, 5e-6, 50e9)]
correct_5_3 = teach.check_function("5.3", crossover_answer, closed_form_crossover, cases,
                                   compare=lambda got, want: abs(got - want) <= 1e-6 * want,
                                   unit="B", given={"K": "ranks", "alpha": "latency (s)",
                                                    "beta": "bandwidth (B/s)"},
                                   hint="write 2⌈log2 K⌉(α + S/β) = 2(K-1)(α + S/(Kβ)) and "
                                   "solve it for S; ⌈log2 K⌉ is math.ceil(math.log2(K))")

# %% [markdown]
# Now the simulation: a sweep of buffer sizes on one switch of 16 ranks, tree against ring,
# in count-only mode (the real schedules on the simulated network, sizes without data, so
# a sweep takes a fraction of a second). On a switch a rank-to-rank path crosses two
# links, so its $\alpha$ is twice a link's. The dashed line marks where the fastest
# algorithm changes; the dotted one where the fastest becomes bandwidth-bound.

# %%
switch16 = collsim.Cluster(topology.switch(16, bandwidth="100GB/s", latency="5us"))
a16, b16 = path_alpha_beta(switch16.topology, 0, 1)
rule = crossover_answer if correct_5_3 and crossover_answer is not None else closed_form_crossover
predicted = rule(16, a16, b16)
data = sweep(switch16, algorithms=["tree", "ring"], sizes=[2**e for e in range(4, 29)])
for i, before, after in data.changes():
    print(f"simulated: {before} fastest up to {format_size(data.sizes[i])}, "
          f"{after} from {format_size(data.sizes[i + 1])}")
print(f"closed forms: crossover at {format_size(predicted)} (path alpha {format_time(a16)})")
teach.show(sweep_figure(switch16, data=data), "05_sweep_tree_vs_ring")

# %% [markdown]
# The right panel is what nccl-tests reports, *bus bandwidth*
# ($\text{busbw} = \frac{S}{t}\cdot\frac{2(K-1)}{K}$): for large buffers the ring's
# approaches the link's 100 GB/s, while the tree's stays far below it, because every tree
# step sends the whole buffer.
#
# collsim has two more all-reduce algorithms, and the same sweep with all four shows a
# richer picture: **halving-doubling** ($2\log_2 K$ steps and the ring's bytes) takes both
# prizes on a switch for large buffers, and for tiny ones the 2-step **naive** algorithm
# wins, because when the buffer is a few bytes the saturated root costs nothing.

# %%
everything = sweep(switch16, sizes=[2**e for e in range(4, 29, 2)])
teach.show(sweep_figure(switch16, data=everything), "05_sweep_all_algorithms")

# %% [markdown]
# ## Congestion: when transfers share a link
#
# The closed forms assume no two transfers of one step use the same link. When they do,
# the link's bandwidth is split between them. collsim's network (`model="maxmin"`, the
# default) shares each link **max-min fairly**: flows crossing a saturated link get equal
# shares, unless another link already limits them to less. `model="ideal"` ignores the
# other flows (every transfer gets the full $\beta$, like a congestion-unaware
# simulator); the difference between the two is what congestion costs.
#
# Lesson 4's naive all-reduce on a switch of 8 is the clearest case: 7 buffers arrive on
# the root's one down-link at once.

# %%
S = 64 * 2**20
switch8 = topology.switch(8, bandwidth="100GB/s", latency="5us")
naive = {}
for model in ("maxmin", "ideal"):
    naive[model] = collsim.Cluster(switch8, model=model).all_reduce(
        count=S // 4, dtype="float32", algorithm="naive")
    print(f"naive all-reduce of {format_size(S)}, {model=}: {format_time(naive[model].time)}")
print(f"max-min / ideal: {naive['maxmin'].time / naive['ideal'].time:.3g}x")
teach.show(utilization_figure(switch8, naive["maxmin"],
                              title="naive all-reduce, max-min sharing: the root's link is the bottleneck"),
           "05_utilization_naive_maxmin")
teach.show(utilization_figure(switch8, naive["ideal"],
                              title='naive all-reduce, model="ideal": every link looks busy'),
           "05_utilization_naive_ideal")

# %% [markdown]
# Read the two pictures row by row. With max-min sharing, the root's link (`switch → r0`
# in the gather step, `r0 → switch` in the send-back step) is full while each of the other
# links runs at $1/(K-1)$ of its bandwidth: they wait for the root. The ideal model lets
# all 7 flows through the root's link at full speed each: the subtitle's "busiest slice"
# is far above 100 %, a load no real link can carry, and the time it reports is too short
# by the factor printed above.
#
# Congestion also hides in well-designed algorithms. Run the ring all-reduce on a ring of
# 8 GPUs, but with the ranks ordered 0, 2, 4, 6, 1, 3, 5, 7 (as a careless mapping of
# ranks to devices could do). The "neighbours" are now several links apart (the first
# line printed below counts the hops), and every link of the ring carries two transfers
# at once.
#
# **Exercise 5.4.** With max-min sharing, by what factor is the mis-ordered ring slower than
# the ring in order, for a 64 MiB buffer?

# %%
misordered_slowdown_answer = None  # your prediction: time (mis-ordered) / time (in order)

# %%
ring_topology = topology.ring(8, bandwidth="100GB/s", latency="5us")
order = [0, 2, 4, 6, 1, 3, 5, 7]
pairs = list(zip(order, order[1:] + order[:1]))  # who sends to whom at every step
hops = [len(route(ring_topology, a, b)) for a, b in pairs]
per_link = Counter(link for a, b in pairs for link in route(ring_topology, a, b))
print(f"links between consecutive ranks of {order}: {hops}")
print(f"transfers crossing each link in one step: {sorted(set(per_link.values()))}")
ratios, times = {}, {}
for model in ("maxmin", "ideal"):
    cluster = collsim.Cluster(ring_topology, model=model)
    in_order = cluster.all_reduce(count=S // 4, dtype="float32")
    shuffled = cluster.all_reduce(count=S // 4, dtype="float32", group=order)
    times[model] = (in_order.time, shuffled.time)
    ratios[model] = shuffled.time / in_order.time
teach.check(
    "5.4",
    misordered_slowdown_answer,
    expected=ratios["maxmin"],
    rel=0.02,
    unit="x",
    given=[
        teach.Quantity("sharing", max(per_link.values()), "transfers on each link"),
        teach.Quantity("hops", max(hops), "links between neighbours"),
    ],
    hint="the bandwidth term dominates at 64 MiB: what share of a link does each transfer get?",
)
for model, (in_order_time, shuffled_time) in times.items():
    print(f"model={model!r:<8}: in order {format_time(in_order_time)}, "
          f"ranks {order}: {format_time(shuffled_time)} ({ratios[model]:.3g}x)")

# %% [markdown]
# The ideal model charges the mis-ordered ring only for the latency of its longer paths
# and misses the halved bandwidth; a closed form, which prices each transfer as if it were
# alone on its links, misses it too.

# %% [markdown]
# ## Takeaways
#
# - One message costs $\alpha + n/\beta$; a collective costs (steps)$\cdot\alpha$ +
#   (bytes on the busiest link)$/\beta$ (Hockney's model; Thakur, Rabenseifner & Gropp
#   2005).
# - Below the size where its two terms are equal an algorithm is **latency-bound** and
#   fewer steps win (tree, halving-doubling, even naive); above it it is
#   **bandwidth-bound** and fewer bytes on the busiest link win (ring, halving-doubling).
#   Exercise 5.2 found that size for the ring all-reduce.
# - Tree and ring cross where $2\lceil\log_2 K\rceil(\alpha + S/\beta) = 2(K-1)(\alpha +
#   S/(K\beta))$; libraries pick the algorithm by size.
# - Closed forms assume every transfer has its links to itself. When flows share a link
#   (a naive root, a badly mapped ring) max-min sharing divides its bandwidth, and a
#   congestion-unaware model reports times that are too short.
# - Next: lesson 6 weighs communication against the computation it should hide behind.
