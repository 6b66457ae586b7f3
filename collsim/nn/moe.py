"""A mixture-of-experts layer: a router and E gated-MLP experts, the single-device oracle.

``y = x + Σ_slots gate · expert(x_token)`` (the residual is part of the layer, so a token
every expert dropped comes out as it went in).  Each expert is a SwiGLU MLP, as in Mixtral
and DeepSeek: ``(silu(x W_gate) ⊙ x W_up) W_down``, no biases.  Routing, capacity and the
auxiliary loss are :mod:`collsim.nn.routing`'s; expert parallelism
(:mod:`collsim.parallel.experts`) runs the same layer over ranks and must give the same
numbers.

The forward pass takes ``(T, d)`` tokens (flatten batch and sequence first) and ``ranks``,
the source ranks they are split over in equal blocks: capacity is counted per rank, as each
rank routes its own tokens (``ranks=1``: one device's view).  With ``aux_loss_coeff`` set,
backward adds the load-balancing loss's gradient (``ctx["aux_loss"]`` holds its value), as
Megatron-Core's ``MoEAuxLossAutoScaler`` does.

Examples
--------
>>> import numpy as np
>>> from collsim.nn.routing import RouterConfig
>>> rng = np.random.default_rng(0)
>>> layer = MoE.init(8, 16, RouterConfig(experts=4, top_k=2), rng)
>>> x = rng.normal(size=(6, 8))
>>> y, ctx = layer.forward(x)
>>> dx, grads = layer.backward(ctx, np.ones_like(y))
>>> y.shape, dx.shape, sorted(grads)
((6, 8), (6, 8), ['router', 'w_down', 'w_gate', 'w_up'])
>>> ctx["routing"].slot_token.size  # 6 tokens x 2 experts, nothing dropped
12
"""

import math

import numpy as np

from ..errors import ConfigError
from .module import Module, as_param, check_grad
from .routing import aux_loss, gate_gradient_to_logits, route

__all__ = [
    "MoE",
    "MoEMLP",
    "SwiGLUExperts",
    "combine",
    "scatter_rows",
    "router_logit_grad",
]

SILU_FLOPS = 6  # rough FLOPs per element of silu(a) * b and of its derivative


def _silu(a):
    return a / (1.0 + np.exp(-a))


class SwiGLUExperts:
    """E experts as stacked weights: ``w_gate``, ``w_up`` (E, d, f) and ``w_down`` (E, f, d).

    :meth:`forward` runs a *grouped* pass: rows arrive sorted by expert, ``counts[e]`` rows
    for expert ``e`` (Megatron-Core's GroupedMLP); ``experts`` says which of the stack each
    group is, so a rank holding experts 4..7 passes ``range(4, 8)`` relative to its slice.
    """

    def __init__(self, w_gate, w_up, w_down):
        self.w_gate = as_param(w_gate, "w_gate")
        self.w_up = as_param(w_up, "w_up")
        self.w_down = as_param(w_down, "w_down")
        E, d, f = self.w_gate.shape
        if self.w_up.shape != (E, d, f) or self.w_down.shape != (E, f, d):
            raise ConfigError(
                f"expert weights must be w_gate, w_up (E, d, f) and w_down (E, f, d); got "
                f"{self.w_gate.shape}, {self.w_up.shape}, {self.w_down.shape}"
            )

    @property
    def params(self):
        return {"w_gate": self.w_gate, "w_up": self.w_up, "w_down": self.w_down}

    def flops(self, rows):
        """FLOPs of ``rows`` token rows through one expert, per pass (FLOP_KEYS)."""
        d, f = self.w_gate.shape[1:]
        matmuls = 2 * rows * d * f * 3
        return {
            "forward": matmuls + SILU_FLOPS * rows * f,
            "backward_input": matmuls + 2 * SILU_FLOPS * rows * f,
            "backward_weight": matmuls,
        }

    def forward(self, rows, counts):
        """``(out, ctx)`` for ``rows`` (N, d) grouped by expert, ``counts[e]`` each."""
        bounds = np.concatenate([[0], np.cumsum(counts)])
        out = np.empty_like(rows)
        saved = []
        for e in range(len(counts)):
            x = rows[bounds[e] : bounds[e + 1]]  # (n_e, d)
            a, b = x @ self.w_gate[e], x @ self.w_up[e]  # (n_e, f) each
            h = _silu(a) * b
            out[bounds[e] : bounds[e + 1]] = h @ self.w_down[e]
            saved.append((x, a, b, h))
        return out, saved

    def backward(self, saved, dout, counts):
        """``(drows, grads)`` for ``dout`` (N, d) grouped as forward's rows were."""
        bounds = np.concatenate([[0], np.cumsum(counts)])
        drows = np.empty_like(dout)
        grads = {k: np.zeros_like(v) for k, v in self.params.items()}
        for e, (x, a, b, h) in enumerate(saved):
            dy = dout[bounds[e] : bounds[e + 1]]
            grads["w_down"][e] = h.T @ dy
            dh = dy @ self.w_down[e].T
            sig = 1.0 / (1.0 + np.exp(-a))
            da = dh * b * sig * (1.0 + a * (1.0 - sig))  # d silu(a) = s(1 + a(1 - s))
            db = dh * a * sig
            grads["w_gate"][e] = x.T @ da
            grads["w_up"][e] = x.T @ db
            drows[bounds[e] : bounds[e + 1]] = da @ self.w_gate[e].T + db @ self.w_up[e].T
        return drows, grads


def combine(x, slot_token, slot_gate, out_rows):
    """``x`` plus every slot's output times its gate, added to its token in slot order
    (the score-weighted combine; the order is fixed, so every caller sums alike)."""
    y = np.array(x, dtype=np.float64, copy=True)
    np.add.at(y, slot_token, slot_gate[:, None] * out_rows)
    return y


def scatter_rows(x, slot_token, rows):
    """``x`` plus each row added to its token, in slot order."""
    y = np.array(x, dtype=np.float64, copy=True)
    np.add.at(y, slot_token, rows)
    return y


class MoE(Module):
    """Router ``router`` (d, E), experts :class:`SwiGLUExperts`, a :class:`RouterConfig`,
    and ``expert_bias`` (E,), moved only by
    :func:`~collsim.nn.routing.updated_expert_bias` (not a parameter: no gradient)."""

    def __init__(self, router, experts, config, expert_bias=None):
        self.router = as_param(router, "router")
        self.experts = experts
        self.config = config
        d, E = self.router.shape
        if E != config.experts or experts.w_gate.shape[:2] != (E, d):
            raise ConfigError(
                f"router (d, E) = {self.router.shape} must match the config's experts="
                f"{config.experts} and the experts' (E, d, f) = {experts.w_gate.shape}"
            )
        self.expert_bias = np.zeros(E) if expert_bias is None else as_param(expert_bias, "bias")

    @classmethod
    def init(cls, d, f, config, rng):
        """Router and experts ~ N(0, 1/fan_in)."""
        E = config.experts
        return cls(
            rng.normal(0.0, 1.0 / math.sqrt(d), (d, E)),
            SwiGLUExperts(
                rng.normal(0.0, 1.0 / math.sqrt(d), (E, d, f)),
                rng.normal(0.0, 1.0 / math.sqrt(d), (E, d, f)),
                rng.normal(0.0, 1.0 / math.sqrt(f), (E, f, d)),
            ),
            config,
        )

    @property
    def params(self):
        return {"router": self.router, **self.experts.params}

    def output_shape(self, x_shape):
        x_shape = tuple(int(n) for n in x_shape)
        if len(x_shape) != 2 or x_shape[1] != self.router.shape[0]:
            raise ConfigError(f"MoE expects tokens (T, {self.router.shape[0]}), got {x_shape}")
        return x_shape

    def forward(self, x, ranks=1, prior=None):
        """``(y, ctx)``; ``prior`` (T, E), data added to the router logits (a routing
        generator's preference, :mod:`collsim.parallel.experts.generators`)."""
        x = np.asarray(x, dtype=np.float64)
        self.output_shape(x.shape)
        logits = x @ self.router  # (T, E)
        if prior is not None:
            logits = logits + prior
        routing = route(logits, self.config, self.expert_bias, ranks)
        counts = np.bincount(routing.slot_expert, minlength=self.config.experts)
        order = np.argsort(routing.slot_expert, kind="stable")  # expert-major, ranks in order
        out_sorted, saved = self.experts.forward(x[routing.slot_token[order]], counts)
        out = np.empty_like(out_sorted)
        out[order] = out_sorted
        y = combine(x, routing.slot_token, routing.slot_gate, out)
        ctx = {"x": x, "routing": routing, "order": order, "out": out, "saved": saved}
        ctx["aux_loss"], ctx["aux_grad"] = aux_loss(routing, self.config, ranks)
        return y, ctx

    def _backward(self, ctx, dy):
        routing, order = ctx["routing"], ctx["order"]
        dy = check_grad(dy, ctx["x"].shape, "MoE")
        counts = np.bincount(routing.slot_expert, minlength=self.config.experts)
        dout = routing.slot_gate[:, None] * dy[routing.slot_token]
        drows_sorted, expert_grads = self.experts.backward(ctx["saved"], dout[order], counts)
        drows = np.empty_like(drows_sorted)
        drows[order] = drows_sorted
        dx = scatter_rows(dy, routing.slot_token, drows)
        dlogits = router_logit_grad(routing, dy, ctx["out"], self.config, ctx["aux_grad"])
        dx = dx + dlogits @ self.router.T
        return dx, {"router": ctx["x"].T @ dlogits, **expert_grads}

    def backward_input(self, ctx, dy):
        return self._backward(ctx, dy)[0]

    def backward_weight(self, ctx, dy):
        return self._backward(ctx, dy)[1]

    def flops(self, x_shape):
        T, d = self.output_shape(x_shape)
        router = 2 * T * d * self.config.experts
        per_row = self.experts.flops(T * self.config.top_k)
        return {key: router + per_row[key] for key in per_row}


def router_logit_grad(routing, dy, out, config, aux_grad=None):
    """``dL/dlogits`` (T, E): each kept slot's gate gradient ``dy_token · out_slot``, through
    the normalisation and the score function, plus the auxiliary loss's."""
    real = routing.slot_choice >= 0
    dgates = np.zeros_like(routing.gates)
    tokens, choices = routing.slot_token[real], routing.slot_choice[real]
    dgates[tokens, choices] = np.einsum("nd,nd->n", dy[tokens], out[real])
    return gate_gradient_to_logits(routing, dgates, config, aux_grad)


class MoEMLP(Module):
    """An :class:`MoE` in a transformer block's MLP place: tokens ``(..., d)``, no residual.

    The block adds its own residual, so this returns ``MoE(x) - x``: a token every expert
    dropped contributes nothing and passes through the block's residual only.  ``ranks``
    is how many equal, consecutive blocks of the flattened tokens route on their own, each
    with its own capacity (the mesh trainer's oracle sets it to the ranks x micro-batches
    that route separately); parameter names are the MoE's (``"router"``, ``"w_gate"``, ...).

    >>> import numpy as np
    >>> from collsim.nn.routing import RouterConfig
    >>> rng = np.random.default_rng(0)
    >>> mlp = MoEMLP(MoE.init(4, 8, RouterConfig(experts=4, top_k=1, capacity_factor=0.5), rng))
    >>> y, ctx = mlp.forward(rng.normal(size=(2, 3, 4)))  # 6 tokens, ceil(6/4 x 0.5) = 1 slot
    >>> y.shape, ctx["routing"].capacity, ctx["routing"].dropped  # of 6 choices, 3 kept
    ((2, 3, 4), 1, 3)
    """

    def __init__(self, moe, ranks=1):
        if not isinstance(moe, MoE):
            raise ConfigError(f"MoEMLP wraps a collsim.nn.MoE, got {type(moe).__name__}")
        self.moe, self.ranks = moe, int(ranks)

    def __repr__(self):
        return f"MoEMLP(experts={self.moe.config.experts}, top_k={self.moe.config.top_k})"

    @property
    def params(self):
        return self.moe.params

    def output_shape(self, x_shape):
        x_shape = tuple(int(n) for n in x_shape)
        self.moe.output_shape((math.prod(x_shape[:-1]), x_shape[-1]) if x_shape else ())
        return x_shape

    def forward(self, x):
        x = np.asarray(x, dtype=np.float64)
        self.output_shape(x.shape)
        tokens = x.reshape(-1, x.shape[-1])  # (B·S, d)
        y, ctx = self.moe.forward(tokens, ranks=self.ranks)
        return (y - tokens).reshape(x.shape), ctx

    def backward_input(self, ctx, dy):
        flat = np.reshape(dy, ctx["x"].shape)
        return (self.moe.backward_input(ctx, flat) - flat).reshape(np.shape(dy))

    def backward_weight(self, ctx, dy):
        return self.moe.backward_weight(ctx, np.reshape(dy, ctx["x"].shape))

    def flops(self, x_shape):
        x_shape = self.output_shape(x_shape)
        return self.moe.flops((math.prod(x_shape[:-1]), x_shape[-1]))
