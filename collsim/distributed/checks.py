"""The checks every call makes on the tensors it is given, before anything moves.

Examples
--------
>>> import numpy as np
>>> check_tensor(np.zeros(2, np.uint8), "all_reduce")
Traceback (most recent call last):
...
collsim.errors.ConfigError: all_reduce(tensor=<uint8 array of shape (2,)>): dtype uint8 is \
not one the collectives move; use one of float64, float32, float16, int64, int32
"""

import numpy as np

from ..collectives.checks import NUMERIC_DTYPES
from ..errors import ConfigError

__all__ = ["check_tensor", "describe"]


def check_tensor(tensor, call, name="tensor", writes=True):
    """``tensor`` if it is a numpy array of a dtype collsim moves (writeable if the call
    writes it); else a ConfigError naming the call, the argument and the value."""
    if not isinstance(tensor, np.ndarray):
        text = repr(tensor)
        text = text if len(text) <= 60 else text[:57] + "..."
        raise ConfigError(
            f"{call}({name}={text}): a tensor here is a numpy array, not a {type(tensor).__name__}"
        )
    if tensor.dtype.name not in NUMERIC_DTYPES:
        raise ConfigError(
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
