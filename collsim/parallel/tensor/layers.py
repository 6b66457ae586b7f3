"""Tensor parallelism (Megatron-LM): column- and row-parallel linears, the parallel MLP,
and the communication operators ``f`` and ``g`` they are built from.

Megatron-LM's picture (Shoeybi et al. 2019): split a weight by columns,
``W = [W0 | W1 | W2 | W3]``; every TP rank sees the whole input ``X`` and computes
``Y_i = X W_i``.  The forward needs an all-gather to assemble ``Y``; the backward needs
an all-reduce of ``dX = sum_i dY_i W_i^T``.
Megatron puts a column-parallel layer in front of a row-parallel one, so the sharded
``Y_i`` feeds the row-parallel layer directly and the pair communicates once each way:

==================  ======================  ========================  ======================
operator            forward                 backward                  sequence parallel
==================  ======================  ========================  ======================
``f`` (enter)       identity                all-reduce of ``dX``      all-gather / reduce-scatter
``g`` (exit)        all-reduce of ``Y``     identity                  reduce-scatter / all-gather
==================  ======================  ========================  ======================

With sequence parallelism (SP) the activations outside the TP region are split along the
sequence: ``g``'s all-reduce becomes a reduce-scatter and ``f``'s identity an all-gather.
Ring reduce-scatter + all-gather move exactly the bytes of one ring all-reduce, so SP
costs TP nothing in communication and divides the activation memory outside by ``tp``.

Every layer here is a *rank module* (see :mod:`collsim.parallel.modules`): build one per
rank from the full single-device layer with ``from_full(full, group, tp_rank)`` (it keeps
only that rank's slice) and call its generator passes inside a rank program::

    fc = ColumnParallelLinear.from_full(linear, group, group.index(rank.id))
    y, ctx = yield from fc.forward(rank, x)
    dx = yield from fc.backward_input(rank, ctx, dy)
    grads = yield from fc.backward_weight(rank, ctx, dy)   # this rank's slices

=========================  ===============================================================
name                       what it is
=========================  ===============================================================
:class:`ColumnParallelLinear`  ``Y_i = f(X) W_i + b_i``; output sharded or gathered
:class:`RowParallelLinear`     ``Y = g(sum_i X_i W_i) + b``; input sharded (or split here)
:class:`ParallelMLP`       column -> GELU -> row: one all-reduce forward, one backward
=========================  ===============================================================

Attention with heads split and the transformer block are in
:mod:`collsim.parallel.tensor.attention`; ``f``, ``g``, the rules and the collectives
along an axis in :mod:`collsim.parallel.tensor.comm` (both exported by the package).

Examples
--------
Megatron-LM's column split on 4 ranks: the gathered output is ``X W`` and ``dX`` is summed.

>>> import numpy as np, collsim
>>> from collsim.nn import Linear
>>> from collsim.runtime.group import Group
>>> rng = np.random.default_rng(0)
>>> full = Linear.init(8, 4, rng)
>>> x, dy = rng.uniform(-1, 1, (64, 8)), rng.uniform(-1, 1, (64, 4))
>>> group = Group(range(4))
>>> def program(rank):
...     fc = ColumnParallelLinear.from_full(full, group, rank.id, gather_output=True)
...     y, ctx = yield from fc.forward(rank, x)         # all-gather of the Y_i
...     dx, grads = yield from fc.backward(rank, ctx, dy)  # all-reduce of dX
...     return y, dx
>>> result = collsim.Cluster(collsim.topology.switch(4)).run(program)
>>> y, dx = result.returns[3]
>>> y_ref, ctx = full.forward(x)
>>> bool(np.allclose(y, y_ref)), bool(np.allclose(dx, full.backward_input(ctx, dy)))
(True, True)
>>> result.stats.bytes_sent  # 3/4 of Y (64·4·8 B) + 2·3/4 of dX (64·8·8 B)
[7680, 7680, 7680, 7680]
"""

import numpy as np

from ...errors import ConfigError
from ...nn import GELU, Linear
from ..modules import Local, layer_compute
from .comm import (
    FG,
    _check_rank,
    _shard,
    _stashed,
    all_gather_along,
    reduced_output_weight_grads,
    split_along,
)

__all__ = [
    "ColumnParallelLinear",
    "RowParallelLinear",
    "ParallelMLP",
]


# ---- the layers -------------------------------------------------------------------------


class ColumnParallelLinear:
    """``Y_i = f(X) W_i + b_i``: this rank's output columns of a Linear.

    Parameters
    ----------
    shard : collsim.nn.Linear
        The local slice: ``weight[:, cols]`` and ``bias[cols]``.
    group : Group
        The TP group; ``tp_rank`` is this rank's index in it.
    gather_output : bool
        All-gather the ``Y_i`` into the full ``Y`` (Megatron-LM), or leave ``Y_i`` for a
        row-parallel layer (Megatron's MLP).  Backward then all-reduces ``dX`` (``f``).
    sequence_parallel : bool
        ``X`` arrives split along ``seq_axis`` and is all-gathered first; ``dX`` leaves
        reduce-scattered.  Not with ``gather_output``.
    """

    def __init__(
        self,
        shard,
        group,
        tp_rank,
        gather_output=False,
        sequence_parallel=False,
        seq_axis=-2,
        name="column",
    ):
        if gather_output and sequence_parallel:
            raise ConfigError(
                "a column-parallel layer cannot gather its output under sequence "
                "parallelism: the next layer must be row-parallel"
            )
        self.shard, self.group, self.tp_rank = shard, group, tp_rank
        self.gather_output = bool(gather_output)
        self.fg = FG(group, sequence_parallel, seq_axis)
        self.name = name
        self.shard_axes = {"weight": 1, "bias": 0} if shard.bias is not None else {"weight": 1}
        self.partial_grad_names = ()  # every local gradient is complete

    @classmethod
    def from_full(cls, linear, group, tp_rank, **options):
        """This rank's shard of ``linear`` (copied): raises if tp does not divide the outputs."""
        cols = _shard(linear.out_features, group, tp_rank, "out_features")
        bias = None if linear.bias is None else linear.bias[cols]
        return cls(Linear(linear.weight[:, cols], bias), group, tp_rank, **options)

    def __repr__(self):
        return f"ColumnParallelLinear({self.shard!r}, tp={self.group.size})"

    @property
    def params(self):
        return self.shard.params

    def forward(self, rank, x):
        _check_rank(self, rank)
        x_full = yield from self.fg.f_forward(rank, x)  # SP: all-gather the tokens
        flops = self.shard.flops(x_full.shape)
        yield layer_compute(rank, "forward", self.name, flops["forward"])
        y, ctx = self.shard.forward(x_full)  # (..., out/t)
        if self.gather_output:
            y = yield from all_gather_along(rank, y, self.group, -1)  # (..., out)
        return y, {"inner": ctx, "flops": flops}

    def _local_dy(self, dy):
        if self.gather_output:  # the gradient of our columns only: no communication
            return split_along(dy, self.group, self.tp_rank, -1)
        return dy

    def backward_input(self, rank, ctx, dy):
        dy_local = self._local_dy(dy)
        ctx["dy_local"] = (dy, dy_local)
        yield layer_compute(rank, "backward_input", self.name, ctx["flops"]["backward_input"])
        dx = self.shard.backward_input(ctx["inner"], dy_local)  # a partial sum over ranks
        return (yield from self.fg.f_backward(rank, dx))  # all-reduce (SP: reduce-scatter)

    def backward_weight(self, rank, ctx, dy):
        dy_local = _stashed(ctx, dy)
        if dy_local is None:
            dy_local = self._local_dy(dy)
        yield layer_compute(rank, "backward_weight", self.name, ctx["flops"]["backward_weight"])
        return self.shard.backward_weight(ctx["inner"], dy_local)

    def backward(self, rank, ctx, dy):
        dx = yield from self.backward_input(rank, ctx, dy)
        return dx, (yield from self.backward_weight(rank, ctx, dy))


class RowParallelLinear:
    """``Y = g(sum_i X_i W_i) + b``: this rank's input rows of a Linear.

    Parameters
    ----------
    shard : collsim.nn.Linear
        The local slice ``weight[rows, :]``, without bias.
    bias : array or None
        The full bias, held by every rank and added once, after the reduction.
    input_is_parallel : bool
        ``X_i`` arrives already split along its last axis (from a column-parallel layer).
        If False the full ``X`` arrives, is split here, and ``dX`` is all-gathered.
    sequence_parallel : bool
        ``g`` reduce-scatters along ``seq_axis`` instead of all-reducing; the bias
        gradient then covers this rank's tokens only and is summed over the group
        (:func:`sync_partial_grads`) unless ``sync_partial_grads=False`` (a block that
        sums all such gradients at once).
    """

    def __init__(
        self,
        shard,
        bias,
        group,
        tp_rank,
        input_is_parallel=True,
        sequence_parallel=False,
        seq_axis=-2,
        name="row",
        sync_partial_grads=True,
    ):
        if sequence_parallel and not input_is_parallel:
            raise ConfigError(
                "sequence parallelism needs input_is_parallel=True for a "
                "row-parallel layer, as in Megatron"
            )
        if shard.bias is not None:
            raise ConfigError("a row-parallel shard has no bias: pass the bias separately")
        self.shard, self.group, self.tp_rank = shard, group, tp_rank
        self.bias = None if bias is None else np.array(bias, dtype=shard.weight.dtype)
        self.input_is_parallel = bool(input_is_parallel)
        self.fg = FG(group, sequence_parallel, seq_axis)
        self.name = name
        self.sync_partial_grads = sync_partial_grads
        self.shard_axes = {"weight": 0} | ({"bias": None} if bias is not None else {})
        partial = sequence_parallel and bias is not None
        self.partial_grad_names = ("bias",) if partial else ()

    @classmethod
    def from_full(cls, linear, group, tp_rank, **options):
        """This rank's shard of ``linear`` (copied): raises if tp does not divide the inputs."""
        rows = _shard(linear.in_features, group, tp_rank, "in_features")
        return cls(Linear(linear.weight[rows, :]), linear.bias, group, tp_rank, **options)

    def __repr__(self):
        return f"RowParallelLinear({self.shard!r}, tp={self.group.size})"

    @property
    def params(self):
        return self.shard.params | ({"bias": self.bias} if self.bias is not None else {})

    def forward(self, rank, x):
        _check_rank(self, rank)
        if not self.input_is_parallel:
            x = split_along(x, self.group, self.tp_rank, -1)
        flops = self.shard.flops(np.shape(x))
        yield layer_compute(rank, "forward", self.name, flops["forward"])
        y, ctx = self.shard.forward(x)  # (..., out): a partial sum over ranks
        y = yield from self.fg.g_forward(rank, y)  # all-reduce (SP: reduce-scatter)
        if self.bias is not None:
            y = y + self.bias
        return y, {"inner": ctx, "flops": flops}

    def backward_input(self, rank, ctx, dy):
        dy_full = yield from self.fg.g_backward(rank, dy)  # SP: all-gather the tokens
        ctx["dy_local"] = (dy, dy_full)
        yield layer_compute(rank, "backward_input", self.name, ctx["flops"]["backward_input"])
        dx = self.shard.backward_input(ctx["inner"], dy_full)  # (..., in/t)
        if not self.input_is_parallel:
            dx = yield from all_gather_along(rank, dx, self.group, -1)
        return dx

    def backward_weight(self, rank, ctx, dy):
        return (yield from reduced_output_weight_grads(self, rank, ctx, dy, "bias", self.bias))

    def backward(self, rank, ctx, dy):
        dx = yield from self.backward_input(rank, ctx, dy)
        return dx, (yield from self.backward_weight(rank, ctx, dy))


class ParallelMLP:
    """Megatron's MLP: ``fc1`` column-parallel, GELU on the local columns, ``fc2``
    row-parallel.  One all-reduce forward (``g``), one backward (``f``); with sequence
    parallelism an all-gather and a reduce-scatter each way.

    ``from_full(mlp, group, tp_rank, sequence_parallel=False)`` shards a
    :class:`collsim.nn.MLP`; tp must divide its inner (ffn) size.
    """

    def __init__(self, fc1, fc2, sync_partial_grads=True):
        self.fc1, self.fc2 = fc1, fc2
        self.act = Local(GELU(), name="gelu")
        self.group, self.tp_rank = fc1.group, fc1.tp_rank
        fc2.sync_partial_grads = sync_partial_grads
        self.shard_axes = {f"fc1.{k}": v for k, v in fc1.shard_axes.items()}
        self.shard_axes |= {f"fc2.{k}": v for k, v in fc2.shard_axes.items()}
        self.partial_grad_names = tuple(f"fc2.{n}" for n in fc2.partial_grad_names)

    @classmethod
    def from_full(
        cls, mlp, group, tp_rank, sequence_parallel=False, seq_axis=-2, sync_partial_grads=True
    ):
        _shard(mlp.fc1.out_features, group, tp_rank, "ffn_hidden")
        sp = {"sequence_parallel": sequence_parallel, "seq_axis": seq_axis}
        fc1 = ColumnParallelLinear.from_full(mlp.fc1, group, tp_rank, name="fc1", **sp)
        fc2 = RowParallelLinear.from_full(mlp.fc2, group, tp_rank, name="fc2", **sp)
        return cls(fc1, fc2, sync_partial_grads)

    def __repr__(self):
        return f"ParallelMLP(fc1={self.fc1!r}, fc2={self.fc2!r})"

    @property
    def params(self):
        out = {f"fc1.{k}": v for k, v in self.fc1.params.items()}
        return out | {f"fc2.{k}": v for k, v in self.fc2.params.items()}

    def forward(self, rank, x):
        h, c1 = yield from self.fc1.forward(rank, x)  # f, then (..., ffn/t)
        a, c2 = yield from self.act.forward(rank, h)
        y, c3 = yield from self.fc2.forward(rank, a)  # g
        return y, {"fc1": c1, "act": c2, "fc2": c3}

    def backward_input(self, rank, ctx, dy):
        da = yield from self.fc2.backward_input(rank, ctx["fc2"], dy)
        dh = yield from self.act.backward_input(rank, ctx["act"], da)
        ctx["dys"] = (dy, dh)
        return (yield from self.fc1.backward_input(rank, ctx["fc1"], dh))

    def backward_weight(self, rank, ctx, dy):
        kept = ctx.get("dys")
        if kept is None or kept[0] is not dy:
            yield from self.backward_input(rank, ctx, dy)
            kept = ctx["dys"]
        grads = {}
        for prefix, layer, d in (("fc1", self.fc1, kept[1]), ("fc2", self.fc2, dy)):
            part = yield from layer.backward_weight(rank, ctx[prefix], d)
            grads |= {f"{prefix}.{k}": v for k, v in part.items()}
        return {name: grads[name] for name in self.params}

    def backward(self, rank, ctx, dy):
        dx = yield from self.backward_input(rank, ctx, dy)
        return dx, (yield from self.backward_weight(rank, ctx, dy))
