"""Leaf layers: Linear, ReLU, GELU, LayerNorm, and the stable softmax they share.

Every layer accepts any leading dims, ``(..., features)``, and follows the
contract in :mod:`collsim.nn.module`: ``forward(x) -> (y, ctx)``,
``backward_input(ctx, dy) -> dx``, ``backward_weight(ctx, dy) -> grads``.

A layer is built from explicit arrays (copied, so a tensor-parallel shard built
from a slice of a full layer never writes through to it), or with ``init``.

Examples
--------
A column-parallel split of a Linear: each shard holds some output columns, and
the shard outputs concatenated are the full output.

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> full = Linear.init(4, 6, rng)
>>> shards = [Linear(full.weight[:, i : i + 3], full.bias[i : i + 3]) for i in (0, 3)]
>>> x = rng.uniform(-1, 1, size=(2, 4))
>>> y_full = full.forward(x)[0]
>>> y_cat = np.concatenate([s.forward(x)[0] for s in shards], axis=-1)
>>> bool(np.allclose(y_cat, y_full))
True
"""

import math

import numpy as np

from ..errors import ConfigError
from .module import (
    Module,
    as_param,
    check_features,
    check_grad,
    check_param_shape,
    elementwise_flops,
)

__all__ = ["Linear", "ReLU", "GELU", "LayerNorm", "softmax"]

# Rough FLOPs per element for elementwise work (see collsim.nn.module on counting).
RELU_FLOPS = (1, 1)  # forward: max; backward_input: mask multiply
GELU_FLOPS = (8, 12)  # tanh form: cube, scale, add, tanh, ...; its derivative is longer
LAYERNORM_FLOPS = (7, 8, 3)  # forward, backward_input, backward_weight
SOFTMAX_FLOPS = (5, 4)  # forward: max, sub, exp, sum, div; backward: mul, sum, sub, mul

_GELU_C = math.sqrt(2.0 / math.pi)


def softmax(x, axis=-1):
    """Softmax along ``axis``, stable for large inputs (the max is subtracted first).

    Entries equal to ``-inf`` (masked) get probability exactly 0.

    >>> softmax(np.array([1000.0, 1000.0, -np.inf]))
    array([0.5, 0.5, 0. ])
    """
    z = x - np.max(x, axis=axis, keepdims=True)
    e = np.exp(z)
    return e / np.sum(e, axis=axis, keepdims=True)


class Linear(Module):
    """``y = x @ weight + bias`` with ``weight`` of shape ``(in_features, out_features)``.

    Parameters
    ----------
    weight : array, shape (in_features, out_features)
    bias : array, shape (out_features,), or None

    Notes
    -----
    The (in, out) layout makes the Megatron splits plain slices: a column-parallel
    shard is ``weight[:, cols]`` (outputs concatenate), a row-parallel shard is
    ``weight[rows, :]`` with bias on one shard only (outputs sum).
    FLOPs: forward, backward_input and backward_weight are each
    ``2 * rows * in * out`` where rows is the product of the leading dims.

    Examples
    --------
    >>> layer = Linear(np.eye(2), np.array([1.0, -1.0]))
    >>> y, ctx = layer.forward(np.array([[3.0, 4.0]]))
    >>> y
    array([[4., 3.]])
    >>> layer.flops((8, 2))
    {'forward': 64, 'backward_input': 64, 'backward_weight': 64}
    """

    def __init__(self, weight, bias=None):
        self.weight = as_param(weight, "Linear weight")
        if self.weight.ndim != 2:
            raise ConfigError(
                f"Linear weight must be 2-D (in_features, out_features), got {self.weight.shape}"
            )
        self.bias = None
        if bias is not None:
            self.bias = as_param(bias, "Linear bias")
            check_param_shape(self.bias, (self.weight.shape[1],), "Linear bias")

    @classmethod
    def init(cls, in_features, out_features, rng, bias=True, dtype=np.float64):
        """Weight ~ N(0, 1/in_features) so outputs keep unit scale; bias zero."""
        weight = rng.normal(0.0, 1.0 / math.sqrt(in_features), size=(in_features, out_features))
        b = np.zeros(out_features, dtype=dtype) if bias else None
        return cls(weight.astype(dtype), b)

    @property
    def in_features(self):
        return self.weight.shape[0]

    @property
    def out_features(self):
        return self.weight.shape[1]

    def __repr__(self):
        return (
            f"Linear(in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None})"
        )

    @property
    def params(self):
        out = {"weight": self.weight}
        if self.bias is not None:
            out["bias"] = self.bias
        return out

    def output_shape(self, x_shape):
        x_shape = check_features(x_shape, self.in_features, "Linear")
        return x_shape[:-1] + (self.out_features,)

    def forward(self, x):
        x = np.asarray(x)
        self.output_shape(x.shape)
        y = x @ self.weight  # (..., out)
        if self.bias is not None:
            y = y + self.bias
        return y, {"x": x}

    def backward_input(self, ctx, dy):
        dy = check_grad(dy, self.output_shape(ctx["x"].shape), "Linear")
        return dy @ self.weight.T  # (..., in)

    def backward_weight(self, ctx, dy):
        dy = check_grad(dy, self.output_shape(ctx["x"].shape), "Linear")
        x2 = ctx["x"].reshape(-1, self.in_features)  # (rows, in)
        dy2 = dy.reshape(-1, self.out_features)  # (rows, out)
        grads = {"weight": x2.T @ dy2}  # (in, out): a sum over rows, i.e. over the batch
        if self.bias is not None:
            grads["bias"] = dy2.sum(axis=0)
        return grads

    def flops(self, x_shape):
        x_shape = check_features(x_shape, self.in_features, "Linear")
        matmul = 2 * math.prod(x_shape[:-1]) * self.in_features * self.out_features
        return {"forward": matmul, "backward_input": matmul, "backward_weight": matmul}


class ReLU(Module):
    """``max(x, 0)``, elementwise; no params.  The ctx keeps only a boolean mask.

    >>> ReLU().forward(np.array([-1.0, 2.0]))[0]
    array([0., 2.])
    """

    def __repr__(self):
        return "ReLU()"

    def output_shape(self, x_shape):
        return tuple(int(n) for n in x_shape)

    def forward(self, x):
        x = np.asarray(x)
        return np.maximum(x, 0), {"mask": x > 0}  # 1 byte per element instead of 8

    def backward_input(self, ctx, dy):
        dy = check_grad(dy, ctx["mask"].shape, "ReLU")
        return dy * ctx["mask"]

    def flops(self, x_shape):
        return elementwise_flops(x_shape, *RELU_FLOPS)


class GELU(Module):
    """GELU in its tanh form, as GPT-2 and nanoGPT use it; no params.

    ``0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3)))``

    >>> GELU().forward(np.array([0.0, 10.0]))[0]
    array([ 0., 10.])
    """

    def __repr__(self):
        return "GELU()"

    def output_shape(self, x_shape):
        return tuple(int(n) for n in x_shape)

    def forward(self, x):
        x = np.asarray(x)
        t = np.tanh(_GELU_C * (x + 0.044715 * x**3))
        return 0.5 * x * (1.0 + t), {"x": x}

    def backward_input(self, ctx, dy):
        x = ctx["x"]
        dy = check_grad(dy, x.shape, "GELU")
        t = np.tanh(_GELU_C * (x + 0.044715 * x**3))  # recomputed: cheaper to keep x only
        dt = (1.0 - t * t) * _GELU_C * (1.0 + 3 * 0.044715 * x * x)
        return dy * (0.5 * (1.0 + t) + 0.5 * x * dt)

    def flops(self, x_shape):
        return elementwise_flops(x_shape, *GELU_FLOPS)


class LayerNorm(Module):
    """Normalise the last axis to zero mean and unit variance, then ``* gamma + beta``.

    Parameters
    ----------
    gamma, beta : array, shape (d,)
    eps : float
        Added to the variance (biased, as in PyTorch) before the square root.

    Examples
    --------
    >>> ln = LayerNorm.init(2)
    >>> ln.forward(np.array([[1.0, 3.0]]))[0].round(4)
    array([[-1.,  1.]])
    """

    def __init__(self, gamma, beta, eps=1e-5):
        self.gamma = as_param(gamma, "LayerNorm gamma")
        if self.gamma.ndim != 1:
            raise ConfigError(f"LayerNorm gamma must be 1-D (d,), got {self.gamma.shape}")
        self.beta = as_param(beta, "LayerNorm beta")
        check_param_shape(self.beta, self.gamma.shape, "LayerNorm beta")
        self.eps = float(eps)

    @classmethod
    def init(cls, d, eps=1e-5, dtype=np.float64):
        """gamma = 1, beta = 0: the identity on already-normalised rows."""
        return cls(np.ones(d, dtype=dtype), np.zeros(d, dtype=dtype), eps)

    def __repr__(self):
        return f"LayerNorm({self.gamma.shape[0]}, eps={self.eps})"

    @property
    def params(self):
        return {"gamma": self.gamma, "beta": self.beta}

    def output_shape(self, x_shape):
        return check_features(x_shape, self.gamma.shape[0], "LayerNorm")

    def forward(self, x):
        x = np.asarray(x)
        self.output_shape(x.shape)
        mu = x.mean(axis=-1, keepdims=True)  # (..., 1)
        var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)  # (..., 1)
        rstd = 1.0 / np.sqrt(var + self.eps)  # (..., 1)
        xhat = (x - mu) * rstd  # (..., d)
        return xhat * self.gamma + self.beta, {"xhat": xhat, "rstd": rstd}

    def backward_input(self, ctx, dy):
        xhat, rstd = ctx["xhat"], ctx["rstd"]
        dy = check_grad(dy, xhat.shape, "LayerNorm")
        dxhat = dy * self.gamma  # (..., d)
        # d/dx of (x - mean) / std: remove the components along 1 and along xhat
        mean_dxhat = dxhat.mean(axis=-1, keepdims=True)
        mean_dxhat_xhat = (dxhat * xhat).mean(axis=-1, keepdims=True)
        return rstd * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat)

    def backward_weight(self, ctx, dy):
        xhat = ctx["xhat"]
        dy = check_grad(dy, xhat.shape, "LayerNorm")
        d = self.gamma.shape[0]
        return {
            "gamma": (dy * xhat).reshape(-1, d).sum(axis=0),
            "beta": dy.reshape(-1, d).sum(axis=0),
        }

    def flops(self, x_shape):
        return elementwise_flops(self.output_shape(x_shape), *LAYERNORM_FLOPS)
