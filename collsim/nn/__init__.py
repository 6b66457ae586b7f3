"""A tiny numpy neural-network kit: the single-device oracle for parallel training.

Every module is built from explicit arrays (so a tensor-parallel shard is built
from a slice), keeps no state between calls, and splits its backward pass:

* ``forward(x) -> (y, ctx)``  -- ``ctx`` is this micro-batch's activation memory
* ``backward_input(ctx, dy) -> dx``  -- what the previous pipeline stage waits for
* ``backward_weight(ctx, dy) -> grads``  -- may run later (zero-bubble schedules)
* ``backward(ctx, dy) -> (dx, grads)``  -- both
* ``flops(x_shape) -> {"forward", "backward_input", "backward_weight"}``

=====================  ====================================================
module                 contents
=====================  ====================================================
``module``             the contract: Module, Composite, ctx_nbytes
``layers``             Linear, ReLU, GELU, LayerNorm, softmax
``attention``          MultiHeadAttention (split by heads for tensor parallel)
``blocks``             Sequential, MLP, TransformerBlock
``routing``            RouterConfig, route: top-k, capacity, drops, aux loss
``moe``                MoE (router + SwiGLU experts), the expert-parallel oracle
``losses``             mse_loss, cross_entropy_loss
``optim``              SGD, Adam
``kv_cache``           LayerKV, cached_attention: attention over a KV cache
``decoder``            Decoder, DecoderConfig: greedy generation, the inference oracle
=====================  ====================================================

Examples
--------
One training step of a two-layer network, by hand:

>>> import numpy as np
>>> from collsim.nn import Adam, GELU, Linear, Sequential, mse_loss
>>> rng = np.random.default_rng(0)
>>> model = Sequential(Linear.init(3, 16, rng), GELU(), Linear.init(16, 1, rng))
>>> x, target = rng.uniform(-1, 1, size=(32, 3)), rng.uniform(-1, 1, size=(32, 1))
>>> y, ctx = model.forward(x)
>>> loss, dy = mse_loss(y, target)
>>> dx, grads = model.backward(ctx, dy)
>>> sorted(grads) == sorted(model.params)
True
>>> Adam(lr=1e-2).step(model.params, grads)  # in place
>>> bool(mse_loss(model.forward(x)[0], target)[0] < loss)
True
"""

from .attention import MultiHeadAttention
from .blocks import MLP, Sequential, TransformerBlock
from .decoder import Decoder, DecoderConfig, Generation, greedy_token
from .kv_cache import LayerKV, cached_attention
from .layers import GELU, LayerNorm, Linear, ReLU, softmax
from .losses import cross_entropy_loss, mse_loss
from .module import Composite, Module, ctx_nbytes
from .moe import MoE, MoEMLP, SwiGLUExperts
from .optim import SGD, Adam
from .routing import RouterConfig, route

__all__ = [
    "Module",
    "Composite",
    "ctx_nbytes",
    "Linear",
    "ReLU",
    "GELU",
    "LayerNorm",
    "softmax",
    "MultiHeadAttention",
    "Sequential",
    "MLP",
    "TransformerBlock",
    "MoE",
    "MoEMLP",
    "SwiGLUExperts",
    "RouterConfig",
    "route",
    "mse_loss",
    "cross_entropy_loss",
    "SGD",
    "Adam",
    "LayerKV",
    "cached_attention",
    "Decoder",
    "DecoderConfig",
    "Generation",
    "greedy_token",
]
