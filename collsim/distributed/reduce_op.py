"""``ReduceOp``: torch.distributed's names for the reductions collsim's collectives run.

Examples
--------
>>> ReduceOp.SUM, ReduceOp.PRODUCT.value
(<ReduceOp.SUM: 'sum'>, 'prod')
>>> op_name(ReduceOp.AVG, "all_reduce")
'avg'
>>> op_name(ReduceOp.BAND, "all_reduce")
Traceback (most recent call last):
...
collsim.errors.ConfigError: all_reduce(op=ReduceOp.BAND): collsim reduces with ReduceOp.SUM, \
ReduceOp.AVG, ReduceOp.PRODUCT, ReduceOp.MIN or ReduceOp.MAX
"""

from enum import Enum

from ..errors import ConfigError

__all__ = ["ReduceOp", "SUPPORTED_OPS", "op_name"]


class ReduceOp(Enum):
    """The reduction of a collective, with torch's names; the value is collsim's op name.

    The bitwise ops and ``PREMUL_SUM`` exist so that code naming them gets a clear
    refusal rather than an ``AttributeError``: the simulator's collectives do not run them.
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


SUPPORTED_OPS = (ReduceOp.SUM, ReduceOp.AVG, ReduceOp.PRODUCT, ReduceOp.MIN, ReduceOp.MAX)


def op_name(op, call):
    """collsim's name of ``op`` (``"sum"``, ...), or a ConfigError naming ``op`` and ``call``."""
    if isinstance(op, ReduceOp) and op in SUPPORTED_OPS:
        return op.value
    given = str(op) if isinstance(op, ReduceOp) else repr(op)
    choices = ", ".join(str(o) for o in SUPPORTED_OPS[:-1])
    raise ConfigError(f"{call}(op={given}): collsim reduces with {choices} or {SUPPORTED_OPS[-1]}")
