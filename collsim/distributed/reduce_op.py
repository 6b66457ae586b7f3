"""``ReduceOp``: torch.distributed's names for the reductions collsim's collectives run.

Examples
--------
>>> ReduceOp.SUM, ReduceOp.PRODUCT.value
(<ReduceOp.SUM: 'sum'>, 'prod')
>>> op_name(ReduceOp.AVG, "all_reduce")
'avg'
>>> op_name(ReduceOp.BXOR, "all_reduce")
'bxor'
>>> op_name(ReduceOp.PREMUL_SUM, "all_reduce")
Traceback (most recent call last):
...
collsim.errors.ConfigError: all_reduce(op=ReduceOp.PREMUL_SUM): collsim reduces with \
ReduceOp.SUM, ReduceOp.AVG, ReduceOp.PRODUCT, ReduceOp.MIN, ReduceOp.MAX, ReduceOp.BAND, \
ReduceOp.BOR or ReduceOp.BXOR
"""

from enum import Enum

from ..collectives.checks import check_op
from ..errors import ConfigError
from .checks import TensorMismatchError

__all__ = ["ReduceOp", "SUPPORTED_OPS", "op_name", "check_reducible"]


class ReduceOp(Enum):
    """The reduction of a collective, with torch's names; the value is collsim's op name.

    The bitwise ops reduce integer and bool tensors only, as in torch.  ``PREMUL_SUM``
    exists so that code naming it gets a clear refusal rather than an ``AttributeError``:
    the simulator's collectives do not run it.
    """

    SUM = "sum"
    AVG = "avg"  # sum, then divide by the group size (integers truncate, as NCCL does)
    PRODUCT = "prod"
    MIN = "min"
    MAX = "max"
    BAND = "band"
    BOR = "bor"
    BXOR = "bxor"
    PREMUL_SUM = "premul_sum"

    def __str__(self):
        return f"ReduceOp.{self.name}"


SUPPORTED_OPS = (
    ReduceOp.SUM,
    ReduceOp.AVG,
    ReduceOp.PRODUCT,
    ReduceOp.MIN,
    ReduceOp.MAX,
    ReduceOp.BAND,
    ReduceOp.BOR,
    ReduceOp.BXOR,
)


def op_name(op, call):
    """collsim's name of ``op`` (``"sum"``, ...), or a ConfigError naming ``op`` and ``call``."""
    if isinstance(op, ReduceOp) and op in SUPPORTED_OPS:
        return op.value
    given = str(op) if isinstance(op, ReduceOp) else repr(op)
    choices = ", ".join(str(o) for o in SUPPORTED_OPS[:-1])
    raise ConfigError(f"{call}(op={given}): collsim reduces with {choices} or {SUPPORTED_OPS[-1]}")


def check_reducible(op, tensor, call):
    """Refuse ``op`` on ``tensor``'s dtype where it means nothing (a bitwise op of floats,
    the average of bools) with torch's exception, a RuntimeError, naming both."""
    try:
        check_op(op_name(op, call), tensor.dtype.name)
    except ConfigError as exc:
        rule = str(exc).split(": ", 1)[1]
        raise TensorMismatchError(f"{call}(op={op}) of a {tensor.dtype} tensor: {rule}") from None
