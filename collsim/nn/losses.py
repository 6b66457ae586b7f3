"""Losses that return ``(loss, gradient)``: mean squared error and softmax cross-entropy.

Each loss takes ``reduction="mean"`` (the default, as in PyTorch) or ``"sum"``.

How a data-parallel rank's loss relates to the global one: with the global batch
of ``B`` rows split evenly over ``dp`` ranks, each rank computes the *mean* over
its own ``B / dp`` rows.  The global mean loss is the average of the local ones,
so the full-batch gradient is the **average** of the ranks' gradients, which is
why data parallelism all-reduces with SUM and then divides by ``dp``.  With
``reduction="sum"`` the local losses and gradients simply **sum** (no division).
Uneven shards break the averaging rule; use ``"sum"`` and divide by ``B`` instead.

Examples
--------
>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> pred, target = rng.normal(size=(8, 3)), rng.normal(size=(8, 3))
>>> loss, dpred = mse_loss(pred, target)  # full batch
>>> local = [mse_loss(pred[r::2], target[r::2]) for r in range(2)]  # dp = 2 ranks
>>> bool(np.isclose(loss, (local[0][0] + local[1][0]) / 2))
True
>>> dW_full = pred.T @ dpred  # any linear function of dpred averages the same way
>>> dW_avg = (pred[0::2].T @ local[0][1] + pred[1::2].T @ local[1][1]) / 2
>>> bool(np.allclose(dW_full, dW_avg))
True
"""

import numpy as np

from ..errors import ConfigError

__all__ = ["mse_loss", "cross_entropy_loss"]

_REDUCTIONS = ("mean", "sum")


def _check_reduction(reduction):
    if reduction not in _REDUCTIONS:
        raise ConfigError(f"reduction must be one of {_REDUCTIONS}, got {reduction!r}")


def mse_loss(pred, target, reduction="mean"):
    """Squared error, averaged (or summed) over **all elements**, and its gradient.

    Parameters
    ----------
    pred, target : array, same shape
    reduction : {"mean", "sum"}
        ``"mean"`` divides the sum by ``pred.size``, as ``torch.nn.MSELoss`` does.

    Returns
    -------
    loss : scalar of pred's dtype
    dpred : array, shape of pred
        ``d loss / d pred``: ``2 * (pred - target) / pred.size`` for ``"mean"``.

    Examples
    --------
    >>> loss, dpred = mse_loss(np.array([1.0, 3.0]), np.array([0.0, 0.0]))
    >>> float(loss), dpred
    (5.0, array([1., 3.]))
    """
    _check_reduction(reduction)
    pred, target = np.asarray(pred), np.asarray(target)
    if pred.shape != target.shape:
        raise ConfigError(
            f"mse_loss needs pred and target of one shape, got {pred.shape} and {target.shape}"
        )
    if pred.size == 0:
        raise ConfigError("mse_loss of an empty array is undefined")
    diff = pred - target
    scale = 1.0 / diff.size if reduction == "mean" else 1.0
    return np.sum(diff * diff) * scale, (2.0 * scale) * diff


def cross_entropy_loss(logits, targets, reduction="mean"):
    """Softmax cross-entropy over the last axis, averaged (or summed) over **rows**.

    Parameters
    ----------
    logits : array, shape (..., C)
        Unnormalised scores; any leading dims (e.g. ``(B, T, vocab)``) are rows.
    targets : int array, shape (...)
        The correct class of each row, in ``[0, C)``.
    reduction : {"mean", "sum"}
        ``"mean"`` divides by the number of rows.

    Returns
    -------
    loss : scalar of logits' dtype
    dlogits : array, shape of logits
        ``(softmax(logits) - onehot(targets)) / rows`` for ``"mean"``.

    Notes
    -----
    Stable for any logits: the row maximum is subtracted before ``exp``, and the
    log-probabilities are ``z - logsumexp(z)`` rather than ``log(softmax(z))``.

    Examples
    --------
    >>> loss, dlogits = cross_entropy_loss(np.array([[0.0, 0.0], [1000.0, 0.0]]), np.array([1, 0]))
    >>> round(float(loss), 6)  # row 0: log 2; row 1: ~0, no overflow
    0.346574
    >>> dlogits
    array([[ 0.25, -0.25],
           [ 0.  ,  0.  ]])
    """
    _check_reduction(reduction)
    logits, targets = np.asarray(logits), np.asarray(targets)
    if logits.ndim == 0 or logits.shape[:-1] != targets.shape or logits.size == 0:
        raise ConfigError(
            f"cross_entropy_loss needs logits (..., C) and targets (...) with the same leading "
            f"dims, got logits {logits.shape} and targets {targets.shape}"
        )
    if not np.issubdtype(targets.dtype, np.integer):
        raise ConfigError(f"targets must be integer class indices, got dtype {targets.dtype}")
    C = logits.shape[-1]
    bad = (targets < 0) | (targets >= C)
    if bad.any():
        raise ConfigError(f"target {targets[bad].flat[0]} is outside the {C} classes [0, {C})")
    z = logits.reshape(-1, C)  # (rows, C)
    t = targets.reshape(-1)  # (rows,)
    rows = np.arange(z.shape[0])
    z = z - z.max(axis=-1, keepdims=True)  # the largest logit becomes 0: exp cannot overflow
    logsumexp = np.log(np.exp(z).sum(axis=-1, keepdims=True))  # (rows, 1)
    log_probs = z - logsumexp  # (rows, C)
    scale = 1.0 / z.shape[0] if reduction == "mean" else 1.0
    loss = -np.sum(log_probs[rows, t]) * scale
    dlogits = np.exp(log_probs)  # softmax, (rows, C)
    dlogits[rows, t] -= 1.0
    return loss, (dlogits * scale).reshape(logits.shape)
