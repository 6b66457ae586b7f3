"""Expert tensor parallelism: each expert's MLP split by columns and rows over an etp group.

An expert ``(silu(x W_gate) ⊙ x W_up) W_down`` is Megatron's column-then-row MLP: etp rank
``t`` holds columns ``t·f/etp .. (t+1)·f/etp`` of ``W_gate`` and ``W_up`` and the same rows
of ``W_down``, and its output is a partial sum over its columns.  What the etp group
exchanges around the experts depends on whose tokens they are:

* **the same tokens** (the etp group inside a tensor-parallel group without sequence
  parallelism): each rank computes its columns for all of them and the partial outputs
  are **all-reduced** (summed), forward and, for the input gradient, backward;
* **its own tokens** (sequence parallelism, or etp folded over data-parallel ranks): the
  ranks **all-gather** their dispatched rows (uneven: the counts first, then an
  all-to-allv), each computes its columns for every row, and the partial outputs are
  **reduce-scattered** back to the rank that brought the row (Megatron-Core's all-to-all
  dispatcher with ``tp > 1``: all-gather after the ep all-to-all, reduce-scatter before
  the one back).

The uneven exchanges are all-to-allv transfers named by :data:`ETP_GATHER` and
:data:`ETP_SCATTER` (counted as the ``etp`` dimension), the counts an all-gather on the
etp group.

>>> import numpy as np
>>> from collsim.nn.moe import SwiGLUExperts
>>> rng = np.random.default_rng(0)
>>> full = SwiGLUExperts(rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 3, 4)),
...                      rng.normal(size=(2, 4, 3)))
>>> rows, counts = rng.normal(size=(5, 3)), np.array([2, 3])
>>> parts = [column_shard(full, 2, t).forward(rows, counts)[0] for t in range(2)]
>>> bool(np.allclose(sum(parts), full.forward(rows, counts)[0], rtol=0, atol=1e-13))
True
"""

from dataclasses import dataclass

import numpy as np

from ...collectives.all_to_allv import direct_all_to_allv, run_all_to_allv
from ...errors import ConfigError
from ...nn.moe import SwiGLUExperts
from ..accounting import ETP_GATHER, ETP_SCATTER
from .dispatch import known_counts

__all__ = ["column_shard", "EtpExchange", "gather_rows", "gather_again", "reduce_rows"]


def column_shard(experts, etp, etp_rank):
    """Etp rank ``etp_rank``'s columns of ``experts`` (a :class:`SwiGLUExperts`), copied."""
    f = experts.w_gate.shape[2]
    if f % etp:
        near = max(e for e in range(1, etp + 1) if f % e == 0)
        raise ConfigError(
            f"an expert's ffn hidden {f} is not divisible by etp={etp} (the expert MLP is "
            f"split by columns and rows over etp); nearest valid etp={near}"
        )
    cols = slice(etp_rank * f // etp, (etp_rank + 1) * f // etp)
    return SwiGLUExperts(
        experts.w_gate[:, :, cols].copy(),
        experts.w_up[:, :, cols].copy(),
        experts.w_down[:, cols, :].copy(),
    )


@dataclass(frozen=True)
class EtpExchange:
    """What one forward's etp exchange learned on one rank (reused by its backward)."""

    group: object  # the etp Group (size 1: no exchange)
    replicated: bool  # the group's ranks hold the same rows: all-reduce, no gather
    source_rows: np.ndarray  # (etp,) rows each etp rank brought
    order: np.ndarray  # gathered row of each expert-major row (the permutation)
    gather_schedule: object  # RaggedSchedule of the rows' all-gather (None: not gathered)
    scatter_schedule: object  # and of the partial outputs' way back

    @property
    def gathered(self):
        return self.gather_schedule is not None


def gather_rows(rank, group, replicated, rows, expert_rows):
    """``(rows for this rank's columns, rows per local expert, exchange)``: the etp group's
    rows in expert-major order (``yield from`` it); ``rows`` are this rank's, expert-major,
    ``expert_rows[e]`` of local expert e."""
    expert_rows = np.asarray(expert_rows, dtype=np.int64)
    if group.size == 1 or replicated:
        exchange = EtpExchange(group, replicated, np.array([len(rows)]), None, None, None)
        return rows, expert_rows, exchange
    k, g = group.size, group.index(rank.id)
    counts = yield from rank.all_gather(expert_rows, group=group)
    counts = np.asarray(counts, dtype=np.int64).reshape(k, -1)  # (etp, E/ep)
    source_rows = counts.sum(axis=1)
    known = known_counts(k, g, np.full(k, source_rows[g]), source_rows)
    gather_schedule, scatter_schedule = direct_all_to_allv(known), direct_all_to_allv(known.T)
    starts = np.concatenate([[0], np.cumsum(counts.ravel())])[:-1].reshape(counts.shape)
    pieces = [np.zeros(0, dtype=np.int64)]  # expert-major: expert e's rows, sources in order
    for e in range(counts.shape[1]):
        pieces += [np.arange(starts[s, e], starts[s, e] + counts[s, e]) for s in range(k)]
    exchange = EtpExchange(
        group, False, source_rows, np.concatenate(pieces), gather_schedule, scatter_schedule
    )
    got = yield from gather_again(rank, exchange, rows)
    return got, counts.sum(axis=0), exchange


def gather_again(rank, exchange, rows):
    """The same gather as ``exchange``'s for other rows of this rank (the backward sends
    the outputs' gradients the way the rows went)."""
    if not exchange.gathered:
        return rows
    k = exchange.group.size
    send = np.concatenate([rows] * k)  # its block for every etp rank, its own kept
    got = yield from run_all_to_allv(
        rank, exchange.gather_schedule, send, exchange.group, ETP_GATHER
    )
    return got[exchange.order]


def reduce_rows(rank, exchange, partial):
    """This rank's rows of the partial outputs ``partial`` (expert-major, every etp rank's
    rows), summed over the etp group: all-reduced, or reduce-scattered back."""
    if exchange.group.size == 1:
        return partial
    if exchange.replicated:
        return (yield from rank.all_reduce(partial, group=exchange.group, op="sum"))
    by_source = np.empty_like(partial)
    by_source[exchange.order] = partial  # back to source-major: each rank's block in order
    got = yield from run_all_to_allv(
        rank, exchange.scatter_schedule, by_source, exchange.group, ETP_SCATTER
    )
    k, n = exchange.group.size, exchange.source_rows[exchange.group.index(rank.id)]
    return got.reshape(k, n, *partial.shape[1:]).sum(axis=0)  # sources in group order
