"""SGD and Adam, updating a dict of parameter arrays in place.

``step(params, grads)`` updates ``params[name]`` in place for every ``name`` in
``grads`` (a parameter with no gradient is left alone, as PyTorch does for
``p.grad is None``).  The optimizer keeps per-name state (momentum, Adam moments,
step count), so one optimizer can serve a whole model or just one pipeline stage
or ZeRO shard, as long as names stay stable.  There is no randomness.

Because updates are in place, pass ``module.params`` and the module sees the new
values; see :class:`collsim.nn.Module` for when it is safe to step.

Examples
--------
>>> import numpy as np
>>> params = {"w": np.array([1.0, 2.0])}
>>> opt = SGD(lr=0.1)
>>> opt.step(params, {"w": np.array([1.0, -1.0])})
>>> params["w"]
array([0.9, 2.1])
"""

import numpy as np

from ..errors import ConfigError

__all__ = ["SGD", "Adam"]


def _check_step(params, grads):
    for name, grad in grads.items():
        if name not in params:
            raise ConfigError(
                f"gradient {name!r} has no parameter; parameters are {sorted(params)}"
            )
        if np.shape(grad) != np.shape(params[name]):
            raise ConfigError(
                f"gradient {name!r} has shape {np.shape(grad)} but its parameter has "
                f"shape {np.shape(params[name])}"
            )


def _check_rate(value, what, low, high=None):
    if not (value >= low and (high is None or value < high)):
        bound = f"in [{low}, {high})" if high is not None else f">= {low}"
        raise ConfigError(f"{what} must be {bound}, got {value!r}")


class SGD:
    """Stochastic gradient descent with optional momentum (PyTorch's formula).

    ``buf = momentum * buf + g`` (``buf = g`` on the first step), then
    ``p -= lr * buf``; with ``momentum=0`` simply ``p -= lr * g``.

    Parameters
    ----------
    lr : float
    momentum : float in [0, 1)
    """

    def __init__(self, lr, momentum=0.0):
        _check_rate(lr, "lr", 0.0)
        _check_rate(momentum, "momentum", 0.0, 1.0)
        self.lr = float(lr)
        self.momentum = float(momentum)
        self.state = {}  # name -> {"momentum_buffer": array}

    def __repr__(self):
        return f"SGD(lr={self.lr}, momentum={self.momentum})"

    def step(self, params, grads):
        """Update ``params`` in place from ``grads``."""
        _check_step(params, grads)
        for name, grad in grads.items():
            update = np.asarray(grad)
            if self.momentum:
                state = self.state.setdefault(name, {})
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = update.copy()
                else:
                    state["momentum_buffer"] = self.momentum * state["momentum_buffer"] + update
                update = state["momentum_buffer"]
            params[name] -= self.lr * update


class Adam:
    """Adam with bias correction (Kingma & Ba; PyTorch's formula, no weight decay).

    ``m = b1*m + (1-b1)*g``, ``v = b2*v + (1-b2)*g**2``, then
    ``p -= lr * m_hat / (sqrt(v_hat) + eps)`` with ``m_hat = m / (1 - b1**t)``,
    ``v_hat = v / (1 - b2**t)``.  On the first step ``m_hat = g`` and
    ``sqrt(v_hat) = |g|``, so every parameter moves by about ``lr * sign(g)``.

    Parameters
    ----------
    lr : float
    betas : (float, float), each in [0, 1)
    eps : float
        Added to ``sqrt(v_hat)``; keeps the step finite where ``g`` is 0.

    Examples
    --------
    >>> params = {"w": np.array([0.0, 0.0])}
    >>> Adam(lr=0.01).step(params, {"w": np.array([5.0, -0.2])})
    >>> params["w"].round(6)
    array([-0.01,  0.01])
    """

    def __init__(self, lr, betas=(0.9, 0.999), eps=1e-8):
        _check_rate(lr, "lr", 0.0)
        if len(betas) != 2:
            raise ConfigError(f"betas must be a pair (beta1, beta2), got {betas!r}")
        _check_rate(betas[0], "beta1", 0.0, 1.0)
        _check_rate(betas[1], "beta2", 0.0, 1.0)
        _check_rate(eps, "eps", 0.0)
        self.lr = float(lr)
        self.betas = (float(betas[0]), float(betas[1]))
        self.eps = float(eps)
        self.state = {}  # name -> {"step": int, "m": array, "v": array}

    def __repr__(self):
        return f"Adam(lr={self.lr}, betas={self.betas}, eps={self.eps})"

    def step(self, params, grads):
        """Update ``params`` in place from ``grads``."""
        _check_step(params, grads)
        b1, b2 = self.betas
        for name, grad in grads.items():
            g = np.asarray(grad)
            state = self.state.setdefault(
                name, {"step": 0, "m": np.zeros_like(g), "v": np.zeros_like(g)}
            )
            state["step"] += 1
            t = state["step"]
            state["m"] = b1 * state["m"] + (1.0 - b1) * g
            state["v"] = b2 * state["v"] + (1.0 - b2) * (g * g)
            m_hat = state["m"] / (1.0 - b1**t)
            v_hat = state["v"] / (1.0 - b2**t)
            params[name] -= self.lr * m_hat / (np.sqrt(v_hat) + self.eps)
