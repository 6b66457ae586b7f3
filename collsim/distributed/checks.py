"""The checks every call makes on the tensors it is given, before anything moves.

Examples
--------
>>> import numpy as np
>>> check_tensor(np.zeros(2, np.complex64), "all_reduce")
Traceback (most recent call last):
...
collsim.distributed.checks.TensorTypeError: all_reduce(tensor=<complex64 array of shape (2,)>): \
dtype complex64 is not one the collectives move; use one of float64, float32, float16, int64, \
int32, int16, int8, uint8, bool

Each refusal is also the exception torch raises for the same mistake (a ``TypeError`` for
a wrong type, a ``RuntimeError`` for tensors that do not fit together, a ``ValueError``
for a bad rank), so ``except RuntimeError:`` written for torch catches it here too.
"""

import numpy as np

from ..collectives.checks import NUMERIC_DTYPES
from ..errors import ConfigError

__all__ = [
    "check_tensor",
    "check_list_like",
    "describe",
    "TensorTypeError",
    "TensorMismatchError",
]


class TensorTypeError(ConfigError, TypeError):
    """A tensor argument of the wrong type or dtype: torch raises a TypeError there."""


class TensorMismatchError(ConfigError, RuntimeError):
    """Tensors that do not fit together (sizes, dtypes, list lengths): torch's backends
    raise a RuntimeError there."""


def check_tensor(tensor, call, name="tensor", writes=True):
    """``tensor`` if it is a numpy array of a dtype collsim moves (writeable if the call
    writes it); else a ConfigError naming the call, the argument and the value."""
    if not isinstance(tensor, np.ndarray):
        text = repr(tensor)
        text = text if len(text) <= 60 else text[:57] + "..."
        raise TensorTypeError(
            f"{call}({name}={text}): a tensor here is a numpy array, not a {type(tensor).__name__}"
        )
    if tensor.dtype.name not in NUMERIC_DTYPES:
        raise TensorTypeError(
            f"{call}({name}=<{tensor.dtype} array of shape {tensor.shape}>): "
            f"dtype {tensor.dtype} is not one the collectives move; use one "
            f"of {', '.join(NUMERIC_DTYPES)}"
        )
    if writes and not tensor.flags.writeable:
        raise ConfigError(
            f"{call}({name}=<read-only {tensor.dtype} array of shape "
            f"{tensor.shape}>): the call writes into it; pass a writeable "
            "array, e.g. tensor.copy()"
        )
    return tensor


def describe(tensor):
    """``"float64 (3, 4)"``: a tensor as an error message names it."""
    return f"{tensor.dtype} {tuple(tensor.shape)}"


def check_list_like(tensors, k, like, call, name, writes):
    """``tensors`` as a list, if it holds ``k`` tensors of ``like``'s shape and dtype."""
    if not isinstance(tensors, list | tuple) or len(tensors) != k:
        got = f"{len(tensors)} tensors" if isinstance(tensors, list | tuple) else repr(tensors)
        raise TensorMismatchError(
            f"{call}({name}=...): give a list of {k} tensors, one per rank of the group, got {got}"
        )
    for i, t in enumerate(tensors):
        check_tensor(t, call, f"{name}[{i}]", writes=writes)
        if t.shape != like.shape or t.dtype != like.dtype:
            raise TensorMismatchError(
                f"{call}: {name}[{i}] is {describe(t)} but tensor is "
                f"{describe(like)}: every entry must match it"
            )
    return list(tensors)
