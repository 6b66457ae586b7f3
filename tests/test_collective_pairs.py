"""Every (collective, algorithm) pair, for K in {1, 2, 3, 5, 8} (the power-of-two-only
halving-doubling reduce-scatter and all-gather for K in {1, 2, 4, 8}, and their refusal
for K in {3, 5}): values against a numpy
reference written here (not collsim's), and structure (who sends which chunk to whom at
which step, how many transfers, bytes per rank, steps) against closed forms written here,
read from the trace and the schedule.  Parametrised, so no pair is left to chance."""

import math

import numpy as np
import pytest

import collsim
from collsim import topology
from collsim.collectives import ALGORITHMS, analytical, closed_form
from collsim.errors import ConfigError

PAIRS = [(c, a) for c, algs in ALGORITHMS.items() for a in algs]
KS = [1, 2, 3, 5, 8]
# recursive halving / doubling pair rank r with r XOR 2^i: K must be a power of two
POWER_OF_TWO_ONLY = {("reduce_scatter", "halving_doubling"), ("all_gather", "halving_doubling")}
POWER_OF_TWO_KS = [1, 2, 4, 8]
CASES = [
    (c, a, k) for c, a in PAIRS for k in (POWER_OF_TWO_KS if (c, a) in POWER_OF_TWO_ONLY else KS)
]
DTYPES = ["float64", "float32", "float16", "int64", "int32"]
REDUCING = [case for case in CASES if case[0] in ("all_reduce", "reduce_scatter", "reduce")]
ROOTED = ("broadcast", "reduce")
N = 840  # elements: divisible by every K here and by halving-doubling's 2^m core


def test_every_pair_is_listed():
    assert len(PAIRS) == 17


def roots(collective, k):
    return sorted({0, k // 2, k - 1}) if collective in ROOTED else [0]


def inputs(k, n, dtype, op="sum", shape=None):
    # different values on every rank and in every chunk, small enough that every
    # reduction order is exact in float16 (|sum of 8| <= 64; products of {-1, 1, 2})
    out = []
    for r in range(k):
        rng = np.random.default_rng(1000 + r)
        values = rng.choice([-1, 1, 2], n) if op == "prod" else rng.integers(-8, 9, n)
        out.append(values.astype(dtype).reshape(shape or (n,)))
    return out


# -- the reference, by plain numpy ---------------------------------------------------------


def split(x, k):
    return np.array_split(x.reshape(-1), k) if x.ndim <= 1 else np.split(x, k)


def reduce_all(xs, op):
    stack = np.stack(xs)
    if op in ("sum", "avg"):
        total = stack.sum(axis=0, dtype=stack.dtype)
    elif op == "prod":
        total = stack.prod(axis=0, dtype=stack.dtype)
    else:
        total = {"max": np.max, "min": np.min}[op](stack, axis=0)
    if op == "avg":
        if np.issubdtype(total.dtype, np.integer):  # truncate toward zero, as NCCL
            flat = [int(v) for v in total.reshape(-1)]
            avg = [abs(v) // len(xs) * (1 if v >= 0 else -1) for v in flat]
            return np.array(avg, dtype=total.dtype).reshape(total.shape)
        return (total / len(xs)).astype(total.dtype)
    return total


def expected_outputs(collective, xs, op, root):
    k = len(xs)
    if collective == "all_gather":
        return [np.concatenate(xs)] * k
    if collective == "broadcast":
        return [xs[root]] * k
    if collective == "all_to_all":
        return [
            np.concatenate([split(xs[src], k)[dst] for src in range(k)]).reshape(xs[0].shape)
            for dst in range(k)
        ]
    total = reduce_all(xs, op)
    if collective == "reduce_scatter":
        return split(total, k)
    if collective == "reduce":
        return [total if r == root else None for r in range(k)]
    return [total] * k


def check(out, want):
    for rank, (got, expected) in enumerate(zip(out.outputs, want)):
        if expected is None:
            assert got is None, f"rank {rank} should get nothing"
        else:
            assert got.shape == expected.shape and got.dtype == expected.dtype, f"rank {rank}"
            np.testing.assert_array_equal(got, expected, err_msg=f"rank {rank}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("collective,algorithm,k", CASES)
def test_values_equal_numpy(collective, algorithm, k, dtype):
    n = 3 * k if collective == "all_to_all" else 3 * k + 2  # uneven chunks where allowed
    cluster = collsim.Cluster(topology.ring(k, "10GB/s", "1us"))
    xs = inputs(k, n, dtype)
    for root in roots(collective, k):
        out = cluster.collective(collective, xs, algorithm=algorithm, root=root)
        check(out, expected_outputs(collective, xs, "sum", root))


@pytest.mark.parametrize("op", ["sum", "avg", "prod", "max", "min"])
@pytest.mark.parametrize("collective,algorithm,k", REDUCING)
def test_every_reduce_op_equals_numpy(collective, algorithm, k, op):
    cluster = collsim.Cluster(topology.switch(k, "10GB/s", "1us"))
    for dtype in ("int32", "float32"):
        xs = inputs(k, 2 * k + 3, dtype, op)
        for root in roots(collective, k):
            out = cluster.collective(collective, xs, algorithm=algorithm, op=op, root=root)
            check(out, expected_outputs(collective, xs, op, root))


@pytest.mark.parametrize("collective,algorithm,k", CASES)
def test_shapes_follow_torch(collective, algorithm, k):
    # all_gather_into_tensor stacks along dim 0, reduce_scatter_tensor splits it, the
    # others keep the shape
    cluster = collsim.Cluster(topology.switch(k))
    xs = inputs(k, 2 * k * 3, "float32", shape=(2 * k, 3))
    out = cluster.collective(collective, xs, algorithm=algorithm, root=k - 1)
    want = {"all_gather": (2 * k * k, 3), "reduce_scatter": (2, 3)}.get(collective, (2 * k, 3))
    assert {o.shape for o in out.outputs if o is not None} == {want}
    check(out, expected_outputs(collective, xs, "sum", k - 1))


# -- structure: the moves, written out here for every pair ---------------------------------


def ring_moves(k, first, steps_before=0, chunk_shift=1):
    """Step s: rank r sends chunk (r - s - shift) mod K to r + 1."""
    return {
        (steps_before + s, r, (r + 1) % k, ((r - s - chunk_shift) % k,))
        for s in range(k - 1)
        for r in range(k)
    }


def chain_moves(k, first):
    """Chain first -> first+1 -> ... (K ranks): chunk c crosses hop h at step c + h."""
    return {
        (c + h, (first + h) % k, (first + h + 1) % k, (c,)) for h in range(k - 1) for c in range(k)
    }


def tree_steps(k, root):
    """Binomial broadcast: step d sends from rel < 2^d to rel + 2^d."""
    depth = math.ceil(math.log2(k)) if k > 1 else 0
    return [
        [((root + rel) % k, (root + rel + 2**d) % k) for rel in range(2**d) if rel + 2**d < k]
        for d in range(depth)
    ]


def tree_moves(k, root, reverse=False, steps_before=0):
    steps = tree_steps(k, root)
    if reverse:
        steps = [[(dst, src) for src, dst in step] for step in reversed(steps)]
    return {(steps_before + s, src, dst, (0,)) for s, step in enumerate(steps) for src, dst in step}


def expected_moves(collective, algorithm, k, root):
    """``{(step, src, dst, chunks)}``, or ``None`` where only partners are checked."""
    if k == 1:
        return set()
    if (collective, algorithm) == ("reduce_scatter", "ring"):
        return ring_moves(k, 0, chunk_shift=1)
    if (collective, algorithm) == ("all_gather", "ring"):
        return ring_moves(k, 0, chunk_shift=0)
    if (collective, algorithm) == ("all_reduce", "ring"):
        return ring_moves(k, 0, chunk_shift=1) | ring_moves(k, 0, k - 1, chunk_shift=0)
    if (collective, algorithm) == ("broadcast", "ring"):
        return chain_moves(k, root)  # root -> root+1 -> ... -> root-1
    if (collective, algorithm) == ("reduce", "ring"):
        return chain_moves(k, root + 1)  # root+1 -> ... -> root: along the links
    if (collective, algorithm) == ("broadcast", "tree"):
        return tree_moves(k, root)
    if (collective, algorithm) == ("reduce", "tree"):
        return tree_moves(k, root, reverse=True)
    if (collective, algorithm) == ("all_reduce", "tree"):
        depth = len(tree_steps(k, 0))
        return tree_moves(k, 0, reverse=True) | tree_moves(k, 0, steps_before=depth)
    if (collective, algorithm) == ("all_reduce", "naive"):
        return {(0, r, 0, (0,)) for r in range(1, k)} | {(1, 0, r, (0,)) for r in range(1, k)}
    if (collective, algorithm) == ("all_to_all", "direct"):
        return {(s - 1, r, (r + s) % k, ((r + s) % k,)) for s in range(1, k) for r in range(k)}
    pairs = [(src, dst) for src in range(k) for dst in range(k) if src != dst]
    if (collective, algorithm) == ("all_reduce", "one_shot"):  # every whole buffer to every peer
        return {(0, src, dst, (0,)) for src, dst in pairs}
    if (collective, algorithm) == ("all_reduce", "two_shot"):  # part c to rank c, then back
        return {(0, src, dst, (dst,)) for src, dst in pairs} | {
            (1, src, dst, (src,)) for src, dst in pairs
        }
    if (collective, algorithm) == ("reduce_scatter", "halving_doubling"):
        return halving_moves(k)
    if (collective, algorithm) == ("all_gather", "halving_doubling"):
        return doubling_moves(k)
    return None  # halving-doubling all-reduce: see test_halving_doubling_partners


def halving_moves(k):
    """Recursive halving, step i = 0..log2 K - 1: rank r sends to r XOR K/2^(i+1) the
    half of its block of K/2^i chunks (the block holding chunk r) that does not hold r."""
    moves = set()
    for i in range(int(math.log2(k))):
        size, mask = k >> i, k >> (i + 1)
        for r in range(k):
            lo = r - r % size
            give = range(lo, lo + mask) if r & mask else range(lo + mask, lo + size)
            moves.add((i, r, r ^ mask, tuple(give)))
    return moves


def doubling_moves(k):
    """Recursive doubling, step i: rank r sends its block of 2^i chunks to r XOR 2^i."""
    return {
        (i, r, r ^ (1 << i), tuple(range(r - r % (1 << i), r - r % (1 << i) + (1 << i))))
        for i in range(int(math.log2(k)))
        for r in range(k)
    }


def expected_counts(collective, algorithm, k, size, root):
    """(steps, transfers, bytes sent per group rank) by closed form, S = ``size`` bytes
    (for all-gather: what each rank ends with)."""
    if k == 1:
        return 0, 0, [0]
    depth = math.ceil(math.log2(k))
    ring = [(k - 1) * size // k] * k
    if (collective, algorithm) in (
        ("reduce_scatter", "ring"),
        ("all_gather", "ring"),
        ("all_to_all", "direct"),
    ):
        return k - 1, k * (k - 1), ring
    if algorithm == "pat":  # partners 1, 2, 4, ...: n = min(d, K - d) chunks, of which a
        # range wrapping past chunk K - 1 is two messages (n - 1 ranks' ranges wrap)
        counts = [min(2**i, k - 2**i) for i in range(depth)]
        return depth, sum(k + n - 1 for n in counts), ring
    if (collective, algorithm) in POWER_OF_TWO_ONLY:  # log2 K steps, S/2 + S/4 + ... + S/K
        depth = int(math.log2(k))
        return depth, k * depth, [sum(size >> (i + 1) for i in range(depth))] * k
    if (collective, algorithm) == ("all_reduce", "ring"):
        return 2 * (k - 1), 2 * k * (k - 1), [2 * b for b in ring]
    if algorithm == "ring":  # chains: every rank but the last on the chain sends S
        last = (root - 1) % k if collective == "broadcast" else root
        return 2 * (k - 1), k * (k - 1), [0 if r == last else size for r in range(k)]
    if algorithm == "tree":
        steps = tree_steps(k, root if collective in ROOTED else 0)
        sent = [0] * k
        for step in steps:
            for src, dst in step:
                sent[dst if collective == "reduce" else src] += size
        if collective == "all_reduce":  # reduce, then the same tree broadcasting
            sent = [
                size
                * (
                    len([1 for st in steps for s, _ in st if s == r])
                    + len([1 for st in steps for _, d in st if d == r])
                )
                for r in range(k)
            ]
            return 2 * depth, 2 * (k - 1), sent
        return depth, k - 1, sent
    if algorithm == "naive":
        return 2, 2 * (k - 1), [(k - 1) * size] + [size] * (k - 1)
    if algorithm == "one_shot":  # 1 step; each rank sends its buffer to K-1 peers
        return 1, k * (k - 1), [(k - 1) * size] * k
    if algorithm == "two_shot":  # 2 steps; each rank sends K-1 parts of S/K in each
        return 2, 2 * k * (k - 1), [2 * (k - 1) * size // k] * k
    core = 2 ** int(math.log2(k))
    extra = k - core
    core_bytes = 2 * (core - 1) * size // core
    sent = [core_bytes + (size if r < extra else 0) for r in range(core)] + [size] * extra
    steps = 2 * int(math.log2(core)) + (2 if extra else 0)
    return steps, 2 * core * int(math.log2(core)) + 2 * extra, sent


@pytest.mark.parametrize("collective,algorithm,k", CASES)
def test_structure_from_the_trace(collective, algorithm, k):
    itemsize = 8
    count = N // k if collective == "all_gather" else N
    size = N * itemsize
    cluster = collsim.Cluster(topology.switch(k, "25GB/s", "3us"))
    for root in roots(collective, k):
        out = cluster.collective(
            collective, count=count, dtype="float64", algorithm=algorithm, root=root
        )
        steps, n_transfers, sent = expected_counts(collective, algorithm, k, size, root)
        transfers = out.trace.transfers
        assert out.stats.steps == out.schedule.n_steps == steps
        assert len(transfers) == n_transfers
        assert out.stats.bytes_sent == sent
        assert sum(out.stats.bytes_received) == sum(sent)
        # the trace holds exactly the schedule's moves: step, pair, bytes of its chunks
        chunk_bytes = size // out.schedule.n_chunks
        traced = sorted((t.tag.step, t.src, t.dst, t.nbytes) for t in transfers)
        scheduled = sorted(
            (s, m.src, m.dst, len(m.chunks) * chunk_bytes) for s, m in out.schedule.moves()
        )
        assert traced == scheduled
        want = expected_moves(collective, algorithm, k, root)
        if want is not None:
            got = {(s, m.src, m.dst, tuple(m.chunks)) for s, m in out.schedule.moves()}
            assert got == want
        # and the closed form collsim uses agrees with the one written here and with time
        form = analytical(cluster, collective, size, algorithm)  # α: up and down, 6 us
        assert (form.steps, form.bytes_per_rank) == (steps, max(sent))
        assert out.time == pytest.approx(form.time_s, rel=1e-12)


@pytest.mark.parametrize("k", [2, 3, 5, 8])
def test_halving_doubling_partners(k):
    s = collsim.collectives.build("all_reduce", "halving_doubling", k)
    core = 2 ** int(math.log2(k))
    fold = 1 if core < k else 0
    for i, step in enumerate(s.steps[fold : fold + int(math.log2(core))]):
        mask = core >> (i + 1)
        assert sorted((m.src, m.dst) for m in step) == sorted((r, r ^ mask) for r in range(core))
        assert all(len(m.chunks) == core >> (i + 1) for m in step)  # halves each step


@pytest.mark.parametrize("k", KS)
def test_trace_labels_name_each_step_from_one(k):
    out = collsim.Cluster(topology.ring(k)).all_reduce(count=4 * k, dtype="float32")
    moves = {(s, m.src, m.dst): m for s, m in out.schedule.moves()}
    for t in out.trace.transfers:
        s = t.tag.step
        assert t.meta is moves[(s, t.src, t.dst)]  # the record is the schedule's own move
        assert t.label == f"all_reduce step {t.tag.number} chunk {t.meta.chunks.start}"


# -- ring algorithms on a ring: one link a hop, no contention (formulas.py's claim) -------

RING_FAMILY = [p for p in PAIRS if p[1] == "ring"]


@pytest.mark.parametrize("latency", ["0", "5us"])
@pytest.mark.parametrize("k", [2, 3, 5, 8])
@pytest.mark.parametrize("collective,algorithm", RING_FAMILY)
@pytest.mark.parametrize("preset", ["ring", "bidirectional_ring"])
def test_ring_algorithms_on_a_ring_meet_no_contention(preset, collective, algorithm, k, latency):
    cluster = collsim.Cluster(getattr(topology, preset)(k, "100GB/s", latency))
    size = 64 * k * k * 4
    count = size // 4 // (k if collective == "all_gather" else 1)
    for root in roots(collective, k):
        out = cluster.collective(
            collective, count=count, dtype="float32", algorithm=algorithm, root=root
        )
        assert all(len(t.links) == 1 for t in out.trace.transfers)  # every hop one link
        per_step = {}
        for t in out.trace.transfers:  # no two transfers of one step share a link
            per_step.setdefault(t.tag.step, []).extend(t.links)
        assert all(len(links) == len(set(links)) for links in per_step.values())
        form = closed_form(collective, algorithm, k, size, 0.0 if latency == "0" else 5e-6, 100e9)
        assert out.time == pytest.approx(form.time_s, rel=1e-12)


@pytest.mark.parametrize("latency", ["0", "5us"])
@pytest.mark.parametrize("k", [2, 3, 5, 8])
def test_chain_reduce_takes_exactly_the_broadcast_time(k, latency):
    cluster = collsim.Cluster(topology.ring(k, "100GB/s", latency))
    xs = inputs(k, 6 * k + 1, "int64")
    for root in range(k):
        bcast = cluster.broadcast(xs, root=root, algorithm="ring")
        reduce = cluster.reduce(xs, root=root, algorithm="ring")
        assert reduce.time == bcast.time
        check(reduce, expected_outputs("reduce", xs, "sum", root))
        check(bcast, expected_outputs("broadcast", xs, "sum", root))


# -- halving-doubling reduce-scatter and all-gather: partners, bytes, refusal -------------


@pytest.mark.parametrize("k", [2, 4, 8])
@pytest.mark.parametrize("collective", ["reduce_scatter", "all_gather"])
def test_halving_doubling_pairs_r_xor_2_to_the_i_and_halves_or_doubles_bytes(collective, k):
    size = 64 * k * 8  # bytes
    count = size // 8 // (k if collective == "all_gather" else 1)
    cluster = collsim.Cluster(topology.switch(k, "25GB/s", "3us"))
    out = cluster.collective(collective, count=count, dtype="float64", algorithm="halving_doubling")
    depth = int(math.log2(k))
    assert out.stats.steps == depth
    for i in range(depth):
        # reduce-scatter: partner r XOR K/2^(i+1), S/2^(i+1) bytes; all-gather: r XOR 2^i,
        # 2^i·S/K bytes
        mask = k >> (i + 1) if collective == "reduce_scatter" else 1 << i
        nbytes = size >> (i + 1) if collective == "reduce_scatter" else (size // k) << i
        step = sorted((t.src, t.dst, t.nbytes) for t in out.trace.transfers if t.tag.step == i)
        assert step == [(r, r ^ mask, nbytes) for r in range(k)]
    assert out.time == pytest.approx(
        closed_form(collective, "halving_doubling", k, size, 6e-6, 25e9).time_s, rel=1e-12
    )


@pytest.mark.parametrize("k", [3, 5])
@pytest.mark.parametrize("collective", ["reduce_scatter", "all_gather"])
def test_halving_doubling_scatter_and_gather_refuse_k_not_a_power_of_two(collective, k):
    cluster = collsim.Cluster(topology.switch(k))
    lower = 2 if k == 3 else 4
    message = f"on {k} ranks: .*power of two \\(nearest: {lower} or {2 * lower}\\)"
    for alias in ("halving_doubling", "hd", "halving-doubling"):
        with pytest.raises(ConfigError, match=message):
            cluster.collective(collective, inputs(k, 4 * k, "float32"), algorithm=alias)
        with pytest.raises(ConfigError, match=message):
            cluster.collective(collective, count=4 * k, dtype="float32", algorithm=alias)
    with pytest.raises(ConfigError, match=message):
        analytical(cluster, collective, 64 * k, "hd")
    with pytest.raises(ConfigError, match=message):
        collsim.collectives.build(collective, "hd", k)


@pytest.mark.parametrize("spelling", ["halving_doubling", "hd", "halving-doubling"])
@pytest.mark.parametrize("collective", ["reduce-scatter", "all-gather"])
def test_collsim_run_selects_halving_doubling(collective, spelling, capsys):
    import json

    from collsim.cli import main

    argv = ["run", collective, "-k", "8", "-s", "2KiB", "--topology", "switch", "-a", spelling]
    argv.append("--json")
    assert main(argv) == 0
    (row,) = json.loads(capsys.readouterr().out)["results"]
    assert (row["algorithm"], row["steps"], row["wrong"]) == ("halving_doubling", 3, 0)
    assert main(["run", collective, "-k", "6", "-s", "2040", "-a", spelling]) == 2
    assert "6 ranks: partners are r XOR 2^i" in capsys.readouterr().err
