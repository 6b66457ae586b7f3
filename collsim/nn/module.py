"""The contract every ``collsim.nn`` module follows, and the base classes that carry it.

A module is *functional*: ``forward`` returns the output together with a ``ctx``
(a plain dict of the arrays backward will need) and keeps nothing on ``self``.
That is what lets a pipeline schedule hold many micro-batches in flight at once:
each micro-batch's ctx is its own activation memory.

The backward pass is split in two, the way zero-bubble pipeline schedules split it:

* ``backward_input(ctx, dy) -> dx``: the gradient the previous stage waits for (``B``).
* ``backward_weight(ctx, dy) -> grads``: the parameter gradients (``W``), which
  nobody waits for and so can be scheduled later, into a bubble.

``backward(ctx, dy) -> (dx, grads)`` does both.

Where ``W`` needs gradients that ``B`` computed on its way (the gradient at every
layer boundary inside a block, ``dQ/dK/dV`` inside attention), ``backward_input``
*stashes* them in ``ctx`` next to the ``dy`` it was given.  ``backward_weight``
called later with that same ``dy`` object takes the stash (and drops it, freeing
the memory, as a real zero-bubble schedule does after ``W``).  Called with any
other ``dy`` (or before ``backward_input``) it recomputes what it needs, so the
answer is always right; only the work differs.

FLOP counting (``flops(x_shape)``): a multiply-add is 2 FLOPs.  Matrix products
are counted exactly and bias additions are ignored (the usual convention, so a
Linear forward is exactly ``2 * rows * in * out``).  Other elementwise work
(activations, LayerNorm, softmax, residual adds) is counted roughly, at a small
documented number of FLOPs per element; it is a few percent of a transformer.

Examples
--------
>>> import numpy as np
>>> from collsim.nn import Linear, ctx_nbytes
>>> layer = Linear.init(4, 3, np.random.default_rng(0))
>>> y, ctx = layer.forward(np.ones((2, 4)))
>>> dx, grads = layer.backward(ctx, np.ones((2, 3)))
>>> dx.shape, sorted(grads), grads["weight"].shape
((2, 4), ['bias', 'weight'], (4, 3))
>>> ctx_nbytes(ctx)  # activation memory: the (2, 4) float64 input
64
"""

import math

import numpy as np

from ..errors import ConfigError

__all__ = ["Module", "Composite", "ctx_nbytes", "FLOP_KEYS"]

FLOP_KEYS = ("forward", "backward_input", "backward_weight")


class Module:
    """Base class of a layer: explicit params, functional forward, split backward.

    Subclasses implement ``params``, ``output_shape``, ``forward``,
    ``backward_input``, ``backward_weight`` and ``flops``.

    Backward uses the module's *current* params, so do not step an optimizer
    between a micro-batch's forward and its backward (GPipe and 1F1B flush first).
    """

    @property
    def params(self):
        """Name -> the very array the module computes with (update in place)."""
        return {}

    def output_shape(self, x_shape):
        """Shape of ``forward(x)[0]`` for an ``x`` of ``x_shape``; raises ConfigError if bad."""
        raise NotImplementedError

    def forward(self, x):
        """Return ``(y, ctx)``; ``ctx`` holds references (not copies) to what backward needs."""
        raise NotImplementedError

    def backward_input(self, ctx, dy):
        """Gradient of the loss with respect to the input, given ``dy`` for the output."""
        raise NotImplementedError

    def backward_weight(self, ctx, dy):
        """Gradients of the loss with respect to ``params`` (same keys and shapes)."""
        return {}

    def backward(self, ctx, dy):
        """``(backward_input(ctx, dy), backward_weight(ctx, dy))``."""
        dx = self.backward_input(ctx, dy)
        return dx, self.backward_weight(ctx, dy)

    def flops(self, x_shape):
        """FLOPs of each pass for an input of ``x_shape``: a dict keyed by FLOP_KEYS."""
        raise NotImplementedError


class Composite(Module):
    """A module made of named child modules, e.g. a block or a Sequential.

    Parameters are the children's, prefixed: ``"mlp.fc1.weight"``.  A subclass
    implements ``output_shape``, ``forward`` (putting each child's ctx in
    ``ctx["children"][name]``) and ``_backward_chain``, which returns ``dx`` and the
    gradient each child received for its output.  This class turns that into
    ``backward_input`` (which stashes those gradients) and ``backward_weight``
    (which hands each child exactly the ``dy`` it saw, so children's own stashes hit).
    """

    def __init__(self, children):
        self._children = dict(children)  # name -> Module, in forward order

    @property
    def params(self):
        return {
            f"{name}.{key}": value
            for name, child in self._children.items()
            for key, value in child.params.items()
        }

    def _backward_chain(self, ctx, dy):
        """Return ``(dx, dys)`` with ``dys[name]`` the gradient at that child's output."""
        raise NotImplementedError

    def backward_input(self, ctx, dy):
        dx, dys = self._backward_chain(ctx, dy)
        _stash(ctx, dy, dys)
        return dx

    def backward_weight(self, ctx, dy):
        dys = _take_stash(ctx, dy)
        if dys is None:  # no backward_input for this dy: recompute the chain
            dys = self._backward_chain(ctx, dy)[1]
        grads = {}
        for name, child in self._children.items():
            child_grads = child.backward_weight(ctx["children"][name], dys[name])
            for key, grad in child_grads.items():
                grads[f"{name}.{key}"] = grad
        return grads


def _stash(ctx, dy, saved):
    """Keep ``saved`` in ctx for the backward_weight that will come with this same ``dy``."""
    ctx["stash"] = (dy, saved)


def _take_stash(ctx, dy):
    """The stash saved for this ``dy`` object (removed from ctx), or None."""
    stash = ctx.get("stash")
    if stash is None or stash[0] is not dy:
        return None
    del ctx["stash"]
    return stash[1]


def ctx_nbytes(ctx):
    """Bytes of activation memory a ctx holds (nested dicts, lists and tuples).

    Views of one buffer (a reshape, a transpose) count once, at the size of the
    largest view, so this is exact for the ctxs collsim builds and approximate
    for arbitrary slices.

    >>> import numpy as np
    >>> a = np.zeros((4, 8))
    >>> ctx_nbytes({"x": a, "xt": a.T, "more": [np.zeros(3, dtype=np.float32)]})
    268
    """
    largest = {}  # id of the owning buffer -> bytes of the largest view seen
    _visit(ctx, largest)
    return sum(largest.values())


def _visit(item, largest):
    """Record in ``largest`` the arrays ``item`` holds, at any depth.  A function of its
    own, not a closure that calls itself: that closure would be a reference cycle, left
    for the collector (which is off during a run) after every call."""
    if isinstance(item, np.ndarray):
        root = item
        while isinstance(root.base, np.ndarray):
            root = root.base
        largest[id(root)] = max(largest.get(id(root), 0), item.nbytes)
    elif isinstance(item, dict):
        for value in item.values():
            _visit(value, largest)
    elif isinstance(item, list | tuple):
        for value in item:
            _visit(value, largest)


# ---- helpers shared by the layer modules -------------------------------------------


def as_param(array, what):
    """A float copy of ``array``, so a shard built from a slice never writes through."""
    out = np.array(array, copy=True)
    if not np.issubdtype(out.dtype, np.floating):
        out = out.astype(np.float64)
    if out.ndim == 0:
        raise ConfigError(f"{what} must be an array, got the scalar {array!r}")
    return out


def check_param_shape(array, expected, what):
    if array.shape != tuple(expected):
        raise ConfigError(f"{what} must have shape {tuple(expected)}, got {array.shape}")


def check_features(x_shape, features, who):
    """Check ``x_shape`` is ``(..., features)``; return it as a tuple."""
    x_shape = tuple(int(n) for n in x_shape)
    if len(x_shape) == 0 or x_shape[-1] != features:
        raise ConfigError(
            f"{who} expects input of shape (..., {features}) but got {x_shape}: "
            f"the last axis must have {features} features"
        )
    return x_shape


def check_grad(dy, expected, who):
    """Check ``dy`` has the shape forward returned."""
    dy = np.asarray(dy)
    if dy.shape != tuple(expected):
        raise ConfigError(
            f"{who} backward got dy of shape {dy.shape}, expected {tuple(expected)} "
            "(the shape forward returned)"
        )
    return dy


def elementwise_flops(x_shape, forward, backward_input, backward_weight=0):
    """FLOP dict for per-element work at the given rates (FLOPs per element)."""
    n = math.prod(x_shape)
    return {
        "forward": forward * n,
        "backward_input": backward_input * n,
        "backward_weight": backward_weight * n,
    }


def add_flops(*counts):
    """Sum FLOP dicts key by key."""
    return {key: sum(count[key] for count in counts) for key in FLOP_KEYS}
