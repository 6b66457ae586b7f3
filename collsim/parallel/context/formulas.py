"""Closed forms for ring attention: bytes each rank sends and attention FLOPs each rank does.

They are the second oracle of :class:`~collsim.parallel.context.ring.RingAttention` (the
tests check the trace and the module's counts against them) and need no simulation.

Notation: B batch, S the full sequence, D the width of K and V (``n_heads * head_dim``,
``d_model`` for a square attention), cp the context-parallel group size, b bytes per
element, T = S/cp the tokens a rank holds.

Bytes (per rank per layer; every rank sends exactly what it receives)
    One K/V block is K and V of T tokens: ``2·B·T·D·b`` bytes; a dK/dV block the same.

    * forward: the ring has cp steps; before each of the first cp−1 a rank forwards the
      block it holds to rank r+1 (the last block it sees is not sent on), so
      ``(cp−1)·2·B·T·D·b = 2·(cp−1)/cp·B·S·D·b``.
    * backward: K/V circulate again, cp−1 hops as in the forward; the dK/dV partial sums
      travel *with* their block, one hop after each of the cp steps: after step s the
      rank sends on the sum for the block it holds, and after the last step that block's
      owner is r+1, so the cp-th hop takes the finished dK/dV home.  That is
      ``(cp−1 + cp)·2·B·T·D·b = 2·(2cp−1)/cp·B·S·D·b``.
    * cp = 1: nothing moves.

FLOPs (per rank per pass, attention only: the projections are the usual
``2·B·T·D·D`` matmuls, the same on every rank)
    A (query, key) pair costs ``u = B·H·f`` (f FLOPs per score below).  Under a causal mask
    a query at position t keeps the t + 1 keys at positions 0 … t, its own included, and
    skips the rest; without one it keeps all S.  :func:`causal_pairs` counts each rank's
    kept pairs exactly.  Cut the sequence into tiles of L tokens (L = S/cp contiguous,
    S/(2cp) balanced, the layout's chunks): a key tile before the query tile is kept whole,
    ``L²`` pairs, one after it is skipped, and the diagonal tile keeps its lower triangle,
    diagonal included, ``L(L+1)/2`` pairs.

    * contiguous: rank i holds tile i: ``i·L² + L(L+1)/2`` pairs.  The last rank does
      ``(cp−1)·L² + L(L+1)/2`` against a mean of ``(cp−1)/2·L² + L(L+1)/2``: for cp = 4 and
      2-token tiles 15 pairs against 9, 5/3 times the mean, rank 0 1/3 of it.  As the tiles
      grow, ``L(L+1)/2 → L²/2`` and the ratios tend to (2cp−1)/cp and 1/(2cp)
      (:func:`contiguous_imbalance_limit`), which large sequences reach.
    * balanced (Megatron, Llama 3): rank i holds tiles i and 2cp−1−i of 2cp:
      ``(2cp−1)·L² + L(L+1)`` pairs on every rank, ``S(S+1)/(2cp)``: the mean, exactly.

    f per score: forward ``4·hd + 6`` (QKᵀ and PV, 2·hd each; max, subtract, exp, sum,
    divide and the 1/√hd scale); backward ``10·hd + 11`` (QKᵀ recomputed, dV, dP, dQ, dK at
    2·hd each; the recomputed exp and scale, 6, and the softmax backward and scale, 5).
    The online softmax's per-row rescale is O(T), not O(T²), and is not counted.

Examples
--------
>>> ring_attention_bytes(batch=1, seq=1024, d_model=512, cp=4, bytes_per_element=2)
1572864
>>> ring_attention_bytes(1, 1024, 512, 4, 2, pass_="backward")  # (2cp-1)/(cp-1) = 7/3 times
3670016
>>> causal_pairs(8, 4, "contiguous")  # 2-token tiles: 4i + 3 pairs
[3, 7, 11, 15]
>>> causal_attention_flops(8, 2, "contiguous")   # per rank, B = H = hd = 1: 10 per pair
[100.0, 260.0]
>>> causal_attention_flops(8, 2, "balanced")
[180.0, 180.0]
"""

import difflib
import numbers
from typing import NamedTuple

from ...collectives.formulas import closed_form
from ...errors import ConfigError
from ...nn.layers import SOFTMAX_FLOPS
from .layouts import check_sequence

__all__ = [
    "CP_PASSES",
    "CausalBalance",
    "RingHops",
    "ring_attention_bytes",
    "ring_attention_hops",
    "ulysses_attention_bytes",
    "context_parallel_bytes",
    "causal_pairs",
    "causal_balance",
    "contiguous_imbalance_limit",
    "causal_attention_flops",
    "score_flops",
]

#: The passes the closed forms know: forward, and the backward (input and weight).
CP_PASSES = ("forward", "backward")


def score_flops(head_dim, pass_="forward"):
    """FLOPs per attention score of one head in ``pass_`` (see the module docstring).

    >>> score_flops(64), score_flops(64, "backward")
    (262, 651)
    """
    _check_pass(pass_)
    softmax_fwd, softmax_bwd = SOFTMAX_FLOPS
    if pass_ == "forward":
        return 4 * head_dim + softmax_fwd + 1
    return 10 * head_dim + (softmax_fwd + 1) + (softmax_bwd + 1)


def ring_attention_bytes(batch, seq, d_model, cp, bytes_per_element, pass_="forward"):
    """Bytes one rank sends (and receives) in one ring-attention layer's ``pass_``.

    forward ``2·(cp−1)·B·(S/cp)·D·b``; backward ``2·(2cp−1)·B·(S/cp)·D·b`` (K/V cp−1
    hops, dK/dV cp hops, the last one home); 0 when cp = 1.  Derivation in the module
    docstring.

    >>> ring_attention_bytes(2, 16, 8, 2, 8), ring_attention_bytes(2, 16, 8, 2, 8, "backward")
    (2048, 6144)
    """
    for name, value in (
        ("batch", batch),
        ("seq", seq),
        ("d_model", d_model),
        ("cp", cp),
        ("bytes_per_element", bytes_per_element),
    ):
        _check_positive_int(name, value)
    _check_pass(pass_)
    check_sequence(seq, cp, "contiguous")
    block = 2 * batch * (seq // cp) * d_model * bytes_per_element  # K and V (or dK and dV)
    hops = ring_attention_hops(cp)
    return block * (hops.kv if pass_ == "forward" else hops.kv + hops.dkv)


class RingHops(NamedTuple):
    """The hops one rank sends a block on, per ring-attention layer and micro-batch."""

    kv: int  # K/V blocks passed on in one pass (forward, and again in the backward)
    dkv: int  # dK/dV partial sums passed on in the backward, the last hop home


def ring_attention_hops(cp):
    """K/V hops per pass (cp−1: the last block is not sent on) and dK/dV hops in the
    backward (cp: each block's sums travel behind it and go home): what
    :func:`ring_attention_bytes` multiplies one block by, and the planner's sends per layer.

    >>> ring_attention_hops(4), ring_attention_hops(1)
    (RingHops(kv=3, dkv=4), RingHops(kv=0, dkv=0))
    """
    _check_positive_int("cp", cp)
    return RingHops(cp - 1, cp) if cp > 1 else RingHops(0, 0)


def ulysses_attention_bytes(batch, seq, d_model, cp, bytes_per_element, pass_="forward"):
    """Bytes each rank sends in one all-to-all (DeepSpeed-Ulysses) layer's ``pass_``
    (:class:`~collsim.parallel.context.ulysses.UlyssesAttention`).

    Derivation.  Let ``A = batch·(seq/cp)·d_model·b``, one rank's share of one activation
    (``d_model`` is the attention's inner width ``n_heads·head_dim``, equal to the model
    width for every :meth:`~collsim.nn.MultiHeadAttention.init`).  The direct all-to-all
    of a per-rank buffer of ``N`` bytes keeps 1/cp of it and sends the rest,
    ``(cp−1)/cp·N`` (:func:`collsim.collectives.formulas.closed_form`, ``"all_to_all"``).

    * forward: the packed q, k, v (``N = 3A``) to heads, the attention output (``N = A``)
      back: ``(cp−1)/cp·4A = 4·(cp−1)/cp²·batch·seq·d_model·b``;
    * backward (``backward_input``; ``backward_weight`` sends nothing): the output
      gradient (``N = A``) to heads, the packed dq, dk, dv (``N = 3A``) back: the same.

    Unlike ring attention's ``(cp−1)/cp`` of the K/V, this shrinks as cp grows at a fixed
    sequence (Jacobs et al. 2023: constant per-link volume when seq and cp grow together).

    >>> ulysses_attention_bytes(2, 8, 8, 2, 8)  # 4 · (1/4) · 2·8·8 · 8 bytes
    1024.0
    >>> ulysses_attention_bytes(2, 8, 8, 1, 8, "backward")
    0.0
    """
    sizes = {
        "batch": batch,
        "seq": seq,
        "d_model": d_model,
        "cp": cp,
        "bytes_per_element": bytes_per_element,
    }
    for name, value in sizes.items():
        _check_positive_int(name, value)
    _check_pass(pass_)
    for what in ("seq", "d_model"):
        if sizes[what] % cp:
            raise ConfigError(
                f"{what}={sizes[what]} is not divisible by cp={cp}: DeepSpeed-Ulysses splits "
                f"the sequence and the heads over the cp ranks"
            )
    share = batch * (seq // cp) * d_model * bytes_per_element  # A: one activation, one rank

    def all_to_all(size):
        return closed_form("all_to_all", "direct", cp, size, alpha=0.0, beta=1.0).bytes_per_rank

    if pass_ == "forward":
        return all_to_all(3 * share) + all_to_all(share)  # q, k, v to heads; output back
    return all_to_all(share) + all_to_all(3 * share)  # output gradient; dq, dk, dv back


def context_parallel_bytes(
    variant,
    *,
    batch,
    seq,
    hidden,
    cp,
    bytes_per_element,
    tp=1,
    layers=1,
    microbatches=1,
    steps=1,
    passes=CP_PASSES,
):
    """Bytes one rank sends along cp in a run: the ``passes`` (forward and backward) of
    ``layers`` transformer layers, ``microbatches`` of ``batch`` samples each, ``steps`` times.

    A rank of a (cp, tp) grid attends for its tp share of the heads, so its K/V (ring) or
    q/k/v (all-to-all) are ``hidden/tp`` wide: the ``variant``'s closed form
    (:func:`ring_attention_bytes`, :func:`ulysses_attention_bytes`) at that width.  What
    ``collsim verify cp | nd`` sets next to the bytes each rank measured.

    >>> context_parallel_bytes("ring", batch=2, seq=8, hidden=16, cp=2, bytes_per_element=8)
    8192
    >>> context_parallel_bytes("ring", batch=2, seq=8, hidden=16, cp=2, bytes_per_element=8,
    ...                        tp=2, layers=2, steps=3)  # half as wide, 6 times as often
    24576
    """
    closed = {"ring": ring_attention_bytes, "all-to-all": ulysses_attention_bytes}
    if variant not in closed:
        guess = difflib.get_close_matches(str(variant), list(closed), n=1, cutoff=0)[0]
        raise ConfigError(
            f"variant={variant!r} is not one of {', '.join(closed)}; nearest "
            f"valid choice: {guess!r}"
        )
    sizes = {
        "batch": batch,
        "seq": seq,
        "hidden": hidden,
        "cp": cp,
        "bytes_per_element": bytes_per_element,
        "tp": tp,
        "layers": layers,
        "microbatches": microbatches,
        "steps": steps,
    }
    for name, value in sizes.items():  # before any arithmetic on them
        _check_positive_int(name, value)
    for pass_ in passes:
        _check_pass(pass_)
    if cp == 1:
        return 0
    if hidden % tp:
        raise ConfigError(
            f"hidden={hidden} is not divisible by tp={tp}: each tp rank holds "
            "hidden/tp of the attention's width"
        )
    per_layer = sum(
        closed[variant](batch, seq, hidden // tp, cp, bytes_per_element, pass_=p) for p in passes
    )
    return int(per_layer) * layers * microbatches * steps


def causal_pairs(seq, cp, layout, causal=True):
    """The (query, key) pairs each rank of the cp group scores (a list, group order).

    Causal: a query at position t keeps keys 0 … t, its own included; contiguous rank i
    ``i·L² + L(L+1)/2`` with L = S/cp, balanced ``S(S+1)/(2cp)`` on every rank.  Not
    causal: ``S²/cp``.  Derivation in the module docstring.

    >>> causal_pairs(8, 2, "contiguous"), causal_pairs(8, 2, "balanced")
    ([10, 26], [18, 18])
    """
    for name, value in (("seq", seq), ("cp", cp)):
        _check_positive_int(name, value)
    check_sequence(seq, cp, layout)
    if not causal:
        return [seq * seq // cp] * cp
    if layout == "balanced":
        tile = seq // (2 * cp)
        return [(2 * cp - 1) * tile * tile + tile * (tile + 1)] * cp
    tile = seq // cp
    return [i * tile * tile + tile * (tile + 1) // 2 for i in range(cp)]


class CausalBalance(NamedTuple):
    """How unevenly causal attention loads a cp group: exact and large-tile ratios."""

    max_over_mean: float  # the busiest rank's kept pairs over the mean
    min_over_mean: float  # the idlest rank's (rank 0's, contiguous)
    max_limit: float  # max_over_mean as the tiles grow: (2cp−1)/cp contiguous, else 1
    min_limit: float  # min_over_mean as the tiles grow: 1/(2cp) contiguous, else 1


def causal_balance(seq, cp, layout, causal=True):
    """The exact max/mean and min/mean of :func:`causal_pairs`, next to their limits.

    >>> causal_balance(8, 4, "contiguous")  # doctest: +ELLIPSIS
    CausalBalance(max_over_mean=1.666..., min_over_mean=0.333..., max_limit=1.75, min_limit=0.125)
    """
    pairs = causal_pairs(seq, cp, layout, causal)
    mean = sum(pairs) / cp
    uneven = causal and layout == "contiguous"
    limit = contiguous_imbalance_limit(cp) if uneven else 1.0
    return CausalBalance(
        max(pairs) / mean, min(pairs) / mean, limit, 1 / (2 * cp) if uneven else 1.0
    )


def contiguous_imbalance_limit(cp):
    """(2cp−1)/cp: the last rank's share of the mean causal work, contiguous layout, as the
    tiles grow (the diagonal tile's L(L+1)/2 pairs tend to L²/2).

    >>> contiguous_imbalance_limit(4)
    1.75
    """
    _check_positive_int("cp", cp)
    return (2 * cp - 1) / cp


def causal_attention_flops(
    seq, cp, layout, batch=1, heads=1, head_dim=1, pass_="forward", causal=True
):
    """Attention FLOPs of each rank of the cp group (a list, group order) in ``pass_``:
    ``u·``:func:`causal_pairs` with ``u = B·H·score_flops(head_dim, pass_)``.

    >>> flops = causal_attention_flops(64, 4, "contiguous")
    >>> round(flops[-1] / (sum(flops) / 4), 4)  # 16-token tiles: 904/520, near 1.75
    1.7385
    """
    for name, value in (("batch", batch), ("heads", heads), ("head_dim", head_dim)):
        _check_positive_int(name, value)
    unit = batch * heads * score_flops(head_dim, pass_)
    return [float(unit * pairs) for pairs in causal_pairs(seq, cp, layout, causal)]


def _check_positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ConfigError(f"{name} must be a whole number >= 1, got {name}={value!r}")


def _check_pass(pass_):
    if pass_ not in CP_PASSES:
        guess = difflib.get_close_matches(str(pass_), CP_PASSES, n=1, cutoff=0)
        raise ConfigError(
            f"pass_={pass_!r} is not one of {', '.join(CP_PASSES)}; nearest valid choice: "
            f"{guess[0]!r}"
        )
