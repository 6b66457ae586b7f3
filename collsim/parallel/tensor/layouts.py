"""How an activation is split over a tensor-parallel group.

=========  ======================================================================
layout     what TP rank ``j`` of ``t`` holds
=========  ======================================================================
``full``   all of it (every TP rank the same array)
``seq``    tokens ``j·S/t ..`` of axis 1: sequence parallelism (Korthikanti et al.)
``last``   columns ``j·n/t ..`` of the last axis: the input of a row-parallel layer,
           the output of a column-parallel one that does not gather
=========  ======================================================================

>>> import numpy as np
>>> from collsim.runtime.group import Group
>>> x = np.arange(8.0).reshape(1, 2, 4)  # (B, S, H)
>>> parts = [local_part(x, "last", Group([0, 1]), j) for j in range(2)]
>>> [p.shape for p in parts], bool((assemble(parts, "last") == x).all())
([(1, 2, 2), (1, 2, 2)], True)
"""

import numpy as np

from .comm import check_tp, split_along

__all__ = ["LAYOUTS", "local_part", "assemble"]

LAYOUTS = ("full", "seq", "last")


def local_part(x, layout, group, tp_rank):
    """This TP rank's part of an activation in ``layout``."""
    if layout == "full" or group.size == 1:
        return x
    if layout == "seq":
        check_tp(group.size, seq=np.shape(x)[1], sequence_parallel=True)
        return split_along(x, group, tp_rank, 1)
    return split_along(x, group, tp_rank, -1)


def assemble(parts, layout):
    """The full activation from the TP ranks' parts, in group order."""
    if layout == "full":
        return parts[0]
    return np.concatenate(parts, axis=1 if layout == "seq" else -1)
