"""Composite modules: Sequential, the MLP block and the pre-LayerNorm transformer block.

All three are :class:`~collsim.nn.module.Composite`: their params are their
children's with a prefix (``"0.weight"``, ``"mlp.fc1.weight"``, ``"attn.wq"``),
``backward_input`` stashes the gradient each child received for its output in
``ctx``, and ``backward_weight`` hands each child exactly that gradient, so a
zero-bubble schedule can run ``W`` long after ``B`` without redoing the chain.

Examples
--------
A pipeline stage is a slice of a Sequential; the slice keeps the original names,
so a stage's gradients are a sub-dict of the full model's.

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> model = Sequential(Linear.init(4, 8, rng), GELU(), Linear.init(8, 2, rng))
>>> stage1 = model[2:]
>>> list(stage1.params)
['2.weight', '2.bias']
>>> x = rng.uniform(-1, 1, size=(3, 4))
>>> h, ctx0 = model[:2].forward(x)  # stage 0
>>> y, ctx1 = stage1.forward(h)  # stage 1
>>> bool(np.allclose(y, model.forward(x)[0]))
True
"""

import numpy as np

from ..errors import ConfigError
from .attention import MultiHeadAttention
from .layers import GELU, LayerNorm, Linear
from .module import Composite, add_flops, elementwise_flops

__all__ = ["Sequential", "MLP", "TransformerBlock"]

RESIDUAL_FLOPS = (1, 1)  # forward: one add per element; backward_input: one add


class _Chain(Composite):
    """Children applied one after another; the shared part of Sequential and MLP."""

    def output_shape(self, x_shape):
        for child in self._children.values():
            x_shape = child.output_shape(x_shape)
        return tuple(x_shape)

    def forward(self, x):
        ctxs = {}
        for name, child in self._children.items():
            x, ctxs[name] = child.forward(x)
        return x, {"children": ctxs}

    def _backward_chain(self, ctx, dy):
        dys = {}
        for name in reversed(self._children):
            dys[name] = dy  # the gradient at this child's output
            dy = self._children[name].backward_input(ctx["children"][name], dy)
        return dy, dys

    def flops(self, x_shape):
        counts = []
        for child in self._children.values():
            counts.append(child.flops(x_shape))
            x_shape = child.output_shape(x_shape)
        return add_flops(*counts)


class Sequential(_Chain):
    """Modules applied in order; params named ``"<index>.<name>"`` like PyTorch.

    Indexing gives a module, slicing a Sequential that *keeps the original
    indices as names* (``model[2:4]`` has params ``"2.weight"``, ...) and shares
    the same modules, hence the same arrays.

    >>> import numpy as np
    >>> from collsim.nn import ReLU
    >>> net = Sequential(Linear(np.ones((2, 3))), ReLU())
    >>> net
    Sequential(Linear(in_features=2, out_features=3, bias=False), ReLU())
    >>> net.forward(np.array([[1.0, -2.0]]))[0]
    array([[0., 0., 0.]])
    """

    def __init__(self, *modules):
        if not modules:
            raise ConfigError("Sequential needs at least one module")
        super().__init__((str(i), m) for i, m in enumerate(modules))

    @classmethod
    def _named(cls, children):
        seq = cls.__new__(cls)
        Composite.__init__(seq, children)
        return seq

    def __len__(self):
        return len(self._children)

    def __iter__(self):
        return iter(self._children.values())

    def __getitem__(self, index):
        items = list(self._children.items())
        if isinstance(index, slice):
            picked = items[index]
            if not picked:
                raise ConfigError(f"slice {index} of a Sequential of {len(items)} is empty")
            return Sequential._named(picked)
        return items[index][1]

    def __repr__(self):
        return "Sequential(" + ", ".join(repr(m) for m in self) + ")"


class MLP(_Chain):
    """``fc2(GELU(fc1(x)))``, the transformer feed-forward block.

    Megatron splits it as ``fc1`` column-parallel and ``fc2`` row-parallel: each
    shard holds ``fc1.weight[:, cols]`` and ``fc2.weight[cols, :]``, the GELU needs
    no communication, and the shard outputs sum to the full output (add ``fc2``'s
    bias once).

    >>> import numpy as np
    >>> mlp = MLP.init(4, np.random.default_rng(0))
    >>> mlp.fc1
    Linear(in_features=4, out_features=16, bias=True)
    >>> list(mlp.params)
    ['fc1.weight', 'fc1.bias', 'fc2.weight', 'fc2.bias']
    """

    def __init__(self, fc1, fc2):
        if fc1.out_features != fc2.in_features:
            raise ConfigError(
                f"MLP fc1 gives {fc1.out_features} features but fc2 takes {fc2.in_features}"
            )
        super().__init__({"fc1": fc1, "act": GELU(), "fc2": fc2})
        self.fc1, self.fc2 = fc1, fc2

    @classmethod
    def init(cls, d_model, rng, hidden=None, bias=True, dtype=np.float64):
        """``d_model -> hidden -> d_model``; ``hidden`` defaults to ``4 * d_model``."""
        hidden = 4 * d_model if hidden is None else hidden
        return cls(
            Linear.init(d_model, hidden, rng, bias=bias, dtype=dtype),
            Linear.init(hidden, d_model, rng, bias=bias, dtype=dtype),
        )

    def __repr__(self):
        return f"MLP(fc1={self.fc1!r}, fc2={self.fc2!r})"


class TransformerBlock(Composite):
    """Pre-LayerNorm block: ``h = x + attn(ln1(x))``, then ``y = h + mlp(ln2(h))``.

    Input and output are ``(B, T, D)``.  Params are prefixed ``ln1.``, ``attn.``,
    ``ln2.``, ``mlp.``.

    >>> import numpy as np
    >>> block = TransformerBlock.init(8, 2, np.random.default_rng(0))
    >>> y, ctx = block.forward(np.zeros((2, 3, 8)))
    >>> y.shape, len(block.params)
    ((2, 3, 8), 16)
    """

    def __init__(self, ln1, attn, ln2, mlp):
        super().__init__({"ln1": ln1, "attn": attn, "ln2": ln2, "mlp": mlp})
        self.ln1, self.attn, self.ln2, self.mlp = ln1, attn, ln2, mlp

    @classmethod
    def init(cls, d_model, n_heads, rng, hidden=None, bias=True, causal=True, dtype=np.float64):
        """LayerNorms at identity, attention and MLP from their own ``init``."""
        return cls(
            LayerNorm.init(d_model, dtype=dtype),
            MultiHeadAttention.init(d_model, n_heads, rng, bias=bias, causal=causal, dtype=dtype),
            LayerNorm.init(d_model, dtype=dtype),
            MLP.init(d_model, rng, hidden=hidden, bias=bias, dtype=dtype),
        )

    def __repr__(self):
        return f"TransformerBlock({self.ln1!r}, {self.attn!r}, {self.ln2!r}, {self.mlp!r})"

    def output_shape(self, x_shape):
        x_shape = self.attn.output_shape(x_shape)  # (B, T, D) with D = d_model
        for child in (self.ln1, self.ln2, self.mlp):
            if child.output_shape(x_shape) != x_shape:
                raise ConfigError(f"{child!r} does not map {x_shape} to itself")
        return x_shape

    def forward(self, x):
        x = np.asarray(x)
        self.output_shape(x.shape)
        ctx = {}
        a, ctx["ln1"] = self.ln1.forward(x)  # (B, T, D)
        o, ctx["attn"] = self.attn.forward(a)  # (B, T, D)
        h = x + o  # (B, T, D) residual stream
        b, ctx["ln2"] = self.ln2.forward(h)  # (B, T, D)
        m, ctx["mlp"] = self.mlp.forward(b)  # (B, T, D)
        return h + m, {"children": ctx}

    def _backward_chain(self, ctx, dy):
        c = ctx["children"]
        d_b = self.mlp.backward_input(c["mlp"], dy)  # at ln2's output
        dh = dy + self.ln2.backward_input(c["ln2"], d_b)  # residual: both paths add
        d_a = self.attn.backward_input(c["attn"], dh)  # at ln1's output
        dx = dh + self.ln1.backward_input(c["ln1"], d_a)
        return dx, {"mlp": dy, "ln2": d_b, "attn": dh, "ln1": d_a}

    def flops(self, x_shape):
        x_shape = self.output_shape(x_shape)
        residual = elementwise_flops(x_shape, *RESIDUAL_FLOPS)
        parts = (self.ln1, self.attn, self.ln2, self.mlp)
        return add_flops(*(p.flops(x_shape) for p in parts), residual, residual)
