"""The single-device oracle: what one device computes for the same model and batches.

Every parallel run is checked against it (DESIGN.md, principle 3): one forward and backward
of the whole batch, then the optimizer step, on copies, so the model passed in is not changed.

>>> import numpy as np
>>> from collsim.nn import Linear, Sequential
>>> model = Sequential(Linear(np.eye(2), np.zeros(2)))
>>> x = np.ones((4, 2))
>>> (loss, grads, params), = reference_steps(model, [(x, x)])
>>> loss, sorted(grads)
(0.0, ['0.bias', '0.weight'])
"""

import copy

import numpy as np

from ..nn import mse_loss

__all__ = ["single_device_step", "reference_steps", "compare"]


def single_device_step(model, x, target, loss=mse_loss, optimizer=None):
    """One forward and backward of the whole batch on one device.

    Returns ``(loss, grads)``; with ``optimizer`` also steps ``model``'s parameters in place.
    """
    y, ctx = model.forward(x)
    value, dy = loss(y, target)
    _, grads = model.backward(ctx, dy)
    if optimizer is not None:
        optimizer.step(model.params, grads)
    return float(value), grads


def reference_steps(model, batches, loss=mse_loss, optimizer=None):
    """``[(loss, grads, params after the step), ...]`` per batch, on copies of ``model`` and
    ``optimizer`` (without an optimizer the parameters never change)."""
    model, optimizer = copy.deepcopy(model), copy.deepcopy(optimizer)
    out = []
    for x, target in batches:
        value, grads = single_device_step(model, x, target, loss, optimizer)
        out.append((value, grads, {k: a.copy() for k, a in model.params.items()}))
    return out


def compare(grads, params, reference, rtol, atol):
    """``(match, max_error)`` of gradients (and stepped ``params``, unless None) vs one
    device's ``reference = (loss, grads, params)``."""
    _, ref_grads, ref_params = reference
    pairs = [(grads.get(k), g) for k, g in ref_grads.items()]
    if params is not None:
        pairs += [(params.get(k), a) for k, a in ref_params.items()]
    errors = [np.max(np.abs(a - b), initial=0.0) for a, b in pairs if a is not None]
    match = set(grads) == set(ref_grads) and all(
        a is not None and np.allclose(a, b, rtol=rtol, atol=atol) for a, b in pairs
    )
    return bool(match), float(max(errors, default=0.0))
