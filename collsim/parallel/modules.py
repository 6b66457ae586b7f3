"""Rank modules: the layers that run *inside* rank programs, and the contract they share.

A rank module is the rank-program twin of a :mod:`collsim.nn` module.  Its passes are
generators that take the ``rank`` first, so they can charge compute time
(``rank.compute(flops=...)``) and run collectives (``yield from rank.all_reduce(...)``)
on the way; use them with ``yield from``::

    y, ctx = yield from m.forward(rank, x)
    dx = yield from m.backward_input(rank, ctx, dy)       # B: what upstream waits for
    grads = yield from m.backward_weight(rank, ctx, dy)   # W: call after B, same dy
    dx, grads = yield from m.backward(rank, ctx, dy)      # both

    m.params        # name -> the local array the rank computes with (update in place)
    m.shard_axes    # name -> axis along which it is a slice of the full parameter,
                    #         or None where every rank of the group holds all of it

Parameter names are the names of the full :mod:`collsim.nn` module, so the gradients of
a tensor-parallel shard line up with the single-device ones by name (see
:func:`gather_params`).  ``backward_weight`` must come after ``backward_input`` with the
*same* ``dy`` object (the order every schedule uses, zero-bubble included): what ``B``
computed or communicated on its way is kept in ``ctx`` for ``W``, never fetched twice.

=====================  =========================================================
name                   what it is
=====================  =========================================================
:class:`Local`         an nn module run as is on one rank, compute time charged
:class:`LayerPass`     the record of a layer's compute span: which pass of which
                       layer (the trace's ``meta``; the label is for display)
:func:`units_of`       a model as a list of ``(prefix, rank module)`` units
:func:`flat_params`    all units' params under their prefixed names
:func:`gather_params`  full parameters (or gradients) from the shards of a group
=====================  =========================================================

Tensor-parallel rank modules live in :mod:`collsim.parallel.tensor` and
:mod:`collsim.parallel.tensor.attention`; :mod:`collsim.parallel.data` trains any list
of units data-parallel.

Examples
--------
>>> import numpy as np, collsim
>>> from collsim.nn import Linear
>>> layer = Local(Linear(np.eye(2), np.zeros(2)), name="fc")
>>> def program(rank):
...     y, ctx = yield from layer.forward(rank, np.ones((3, 2)))
...     dx, grads = yield from layer.backward(rank, ctx, np.ones((3, 2)))
...     return grads["weight"].tolist()
>>> result = collsim.Cluster(collsim.topology.switch(1), compute_rate=1e9).run(program)
>>> result.returns[0]
[[3.0, 3.0], [3.0, 3.0]]
>>> [(c.meta.kind, c.end - c.start) for c in result.trace.computes]  # 24 FLOPs at 1 GFLOP/s
[('forward', 2.4e-08), ('backward_input', 2.4e-08), ('backward_weight', 2.4e-08)]
>>> result.trace.computes[0].meta, result.trace.computes[0].label
(LayerPass(kind='forward', layer='fc'), 'F fc')
"""

import difflib
from dataclasses import asdict, dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from ..errors import ConfigError
from ..nn import Sequential

__all__ = [
    "RankModule",
    "LAYER_PASS_KINDS",
    "LayerPass",
    "layer_compute",
    "Local",
    "units_of",
    "flat_params",
    "gather_params",
    "replica_max_diff",
]


@runtime_checkable
class RankModule(Protocol):
    """What every rank-local module provides, the contract the mesh trainer's chunks rely on.

    ``Local``, the tensor-parallel layers (:mod:`collsim.parallel.tensor`) and any new
    parallel dimension's layers follow it. The passes are generators used with
    ``yield from`` inside a rank program; ``backward_weight`` comes after
    ``backward_input`` with the same ``ctx`` and ``dy``, and ``backward`` does both.

    >>> from collsim.nn import Linear
    >>> isinstance(Local(Linear(np.eye(2))), RankModule), isinstance(Linear(np.eye(2)), RankModule)
    (True, False)
    """

    params: dict  # name -> the local array the rank computes with (updated in place)
    shard_axes: dict  # name -> axis it is a slice of the full parameter along, or None

    def forward(self, rank, x): ...  # generator -> (y, ctx)

    def backward_input(self, rank, ctx, dy): ...  # generator -> dx

    def backward_weight(self, rank, ctx, dy): ...  # generator -> {name: grad}

    def backward(self, rank, ctx, dy): ...  # generator -> (dx, {name: grad})


#: A layer pass's kinds (the names a pipeline pass's record uses too) and their short
#: display letters: forward, gradient of the input (B), gradient of the weights (W).
LAYER_PASS_KINDS = {"forward": "F", "backward_input": "B", "backward_weight": "W"}


@dataclass(frozen=True)
class LayerPass:
    """What a rank module's compute span is: one pass of one layer.

    The rank modules hand it to ``rank.compute(..., meta=...)``; the trace keeps it on
    the span (``trace.computes[i].meta``) and the Chrome export writes its fields in the
    event's ``args``.  Select spans by these fields; :attr:`label` is only how the span
    is shown (DESIGN.md, principle 4).

    Parameters
    ----------
    kind : {"forward", "backward_input", "backward_weight"}
        Which pass (:data:`LAYER_PASS_KINDS`).
    layer : str
        The rank module's ``name`` (``"0 Linear"`` for the first child of a Sequential).

    >>> LayerPass("backward_weight", "0 Linear").label
    'W 0 Linear'
    """

    kind: str
    layer: str

    def __post_init__(self):
        if self.kind not in LAYER_PASS_KINDS:
            guess = difflib.get_close_matches(str(self.kind), list(LAYER_PASS_KINDS), n=1, cutoff=0)
            raise ConfigError(
                f"LayerPass kind {self.kind!r} is not one of {', '.join(LAYER_PASS_KINDS)}; "
                f"nearest valid choice: {guess[0]!r}"
            )

    @property
    def label(self):
        """The span's display label: ``"F <layer>"``, ``"B <layer>"``, ``"W <layer>"``."""
        return f"{LAYER_PASS_KINDS[self.kind]} {self.layer}"

    def to_args(self):
        """The fields as a JSON-ready dict, for the Chrome/Perfetto export's ``args``."""
        return asdict(self)


def layer_compute(rank, kind, layer, flops):
    """The compute operation of pass ``kind`` of ``layer``: ``flops`` charged, its
    :class:`LayerPass` record attached (``yield`` it)."""
    record = LayerPass(kind, layer)
    return rank.compute(flops=flops, label=record.label, meta=record)


class Local:
    """An nn module run whole on one rank: the numpy of the module, with its FLOPs charged.

    Parameters
    ----------
    module : collsim.nn.Module
        Its arrays are used (and updated) as they are, not copied.
    name : str
        The ``layer`` of its compute spans' :class:`LayerPass` records (shown in their
        labels: ``"F <name>"``, ``"B <name>"``, ``"W <name>"``).
    """

    def __init__(self, module, name=""):
        self.module = module
        self.name = name or type(module).__name__

    def __repr__(self):
        return f"Local({self.module!r})"

    @property
    def params(self):
        return self.module.params

    @property
    def shard_axes(self):
        return dict.fromkeys(self.module.params)  # every rank holds the whole module

    def forward(self, rank, x):
        flops = self.module.flops(np.shape(x))
        yield layer_compute(rank, "forward", self.name, flops["forward"])
        y, ctx = self.module.forward(x)
        return y, {"inner": ctx, "flops": flops}

    def backward_input(self, rank, ctx, dy):
        yield layer_compute(rank, "backward_input", self.name, ctx["flops"]["backward_input"])
        return self.module.backward_input(ctx["inner"], dy)

    def backward_weight(self, rank, ctx, dy):
        if not self.module.params:
            return {}
        yield layer_compute(rank, "backward_weight", self.name, ctx["flops"]["backward_weight"])
        return self.module.backward_weight(ctx["inner"], dy)

    def backward(self, rank, ctx, dy):
        dx = yield from self.backward_input(rank, ctx, dy)
        grads = yield from self.backward_weight(rank, ctx, dy)
        return dx, grads


def units_of(model):
    """``[(prefix, rank module), ...]`` in forward order.

    A :class:`~collsim.nn.Sequential` gives one :class:`Local` unit per child (prefix
    ``"0"``, ``"1"``, ...); a list or tuple is taken as ``(prefix, unit)`` pairs, or as
    units to number; any other nn module is one unit with prefix ``""``; any other rank
    module (it has a generator ``forward(rank, x)``) is one unit as it is.

    >>> from collsim.nn import GELU, Linear, Sequential
    >>> model = Sequential(Linear(np.ones((2, 2))), GELU())
    >>> [(p, u.name) for p, u in units_of(model)]
    [('0', '0 Linear'), ('1', '1 GELU')]
    """
    if isinstance(model, Sequential):
        return [(name, Local(m, name=f"{name} {type(m).__name__}")) for name, m in _items(model)]
    if isinstance(model, list | tuple):
        units = []
        for i, item in enumerate(model):
            prefix, unit = item if isinstance(item, tuple) else (str(i), item)
            units.append((prefix, unit if _is_rank_module(unit) else Local(unit, prefix)))
        return units
    if _is_rank_module(model):
        return [("", model)]
    if hasattr(model, "forward") and hasattr(model, "params"):
        return [("", Local(model))]
    raise ConfigError(f"cannot train {type(model).__name__!r}: give an nn module or rank modules")


def _items(seq):
    return list(seq._children.items())


def _is_rank_module(obj):
    return isinstance(obj, RankModule)


def _join(prefix, name):
    return f"{prefix}.{name}" if prefix else name


def flat_params(units):
    """Every unit's params under ``"<prefix>.<name>"``: the very arrays, for an optimizer."""
    return {_join(p, k): v for p, unit in units for k, v in unit.params.items()}


def flat_shard_axes(units):
    """:attr:`shard_axes` of every unit under the prefixed names."""
    return {_join(p, k): v for p, unit in units for k, v in unit.shard_axes.items()}


def gather_params(shards, shard_axes):
    """Full arrays from the per-rank dicts of one tensor-parallel group, in group order.

    A sharded entry is concatenated along its axis; a replicated one (axis ``None``) is
    taken from the first rank (check replicas with :func:`replica_max_diff`).

    >>> a = {"w": np.zeros((2, 1)), "b": np.ones(2)}
    >>> b = {"w": np.ones((2, 1)), "b": np.ones(2)}
    >>> full = gather_params([a, b], {"w": 1, "b": None})
    >>> full["w"].tolist(), full["b"].tolist()
    ([[0.0, 1.0], [0.0, 1.0]], [1.0, 1.0])
    """
    full = {}
    for name, axis in shard_axes.items():
        parts = [s[name] for s in shards]
        full[name] = parts[0].copy() if axis is None else np.concatenate(parts, axis=axis)
    return full


def replica_max_diff(dicts, names=None):
    """Largest absolute difference between the first dict and the others, over ``names``
    (default: every key).  0.0 means the replicas are bitwise equal."""
    names = list(dicts[0]) if names is None else list(names)
    worst = 0.0
    for other in dicts[1:]:
        for name in names:
            worst = max(worst, float(np.max(np.abs(dicts[0][name] - other[name]), initial=0)))
    return worst
