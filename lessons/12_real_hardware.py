# %% [markdown]
# # 12. Real hardware: nodes, rails, protocols and stragglers
# NVSwitch against InfiniBand for one TP all-reduce, the NICs' ceiling on multi-node busbw, NCCL's LL/LL128/Simple crossover, one slow link in a ring and a tree, a watchdog report, and PAT's logarithmic all-gather across 64 nodes.
#
# So far every topology was generic: a ring, a switch, two levels of switches, with
# bandwidths we typed in. Real training runs on a few kinds of machine, and their numbers
# decide most of what lessons 5 to 7 said in general terms. collsim has three of them as
# presets (`collsim.hardware`), each number cited in the code:
#
# - **`dgx-a100`**: 8 A100 GPUs on NVSwitch (12 NVLink3 links of 25 GB/s per direction per
#   GPU) and 8 HDR InfiniBand NICs of 200 Gbit/s, one per GPU;
# - **`dgx-h100`**: 8 H100 GPUs on NVSwitch (18 NVLink4 links: 450 GB/s per direction per
#   GPU), 8 NDR NICs of 400 Gbit/s, and a switch that can add (NVLink SHARP);
# - **`pcie-8gpu`**: 8 A100 PCIe cards, two per PCIe switch, two switches per CPU socket.
#
# `hardware.topology(name, nodes)` builds `nodes` of them. NIC `j` of every node plugs into
# the leaf switch `rail{j}` (a **rail-aligned** fabric: GPU 3 of every node shares rail 3),
# and the leaves meet at a spine. Every link carries its **effective** rate, the line rate
# times the share of it NCCL's own topology model assumes (for the NICs, a measured share),
# and that is what the network uses.
#
# As before: replace each `..._answer = None` with your prediction and run the check.

# %%
import math

import numpy as np
from matplotlib.figure import Figure

import collsim
from collsim import hardware, teach
from collsim.collectives.degraded import degraded_ring_all_reduce_time
from collsim.collectives.formulas import bus_factor, closed_form
from collsim.errors import WatchdogTimeout
from collsim.hardware.protocols import PROTOCOLS, message_alpha_beta
from collsim.runtime.faults import Faults
from collsim.units import format_rate, format_size, format_time
from collsim.viz.sweep import size_axis

for name, machine in hardware.PRESETS.items():
    intra, inter = machine.intra, machine.inter
    fabric = "NVSwitch" if intra.kind == "nvswitch" else "PCIe"
    print(f"{name}: {machine.gpus_per_node} GPUs on {fabric}, "
          f"{format_rate(intra.effective_rate)} per GPU (line rate "
          f"{format_rate(intra.per_gpu_rate)}); {inter.nics} NICs of "
          f"{format_rate(inter.effective_rate)} (line rate {format_rate(inter.nic_rate)})")


# one message's (α, β) as the network charges it: the links' latency plus the protocol's
# latency for the slowest link class on the way, and the narrowest link's rate times the
# protocol's payload fraction
hop = message_alpha_beta


def busbw(result):
    """nccl-tests' bus bandwidth of a collective result: S/t · 2(n−1)/n for all-reduce."""
    return result.size_bytes / result.time * bus_factor(result.collective, result.group.size)


# %% [markdown]
# ## 1. Why TP stays inside a node
#
# Lesson 7 showed that a tensor-parallel layer sums its partial outputs with an all-reduce,
# four times per transformer layer per micro-batch (two forward, two backward), each on the
# critical path. Each carries one activation, `B·s·h` elements in bf16. Take Llama 2 70B's
# shape (hidden 8192, 80 layers; Touvron et al. 2023) with a 4096-token sequence, one per
# micro-batch, and TP over 8 GPUs, placed three ways:
#
# - on **one DGX H100**: the 8 GPUs meet at the NVSwitch;
# - on **8 DGX H100 nodes, one GPU each**: every message crosses an NDR NIC, on rail 0;
# - on **one PCIe server**: two GPUs share each PCIe switch, whose one uplink goes to a CPU,
#   and the two CPU sockets share one link.
#
# Each all-reduce runs in count-only mode (`count=`, `dtype=`: sizes without data, the same
# schedule and network) with the ring algorithm and NCCL's Simple protocol (section 3 is
# about protocols), so lesson 5's closed form applies. Every message pays the links'
# latency plus the protocol's own (Simple: 3.4 µs over NVLink, 14 µs over the network:
# NCCL's model of one ring step); `hop()` above adds the two.

# %%
SEQ, HIDDEN, LAYERS = 4096, 8192, 80  # Llama 2 70B, one 4096-token sequence per micro-batch
TP = 8
TP_COUNT = SEQ * HIDDEN  # elements of one (1, s, h) activation: what each TP all-reduce sums
TP_BYTES = TP_COUNT * 2  # bf16
SIMPLE = PROTOCOLS["simple"]

PLACEMENTS = {  # name: (topology, the TP group's ranks)
    "NVSwitch (1 x dgx-h100)": (hardware.topology("dgx-h100"), list(range(TP))),
    "InfiniBand (8 x dgx-h100, GPU 0 of each)": (hardware.topology("dgx-h100", nodes=8),
                                                 list(range(0, 8 * TP, 8))),
    "PCIe (1 x pcie-8gpu)": (hardware.topology("pcie-8gpu"), list(range(TP))),
}
CLUSTERS = {name: collsim.Cluster(g, protocol="simple") for name, (g, _) in PLACEMENTS.items()}


def tp_all_reduce(name, count=TP_COUNT):
    """One TP all-reduce of ``count`` bf16 elements on placement ``name`` (count-only)."""
    group = PLACEMENTS[name][1]
    return CLUSTERS[name].all_reduce(count=count, dtype="bfloat16", group=group, algorithm="ring")


def tp_closed_form(name, size=TP_BYTES):
    """The ring's closed form 2(K−1)(α + S/(K·β)), α and β of one hop between neighbours."""
    graph, group = PLACEMENTS[name]
    alpha, beta = hop(graph, group[0], group[1], SIMPLE)
    return closed_form("all_reduce", "ring", len(group), size, alpha, beta)


print(f"one TP all-reduce: {TP_COUNT:,} bf16 elements = {format_size(TP_BYTES)}, "
      f"{4 * LAYERS} of them per micro-batch")
print(f"{'placement':<42} {'α':>8} {'β':>10} {'simulated':>10} {'closed form':>11} "
      f"{'per micro-batch':>15}")
tp_time = {}  # one TP all-reduce's simulated time, by placement
for name, (graph, group) in PLACEMENTS.items():
    tp_time[name] = tp_all_reduce(name).time
    alpha, beta = hop(graph, group[0], group[1], SIMPLE)
    print(f"{name:<42} {format_time(alpha):>8} {format_rate(beta):>10} "
          f"{format_time(tp_time[name]):>10} {format_time(tp_closed_form(name).time_s):>11} "
          f"{format_time(4 * LAYERS * tp_time[name]):>15}")

# %% [markdown]
# On NVSwitch and on rail 0 every step of the ring crosses one switch between two GPUs and
# no two messages share a link, so the simulation and the closed form
# `2(K−1)(α + S/(K·β))` agree to the last digit. On PCIe they do not: GPUs share their
# switch's uplink and the sockets' link, which the closed form of one path cannot see, so
# the ring is slower still than its formula.
#
# **Exercise 12.1 — predict, then check.** By the closed form, how many times longer does
# the TP all-reduce take across InfiniBand than on NVSwitch? Call the closed form
# (`closed_form("all_reduce", "ring", 8, S, α, β)` from `collsim.collectives.formulas`,
# with each placement's `α` and `β` from `hop()`) rather than retyping it. Before you
# compute: is the ratio nearer the ratio of the `β`s or of the `α`s, and why?

# %%
tp_slowdown_answer = None  # your prediction: closed-form time across IB / time on NVSwitch

# %%
nvswitch, infiniband = list(PLACEMENTS)[:2]
by_formula = tp_closed_form(infiniband).time_s / tp_closed_form(nvswitch).time_s
teach.check(
    "12.1",
    tp_slowdown_answer,
    expected=by_formula,
    rel=1e-6,
    unit="x",
    ranks=TP,
    hint="closed_form(...).time_s across InfiniBand divided by the same on NVSwitch; "
    "at this size the bandwidth term dominates",
)
print(f"simulated: {tp_time[infiniband] / tp_time[nvswitch]:.4g}x slower")

# %% [markdown]
# At 64 MiB the bytes dominate, so the ratio is close to the ratio of the links' rates:
# 370.8 GB/s of NVLink4 against 47 GB/s of one NDR NIC; the latencies pull it a little
# lower. The picture sweeps the message size. Small messages are latency-bound, and there
# the ratio is the ratio of the `α`s; large ones pay the full ratio of the `β`s. Either way
# the TP all-reduce over InfiniBand sits on the critical path of every layer, which is why
# Megatron-LM keeps `tensor_parallel_size` at most the GPUs of one node (Narayanan et al.
# 2021) and Accelerate's ND-parallelism guide advises against TP over PCIe.

# %%
SIZES = [2**e for e in range(10, 31, 2)]  # 1 KiB .. 1 GiB


def mark_size(ax, size, text, y=0.03, ha="left", ls=":"):
    """A vertical line at ``size`` with a boxed label beside it (``y`` in axes fraction)."""
    ax.axvline(size, color="#333333", ls=ls, lw=1.5)
    ax.text(size, y, text, transform=ax.get_xaxis_transform(), va="top" if y > 0.5 else "bottom",
            ha=ha, fontsize=10, bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "#999999"})


def tp_placement_figure():
    """Time and busbw of the TP all-reduce against its size, one line per placement."""
    fig = Figure(figsize=(13, 5.4), layout="constrained")
    ax_t, ax_b = fig.subplots(1, 2)
    styles = [("#4C72B0", "o", "-"), ("#C44E52", "s", "--"), ("#8172B3", "^", "-.")]
    for name, (colour, marker, ls) in zip(PLACEMENTS, styles):
        runs = [tp_all_reduce(name, count=s // 2) for s in SIZES]
        style = dict(color=colour, marker=marker, ls=ls, lw=2.2, label=name)
        ax_t.plot(SIZES, [r.time for r in runs], **style)
        ax_b.plot(SIZES, [busbw(r) / 1e9 for r in runs], **style)
    for ax in (ax_t, ax_b):
        size_axis(ax, SIZES)
        ax.set_yscale("log")
        mark_size(ax, TP_BYTES, f" one TP all-reduce\n (Llama 2 70B: {format_size(TP_BYTES)})")
    ax_t.set_ylabel("time (s)", fontsize=12)
    ax_t.set_title("time of one all-reduce: lower is better", fontsize=12)
    ax_b.set_ylabel("bus bandwidth (GB/s)", fontsize=12)
    ax_b.set_title("busbw = S/t · 2(n−1)/n: higher is better", fontsize=12)
    ax_t.legend(title=f"TP group of {TP} GPUs", fontsize=10, loc="upper left")
    fig.suptitle("The same TP all-reduce on NVSwitch, InfiniBand and PCIe "
                 "(ring, Simple, count-only)", fontsize=14, fontweight="bold")
    return fig


teach.show(tp_placement_figure(), "12_tp_placement")

# %% [markdown]
# ## 2. Across nodes, the NICs set the busbw
#
# Data parallelism, unlike TP, has to leave the node: the gradient all-reduce spans every
# node. How fast can it be? Take two DGX A100 nodes, 16 GPUs, 8 HDR NICs per node: NVIDIA
# publishes an all-reduce busbw for them, which Exercise 12.2 works out from the NICs.
#
# Every byte that goes from one node to the other leaves through a NIC. A ring of all 16
# GPUs crosses between the nodes twice, and in each of its `2(K−1)` steps each crossing
# carries one chunk of `S/K`: in all `2(K−1)/K · S` through one NIC each way, which
# `busbw = S/t · 2(K−1)/K` turns into **busbw ≤ one NIC's rate**. NCCL does better
# (`nccl_ring` here): it cuts the buffer into `C` parts and runs one ring per part (a
# **channel**), each ring laid through every node's GPUs and crossing on its own rail, so
# the `C` NICs carry the traffic side by side and each moves `1/C` of it:
# **busbw ≤ C × one NIC**. Inside a node, NVLink's 240 GB/s per GPU is the ceiling.

# %%
A100 = hardware.preset("dgx-a100")
NIC_RATE = A100.inter.effective_rate  # one HDR NIC as NCCL drives it
print(f"dgx-a100: {A100.inter.nics} NICs x {format_rate(NIC_RATE)}; NVSwitch "
      f"{format_rate(A100.intra.effective_rate)} per GPU")
BUSBW_COUNT = 2**32  # 8 GiB of bf16, the top of NVIDIA's nccl-tests sweep
runs = {  # (nodes, algorithm)
    "1 node, ring (NVSwitch only)": (1, "ring"),
    "2 nodes, one ring of 16 GPUs": (2, "ring"),
    "2 nodes, nccl_ring (8 channels)": (2, "nccl_ring"),
    "4 nodes, nccl_ring (8 channels)": (4, "nccl_ring"),
    "2 nodes, hierarchical (2-D)": (2, "hierarchical"),
}
a100_busbw = {}
for name, (nodes, algorithm) in runs.items():
    cluster = collsim.Cluster(hardware.topology(A100, nodes=nodes))
    result = cluster.all_reduce(count=BUSBW_COUNT, dtype="bfloat16", algorithm=algorithm)
    a100_busbw[name] = busbw(result)
    print(f"{name:<34} {format_size(result.size_bytes)}: busbw {format_rate(a100_busbw[name]):>11}")

# %% [markdown]
# **Exercise 12.2 — predict, then check.** With NCCL's rings, one channel per NIC, what is
# the ceiling the NICs set on the all-reduce busbw of two DGX A100 nodes (bytes/s, or a
# string such as `"100GB/s"`)? Read the NIC count and rate from `hardware.preset("dgx-a100")`
# (`.inter.nics`, `.inter.effective_rate`).

# %%
nic_ceiling_answer = None  # your prediction, in bytes/s (or a string like "100GB/s")

# ranks=: the NIC count, so an answer of one NIC's rate is named as 1/8 of the ceiling
teach.check("12.2", nic_ceiling_answer, expected=A100.inter.nics * NIC_RATE, unit="B/s",
            ranks=A100.inter.nics, hint="one channel per NIC, each at the NIC's effective "
            "rate: the NICs' rates added up")
for name in ("2 nodes, nccl_ring (8 channels)", "4 nodes, nccl_ring (8 channels)"):
    print(f"{name}: {a100_busbw[name] / (A100.inter.nics * NIC_RATE):.1%} of the NICs' ceiling")

# %% [markdown]
# The ceiling does not depend on the number of nodes: with 4 nodes each ring crosses four
# times, but each NIC still carries one channel's crossing, `2(K−1)/K · S/C` each way. More
# nodes add steps, whose latency shows at small sizes, not bytes per NIC. The 2-D hierarchical all-reduce (reduce-scatter inside each node,
# all-reduce of each shard across nodes, all-gather inside) sends only `S/G` per GPU over
# the network, but its NVLink phases and its network phase take turns, so here it stays
# below the rings, which keep both busy at once.
#
# ## 3. Protocols: LL, LL128 and Simple
#
# Lesson 5's `α` was one number per link. NCCL adds its own per-message cost, which depends
# on how it signals that data has arrived (the NCCL documentation, `NCCL_PROTO`):
#
# - **LL** (low latency) stores 4 bytes of data with a 4-byte flag in every 8-byte word: the
#   receiver polls the data itself, so the latency is the lowest, but half the bytes on the
#   wire are flags;
# - **LL128** stores 120 bytes of data and an 8-byte flag per 128-byte line: almost all the
#   bandwidth, a little more latency;
# - **Simple** sends the data whole and signals with a memory fence: all the bandwidth, the
#   most latency.
#
# Each protocol is an `efficiency` (payload per wire byte) and a latency per message, by
# link class (NCCL's `src/graph/tuning.cc`):

# %%
for p in PROTOCOLS.values():
    print(f"{p.name:>6}: {p.efficiency:.4g} of the bandwidth, latency "
          f"{format_time(p.latency_for('nvlink'))} per message over NVLink, "
          f"{format_time(p.latency_for('net'))} over the network")

# %% [markdown]
# The same ring all-reduce on one DGX H100, forced to each protocol with
# `Cluster(topology, protocol=...)` (what `NCCL_PROTO` does), across sizes; and the
# cluster's default, `protocol="auto"`, which picks one per call from the closed forms, as
# NCCL's tuner does:

# %%
H100 = hardware.topology("dgx-h100")
NAMES = list(PROTOCOLS)  # ll, ll128, simple
PROTOCOL_SIZES = [2**e for e in range(4, 31, 2)]  # 16 B .. 1 GiB
by_protocol = {p: collsim.Cluster(H100, protocol=p) for p in NAMES}
auto = collsim.Cluster(H100)  # protocol="auto", the default on a hardware preset
protocol_times = {p: [] for p in NAMES}
auto_choice = []
print(f"{'S':>9} " + " ".join(f"{p:>10}" for p in NAMES) + "  auto chose")
for size in PROTOCOL_SIZES:
    for p in NAMES:
        result = by_protocol[p].all_reduce(count=size // 2, dtype="bfloat16", algorithm="ring")
        protocol_times[p].append(result.time)
    auto_choice.append(auto.all_reduce(count=size // 2, dtype="bfloat16",
                                       algorithm="ring").protocol.name)
    print(f"{format_size(size):>9} " + " ".join(f"{format_time(protocol_times[p][-1]):>10}"
                                                for p in NAMES) + f"  {auto_choice[-1]}")


def ring_time(size, protocol):
    """The ring's closed form on one DGX H100 with ``protocol``: α and β of one hop."""
    alpha, beta = hop(H100, 0, 1, protocol)
    return closed_form("all_reduce", "ring", 8, size, alpha, beta).time_s


worst = max(abs(protocol_times[p][i] / ring_time(s, PROTOCOLS[p]) - 1)
            for p in NAMES for i, s in enumerate(PROTOCOL_SIZES))
print(f"simulation against the closed form: at most {worst:.1e} apart")

# %% [markdown]
# Small messages: LL wins, because all 14 steps of the ring are latency and LL's is the
# lowest. Large messages: Simple wins, because the bytes dominate and LL sends twice as
# many. LL128 holds the middle. Each protocol's time is a straight line in `S`,
# `2(K−1)(α_p + S/(K·β·e_p))`, so two protocols cross where their lines meet.
#
# **Exercise 12.3 — predict, then check.** At which size `S` (bytes) does LL128 become as
# fast as LL for the ring all-reduce on one DGX H100 (K = 8)? One step of each protocol
# takes `α + λ_p + S/(K·β·e_p)`: `α` and `β` the links' latency and rate
# (`path_alpha_beta(H100, 0, 1)`), `λ_p` the protocol's `latency_for("nvlink")` and `e_p`
# its `efficiency`. Set the two equal and solve for `S` (the links' `α` cancels).

# %%
ll128_crossover_answer = None  # your prediction, in bytes (or a string like "4MiB")


# %%
def crossover(a, b):
    """Where the closed forms of protocols ``a`` and ``b`` meet: both are lines in S."""
    big = 2.0**30  # two sizes on each line (not S = 0: a zero-byte call returns at once)
    slope = {p: (ring_time(2 * big, p) - ring_time(big, p)) / big for p in (a, b)}
    at_zero = {p: ring_time(big, p) - slope[p] * big for p in (a, b)}  # where each line starts
    return (at_zero[b] - at_zero[a]) / (slope[a] - slope[b])


ll_to_ll128 = crossover(PROTOCOLS["ll"], PROTOCOLS["ll128"])
ll128_to_simple = crossover(PROTOCOLS["ll128"], PROTOCOLS["simple"])
teach.check(
    "12.3",
    ll128_crossover_answer,
    expected=ll_to_ll128,
    rel=1e-6,
    unit="B",
    ranks=8,
    hint="λ_LL + S/(K·β·e_LL) = λ_LL128 + S/(K·β·e_LL128), solved for S",
)
print(f"LL128 meets Simple at {format_size(ll128_to_simple)}")


# %%
def protocol_figure():
    """Time and busbw of the ring on one DGX H100 for each protocol; the background says
    what ``auto`` chose, the dashed lines where the closed forms cross."""
    fig = Figure(figsize=(13, 5.4), layout="constrained")
    ax_t, ax_b = fig.subplots(1, 2)
    colours = {"ll": "#55A868", "ll128": "#DD8452", "simple": "#4C72B0"}
    markers = {"ll": "s", "ll128": "^", "simple": "o"}
    edges = ([PROTOCOL_SIZES[0]] + [math.sqrt(a * b) for a, b in
             zip(PROTOCOL_SIZES, PROTOCOL_SIZES[1:])] + [PROTOCOL_SIZES[-1]])
    for ax in (ax_t, ax_b):
        for i, chosen in enumerate(auto_choice):
            ax.axvspan(edges[i], edges[i + 1], color=colours[chosen], alpha=0.12, lw=0)
        for where, text, y in ((ll_to_ll128, "LL = LL128", 0.97),
                               (ll128_to_simple, "LL128 = Simple", 0.80)):
            if ax is ax_t:  # labelled once; the busbw lines reach the top of their panel
                mark_size(ax, where, f"{text}\nat {format_size(where)} ", y=y, ha="right", ls="--")
            else:
                ax.axvline(where, color="#333333", ls="--", lw=1.5)
    for p in NAMES:
        style = dict(color=colours[p], marker=markers[p], lw=2.2, label=p)
        ax_t.plot(PROTOCOL_SIZES, protocol_times[p], **style)
        bus = [s / t * bus_factor("all_reduce", 8) / 1e9
               for s, t in zip(PROTOCOL_SIZES, protocol_times[p])]
        ax_b.plot(PROTOCOL_SIZES, bus, **style)
    for ax in (ax_t, ax_b):
        size_axis(ax, PROTOCOL_SIZES)
        ax.set_yscale("log")
    ax_t.set_ylabel("time (s)", fontsize=12)
    ax_t.set_title("time: lower is better (shading: what protocol=auto chose)", fontsize=12)
    ax_b.set_ylabel("bus bandwidth (GB/s)", fontsize=12)
    ax_b.set_title("busbw: LL tops out at half of Simple", fontsize=12)
    ax_t.legend(title="NCCL_PROTO", fontsize=10, loc="center left")
    fig.suptitle("Ring all-reduce on one DGX H100 with each protocol (count-only)",
                 fontsize=14, fontweight="bold")
    return fig


teach.show(protocol_figure(), "12_protocols")

# %% [markdown]
# This is the latency floor nccl-tests shows at small sizes: below a few hundred KiB the
# time hardly moves with `S`, and the protocol's latency, not the link, sets it. For the
# plain ring, `auto` switches exactly where these closed forms cross, because it *is* the
# closed forms. NCCL's tuner decides from its own published table of latencies and
# bandwidths, per algorithm too (`collsim tune all-reduce --topology dgx-h100` prints it):
# with `algorithm="auto"` (the default on a preset) collsim asks that model, as NCCL does,
# among NCCL's ring on rails, the double binary tree, NVLS and NVLS-Tree, and the result's
# `choice` prints what it chose and why, as `NCCL_DEBUG=INFO` does
# (`Cluster(..., choice="closed_form")` lets collsim's own closed forms choose instead):

# %%
for size in (2**12, 2**30):
    choice = auto.all_reduce(count=size // 2, dtype="bfloat16", algorithm="auto").choice
    print(choice.info_line())
a100x2 = collsim.Cluster(hardware.topology("dgx-a100", nodes=2))
for size in (2**12, 2**30):
    print(a100x2.all_reduce(count=size // 2, dtype="bfloat16", algorithm="auto").choice.info_line())

# %% [markdown]
# ## 4. One slow link: the ring waits, the tree partly
#
# A cable that trains down to a lower rate, a NIC that flaps: one link runs slower than the
# rest. `collsim.runtime.faults` describes such a fault and `Cluster(..., faults=...)`
# applies it. Here GPU 5's NVLink port on one DGX H100 runs at a quarter of its rate (the
# command line's `--slow-link 5-nvswitch0:0.25`), and a 64 MiB all-reduce runs with the ring
# and with the tree (lesson 5), healthy and degraded. For each rank: when it finished its
# part (its last transfer, sent or received); the tree's below, the ring's after Exercise
# 12.4 asks you to predict it.

# %%
SLOW_LINK = "5-nvswitch0:0.25"
SLOW_RANK = 5  # the GPU at the slow end of the link
healthy = collsim.Cluster(H100, protocol="simple")
degraded = collsim.Cluster(H100, protocol="simple", faults=Faults.parse(slow_link=[SLOW_LINK]))
print(degraded.faults.describe()[0])


def finish_times(result):
    """When each group rank finished its part: the end of its last transfer."""
    last = {}
    for t in result.trace.transfers:
        for r in (t.src, t.dst):
            last[r] = max(last.get(r, 0.0), t.end)
    return [last[r] for r in result.group.ranks]


def show_finishes(algorithm):
    ratios = [
        s / h for s, h in zip(finished[algorithm, "slow link"], finished[algorithm, "healthy"])
    ]
    print(f"{algorithm}: healthy {format_time(max(finished[algorithm, 'healthy']))}, with the "
          f"slow link {format_time(max(finished[algorithm, 'slow link']))}; each rank's finish, "
          f"x its healthy one: {' '.join(f'{r:.2f}' for r in ratios)}")


finished = {}
for algorithm in ("ring", "tree"):
    for name, cluster in (("healthy", healthy), ("slow link", degraded)):
        result = cluster.all_reduce(count=TP_COUNT, dtype="bfloat16", algorithm=algorithm)
        finished[algorithm, name] = finish_times(result)
show_finishes("tree")  # the ring's after Exercise 12.4, which predicts it

# %% [markdown]
# **The ring.** In every one of its `2(K−1)` steps rank 4 sends to rank 5 and rank 5 to
# rank 6, both over the slow port, and no rank can start its next step before the chunk of
# this one has arrived. So every step runs at the slow link's pace, for every rank:
# `t = 2(K−1)(α + S/(K·f·β))` with `f = 1/4` (`collsim.collectives.degraded`).
#
# **Exercise 12.4 — predict, then check.** By that closed form
# (`degraded_ring_all_reduce_time(k, size, alpha, beta, factor)`, with `α` and `β` of one
# NVSwitch hop from `hop(H100, 0, 1, SIMPLE)`), how many times longer does the 64 MiB ring
# all-reduce take with the port at a quarter than healthy (`factor=1`)?

# %%
slow_ring_answer = None  # your prediction: degraded ring time / healthy ring time

# %%
alpha, beta = hop(H100, 0, 1, SIMPLE)
ring_slowdown = (degraded_ring_all_reduce_time(8, TP_BYTES, alpha, beta, factor=0.25)
                 / degraded_ring_all_reduce_time(8, TP_BYTES, alpha, beta, factor=1.0))
teach.check(
    "12.4",
    slow_ring_answer,
    expected=ring_slowdown,
    rel=1e-6,
    unit="x",
    ranks=8,
    given=[teach.Quantity("1/f", 4, "times slower port")],
    hint="(α + S/(K·f·β)) / (α + S/(K·β)): the latency does not slow down",
)
simulated = max(finished["ring", "slow link"]) / max(finished["ring", "healthy"])
print(f"simulated: {simulated:.4g}x")
show_finishes("ring")

# %% [markdown]
# **The tree.** Lesson 5's binomial tree reduces to rank 0 in `log2 K` steps, then
# broadcasts back. Rank 5 uses its port in two of the six steps: once to send its buffer up
# to its parent, once to receive the result from it. Everyone waits for the late reduce, but
# in the broadcast only the branch below the slow link is late again: most ranks finish
# about 1.5 times later than healthy, and two ranks about twice.
#
# **Exercise 12.5 — read the run.** Besides rank 5, which rank finishes last in the tree
# with the slow link? Look at the schedule's first step
# (`cluster.all_reduce(..., algorithm="tree").schedule.steps[0]`) or at the ratios above.

# %%
tree_slow = finished["tree", "slow link"]
tree_ratio = [s / h for s, h in zip(tree_slow, finished["tree", "healthy"])]
others = [r for r in range(TP) if r != SLOW_RANK]
late = max(others, key=lambda r: tree_slow[r])
slow_partner_answer = None  # your answer: a rank number

teach.check_rank("12.5", slow_partner_answer, expected=late, ranks=TP,
                 why=f"it is rank {SLOW_RANK}'s parent in the tree: it receives rank "
                     f"{SLOW_RANK}'s buffer over the slow port, and in the broadcast it sends "
                     f"the result back over it ({tree_ratio[late]:.2f}x its healthy time)",
                 about={r: f"it finishes at {tree_ratio[r]:.2f}x its healthy time, after the "
                           f"late reduce but without the slow broadcast" for r in others
                        if r != late},
                 hint="the slow port is rank 5's: which rank does rank 5 send to, and hear "
                 "back from, in a binomial tree?")


# %%
def slow_link_figure():
    """Each rank's finish time, healthy and with the slow link, for the ring and the tree."""
    fig = Figure(figsize=(13, 5), layout="constrained")
    axes = fig.subplots(1, 2, sharey=True)
    x = np.arange(TP)
    for ax, algorithm in zip(axes, ("ring", "tree")):
        ax.bar(x - 0.2, np.array(finished[algorithm, "healthy"]) * 1e3, 0.4, color="#9DB4D3",
               label="healthy")
        slow = np.array(finished[algorithm, "slow link"]) * 1e3
        ax.bar(x + 0.2, slow, 0.4, color="#DD6B20", label=f"GPU {SLOW_RANK}'s NVLink at 1/4")
        for r in x:  # how many times its healthy finish
            times = slow[r] / (finished[algorithm, "healthy"][r] * 1e3)
            ax.text(r + 0.2, slow[r], f"{times:.2f}x", ha="center", va="bottom", fontsize=9)
        ax.set_xticks(x, [f"rank {r}" for r in x], fontsize=10)
        ax.get_xticklabels()[SLOW_RANK].set_fontweight("bold")
        ax.set_title(f"{algorithm}: {'every rank waits' if algorithm == 'ring' else 'the branch below the link waits most'}",
                     fontsize=12)
        ax.grid(True, axis="y", alpha=0.3)
    axes[0].set_ylim(0, 1.12 * max(max(v) for v in finished.values()) * 1e3)  # room for labels
    axes[0].set_ylabel("rank finished its part (ms, simulated)", fontsize=12)
    axes[0].legend(fontsize=10, loc="upper left")
    fig.suptitle(f"A {format_size(TP_BYTES)} all-reduce on one DGX H100 with one slow link",
                 fontsize=14, fontweight="bold")
    return fig


teach.show(slow_link_figure(), "12_slow_link")

# %% [markdown]
# The tree is still slower than the degraded ring here, since it sends the whole buffer in
# every step; the point is how a fault spreads. In a ring, every byte passes every link, so
# the slowest link sets the pace of the whole job: one bad cable among thousands slows them
# all, and the job's busbw drops to what that link carries. That is why operators run
# nccl-tests across nodes to find such a link before a large job starts. In a tree a slow
# link delays its own branch in full and the rest only by the late reduce.
#
# ## 5. A crashed rank and the watchdog report
#
# A GPU falls off the bus, a process is killed: the other ranks enter the next collective
# and wait for it. Nothing fails; nothing moves. PyTorch's NCCL watchdog notices only when
# a collective has not finished within the process group's timeout
# (`init_process_group(timeout=...)`), and PyTorch's flight recorder
# (`TORCH_NCCL_TRACE_BUFFER_SIZE`, `TORCH_NCCL_DUMP_ON_TIMEOUT=1`) then tells, per rank, the
# last collective it entered and completed.
#
# collsim does the same with simulated time: a run with faults that makes no progress for
# the watchdog's timeout ends with `collsim.errors.WatchdogTimeout`, whose report is the
# flight recorder's. Here eight ranks train, 1 ms of compute and one gradient all-reduce per
# step, and rank 5 crashes at t = 2.3 ms (`--crash-rank 5@2.3ms`):

# %%
COMPUTE = 1e-3  # seconds of forward + backward per step
CRASH = Faults.parse(crash_rank=["5@2.3ms"], watchdog="10s")


def train(rank, steps):
    grad = np.ones(1024, dtype=np.float32)
    for step in range(steps):
        yield rank.compute(seconds=COMPUTE, label=f"step {step + 1}")  # forward + backward
        grad = yield from rank.all_reduce(grad)  # the gradient all-reduce
    return rank.now


try:
    collsim.Cluster(H100, faults=CRASH).run(train, 5)
except WatchdogTimeout as error:
    report = error
    print(f"WatchdogTimeout:\n{error}")


# %% [markdown]
# Read it as you would a flight-recorder dump: first the line per rank. Seven ranks entered
# the same all-reduce and wait in it, each on the ranks it exchanges with; one rank's line is different.
# The watchdog fired 10 s (its timeout) after the last progress, long after the crash.
#
# **Exercise 12.6 — read the report.** Which rank stopped?

# %%
stopped_rank_answer = None  # your answer: a rank number

teach.check_rank("12.6", stopped_rank_answer, expected=report.culprit.rank, ranks=TP,
                 why=f"its line says CRASHED at t={format_time(report.culprit.time)}; the "
                     "others wait in an all-reduce it never entered",
                 about={r: f"it waits in all_reduce #{line.entered[0]}"
                        for r, line in report.ranks.items() if line.crashed_at is None},
                 hint="one line per rank: which one does not say it waits?")

# %% [markdown]
# **Exercise 12.7 — read the report, then the program.** At which position `#N` (counting
# from 0) of the ranks' sequence of all-reduces do the other seven wait? Work it out from
# the program too: each step is 1 ms of compute and then an all-reduce of 4 KiB, which
# takes microseconds; where in the sequence is t = 2.3 ms?

# %%
waiting_in = {line.entered[0] for line in report.ranks.values() if line.crashed_at is None}
hang_position_answer = None  # your answer: the position N

waited_at = min(waiting_in)  # the seven ranks wait in the same all-reduce
teach.check(
    "12.7",
    hang_position_answer,
    expected=waited_at,
    unit="(position N)",
    given=[teach.Quantity("TP", TP, "ranks")],
    alternatives=[
        teach.Alternative(
            "a position counted from 1",
            waited_at + 1,
            "The report numbers each rank's all-reduces from 0: #0 is the first.",
        )
    ],
    hint="steps start every 1 ms; count the all-reduces that began before 2.3 ms, from #0",
)

# %% [markdown]
# The same story as a picture, drawn from the trace the error carries (`error.trace`): the
# compute and the start of each all-reduce per rank, the crash, and the seven ranks waiting
# in the all-reduce rank 5 never reached.


# %%
def crash_figure(report):
    """Each rank's compute and all-reduces until the run stopped, read from the trace the
    report carries: where rank 5 crashed, and where the others wait."""
    trace, last = report.trace, report.last_progress
    right = last * 1.3 * 1e3  # ms shown: a little past the last progress
    fig = Figure(figsize=(12, 4.8), layout="constrained")
    ax = fig.add_subplot()
    for c in trace.computes:
        ax.broken_barh([(c.start * 1e3, (c.end - c.start) * 1e3)], (c.rank - 0.3, 0.6),
                       color="#9DB4D3", zorder=2)
    calls = {}  # (rank, position) -> first transfer's start, in each rank's all-reduces
    for t in trace.transfers:
        for r in (t.src, t.dst):
            key = (r, t.tag.call)
            calls[key] = min(calls.get(key, t.start), t.start)
    for (r, position), start in sorted(calls.items()):
        ax.plot(start * 1e3, r, marker="v", color="#4C72B0", ms=9, zorder=3)
        ax.annotate(f"#{position}", (start * 1e3, r), xytext=(4, 7), textcoords="offset points",
                    fontsize=9)
    for r, line in report.ranks.items():
        if line.crashed_at is not None:
            ax.plot(line.crashed_at * 1e3, r, marker="X", color="#C53030", ms=14, zorder=4)
            ax.annotate(f"rank {r} crashed at {format_time(line.crashed_at)}",
                        (line.crashed_at * 1e3, r), xytext=(10, -4), textcoords="offset points",
                        fontsize=10, color="#C53030", fontweight="bold")
        else:
            entered = max(c.end for c in trace.computes if c.rank == r)
            ax.broken_barh([(entered * 1e3, right - entered * 1e3)], (r - 0.3, 0.6),
                           facecolor="none", edgecolor="#DD6B20", hatch="///", zorder=1)
            ax.text(right, r, f"waits in all_reduce #{line.entered[0]} ", ha="right",
                    va="center", fontsize=9, color="#9C4221",
                    bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none"})
    ax.set_xlim(0, right)
    ax.set_ylim(TP - 0.5, -0.5)
    ax.set_yticks(range(TP), [f"rank {r}" for r in range(TP)])
    ax.set_xlabel("simulated time (ms)", fontsize=12)
    ax.set_title(f"blue bars: 1 ms of compute per step; triangles: an all-reduce starts (#N, from "
                 f"0); hatched: waiting, until the watchdog fires at t = "
                 f"{format_time(report.time)}", fontsize=10)
    fig.suptitle("Training with a rank that crashes: what the flight recorder saw",
                 fontsize=14, fontweight="bold")
    return fig


teach.show(crash_figure(report), "12_crash")

# %% [markdown]
# ## 6. PAT: an all-gather whose latency grows with log2 of the nodes
#
# Back to latency. A ring all-gather of K ranks takes `K−1` steps; with one GPU per node
# every step crosses the network, so at 64 nodes the latency is 63 network hops whatever
# the size. NCCL 2.23 added **PAT** for all-gather and reduce-scatter at one GPU per node:
# as in Bruck's all-gather (Bruck et al. 1997), a rank sends to partners 1, 2, 4, ... ranks
# away, and what it has gathered travels on together, so `⌈log2 K⌉` steps move the same
# `(K−1)/K` of the buffer per rank. collsim runs it (`algorithm="pat"`, `collsim run
# all-gather --algorithm pat`); its schedule against the ring's, on 64 ranks:

# %%
from collsim.collectives.nccl_model import graph_of, predict, tune_table
from collsim.collectives.pat import pat_all_gather
from collsim.collectives.ring import ring_all_gather

NODES = 64  # one GPU each: where NCCL enables PAT
for name, schedule in (("ring", ring_all_gather(NODES)), ("pat", pat_all_gather(NODES))):
    print(f"{name:>4}: {schedule.n_steps} steps, each rank sends "
          f"{schedule.chunk_count() // NODES} of the {schedule.n_chunks} chunks")

# %% [markdown]
# NCCL's tuner does not count steps: it prices every (algorithm, protocol) with its cost
# model (`collsim tune`, and `collsim.collectives.nccl_model` in Python). For the ring,
# `base + (K−1)·λ` with a base of 8.4 µs and `λ = 14 µs` a network hop with Simple; for
# PAT, `8 + log2(M)·λ/3.5 + 2.8·K` µs, M nodes and K ranks.
#
# **Exercise 12.8 — predict, then check.** At 64 nodes of one GPU each, how many times
# lower is PAT's latency than the ring's (both Simple) in NCCL's model? Predict from the
# step counts first; then compute it, from the formulas or from
# `tune_table(graph_of(hardware.preset("dgx-h100"), nodes=64, gpus_per_node=1), "all_gather")`,
# whose entries have `algorithm`, `protocol` and `latency_us`.

# %%
pat_latency_ratio_answer = None  # your prediction: ring latency / PAT latency

# %%
PAT_MODEL = graph_of(hardware.preset("dgx-h100"), nodes=NODES, gpus_per_node=1)
latency = {e.label: e.latency_us for e in tune_table(PAT_MODEL, "all_gather") if not e.disabled}
NET_HOP_US = 14.0  # λ: one network hop with Simple, in NCCL's table
steps_ratio = (NODES - 1) / math.ceil(math.log2(NODES))
teach.check(
    "12.8",
    pat_latency_ratio_answer,
    expected=latency["ring/simple"] / latency["pat/simple"],
    rel=1e-6,
    unit="x",
    ranks=NODES,
    alternatives=[
        teach.Alternative(
            "the ratio of the step counts, (K−1)/⌈log2 K⌉",
            steps_ratio,
            "That is what the steps alone promise; NCCL's model also charges PAT 2.8 µs for "
            "every rank, a part that grows linearly with K, and a third of a hop a step.",
        ),
        teach.Alternative(
            "PAT at a full network hop a step and no per-rank part",
            latency["ring/simple"] / (8.0 + math.log2(NODES) * NET_HOP_US),
            "NCCL's formula for PAT divides the hop by 3.5 and adds 2.8 µs for every rank.",
        ),
    ],
    hint="(8.4 + 63·14) / (8 + 6·14/3.5 + 64·2.8)",
)
per_rank = 2.8 * NODES
print(f"NCCL's model: ring {latency['ring/simple']:.1f} us, PAT {latency['pat/simple']:.1f} us, "
      f"of which {per_rank:.1f} us is the part linear in K (2.8 us a rank); the steps alone "
      f"would give {steps_ratio:.1f}x")

# %% [markdown]
# The logarithm is real, but NCCL's model keeps a term linear in the ranks for PAT, so at
# 64 nodes most of PAT's latency is that term, and the gain is 4x, not the step counts'
# 10x. It still wins every small call. The bandwidths decide large ones: PAT runs at 0.75
# of the ring's bandwidth, LL at half of it, LL128 at 0.92. Here is NCCL's predicted time of
# each pair by size, and the one it picks:

# %%
PAIRS = ("ring/ll", "ring/ll128", "ring/simple", "pat/simple")
print(f"{'S':>9} " + " ".join(f"{pair:>12}" for pair in PAIRS) + "  NCCL picks")
for size in (2**12, 2**18, 2**24, 2**27, 2**30):
    predictions, winner = predict(PAT_MODEL, "all_gather", size)
    time_us = {p.entry.label: p.time_us for p in predictions if p.time_us is not None}
    print(f"{format_size(size):>9} "
          + " ".join(f"{format_time(time_us[pair] * 1e-6):>12}" for pair in PAIRS)
          + f"  {winner.entry.label}")

# %% [markdown]
# Small and medium calls go to PAT, whose latency is a quarter of the ring's; from about
# 100 MiB the ring with LL128 takes over, and from 1 GiB the ring with Simple, whose full
# bandwidth pays for its 890 µs of latency. LL never wins here: its latency is below the
# ring's other protocols but above PAT's, and its bandwidth is the lowest. That is the trade
# of section 3 again, with one more line on the chart: `collsim tune all-gather --topology
# dgx-h100 --nodes 64 --gpus-per-node 1 -b 8 -e 8G -f 8` prints every size.

# %% [markdown]
# ## 7. NCCL's settings, in collsim
#
# The knobs people set on a real cluster, and where the same choice lives here:
#
# | NCCL / PyTorch | collsim API | collsim command line |
# |---|---|---|
# | `NCCL_ALGO=Ring`, `Tree`, `NVLS` | `cluster.all_reduce(..., algorithm="nccl_ring")`, `"double_tree"`, `"nvls"` | `--algorithm nccl_ring` (`double_tree`, `nvls`) |
# | `NCCL_PROTO=Simple` (`LL`, `LL128`) | `Cluster(topology, protocol="simple")` | `--protocol simple` |
# | neither set: the tuner chooses | `algorithm="auto"`, `protocol="auto"` (the defaults on a preset) | `--algorithm auto` |
# | `NCCL_DEBUG=INFO` (what the tuner chose) | `result.choice.info_line()` | printed by `--algorithm auto` |
# | the watchdog's timeout | `Faults(..., watchdog_timeout=10.0)` | `--watchdog-timeout 10s` |
# | the flight recorder's dump | `WatchdogTimeout.ranks` and its report | printed when the watchdog fires |
#
# On the command line, the runs of this lesson:
#
#     collsim run all-reduce --topology dgx-h100 --algorithm nvls --min-bytes 8 --max-bytes 8GiB --count-only
#     collsim run all-reduce --topology dgx-a100 --nodes 2 --algorithm nccl_ring --size 8GiB --count-only
#     collsim run all-reduce --topology dgx-h100 --protocol ll128 --min-bytes 16 --max-bytes 1GiB --factor 4 --count-only
#     collsim run all-reduce --topology dgx-h100 --algorithm ring --slow-link 5-nvswitch0:0.25 --size 64MiB --count-only
#     collsim run all-reduce --topology dgx-h100 --algorithm ring --size 64MiB --crash-rank 5@100us --watchdog-timeout 10s --count-only
#     collsim run all-reduce --topology dgx-a100 --nodes 2 --algorithm auto --size 4KiB --count-only
#
# Two of them, run from here (`collsim.cli.main` is what the `collsim` command calls): NVLS
# on one DGX H100, where the switch adds, so each GPU sends and receives its buffer once,
# and the tuner's choice for a small all-reduce on two DGX A100 nodes.

# %%
from collsim.cli import main

for command in ("run all-reduce --topology dgx-h100 --algorithm nvls --min-bytes 1KiB "
                "--max-bytes 1GiB --factor 1024 --count-only",
                "run all-reduce --topology dgx-a100 --nodes 2 --algorithm auto --size 4KiB "
                "--count-only"):
    print(f"$ collsim {command}")
    main(command.split())

# %% [markdown]
# ## Takeaways
#
# - **TP stays inside a node** because its all-reduces sit on every layer's critical path:
#   the same 64 MiB all-reduce takes about 7 times longer over one NIC per GPU than over
#   NVSwitch (the ratio of the links' `β` for large messages, of the `α`s for small ones),
#   and longer still over PCIe.
# - **Across nodes the NICs set the busbw**: one ring through every GPU is capped at one NIC;
#   NCCL's rings, one channel per NIC on its own rail, reach `C ×` one NIC (191 GB/s on two DGX
#   A100, NVIDIA's ~192 GB/s), whatever the number of nodes.
# - **Protocols trade latency for bandwidth**: LL for small messages, LL128 in the middle,
#   Simple for large ones; each is a line `α_p + S/(K·β·e_p)` per step, and the tuner (NCCL's
#   or `auto`) switches where the lines cross. The small-message floor is the protocol's
#   latency.
# - **One slow link slows the whole ring** to its pace, every rank; in a tree it delays its
#   own branch in full and the others only by the late reduce.
# - **A crashed rank is a hang**, not an error: read the flight recorder's line per rank,
#   find the one that never entered the collective the others wait in.
# - **PAT's latency grows with log2 of the nodes**, the ring's with the ranks; NCCL's model
#   adds a per-rank part to PAT, so at 64 nodes it is 4x lower, not the steps' 10x, and
#   the ring takes over again where bandwidth counts.
# - NCCL's knobs have collsim twins: `algorithm=`, `protocol=`, `auto` with its INFO line,
#   the watchdog's timeout and report.
#
# Describe your own machine in a TOML file (`base = "dgx-h100"` and the fields that differ;
# `collsim.hardware.load` reads it), pass it as `--topology box.toml` to the commands of
# section 7, and when a run hangs, read the flight recorder's line per rank first. Next,
# lesson 13 runs the programs people really write on these machines: mpi4py code unchanged,
# and torch.distributed-style code on `collsim.distributed`.
