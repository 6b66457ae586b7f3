"""Tensor parallelism's rules and communication: Megatron's ``f`` and ``g`` operators.

==========================  ==========================================================
name                        what it is
==========================  ==========================================================
:func:`check_tp`            the divisibility rules, every violation in one ConfigError
:class:`FG`                 ``f`` (enter a TP region) and ``g`` (leave it), TP or SP
:func:`all_gather_along`    all-gather along any axis (the runtime's gathers along the first)
:func:`reduce_scatter_along`  reduce-scatter along any axis
:func:`split_along`         this rank's slice along an axis (no communication)
:func:`sequence_shard`      this rank's tokens of a full activation (the SP layout)
:func:`sync_partial_grads`  sum over the TP group the gradients SP leaves partial
==========================  ==========================================================

The generators here are used with ``yield from`` inside rank programs; a group of one
rank communicates nothing.  The layers built on them are in
:mod:`collsim.parallel.tensor` and :mod:`collsim.parallel.tensor.attention`.

Examples
--------
>>> import numpy as np, collsim
>>> from collsim.runtime.group import Group
>>> group = Group([0, 1])
>>> def program(rank):
...     x = np.full((2, 4, 3), float(rank.id + 1))  # (B, S, H)
...     fg = FG(group, sequence_parallel=True, seq_axis=1)
...     y = yield from fg.g_forward(rank, x)  # reduce-scatter over the tokens: (B, S/2, H)
...     z = yield from fg.f_forward(rank, y)  # all-gather them back: (B, S, H)
...     return y.shape, float(z[0, 3, 0])
>>> collsim.Cluster(collsim.topology.switch(2)).run(program).returns
[((2, 2, 3), 3.0), ((2, 2, 3), 3.0)]
"""

import math

import numpy as np

from ...errors import ConfigError, nearest_first
from ..batch import divisors
from ..modules import layer_compute

__all__ = [
    "check_tp",
    "FG",
    "all_gather_along",
    "reduce_scatter_along",
    "split_along",
    "sequence_shard",
    "sync_partial_grads",
]


# ---- the rules -----------------------------------------------------------------------


def check_tp(tp, *, hidden=None, heads=None, ffn_hidden=None, seq=None, sequence_parallel=False):
    """Raise one ConfigError naming every size that ``tp`` does not divide.

    Each TP rank holds ``1/tp`` of the hidden columns, of the attention heads and of the
    MLP's inner columns, and with sequence parallelism ``1/tp`` of the tokens (Megatron-LM);
    a size left as None is not checked.  The message names the numbers, the rule, and
    the tp values that would divide all of them.

    >>> check_tp(4, hidden=16, heads=4, ffn_hidden=64)
    >>> check_tp(3, hidden=16, heads=4)
    Traceback (most recent call last):
    ...
    collsim.errors.ConfigError: tensor parallel degree tp=3 must divide hidden=16 (16/3 = 5.333) \
and heads=4 (4/3 = 1.333): each TP rank holds 1/tp of each; tp values that divide hidden=16 \
and heads=4, nearest first: 2, 4, 1
    """
    if isinstance(tp, bool) or not isinstance(tp, int | np.integer) or tp < 1:
        raise ConfigError(f"tensor parallel degree tp must be a positive integer, got {tp!r}")
    sizes = {"hidden": hidden, "heads": heads, "ffn_hidden": ffn_hidden}
    if sequence_parallel:
        sizes["seq"] = seq
    sizes = {k: int(v) for k, v in sizes.items() if v is not None}
    bad = {k: v for k, v in sizes.items() if v % tp}
    if not bad:
        return
    common = 0
    for v in sizes.values():
        common = math.gcd(common, v)
    shown = " and ".join(f"{k}={v} ({v}/{tp} = {v / tp:.4g})" for k, v in bad.items())
    every = " and ".join(f"{k}={v}" for k, v in sizes.items())
    what = "each TP rank holds 1/tp of each"
    if "seq" in bad:
        what += " (with sequence parallelism also 1/tp of the tokens)"
    raise ConfigError(
        f"tensor parallel degree tp={tp} must divide {shown}: {what}; "
        f"tp values that divide {every}, nearest first: "
        + ", ".join(map(str, nearest_first(tp, divisors(common))))
    )


def _shard(n, group, tp_rank, what):
    """The slice of ``n`` columns (or rows) that TP rank ``tp_rank`` of ``group`` holds."""
    t = group.size
    if n % t:
        raise ConfigError(
            f"tensor parallel degree tp={t} must divide {what}={n} ({n}/{t} = {n / t:.4g}): "
            f"each TP rank holds 1/tp of it; tp values that divide {n}, nearest first: "
            + ", ".join(map(str, nearest_first(t, divisors(n))))
        )
    if not 0 <= tp_rank < t:
        raise ConfigError(f"tp_rank {tp_rank} is outside the TP group of {t} ranks")
    per = n // t
    return slice(tp_rank * per, (tp_rank + 1) * per)


def _check_rank(module, rank):
    if module.group.ranks[module.tp_rank] != rank.id:
        raise ConfigError(
            f"{type(module).__name__} holds TP shard {module.tp_rank} of group "
            f"{list(module.group.ranks)} (rank {module.group.ranks[module.tp_rank]}) but runs "
            f"on rank {rank.id}: build it with tp_rank=group.index(rank.id)"
        )


# ---- collectives along an axis ----------------------------------------------------------


def all_gather_along(rank, x, group, axis):
    """Concatenate every group rank's ``x`` along ``axis``, in group order (a generator)."""
    if group.size == 1:
        return x
    front = np.moveaxis(np.asarray(x), axis, 0)  # (n, ...)
    flat = np.ascontiguousarray(front).reshape(-1)
    out = yield from rank.all_gather(flat, group=group)
    out = out.reshape((group.size * front.shape[0],) + front.shape[1:])
    return np.moveaxis(out, 0, axis)


def reduce_scatter_along(rank, x, group, axis):
    """Sum ``x`` over the group and keep this rank's ``1/t`` slice along ``axis``."""
    if group.size == 1:
        return x
    front = np.ascontiguousarray(np.moveaxis(np.asarray(x), axis, 0))  # (n, ...)
    n, t = front.shape[0], group.size
    if n % t:
        raise ConfigError(
            f"reduce-scatter along an axis of {n} over {t} ranks: {t} must divide {n}"
        )
    out = yield from rank.reduce_scatter(front.reshape(-1), group=group)
    return np.moveaxis(out.reshape((n // t,) + front.shape[1:]), 0, axis)


def split_along(x, group, tp_rank, axis):
    """This rank's ``1/t`` slice of ``x`` along ``axis`` (a copy; no communication)."""
    x = np.asarray(x)
    cut = _shard(x.shape[axis], group, tp_rank, f"the size {x.shape[axis]} of axis {axis}")
    index = [slice(None)] * x.ndim
    index[axis] = cut
    return x[tuple(index)].copy()


def sequence_shard(x, group, tp_rank, seq_axis=1):
    """This rank's ``S/t`` tokens of ``x`` (a copy): how sequence-parallel input is laid out.

    Raises a ConfigError naming seq, tp and the tp values that divide seq when tp does
    not divide the sequence length.
    """
    x = np.asarray(x)
    check_tp(group.size, seq=x.shape[seq_axis], sequence_parallel=True)
    return split_along(x, group, tp_rank, seq_axis)


def _all_reduce(rank, x, group):
    if group.size == 1:
        return x
    return (yield from rank.all_reduce(x, group=group))


class FG:
    """Megatron's conjugate operators ``f`` (entering a TP region) and ``g`` (leaving it).

    Parameters
    ----------
    group : Group
        The tensor-parallel group.
    sequence_parallel : bool
        False: ``f`` = identity / all-reduce, ``g`` = all-reduce / identity (forward /
        backward).  True: ``f`` = all-gather / reduce-scatter and ``g`` = reduce-scatter /
        all-gather along ``seq_axis``.
    seq_axis : int
        The token axis: ``-2`` for ``(B, S, H)`` and for ``(tokens, H)``.
    """

    def __init__(self, group, sequence_parallel=False, seq_axis=-2):
        self.group = group
        self.sequence_parallel = bool(sequence_parallel)
        self.seq_axis = seq_axis

    def f_forward(self, rank, x):
        if self.sequence_parallel:
            return (yield from all_gather_along(rank, x, self.group, self.seq_axis))
        return x

    def f_backward(self, rank, dx):
        if self.sequence_parallel:
            return (yield from reduce_scatter_along(rank, dx, self.group, self.seq_axis))
        return (yield from _all_reduce(rank, dx, self.group))

    def g_forward(self, rank, y):
        if self.sequence_parallel:
            return (yield from reduce_scatter_along(rank, y, self.group, self.seq_axis))
        return (yield from _all_reduce(rank, y, self.group))

    def g_backward(self, rank, dy):
        if self.sequence_parallel:
            return (yield from all_gather_along(rank, dy, self.group, self.seq_axis))
        return dy


def sync_partial_grads(rank, grads, names, group):
    """All-reduce ``grads[name]`` for ``names`` over the TP group in one flat buffer.

    With sequence parallelism the replicated parameters that act on sequence-split
    activations (LayerNorm's gamma and beta, the bias after a row-parallel layer) get
    only this rank's tokens' share of their gradient; Megatron sums them over the TP
    group before the optimizer step.  Returns a new dict.
    """
    names = [n for n in names if n in grads]
    if not names or group.size == 1:
        return grads
    flat = np.concatenate([np.ravel(grads[n]) for n in names])
    flat = yield from rank.all_reduce(flat, group=group)
    out, at = dict(grads), 0
    for n in names:
        size = np.size(grads[n])
        out[n] = flat[at : at + size].reshape(np.shape(grads[n]))
        at += size
    return out


def _stashed(ctx, dy):
    """The backward-local gradient backward_input kept for this ``dy``, or None."""
    kept = ctx.get("dy_local")
    return kept[1] if kept is not None and kept[0] is dy else None


def reduced_output_weight_grads(module, rank, ctx, dy, bias_name, bias):
    """The W pass of a layer whose output ``g`` reduced over the TP group (a row-parallel
    linear, attention's output projection): weight gradients from the full ``dy`` (kept
    by B, or gathered again), the bias gradient once, partial gradients summed under SP."""
    dy_full = _stashed(ctx, dy)
    if dy_full is None:  # no backward_input for this dy: communicate again
        dy_full = yield from module.fg.g_backward(rank, dy)
    yield layer_compute(rank, "backward_weight", module.name, ctx["flops"]["backward_weight"])
    grads = module.shard.backward_weight(ctx["inner"], dy_full)
    if bias is not None:
        grads[bias_name] = np.reshape(dy, (-1, bias.shape[0])).sum(axis=0)
    if module.sync_partial_grads:
        grads = yield from sync_partial_grads(rank, grads, module.partial_grad_names, module.group)
    return grads
