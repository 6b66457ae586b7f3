"""Multi-head self-attention with explicit weights, built to be split by heads.

Column layout: head ``h`` owns columns ``h*head_dim : (h+1)*head_dim`` of ``wq``,
``wk`` and ``wv`` (and of ``bq``, ``bk``, ``bv``) and the same *rows* of ``wo``.
So a tensor-parallel shard holding heads ``a:b`` is simply

    MultiHeadAttention(wq[:, cols], wk[:, cols], wv[:, cols], wo[cols, :],
                       n_heads=b - a, bq=bq[cols], bk=bk[cols], bv=bv[cols], bo=None)

with ``cols = slice(a * head_dim, b * head_dim)``.  It computes exactly those heads,
and its output is a *partial sum*: the output projection of its heads only, with
no bias.  Summing the shards' outputs (the row-parallel all-reduce) and adding
``bo`` once gives the full layer.  By convention ``bo`` lives on no shard (add it
after the reduce) or on exactly one shard; never on all of them.

The input gradients sum the same way: the full ``dx`` is the sum of the shards'
``backward_input`` (the all-reduce of Megatron's ``f`` operator), and each shard's
weight gradients are the matching slices of the full layer's.

Examples
--------
>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> full = MultiHeadAttention.init(8, 4, rng)  # d_model=8, 4 heads of size 2
>>> x = rng.uniform(-1, 1, size=(2, 5, 8))  # (B, T, D)
>>> y_full = full.forward(x)[0]
>>> def shard(heads):  # heads 0:2 or 2:4 -> columns 0:4 or 4:8
...     c = slice(2 * heads.start, 2 * heads.stop)
...     return MultiHeadAttention(full.wq[:, c], full.wk[:, c], full.wv[:, c], full.wo[c, :],
...                               n_heads=2, bq=full.bq[c], bk=full.bk[c], bv=full.bv[c])
>>> partial = [shard(h).forward(x)[0] for h in (slice(0, 2), slice(2, 4))]
>>> bool(np.allclose(partial[0] + partial[1] + full.bo, y_full))
True
"""

import math

import numpy as np

from ..errors import ConfigError
from .layers import SOFTMAX_FLOPS, softmax
from .module import Module, _stash, _take_stash, as_param, check_grad, check_param_shape

__all__ = ["MultiHeadAttention"]


class MultiHeadAttention(Module):
    """Scaled dot-product self-attention over ``(B, T, D)`` inputs.

    Parameters
    ----------
    wq, wk, wv : array, shape (d_model, n_heads * head_dim)
    wo : array, shape (n_heads * head_dim, d_model)
    n_heads : int
        Heads held by this module; ``head_dim = wq.shape[1] // n_heads``.
    bq, bk, bv : array, shape (n_heads * head_dim,), or None
    bo : array, shape (d_model,), or None
        None on tensor-parallel shards (see the module docstring).
    causal : bool
        If True, position ``t`` attends only to positions ``<= t``.

    Notes
    -----
    ``ctx`` keeps ``x``, ``q``, ``k``, ``v`` (B, H, T, hd), the attention weights
    (B, H, T, T) and the merged head outputs (B, T, H*hd).  ``backward_input``
    stashes ``dq``, ``dk``, ``dv`` for ``backward_weight``.

    FLOPs (per pass, matmuls exact): forward = 4 projections ``2*B*T*D*H*hd`` each
    + ``QK^T`` and ``AV`` ``2*B*H*T*T*hd`` each + softmax and scaling per score.
    backward_input = 4 projection-sized and 4 attention-sized matmuls + softmax
    backward; backward_weight = 4 projection-sized matmuls.  A causal mask does not
    halve the count: the dense kernel computes the masked scores too.
    """

    def __init__(self, wq, wk, wv, wo, n_heads, bq=None, bk=None, bv=None, bo=None, causal=True):
        self.wq = as_param(wq, "attention wq")
        if self.wq.ndim != 2:
            raise ConfigError(
                f"attention wq must be 2-D (d_model, n_heads*head_dim), got {self.wq.shape}"
            )
        d_model, inner = self.wq.shape
        if isinstance(n_heads, bool) or not isinstance(n_heads, int | np.integer) or n_heads < 1:
            raise ConfigError(f"n_heads must be a positive int, got {n_heads!r}")
        if inner % n_heads != 0:
            divisors = [h for h in range(1, inner + 1) if inner % h == 0]
            nearest = min(divisors, key=lambda h: abs(h - n_heads))
            raise ConfigError(
                f"n_heads={n_heads} does not divide the {inner} columns of wq; "
                f"the nearest valid n_heads is {nearest}"
            )
        self.wk = as_param(wk, "attention wk")
        self.wv = as_param(wv, "attention wv")
        self.wo = as_param(wo, "attention wo")
        check_param_shape(self.wk, (d_model, inner), "attention wk (same as wq)")
        check_param_shape(self.wv, (d_model, inner), "attention wv (same as wq)")
        check_param_shape(self.wo, (inner, d_model), "attention wo (wq transposed)")
        self.bq, self.bk, self.bv, self.bo = (
            None if b is None else as_param(b, f"attention {name}")
            for b, name in ((bq, "bq"), (bk, "bk"), (bv, "bv"), (bo, "bo"))
        )
        for name, size in (("bq", inner), ("bk", inner), ("bv", inner), ("bo", d_model)):
            if getattr(self, name) is not None:
                check_param_shape(getattr(self, name), (size,), f"attention {name}")
        self.n_heads = int(n_heads)
        self.d_model = d_model
        self.head_dim = inner // n_heads
        self.causal = bool(causal)

    @classmethod
    def init(cls, d_model, n_heads, rng, bias=True, causal=True, dtype=np.float64):
        """Weights ~ N(0, 1/fan_in), biases zero, ``head_dim = d_model // n_heads``."""
        if d_model % n_heads != 0:
            raise ConfigError(f"n_heads={n_heads} must divide d_model={d_model}")
        std = 1.0 / math.sqrt(d_model)
        wq, wk, wv, wo = (rng.normal(0.0, std, (d_model, d_model)).astype(dtype) for _ in "qkvo")
        zeros = (lambda n: np.zeros(n, dtype=dtype)) if bias else (lambda n: None)
        return cls(wq, wk, wv, wo, n_heads, *(zeros(d_model) for _ in "qkvo"), causal=causal)

    def __repr__(self):
        return (
            f"MultiHeadAttention(d_model={self.d_model}, n_heads={self.n_heads}, "
            f"head_dim={self.head_dim}, causal={self.causal})"
        )

    @property
    def params(self):
        names = ("wq", "bq", "wk", "bk", "wv", "bv", "wo", "bo")
        return {name: getattr(self, name) for name in names if getattr(self, name) is not None}

    def output_shape(self, x_shape):
        x_shape = tuple(int(n) for n in x_shape)
        if len(x_shape) != 3 or x_shape[-1] != self.d_model or x_shape[1] < 1:
            raise ConfigError(
                f"MultiHeadAttention expects input (B, T, {self.d_model}) with T >= 1, "
                f"got {x_shape}"
            )
        return x_shape

    # ---- head bookkeeping ---------------------------------------------------------

    def _split(self, a):
        """(B, T, H*hd) -> (B, H, T, hd): head h is columns h*hd:(h+1)*hd."""
        B, T, _ = a.shape
        return a.reshape(B, T, self.n_heads, self.head_dim).transpose(0, 2, 1, 3)

    def _merge(self, a):
        """(B, H, T, hd) -> (B, T, H*hd), the inverse of _split."""
        B, H, T, hd = a.shape
        return a.transpose(0, 2, 1, 3).reshape(B, T, H * hd)

    def _project(self, x, w, b):
        y = x @ w  # (B, T, H*hd)
        return self._split(y if b is None else y + b)  # (B, H, T, hd)

    # ---- forward / backward ---------------------------------------------------------

    def forward(self, x):
        x = np.asarray(x)
        B, T, _ = self.output_shape(x.shape)
        q = self._project(x, self.wq, self.bq)  # (B, H, T, hd)
        k = self._project(x, self.wk, self.bk)  # (B, H, T, hd)
        v = self._project(x, self.wv, self.bv)  # (B, H, T, hd)
        scores = (q @ k.swapaxes(-1, -2)) / math.sqrt(self.head_dim)  # (B, H, T, T)
        if self.causal:
            future = np.triu(np.ones((T, T), dtype=bool), k=1)  # (T, T): key after query
            scores = np.where(future, -np.inf, scores)  # exp(-inf) = 0: no weight
        att = softmax(scores, axis=-1)  # (B, H, T, T), rows sum to 1
        y = self._merge(att @ v)  # (B, T, H*hd)
        out = y @ self.wo  # (B, T, D): a partial sum on a head-split shard
        if self.bo is not None:
            out = out + self.bo
        return out, {"x": x, "q": q, "k": k, "v": v, "att": att, "y": y}

    def _grads_wrt_projections(self, ctx, dy):
        """dq, dk, dv, each (B, T, H*hd): the gradients at the q/k/v projection outputs."""
        q, k, v, att = ctx["q"], ctx["k"], ctx["v"], ctx["att"]
        dyh = self._split(dy @ self.wo.T)  # (B, H, T, hd)
        datt = dyh @ v.swapaxes(-1, -2)  # (B, H, T, T)
        dv = att.swapaxes(-1, -2) @ dyh  # (B, H, T, hd)
        # softmax backward; masked entries have att == 0, so they get no gradient
        dscores = att * (datt - np.sum(datt * att, axis=-1, keepdims=True))
        dscores = dscores / math.sqrt(self.head_dim)  # (B, H, T, T)
        dq = dscores @ k  # (B, H, T, hd)
        dk = dscores.swapaxes(-1, -2) @ q  # (B, H, T, hd)
        return {"dq": self._merge(dq), "dk": self._merge(dk), "dv": self._merge(dv)}

    def backward_input(self, ctx, dy):
        dy = check_grad(dy, ctx["x"].shape, "MultiHeadAttention")
        d = self._grads_wrt_projections(ctx, dy)
        _stash(ctx, dy, d)  # backward_weight needs dq/dk/dv, which cost the most to get
        return d["dq"] @ self.wq.T + d["dk"] @ self.wk.T + d["dv"] @ self.wv.T  # (B, T, D)

    def backward_weight(self, ctx, dy):
        dy = check_grad(dy, ctx["x"].shape, "MultiHeadAttention")
        d = _take_stash(ctx, dy)
        if d is None:
            d = self._grads_wrt_projections(ctx, dy)
        inner = self.n_heads * self.head_dim
        x2 = ctx["x"].reshape(-1, self.d_model)  # (B*T, D)
        grads = {}
        for name, g in (("q", d["dq"]), ("k", d["dk"]), ("v", d["dv"])):
            g2 = g.reshape(-1, inner)  # (B*T, H*hd)
            grads["w" + name] = x2.T @ g2
            if getattr(self, "b" + name) is not None:
                grads["b" + name] = g2.sum(axis=0)
        dy2 = dy.reshape(-1, self.d_model)  # (B*T, D)
        grads["wo"] = ctx["y"].reshape(-1, inner).T @ dy2
        if self.bo is not None:
            grads["bo"] = dy2.sum(axis=0)
        return {name: grads[name] for name in self.params}  # in params order

    def flops(self, x_shape):
        B, T, D = self.output_shape(x_shape)
        inner = self.n_heads * self.head_dim
        proj = 2 * B * T * D * inner  # one of the q, k, v, o projections
        attn = 2 * B * self.n_heads * T * T * self.head_dim  # QK^T or AV
        scores = B * self.n_heads * T * T
        softmax_fwd, softmax_bwd = SOFTMAX_FLOPS
        return {
            "forward": 4 * proj + 2 * attn + (softmax_fwd + 1) * scores,
            # dy@wo.T, d(att), dv, dq, dk, then dx through three projections
            "backward_input": 4 * proj + 4 * attn + (softmax_bwd + 1) * scores,
            "backward_weight": 4 * proj,
        }
