"""The two data types of a pipeline schedule: one pass (`PipeOp`) and the whole plan (`Schedule`).

A schedule says, for every pipeline stage, which passes it runs and in which order. It holds no
times: the executor runs it on the virtual cluster and the trace says when each pass ran. The
closed forms here (``formula_*``) are the second oracle that the trace is checked against.

Vocabulary (Megatron's): ``p`` stages, ``m`` micro-batches, ``v`` model chunks per stage. Chunk
``c`` of stage ``s`` is *virtual stage* ``c * p + s``: chunk 0 of every stage comes first, then
chunk 1, and so on, so a micro-batch visits stage 0, 1, ..., p-1, 0, 1, ... on its way forward.

Examples
--------
>>> from collsim.parallel.pipeline.schedules import PipeOp, one_f_one_b
>>> sched = one_f_one_b(p=2, m=3)
>>> print(sched)
stage 0 | F0 F1 B0 F2 B1 B2
stage 1 | F0 B0 F1 B1 F2 B2
>>> sched.dependencies(0, PipeOp("BW", 1))
[(1, PipeOp(kind='BW', microbatch=1, chunk=0)), (0, PipeOp(kind='F', microbatch=1, chunk=0))]
"""

import difflib
from dataclasses import dataclass

from ....errors import ConfigError
from . import formulas
from ._checks import check_count, check_stage_ops

__all__ = ["KINDS", "PipeOp", "Schedule"]

#: F forward; B input-gradient half of the backward; W weight-gradient half; BW both halves.
KINDS = ("F", "B", "W", "BW")


@dataclass(frozen=True)
class PipeOp:
    """One pass of one micro-batch through one model chunk of a stage.

    Parameters
    ----------
    kind : {"F", "B", "W", "BW"}
        ``F`` forward; ``B`` gradient w.r.t. the stage input (what the previous stage waits
        for); ``W`` gradient w.r.t. the weights (nobody waits for it, so it can be deferred);
        ``BW`` the full backward, for schedules that do not split it.
    microbatch : int
        Micro-batch index, ``0 <= microbatch < m``.
    chunk : int, default 0
        Model chunk on this stage, ``0 <= chunk < v`` (always 0 unless interleaved).

    Examples
    --------
    >>> PipeOp("F", 3, chunk=1).label(show_chunk=True)
    'F3.1'
    >>> PipeOp("BW", 3).label()
    'B3'
    """

    kind: str
    microbatch: int
    chunk: int = 0

    def __post_init__(self):
        if self.kind not in KINDS:
            guess = difflib.get_close_matches(str(self.kind).upper(), KINDS, n=1, cutoff=0)
            raise ConfigError(
                f"PipeOp kind {self.kind!r} is not one of {', '.join(KINDS)}; "
                f"nearest valid choice: {guess[0]!r}"
            )
        for field in ("microbatch", "chunk"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"PipeOp {field} must be an integer >= 0, got {value!r}")

    def label(self, show_chunk=False):
        """Short name used in tables: ``F3``, ``B3``, ``W3``, or ``F3.1`` with the chunk.

        A full backward (``BW``) is drawn as ``B``, the way 1F1B pictures draw it; a schedule
        never mixes ``BW`` with split ``B``/``W`` passes, so the table stays unambiguous.
        """
        letter = "B" if self.kind == "BW" else self.kind
        suffix = f".{self.chunk}" if show_chunk else ""
        return f"{letter}{self.microbatch}{suffix}"


@dataclass(frozen=True, repr=False)
class Schedule:
    """A pipeline schedule: for each stage, its passes in execution order.

    Parameters
    ----------
    name : str
        ``"gpipe"``, ``"1f1b"``, ``"interleaved"``, ``"zb-h1"``, or any name for a hand-built
        schedule (which then has no closed forms).
    stages : int
        Number of pipeline stages ``p``.
    microbatches : int
        Number of micro-batches ``m``.
    virtual : int
        Model chunks per stage ``v`` (1 unless interleaved).
    ops : sequence of sequences of PipeOp
        ``ops[s]`` is stage ``s``'s passes in the order it runs them.

    Raises
    ------
    ConfigError
        If a stage misses or repeats a pass, runs a backward before its forward or a ``W``
        before its ``B``, or mixes ``BW`` with split ``B``/``W`` passes.

    Examples
    --------
    >>> from collsim.parallel.pipeline.schedules import PipeOp, Schedule
    >>> ops = [[PipeOp("F", 0), PipeOp("BW", 0)], [PipeOp("F", 0), PipeOp("BW", 0)]]
    >>> sched = Schedule("mine", stages=2, microbatches=1, virtual=1, ops=ops)
    >>> sched
    Schedule(name='mine', stages=2, microbatches=1, virtual=1)
    >>> sched.counts()
    {'F': 2, 'B': 0, 'W': 0, 'BW': 2}
    >>> sched.peak_inflight()
    (1, 1)
    """

    name: str
    stages: int
    microbatches: int
    virtual: int
    ops: tuple

    def __post_init__(self):
        check_count("stages", self.stages)
        check_count("microbatches", self.microbatches)
        check_count("virtual", self.virtual)
        # frozen: normalise lists to tuples so a schedule is hashable, immutable data
        object.__setattr__(self, "ops", tuple(tuple(stage_ops) for stage_ops in self.ops))
        if len(self.ops) != self.stages:
            raise ConfigError(
                f"schedule {self.name!r} has ops for {len(self.ops)} stages but stages="
                f"{self.stages}; give exactly one op list per stage"
            )
        strays = [op for stage_ops in self.ops for op in stage_ops if not isinstance(op, PipeOp)]
        if strays:
            raise ConfigError(f"schedule {self.name!r} holds {strays[0]!r}, which is not a PipeOp")
        kinds = {op.kind for stage_ops in self.ops for op in stage_ops}
        if "BW" in kinds and kinds & {"B", "W"}:
            raise ConfigError(
                f"schedule {self.name!r} mixes full backward passes (BW) with split ones "
                f"(B/W); use BW everywhere or B and W everywhere"
            )
        for stage, stage_ops in enumerate(self.ops):
            check_stage_ops(self, stage, stage_ops)

    def __repr__(self):
        return (
            f"Schedule(name={self.name!r}, stages={self.stages}, "
            f"microbatches={self.microbatches}, virtual={self.virtual})"
        )

    def __str__(self):
        return self.table()

    @property
    def split_backward(self):
        """True if the backward is split into ``B`` and ``W`` passes."""
        return any(op.kind in ("B", "W") for stage_ops in self.ops for op in stage_ops)

    def table(self):
        """The schedule as text: one row per stage, one cell per slot in execution order.

        Cells are ``F<mb>`` forward, ``B<mb>`` backward (the full backward, or its input-gradient
        half when the schedule also has ``W<mb>`` cells). Interleaved schedules add the chunk:
        ``F3.1`` is micro-batch 3 through chunk 1. Columns are positions in each stage's order,
        not times: stage 3's fifth pass need not run at the same time as stage 0's fifth.

        Examples
        --------
        >>> from collsim.parallel.pipeline.schedules import interleaved
        >>> print(interleaved(p=2, m=2, v=2).table())
        stage 0 | F0.0 F1.0 F0.1 F1.1 B0.1 B1.1 B0.0 B1.0
        stage 1 | F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 B0.0 B1.0
        """
        show_chunk = self.virtual > 1
        cells = [[op.label(show_chunk) for op in stage_ops] for stage_ops in self.ops]
        width = max((len(cell) for row in cells for cell in row), default=0)
        heads = [f"stage {s}" for s in range(self.stages)]
        head_width = max(len(h) for h in heads)
        rows = (
            f"{head.ljust(head_width)} | {' '.join(c.ljust(width) for c in row)}".rstrip()
            for head, row in zip(heads, cells)
        )
        return "\n".join(rows)

    def dependencies(self, stage, op):
        """The passes, as ``(stage, PipeOp)``, that must finish before ``op`` may start.

        Activations flow forward through the virtual stages 0, 1, ..., p*v-1 and gradients flow
        back. ``F`` at virtual stage k needs ``F`` of the same micro-batch at k-1; ``B`` (or
        ``BW``) at k needs ``B`` (or ``BW``) at k+1 and its own ``F``; ``W`` needs its own ``B``.
        The order of passes on one stage is a further constraint, given by ``ops`` itself.

        Examples
        --------
        >>> from collsim.parallel.pipeline.schedules import PipeOp, interleaved
        >>> sched = interleaved(p=2, m=2, v=2)
        >>> sched.dependencies(0, PipeOp("F", 1, chunk=1))  # virtual stage 2 <- virtual stage 1
        [(1, PipeOp(kind='F', microbatch=1, chunk=0))]
        >>> sched.dependencies(0, PipeOp("F", 1, chunk=0))  # virtual stage 0: the data loader
        []
        """
        p, v = self.stages, self.virtual
        if not (0 <= stage < p and op.microbatch < self.microbatches and op.chunk < v):
            raise ConfigError(
                f"({stage}, {op}) is outside schedule {self.name!r}: stages are 0..{p - 1}, "
                f"micro-batches 0..{self.microbatches - 1}, chunks 0..{v - 1}"
            )
        virtual_stage = op.chunk * p + stage
        mb = op.microbatch
        if op.kind == "F":
            if virtual_stage == 0:
                return []
            prev = virtual_stage - 1
            return [(prev % p, PipeOp("F", mb, prev // p))]
        if op.kind == "W":
            return [(stage, PipeOp("B", mb, op.chunk))]
        needs = []
        if virtual_stage < p * v - 1:  # the last virtual stage starts from the loss
            nxt = virtual_stage + 1
            needs.append((nxt % p, PipeOp(op.kind, mb, nxt // p)))
        needs.append((stage, PipeOp("F", mb, op.chunk)))
        return needs

    def counts(self, stage=None):
        """Number of passes of each kind, over all stages or on one ``stage``.

        Examples
        --------
        >>> from collsim.parallel.pipeline.schedules import zb_h1
        >>> zb_h1(p=4, m=8).counts(stage=0)
        {'F': 8, 'B': 8, 'W': 8, 'BW': 0}
        """
        rows = self.ops if stage is None else (self.ops[stage],)
        counts = dict.fromkeys(KINDS, 0)
        for stage_ops in rows:
            for op in stage_ops:
                counts[op.kind] += 1
        return counts

    def peak_inflight(self):
        """Per stage, the most (micro-batch, chunk) activations held at once.

        An activation is held from its ``F`` until its backward is complete: the ``BW``, or the
        ``W`` for split schedules (``W`` still reads the stored layer inputs). Counted from the
        op order alone; times do not matter. For interleaved schedules one unit is one chunk's
        activations, 1/v of a whole stage's.

        Examples
        --------
        >>> from collsim.parallel.pipeline.schedules import gpipe, one_f_one_b
        >>> gpipe(p=4, m=8).peak_inflight(), one_f_one_b(p=4, m=8).peak_inflight()
        ((8, 8, 8, 8), (4, 3, 2, 1))
        """
        peaks = []
        for stage_ops in self.ops:
            held = peak = 0
            for op in stage_ops:
                if op.kind == "F":
                    held += 1
                    peak = max(peak, held)
                elif op.kind in ("BW", "W"):
                    held -= 1
            peaks.append(peak)
        return tuple(peaks)

    def formula_peak_inflight(self):
        """Closed-form `peak_inflight` from the papers, to check the op order against.

        gpipe ``m``; 1f1b ``min(p - s, m)``; interleaved ``min(2(p-s-1) + (v-1)p + 1, m v)``
        (warmup + 1; on stage 0 that is ``p v + p - 1`` chunks, i.e. ``p (1 + (p-1)/(p v))``
        stages' worth, Korthikanti et al. 2022); zb-h1 ``p`` on every stage (W is deferred just
        enough that all stages hold as many as 1F1B's stage 0, Qi et al. 2024).

        Examples
        --------
        >>> from collsim.parallel.pipeline.schedules import interleaved
        >>> interleaved(p=4, m=8, v=2).formula_peak_inflight()
        (11, 9, 7, 5)
        """
        return formulas.peak_inflight(self.name, self.stages, self.microbatches, self.virtual)

    def formula_bubble_time(self, t_f=1.0, t_b=1.0, t_w=1.0):
        """Closed-form idle time of each stage, with zero communication time.

        ``t_f``, ``t_b``, ``t_w`` are one micro-batch's forward, input-gradient and
        weight-gradient times on one whole stage (all its chunks); a full backward takes
        ``t_b + t_w``. gpipe and 1f1b idle ``(p-1)(t_f+t_b+t_w)``; interleaved ``1/v`` of that;
        zb-h1 ``(p-1)(t_f+t_b-t_w)``, which holds only when ``t_w <= min(t_f, t_b)``.

        Examples
        --------
        >>> from collsim.parallel.pipeline.schedules import zb_h1
        >>> zb_h1(p=4, m=8).formula_bubble_time(t_f=1.0, t_b=1.0, t_w=1.0)
        3.0
        """
        return formulas.bubble_time(
            self.name, self.stages, self.microbatches, self.virtual, t_f, t_b, t_w
        )

    def formula_bubble_fraction(self, t_f=1.0, t_b=1.0, t_w=1.0):
        """Closed-form share of a stage's time spent idle: ``bubble / (bubble + m (t_f+t_b+t_w))``.

        For gpipe and 1f1b this is ``(p-1)/(m+p-1)`` whatever the times.

        Examples
        --------
        >>> from collsim.parallel.pipeline.schedules import one_f_one_b
        >>> one_f_one_b(p=4, m=8).formula_bubble_fraction()  # 3/11
        0.2727...
        """
        return formulas.bubble_fraction(
            self.name, self.stages, self.microbatches, self.virtual, t_f, t_b, t_w
        )
