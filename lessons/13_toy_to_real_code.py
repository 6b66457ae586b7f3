# %% [markdown]
# # 13. From toy programs to real code
# The ring all-reduce as a collsim generator program and as an mpi4py program, same bytes and same time; then a ping-pong measured the way you would measure a real cluster.
#
# Lessons 1 to 12 wrote every rank program as a **generator**: `yield rank.send(...)`,
# `got = yield rank.recv(...)`. That shows every operation, but nobody writes distributed
# code that way. Students learn with **mpi4py** (`comm.Send(buf, dest=1)`,
# `comm.Allreduce(x, out, op=MPI.SUM)`) or torch.distributed (`dist.all_reduce(t)`):
# calls that block until they are done, then return.
#
# collsim runs mpi4py code unchanged, and torch.distributed-style code written against
# `collsim.distributed` (`import collsim.distributed as dist`: torch.distributed's names on
# numpy arrays; a program that imports `torch.distributed` itself runs too, on collsim's
# torch backend, once torch is installed with `pip install 'collsim[torch]'`):
#
# - `collsim exec -n 4 script.py` runs a script as `mpirun -n 4 python script.py` would
#   (try it with `examples/mpi_pi.py`, `mpi_ping_pong.py`, `mpi_ring_pass.py`);
# - `collsim.exec(main, n=4)` runs a Python function on 4 ranks and returns what each rank
#   returned, what it printed and the run (time, bytes, trace).
#
# Each rank runs in its own thread, but only one runs at any moment and the engine decides
# which, in simulated-time order: every run is the same, byte for byte. Within the run
# `from mpi4py import MPI` gives collsim's MPI (`collsim.mpi`), whose calls move the real
# arrays over the simulated network. The Python between the calls is **free**: it costs no
# simulated time unless the program says what it costs, with `collsim.compute(seconds=...)`
# or `collsim.compute(flops=...)`. Only communication takes time, the network's time.
#
# As before: replace each `..._answer = None` with your answer and run the check.

# %%
import numpy as np
from matplotlib.figure import Figure

import collsim
from collsim import teach, topology
from collsim.topology import path_alpha_beta
from collsim.units import format_rate, format_size, format_time
from collsim.viz.sweep import size_axis

K, N = 4, 1024  # ranks; float64 elements per rank (8 KiB)
cluster = collsim.Cluster(topology.ring(K, bandwidth="100GB/s", latency="5us"))
inputs = [np.arange(N, dtype=np.float64) + 1000 * r for r in range(K)]
expected = np.sum(inputs, axis=0)

# %% [markdown]
# ## 1. The toy: a generator program
#
# Lesson 4's ring all-reduce: cut the buffer into $K$ chunks; at step $s$ (numbered from 1)
# rank $r$ sends chunk $(r - s) \bmod K$ to its right neighbour and receives one from its
# left; for the first $K-1$ steps it adds what it receives (reduce-scatter), for the last
# $K-1$ it copies it (all-gather).


# %%
def ring_generator(rank, x):
    k, me = rank.size, rank.id
    right, left = (me + 1) % k, (me - 1) % k
    chunks = [c.copy() for c in np.array_split(x, k)]
    for step in range(1, 2 * (k - 1) + 1):  # steps 1 .. 2(K-1)
        incoming = (left - step) % k  # the chunk my left neighbour sends now
        handle = yield rank.isend(right, chunks[(me - step) % k])
        got = yield rank.recv(left)
        yield rank.wait(handle)
        chunks[incoming] = chunks[incoming] + got if step <= k - 1 else got
    return np.concatenate(chunks)


toy = cluster.run(lambda rank: ring_generator(rank, inputs[rank.id]))
print("every output equals numpy's sum:", all(np.array_equal(o, expected) for o in toy.returns))
print(f"simulated time: {format_time(toy.time)}")

# %% [markdown]
# ## 2. The same ring in mpi4py
#
# The same algorithm as an mpi4py program. Each line has a twin above:
#
# | generator program | mpi4py |
# |---|---|
# | `rank.id`, `rank.size` | `comm.Get_rank()`, `comm.Get_size()` |
# | `handle = yield rank.isend(right, x)` | `request = comm.Isend(x, dest=right)` |
# | `got = yield rank.recv(left)` | `comm.Recv(got, source=left)`, into a buffer you allocate |
# | `yield rank.wait(handle)` | `request.Wait()` |
#
# The function imports `mpi4py` as any MPI program does; `collsim.exec` runs it on the
# cluster above.


# %%
def ring_mpi(inputs):
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    k, me = comm.Get_size(), comm.Get_rank()
    right, left = (me + 1) % k, (me - 1) % k
    chunks = [c.copy() for c in np.array_split(inputs[me], k)]
    for step in range(1, 2 * (k - 1) + 1):
        incoming = (left - step) % k
        got = np.empty_like(chunks[incoming])
        request = comm.Isend(chunks[(me - step) % k], dest=right)
        comm.Recv(got, source=left)
        request.Wait()
        chunks[incoming] = chunks[incoming] + got if step <= k - 1 else got
    return np.concatenate(chunks)


real = collsim.exec(ring_mpi, cluster=cluster, args=(inputs,))
print("every output equals numpy's sum:", all(np.array_equal(o, expected) for o in real.returns))
print(f"the same bytes as the generator's (counted after Exercise 13.1): "
      f"{real.bytes_sent == toy.stats.bytes_sent}")
print(f"simulated time: {format_time(real.time)} (the generator's: {format_time(toy.time)})")

# %% [markdown]
# Same messages, same bytes, same time: the blocking program is the generator program with
# the `yield`s hidden inside the calls. Each call posts its operation to the same engine
# and sleeps until the engine resumes it.
#
# **Exercise 13.1.** How many bytes does each rank send in `ring_mpi` with $K = 4$ ranks and
# $N = 1024$ float64 elements? (Lesson 4's formula.)

# %%
mpi_ring_bytes_answer = None  # your prediction: bytes sent per rank

# %%
teach.check(
    "13.1",
    mpi_ring_bytes_answer,
    expected=real.bytes_sent[0],
    unit="B",
    ranks=K,
    given=[
        teach.Quantity("b", 8, "bytes per float64 element"),
        teach.Quantity("N", N, "elements per rank"),
    ],
    hint="2(K-1)/K · N · b",
)
print(f"bytes sent per rank: {[format_size(b) for b in real.bytes_sent]} "
      f"(the generator's: the same? {real.bytes_sent == toy.stats.bytes_sent})")

# %% [markdown]
# ## 3. The library call: `comm.Allreduce`
#
# Nobody writes the ring by hand in real code: `comm.Allreduce(x, out, op=MPI.SUM)` does it.
# Under collsim it runs the algorithm the run is configured with: ring by default (MPICH's
# choice for large messages), or `algorithm="tree"`, `"halving_doubling"`, ... given to
# `collsim.exec` (`--algorithm` of `collsim exec`).


# %%
def allreduce_mpi(inputs):
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    out = np.empty_like(inputs[comm.Get_rank()])
    comm.Allreduce(inputs[comm.Get_rank()], out, op=MPI.SUM)
    return out


library = collsim.exec(allreduce_mpi, cluster=cluster, args=(inputs,), algorithm="ring")
print("every output equals numpy's sum:",
      all(np.array_equal(o, expected) for o in library.returns))


# %% [markdown]
# **Exercise 13.2.** How many messages does the ring all-reduce send in all, over every
# rank, for $K = 4$? (Every rank sends one chunk at each of the $2(K-1)$ steps.)

# %%
ring_messages_answer = None  # your prediction: messages in the whole all-reduce

# %%
teach.check("13.2", ring_messages_answer, expected=len(library.trace.transfers),
            unit="messages", ranks=K, given=[teach.Quantity("2(K-1)", 2 * (K - 1), "steps")],
            hint="K ranks, each sending one message at each of the 2(K-1) steps")
print(f"{'program':<28} {'bytes/rank':>11} {'messages':>9} {'time':>10}")
for name, sent, messages, time in (
    ("generator, by hand", toy.stats.bytes_sent[0], len(toy.trace.transfers), toy.time),
    ("mpi4py Isend/Recv, by hand", real.bytes_sent[0], len(real.trace.transfers), real.time),
    ("mpi4py comm.Allreduce", library.bytes_sent[0], len(library.trace.transfers),
     library.time),
):
    print(f"{name:<28} {format_size(sent):>11} {messages:>9} {format_time(time):>10}")

# %% [markdown]
# ### Compute is free unless you say what it costs
#
# A training step computes, then all-reduces its gradient. Under collsim the numpy work
# between the calls takes no simulated time, however long it takes your laptop; a program
# that wants its compute counted says so with `collsim.compute(seconds=...)` (or
# `flops=...`, at the cluster's FLOP/s), which is how it models a forward and backward.


# %%
def train_step(inputs, compute_seconds):
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    gradient = np.tanh(np.outer(inputs[comm.Get_rank()], np.ones(64))).sum(axis=1)  # real work
    if compute_seconds:
        collsim.compute(seconds=compute_seconds)  # what the forward + backward would cost
    total = np.empty_like(gradient)
    comm.Allreduce(gradient, total, op=MPI.SUM)
    return MPI.Wtime()


for seconds in (0, 1e-3):
    step = collsim.exec(train_step, cluster=cluster, args=(inputs, seconds))
    print(f"collsim.compute(seconds={seconds:g}): the step ends at "
          f"{format_time(max(step.returns))} of simulated time")

# %% [markdown]
# ## 4. Measuring a link: the ping-pong
#
# How do you find a real cluster's latency $\alpha$ and bandwidth $\beta$? The way every MPI
# course does it (and the OSU micro-benchmarks' `osu_latency` and `osu_bw`): rank 0 sends
# $n$ bytes to rank 1, which sends them straight back; half the round trip is the one-way
# time $t(n)$, timed with `MPI.Wtime()`, averaged over a few repetitions, for sizes from
# 1 byte to megabytes. The α–β model (Hockney 1994) says
#
# $$t(n) = \alpha + \frac{n}{\beta}$$
#
# so small messages measure $\alpha$ and large ones $\beta$. The program below is that
# benchmark, as you would run it with `mpirun -n 2` (it is `examples/mpi_ping_pong.py` as
# a function). Under collsim, `MPI.Wtime()` is the simulated clock.


# %%
def ping_pong(sizes, repeats=5):
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()

    def round_trip(buf):
        if rank == 0:
            comm.Send(buf, dest=1)
            comm.Recv(buf, source=1)
        elif rank == 1:
            comm.Recv(buf, source=0)
            comm.Send(buf, dest=0)

    times = []
    for n in sizes:
        buf = np.zeros(n, dtype=np.uint8)
        round_trip(buf)  # warm-up: afterwards neither rank waits for the other
        start = MPI.Wtime()
        for _ in range(repeats):
            round_trip(buf)
        times.append((MPI.Wtime() - start) / (2 * repeats))
    return times


link = topology.ring(2, bandwidth="25GB/s", latency="2us")  # two ranks, one link each way
alpha, beta = path_alpha_beta(link, 0, 1)
sizes = [4**i for i in range(12)]  # 1 B .. 4 MiB
measured = collsim.exec(ping_pong, topology=link, args=(sizes,)).returns[0]
print(f"the link: alpha = {format_time(alpha)}, beta = {format_rate(beta)}")

# %% [markdown]
# **Exercise 13.3.** Predict the one-way time of a 1 MiB message on this link (2 us,
# 25 GB/s); the check then prints the measurement for every size.

# %%
one_mib_time_answer = None  # your prediction: seconds for 1 MiB one way

# %%
teach.check(
    "13.3",
    one_mib_time_answer,
    expected=measured[sizes.index(2**20)],
    unit="s",
    **teach.one_message_slips(alpha, beta, 2**20),
    hint="α + n/β with n = 2^20 bytes",
)
print(f"{'size':>10} {'measured t(n)':>14} {'alpha + n/beta':>15} {'bandwidth n/t':>14}")
for n, t in zip(sizes, measured):
    print(f"{format_size(n):>10} {format_time(t):>14} {format_time(alpha + n / beta):>15} "
          f"{format_rate(n / t):>14}")

# %% [markdown]
# **Exercise 13.4.** A real benchmark prints a table, not $\alpha$ and $\beta$: you fit them.
# Write `fit_alpha_beta(sizes, times)` returning `(alpha, beta)` by least squares of
# $t = \alpha + n/\beta$ (a straight line in $n$: intercept $\alpha$, slope $1/\beta$;
# `np.polyfit(sizes, times, 1)` returns `[slope, intercept]`). The check runs it on the
# measurement above and on noisy tables like a real cluster's.

# %%
fit_alpha_beta_answer = None  # your function: def fit_alpha_beta(sizes, times): return (a, b)


# %%
def reference_fit(sizes, times):
    slope, intercept = np.polyfit(np.asarray(sizes, float), np.asarray(times, float), 1)
    return intercept, 1.0 / slope


def noisy_table(alpha, beta, seed):
    """A table as a real cluster gives it: alpha + n/beta plus up to 3 % of jitter."""
    jitter = 1 + 0.03 * np.random.default_rng(seed).random(len(sizes))
    return sizes, list((alpha + np.array(sizes, float) / beta) * jitter)


cases = [(sizes, measured), noisy_table(1.5e-6, 12.5e9, 1), noisy_table(20e-6, 1e9, 2)]
teach.check_function(
    "13.4", fit_alpha_beta_answer, reference_fit, cases,
    compare=lambda got, want: np.allclose(got, want, rtol=1e-6),
    hint="slope, intercept = np.polyfit(sizes, times, 1); alpha is the intercept, beta 1/slope",
)
fitted_alpha, fitted_beta = reference_fit(sizes, measured)
print(f"fitted: alpha = {format_time(fitted_alpha)}, beta = {format_rate(fitted_beta)}; "
      f"the link: {format_time(alpha)}, {format_rate(beta)}")

# %% [markdown]
# On collsim the fit gives back the link exactly: simulated time has no noise. On a real
# cluster it will not. Expect jitter (repeat, and take the minimum or the median), a kink
# where the MPI library switches from its eager protocol (small messages copied into a
# buffer, the send returns at once) to rendezvous (the send waits for the receive; NCCL and
# collsim's large messages work that way), and a latency that includes the software stack,
# not only the wire.
#
# The measured bandwidth $n / t(n)$ climbs towards $\beta$ but only reaches it for large
# messages. The size at which it reaches **half** of $\beta$ is Hockney's $n_{1/2}$: there
# $t = 2n/\beta$, so $\alpha = n/\beta$.
#
# **Exercise 13.5.** What is $n_{1/2}$, in bytes, for this link (2 us, 25 GB/s)?

# %%
half_bandwidth_size_answer = None  # your prediction: bytes at which n/t = beta/2

# %%
teach.check(
    "13.5",
    half_bandwidth_size_answer,
    expected=fitted_alpha * fitted_beta,
    unit="B",
    given=[
        teach.Quantity("β", beta, "of bandwidth", "B/s"),
        teach.Quantity("α", alpha, "of latency", "s"),
    ],
    hint="at n_1/2, α = n/β: solve for n",
)


# %%
def ping_pong_figure(sizes, measured, alpha, beta):
    """Left: one-way time against size; right: bandwidth n/t, with beta and n_1/2."""
    fig = Figure(figsize=(11, 4.6), layout="constrained")
    left, right = fig.subplots(1, 2)
    n = np.array(sizes, float)
    dense = np.geomspace(n[0], n[-1], 200)  # the closed form as a smooth curve
    left.plot(dense, alpha + dense / beta, color="#4C72B0", label="α + n/β (closed form)")
    left.plot(n, measured, "o", color="#DD8452", label="ping-pong, MPI.Wtime()")
    left.set_yscale("log")
    left.axhline(alpha, color="grey", ls=":", lw=1)
    left.text(n[0], alpha * 1.15, f"α = {format_time(alpha)}", fontsize=9, color="grey")
    left.set(ylabel="one-way time t(n) (s)", title="time: flat at α, then n/β")
    right.plot(dense, dense / (alpha + dense / beta) / 1e9, color="#4C72B0",
               label="n / (α + n/β)")
    right.plot(n, n / np.array(measured) / 1e9, "o", color="#DD8452", label="n / t(n), measured")
    right.axhline(beta / 1e9, color="#4C72B0", ls="--", lw=1, label=f"β = {format_rate(beta)}")
    half = alpha * beta
    right.plot([half], [beta / 2e9], "s", color="black")
    right.annotate(f"n½ = α·β = {format_size(half)}\n(half of β)", (half, beta / 2e9),
                   xytext=(-12, 0), textcoords="offset points", ha="right", va="center",
                   fontsize=9)
    right.set(ylabel="bandwidth (GB/s)", title="bandwidth: half of β at n½")
    right.legend(fontsize=9, loc="upper left")
    for ax in (left, right):
        size_axis(ax, sizes)
        ax.set_xlabel("message size n (bytes)", fontsize=11)
    left.legend(fontsize=9, loc="upper left")
    fig.suptitle("Ping-pong on a 2 us, 25 GB/s link, measured as on a real cluster",
                 fontweight="bold")
    return fig


teach.show(ping_pong_figure(sizes, measured, alpha, beta), "13_ping_pong")

# %% [markdown]
# ## 5. A real program: the heat equation on a grid of ranks
#
# The program most MPI courses write after the collectives: the heat equation on a 2-D
# plate, the plate split into blocks over a **Cartesian grid of ranks**, neighbours trading
# their edge cells every time step. `examples/mpi_heat_stencil.py` is that program in plain
# mpi4py, the file you would run with `mpirun -n 4`; below, `exec_script` runs it unchanged
# on 4 virtual ranks (`collsim exec -n 4 examples/mpi_heat_stencil.py 16 24 50` does the
# same from a shell). Open it beside this lesson:
#
# - `MPI.Compute_dims(4, 2)` chooses a 2 x 2 grid of ranks; `world.Create_cart(dims,
#   periods=[False, False])` makes a communicator that knows the grid (MPI_Cart_create), and
#   `cart.Get_coords(rank)` says where a rank sits in it.
# - Each rank owns an $n \times m$ block of the plate plus a one-cell border, the **halo**,
#   which holds copies of its neighbours' edge cells.
# - `cart.Shift(axis, 1)` returns `(source, dest)`: the neighbour one step back and the one
#   a step forward along that axis. A non-periodic grid has no neighbour beyond its edge;
#   there `Shift` returns `MPI.PROC_NULL`, and a send to or a receive from `PROC_NULL`
#   completes at once and moves nothing.
# - Every time step each rank swaps halos with `cart.Sendrecv` (it sends one edge while it
#   receives the opposite halo, so no order of calls can deadlock), then updates its cells
#   with the 5-point stencil
#   $u_{ij} \leftarrow u_{ij} + a\,(u_{i-1,j} + u_{i+1,j} + u_{i,j-1} + u_{i,j+1} - 4u_{ij})$.
#
# The oracle is one process running the same file: with one rank every `Shift` gives
# `PROC_NULL` and the loop is the plain single-device stencil on the whole plate.

# %%
from collsim.course.catalog import course_example
from collsim.launch import exec_script

stencil = course_example("mpi_heat_stencil.py")
ROWS, COLS, STEPS = 16, 24, 50  # the plate's cells; time steps
grid = exec_script(stencil, n=4, argv=(ROWS, COLS, STEPS), echo=False)
alone = exec_script(stencil, n=1, argv=(ROWS, COLS, STEPS), echo=False)
print("4 ranks:  ", " / ".join(grid.stdout[0].splitlines()))
print("1 process:", " / ".join(alone.stdout[0].splitlines()))
print("the same plate, digit for digit:",
      grid.stdout[0].splitlines()[-1] == alone.stdout[0].splitlines()[-1])

# %% [markdown]
# **Exercise 13.6.** Rank 0 owns the top-left block: $n = 8$ rows by $m = 12$ columns of
# float64, in a `u` of $(n + 2) \times (m + 2)$ with its halo. How many bytes does rank 0
# send in **one** time step's halo exchange? Read `swap()` and the four calls to it: what
# does each send, and to which rank?

# %%
halo_bytes_answer = None  # your prediction: bytes rank 0 sends in one time step

# %%
longer = exec_script(stencil, n=4, argv=(ROWS, COLS, STEPS + 1), echo=False)
n_block, m_block, b = ROWS // 2, COLS // 2, 8  # rank 0's block; bytes per float64
teach.check(
    "13.6",
    halo_bytes_answer,
    expected=longer.bytes_sent[0] - grid.bytes_sent[0],  # what one more step cost rank 0
    unit="B",
    given=[
        teach.Quantity("m + 2", m_block + 2, "values in a halo row"),
        teach.Quantity("n + 2", n_block + 2, "values in a halo column"),
        teach.Quantity("b", b, "bytes per float64"),
    ],
    alternatives=[
        teach.Alternative(
            "a row and a column to each of four neighbours",
            2 * (m_block + 2 + n_block + 2) * b,
            "Rank 0 sits at the top and left edges of a non-periodic grid: there Shift gives "
            "MPI.PROC_NULL, and a Sendrecv to PROC_NULL sends nothing.",
        ),
        teach.Alternative(
            "the block's edges without the halo's corners",
            (m_block + n_block) * b,
            "swap() sends whole rows and columns of u, the two corner cells of the halo "
            "included: m + 2 and n + 2 values.",
        ),
    ],
    hint="one row of m + 2 values down and one column of n + 2 values right, 8 bytes each",
)
print(f"rank 0 sent {format_size(longer.bytes_sent[0] - grid.bytes_sent[0])} in one more "
      f"step; every rank of the 2 x 2 grid sends the same, as each has two edges "
      f"(bytes per rank in {STEPS} steps: {[format_size(s) for s in grid.bytes_sent]}, "
      "ranks 1-3 also send their block to rank 0 at the end)")

# %% [markdown]
# ## Takeaways
#
# - A **generator program** and an **mpi4py program** are the same program: `yield
#   rank.isend(...)` is `comm.Isend(...)`, `yield rank.recv(...)` is `comm.Recv(buf, ...)`.
#   On collsim they send the same messages, the same bytes, in the same simulated time;
#   `comm.Allreduce` runs the library's ring and matches both.
# - `collsim exec -n K script.py` runs an unmodified mpi4py script (`mpirun -n K` on the
#   virtual cluster), `collsim.exec(main, n=K)` a function; output is tagged per rank as
#   `mpirun --tag-output` tags it; a hang ends in a report naming every rank and its line.
# - **Compute is free** unless the program says what it costs (`collsim.compute(seconds=...)`);
#   only communication takes simulated time.
# - A **ping-pong** measures a link: $t(n) = \alpha + n/\beta$; small messages give $\alpha$,
#   large ones $\beta$, a least-squares fit both, and the bandwidth reaches half of $\beta$ at
#   $n_{1/2} = \alpha\beta$. On collsim `MPI.Wtime()` differences equal the closed form
#   exactly; on a real cluster, repeat and expect jitter and an eager/rendezvous kink.
# - A **stencil** on a Cartesian communicator trades halos with its neighbours every step:
#   `Create_cart`, `Shift` and `Sendrecv`; Exercise 13.6 counted what one step sends, and
#   one process running the same file is its oracle.
# - Next: run the examples (`collsim exec -n 4 examples/mpi_pi.py`), then your own mpi4py
#   course exercises, and read their traces at ui.perfetto.dev (`--trace run.json`).
