"""All-to-allv: an all-to-all with uneven splits, as a schedule of row moves.

Rank ``r`` sends ``counts[r][d]`` rows to rank ``d`` (MPI's ``Alltoallv``, torch's
``all_to_all_single`` with ``input_split_sizes``); what it sends to ``d`` is a contiguous
block of its send buffer, blocks in destination order, and what it receives lands in
source order.  This is the token exchange of a mixture-of-experts layer, where the counts
are whatever the router chose.

The *direct* algorithm takes K-1 steps: in step s, rank r sends its block for rank
(r+s) mod K straight to it (a permutation, so on a switch no two transfers of a step
share a link).  A block of zero rows is not sent: no message, no latency, as NCCL's
grouped sends skip an empty one.  The block a rank keeps for itself is copied locally.

A :class:`RowMove` says which rows of the sender's buffer land in which rows of the
receiver's; a :class:`RaggedSchedule` holds the steps and the counts.  The executor
(:func:`run_all_to_allv`), the byte counts and the tests read that one description.
A rank needs only its own row of ``counts`` (what it sends) and its own column (what it
receives: in an MoE layer, from the all-to-all of per-expert counts that comes first); the
moves it takes part in read nothing else.

Examples
--------
>>> s = direct_all_to_allv([[1, 2, 0], [0, 0, 3], [4, 0, 1]])
>>> for move in s.steps[0]:
...     print(move)
RowMove(src=0, dst=1, rows=range(1, 3), to=range(0, 2))
RowMove(src=1, dst=2, rows=range(0, 3), to=range(0, 3))
RowMove(src=2, dst=0, rows=range(0, 4), to=range(1, 5))
>>> s.received_rows(2), s.sent_rows(2)  # rank 2 keeps its own row; 3 in, 4 out
(3, 4)
"""

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..errors import ConfigError
from ..runtime.group import Group
from ..runtime.ops import CountOnly

__all__ = [
    "RowMove",
    "RaggedSchedule",
    "RaggedTransfer",
    "direct_all_to_allv",
    "run_all_to_allv",
    "check_counts",
]


@dataclass(frozen=True, slots=True)
class RowMove:
    """``src`` sends rows ``rows`` of its send buffer to ``dst``, where they become rows
    ``to`` of its receive buffer.  Ranks are group ranks."""

    src: int
    dst: int
    rows: range
    to: range

    def to_args(self):
        """JSON-ready fields for the Chrome/Perfetto export."""
        return {
            "group_src": self.src,
            "group_dst": self.dst,
            "first_row": self.rows.start,
            "rows": len(self.rows),
            "first_dst_row": self.to.start,
        }

    def __str__(self):
        return f"RowMove(src={self.src}, dst={self.dst}, rows={self.rows}, to={self.to})"


class RaggedTransfer(NamedTuple):
    """A transfer's ``meta``: which call (``"dispatch"``, ``"combine"``, ...), step and
    move it is, so that a report selects an exchange's bytes by field, not by label."""

    call: str
    step: int  # 1-based
    move: RowMove

    def to_args(self):
        return {"call": self.call, "step": self.step, **self.move.to_args()}


@dataclass(frozen=True)
class RaggedSchedule:
    """The steps of an all-to-allv among ``ranks`` group ranks and the counts it moves."""

    algorithm: str
    counts: tuple  # counts[src][dst]: rows src sends to dst (the diagonal stays home)
    steps: tuple  # steps of RowMove

    collective = "all_to_allv"

    @property
    def ranks(self):
        return len(self.counts)

    @property
    def n_steps(self):
        return len(self.steps)

    def moves(self):
        """Every move with its 0-based step: ``[(step, RowMove), ...]``."""
        return [(s, m) for s, step in enumerate(self.steps) for m in step]

    def send_offsets(self, r):
        """Where each destination's block starts in rank ``r``'s send buffer."""
        return np.concatenate([[0], np.cumsum(self.counts[r])]).tolist()

    def recv_offsets(self, r):
        """Where each source's block starts in rank ``r``'s receive buffer."""
        return np.concatenate([[0], np.cumsum([row[r] for row in self.counts])]).tolist()

    def sent_rows(self, r):
        """Rows rank ``r`` sends to other ranks."""
        return sum(self.counts[r]) - self.counts[r][r]

    def received_rows(self, r):
        """Rows rank ``r`` receives from other ranks."""
        return sum(row[r] for row in self.counts) - self.counts[r][r]


def check_counts(counts):
    """``counts`` as a tuple of K tuples of K whole numbers >= 0, or a ConfigError."""
    rows = [list(row) for row in counts]
    k = len(rows)
    if k == 0 or any(len(row) != k for row in rows):
        raise ConfigError(
            f"all-to-allv counts must be a K x K table (rows sent from src to dst), got "
            f"{[len(row) for row in rows]} entries per row for K={k}"
        )
    for src, row in enumerate(rows):
        for dst, n in enumerate(row):
            if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 0:
                raise ConfigError(
                    f"all-to-allv counts[{src}][{dst}]={n!r}: a count of rows is a whole "
                    "number >= 0"
                )
    return tuple(tuple(int(n) for n in row) for row in rows)


def direct_all_to_allv(counts):
    """K-1 steps; rank r sends its block for (r+s) mod K in step s, unless it is empty."""
    counts = check_counts(counts)
    k = len(counts)
    send = [np.concatenate([[0], np.cumsum(counts[r])]) for r in range(k)]
    recv = [np.concatenate([[0], np.cumsum([counts[s][r] for s in range(k)])]) for r in range(k)]
    steps = []
    for s in range(1, k):
        step = []
        for r in range(k):
            d, n = (r + s) % k, counts[r][(r + s) % k]
            if n:
                rows = range(int(send[r][d]), int(send[r][d]) + n)
                step.append(RowMove(r, d, rows, range(int(recv[d][r]), int(recv[d][r]) + n)))
        steps.append(tuple(step))
    return RaggedSchedule("direct", counts, tuple(steps))


def run_all_to_allv(rank, schedule, send, group=None, call="all_to_allv"):
    """Rank program part (``yield from``): send this rank's blocks of ``send`` (rows along
    the first axis) by ``schedule`` and return the receive buffer, sources in group order.
    ``call`` names the exchange in each transfer's :class:`RaggedTransfer` record.

    ``send`` may be a :class:`~collsim.runtime.ops.CountOnly` of the bytes of *one row*:
    each move then carries ``rows × row bytes`` and no data (a run too big to hold, such as
    DeepEP's 4,096 tokens of 7,168 values on 16 ranks), and the result is None."""
    group = Group(range(rank.size)) if group is None else group
    g = group.index(rank.id)
    sizes_only = isinstance(send, CountOnly)  # each move: rows × row bytes, no data
    if sizes_only:
        out = None
    else:
        send = np.asarray(send)
        if schedule.ranks != group.size or len(send) != sum(schedule.counts[g]):
            raise ConfigError(
                f"rank {rank.id}: all-to-allv of {schedule.ranks} ranks sends "
                f"{sum(schedule.counts[g])} rows from group rank {g}, got a buffer of "
                f"{len(send)} rows on a group of {group.size}"
            )
        recv_at, send_at = schedule.recv_offsets(g), schedule.send_offsets(g)
        out = np.empty((recv_at[-1],) + send.shape[1:], dtype=send.dtype)
        out[recv_at[g] : recv_at[g + 1]] = send[send_at[g] : send_at[g + 1]]  # kept at home
    for number, step in enumerate(schedule.steps, start=1):
        posts = []
        for move in step:
            record = RaggedTransfer(call, number, move)
            if move.src == g:
                if sizes_only:
                    rows = CountOnly(len(move.rows) * send.nbytes)
                else:
                    rows = send[move.rows.start : move.rows.stop]
                label = f"{call} {move.src}->{move.dst}"
                posts.append(rank.isend(group.ranks[move.dst], rows, record[:2], label, record))
            if move.dst == g:
                into = None if sizes_only else out[move.to.start : move.to.stop]
                posts.append(rank.irecv(group.ranks[move.src], record[:2], out=into))
        handles = []
        for post in posts:
            handles.append((yield post))
        if handles:
            yield rank.wait(*handles)
    return out
