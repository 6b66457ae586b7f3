# %% [markdown]
# # 11. Debugging a hang
# A rank that never joins, mismatched collectives, a send/recv cycle: read collsim's deadlock report like NCCL's flight recorder.
#
# On a real cluster a distributed bug rarely crashes. Every rank sits inside a collective,
# GPUs at 0 %, no error — until the NCCL watchdog's timeout fires, minutes later, and kills
# the job with a message about the collective that timed out, not about its cause. The tools
# people reach for:
#
# - **NCCL flight recorder** (PyTorch's "Flight Recorder for Debugging Stuck Jobs" tutorial:
#   set `TORCH_NCCL_TRACE_BUFFER_SIZE` > 0 and `TORCH_NCCL_DUMP_ON_TIMEOUT=1`): every rank
#   keeps a ring buffer of the collectives it entered; after a hang the dumps show which ranks
#   reached collective number `N` and which never did.
# - **`TORCH_DISTRIBUTED_DEBUG=DETAIL`**: checks that all ranks call the same collective with
#   the same shapes, and names the rank that does not.
#
# collsim runs every rank in one event engine, so it knows the moment **no event can ever
# happen again** while ranks still wait. It then raises `collsim.DeadlockError` at once, with
# a report naming every waiting rank, what it waits for, and — per stuck collective — which
# ranks joined it and which never did. `.waiting` holds the same as a dict. A mismatch raises
# `collsim.errors.CollectiveMismatchError` the moment the ranks' calls disagree.
#
# In this lesson every error is caught and printed, so the lesson runs to the end. As
# before: replace each `..._answer = None` with your answer and run the check.

# %%
import re

import networkx as nx
import numpy as np
from matplotlib.figure import Figure

import collsim
from collsim import teach
from collsim.errors import CollectiveMismatchError
from collsim.units import format_time

K = 4  # ranks
cluster = collsim.Cluster(collsim.topology.switch(K))


def wait_for_edges(waiting):
    """``(rank, peer, verb)`` for every send/recv a waiting rank is blocked on."""
    edges = []
    for rank, whats in waiting.items():
        for what in whats:
            for verb, peer in re.findall(r"(send to|recv from) rank (\d+)", what):
                edges.append((rank, int(peer), verb.split()[0]))
    return edges


def wait_for_figure(waiting, size, title):
    """The wait-for graph: an arrow from each blocked rank to the rank it waits on."""
    graph = nx.DiGraph()
    graph.add_nodes_from(range(size))
    edges = wait_for_edges(waiting)
    graph.add_edges_from((a, b) for a, b, _ in edges)
    pos = nx.circular_layout(graph)
    fig = Figure(figsize=(6.4, 5.4), layout="constrained")
    ax = fig.add_subplot()
    colours = ["#F0A150" if r in waiting else "#C44E52" for r in graph.nodes]
    nx.draw_networkx_nodes(graph, pos, ax=ax, node_color=colours, node_size=1500)
    nx.draw_networkx_labels(graph, pos, ax=ax, labels={r: f"rank {r}" for r in graph.nodes},
                            font_size=10, font_weight="bold")
    nx.draw_networkx_edges(graph, pos, ax=ax, node_size=1500, arrowsize=22, width=2,
                           connectionstyle="arc3,rad=0.12")
    labels = {}
    for a, b, verb in edges:
        labels[(a, b)] = " + ".join(sorted({labels.get((a, b), verb), verb}))
    nx.draw_networkx_edge_labels(graph, pos, ax=ax, edge_labels=labels, font_size=9,
                                 connectionstyle="arc3,rad=0.12")
    ax.set_title(title, fontsize=12, fontweight="bold")
    ax.text(0.5, -0.04, "orange: waiting · red: not waiting (finished, or never came)\n"
            "arrow a → b: rank a is blocked on a send to / recv from rank b",
            transform=ax.transAxes, ha="center", va="top", fontsize=9)
    ax.axis("off")
    return fig


# %% [markdown]
# ## 1. A rank that never joins
#
# A classic: the data loader gives each rank every `K`-th sample, `range(rank, n, K)`. When
# `K` does not divide the dataset size `n`, some ranks get one batch fewer. They finish their
# loop and leave; the others enter one more gradient all-reduce and wait for them forever.

# %%
N_SAMPLES = 11  # not a multiple of K


def train(rank, n_samples):
    steps = len(range(rank.id, n_samples, rank.size))  # this rank's share of the data
    grad = np.ones(8)
    for step in range(steps):
        yield rank.compute(seconds=1e-3, label=f"step {step + 1}")  # forward + backward
        grad = yield from rank.all_reduce(grad)  # average the gradients
    return steps


try:
    cluster.run(train, N_SAMPLES)
except collsim.DeadlockError as error:
    hang = error
    print(f"DeadlockError:\n{error}")

# %% [markdown]
# Read it bottom-up, the way you read a flight-recorder dump: the last line is the
# collective view — which all-reduce (by its position `#N` in each rank's sequence of
# collectives on this group), who joined, who never did. The lines above are the
# point-to-point view: inside the ring all-reduce, each waiting rank is stuck on a send or a
# receive with a neighbour. Follow those arrows and they all end at the same rank.

# %%
teach.show(wait_for_figure(hang.waiting, K, "all-reduce with a missing rank"), "11_waitfor_missing")

# %% [markdown]
# **Exercise 11.1 — read the report.** Which rank never joined the all-reduce?

# %%
missing = sorted(set(range(K)) - set(hang.waiting))  # ranks that are not waiting: they left
missing_rank_answer = None  # your answer: a rank number

teach.check_rank("11.1", missing_rank_answer, expected=missing[0], ranks=K,
                 why="it is the one rank not waiting in the report: with 11 samples it had one "
                     "step fewer, finished its loop and left",
                 about={r: f"it is waiting: {whats[0]}" for r, whats in hang.waiting.items()},
                 hint="the report lists the ranks that wait; one rank is not among them")

# %% [markdown]
# **Exercise 11.2 — read the report.** At which position `#N` of the ranks' sequence of
# all-reduces (counting from 0) did the job hang? Work it out from the program too: how many
# steps does each rank run with `n = 11` samples on `K = 4` ranks?

# %%
positions = {int(p) for whats in hang.waiting.values() for w in whats
             for p in re.findall(r"all_reduce #(\d+)", w)}
hang_position_answer = None  # your answer: the position N

hang_at = min(positions)  # every waiting rank names the same position
teach.check(
    "11.2",
    hang_position_answer,
    expected=hang_at,
    unit="(position N)",
    given=[teach.Quantity("K", K, "ranks"), teach.Quantity("n", N_SAMPLES, "samples")],
    alternatives=[
        teach.Alternative(
            "a position counted from 1",
            hang_at + 1,
            "The report numbers each rank's all-reduces from 0: #0 is the first.",
        )
    ],
    hint="the ranks with the fewest samples run ⌊n/K⌋ steps, the others one more; "
    "the first all-reduce is #0",
)

# %% [markdown]
# The fix is in the data, not the communication: give every rank the same number of steps.
# PyTorch's `DistributedSampler` pads the dataset to a multiple of the world size by
# default (or drops the tail with `drop_last=True`) for exactly this reason.

# %%
padded = -(-N_SAMPLES // K) * K  # round up to a multiple of K, as DistributedSampler pads
result = cluster.run(train, padded)
print(f"with {padded} samples every rank runs {result.returns} steps; "
      f"finished at t = {format_time(result.time)}")

# %% [markdown]
# ## 2. Mismatched collectives
#
# Now every rank joins, but not the same collective. Here rank 3 built its model from a
# different config (one layer too many), so its gradient buffer is larger. With NCCL this
# reads or writes past a buffer, or hangs; with `TORCH_DISTRIBUTED_DEBUG=DETAIL` PyTorch
# compares the calls first and reports the shapes. collsim does that check on every call.


# %%
def train_step(rank):
    n_params = 10 if rank.id == 3 else 8  # rank 3 loaded the wrong config
    yield rank.compute(seconds=1e-3, label="forward + backward")
    return (yield from rank.all_reduce(np.ones(n_params)))


try:
    cluster.run(train_step)
except CollectiveMismatchError as error:
    mismatch = error
    print(f"CollectiveMismatchError:\n{error}")

# %% [markdown]
# **Exercise 11.3 — read the report.** Which rank's call differs from the others?

# %%
calls = dict(re.findall(r"rank (\d+): (.*)", str(mismatch)))
odd = [int(r) for r, call in calls.items() if list(calls.values()).count(call) == 1]
odd_rank_answer = None  # your answer: a rank number

teach.check_rank("11.3", odd_rank_answer, expected=odd[0], ranks=K,
                 why=f"its call is the only one of its kind: {calls[str(odd[0])]}",
                 about={int(r): f"its call is the same as the other ranks': {call}"
                        for r, call in calls.items() if int(r) != odd[0]},
                 hint="compare the calls line by line: count, dtype, op")

# %% [markdown]
# ## 3. A cycle of blocking sends
#
# A ring shift: every rank sends its array to the right neighbour and receives from the left
# one. Written the obvious way — `send`, then `recv` — it deadlocks. collsim's point-to-point
# is **rendezvous**, as NCCL's is (and MPI's for large messages): a blocking send completes
# only when the receiver has posted the matching receive. Every rank is inside its send,
# nobody has reached its receive, and the wait-for graph is a cycle.


# %%
def shift_blocking(rank, x):
    right, left = (rank.id + 1) % rank.size, (rank.id - 1) % rank.size
    yield rank.send(right, x)  # blocks until `right` posts its recv ...
    return (yield rank.recv(left))  # ... which it does only after its own send


def run_on_ring(program):
    """``(k, seed) -> what each rank returned`` for a rank program ``program(rank, x)`` run
    on a ring of ``k`` ranks, rank ``r`` starting with ``x = [r, seed]``."""
    if program is None:
        return None

    def run(k, seed):
        ring = collsim.Cluster(collsim.topology.bidirectional_ring(k))
        return ring.run(lambda rank: program(rank, np.array([rank.id, seed], float))).returns

    return run


try:
    run_on_ring(shift_blocking)(K, 0)
except collsim.DeadlockError as error:
    cycle = error
    print(f"DeadlockError:\n{error}")
teach.show(wait_for_figure(cycle.waiting, K, "ring shift with blocking sends"), "11_waitfor_cycle")

# %% [markdown]
# Two standard ways out:
#
# - **Don't block on the send.** Post it with `rank.isend(...)`, which returns a handle at
#   once, then `recv`, then `yield rank.wait(handle)`. (Or post both together with
#   `rank.exchange(...)`, MPI's `sendrecv`.) Every rank reaches its receive, so every send
#   finds its partner.
# - **Break the symmetry.** Order the calls by rank parity: even ranks send first, odd ranks
#   receive first. Now some pair always matches, and the cycle becomes a chain that unwinds
#   (it still works for an odd number of ranks).
#
# **Exercise 11.4 — fix the program.** Write `shift(rank, x)`: send `x` to the right
# neighbour, return what the left neighbour sent, without deadlocking. `run_on_ring` runs
# your program on rings of several sizes, including odd ones, and the check compares every
# rank's result with the reference. (A program that still hangs reports its DeadlockError.)

# %%
shift_answer = None  # your rank program: def shift(rank, x): ...  (a generator: use yield)


def reference_shift(k, seed):
    """What rank r must end with: the left neighbour's [r - 1, seed]."""
    return [np.array([(r - 1) % k, seed], float) for r in range(k)]


teach.check_function("11.4", shift_answer, reference_shift,
                     cases=[(4, 0), (2, 1), (3, 2), (5, 3), (8, 4)], adapt=run_on_ring,
                     given={"k": "ranks in the ring"},
                     hint="h = yield rank.isend(right, x); y = yield rank.recv(left); "
                     "yield rank.wait(h); return y")

# %% [markdown]
# ## Takeaways
#
# - A hang is a **wait-for graph with no way out**: the collective view (who joined
#   collective `#N`, who never did) points at the culprit; the point-to-point view (who waits
#   on whom) shows how the others got stuck. NCCL's flight recorder gives the first after the
#   fact; collsim reports both the moment no event can happen.
# - **A rank that never joins** is usually a control-flow or data bug — uneven data shards,
#   an early `return`, a collective under `if rank == 0`. Make every rank run the same
#   sequence of collectives.
# - **Mismatched collectives** (different op, size or dtype at the same position) are what
#   `TORCH_DISTRIBUTED_DEBUG=DETAIL` catches; collsim checks every call.
# - **Blocking sends in a cycle** deadlock under rendezvous semantics. Use non-blocking
#   `isend`/`irecv` (or a combined exchange), or order the calls by rank parity.
#
# Next, lesson 12 puts these runs on real machines: NVSwitch and InfiniBand, NCCL's
# protocols, and the watchdog report of a rank that crashed. When a run hangs, read the
# report bottom-up.
