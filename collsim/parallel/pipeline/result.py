"""What a pipeline step measured: the bubble, the in-flight activations and the check.

Everything time-related here is read from the run's trace (DESIGN.md, principle 1); the
closed forms of the `Schedule` sit next to it as the second oracle, never in its place.

How the bubble is measured
--------------------------
The *step* is the window from the first pass that starts on any stage to the last pass that
ends on any stage (the span of the trace's compute records). A stage's *idle time* is the part
of that window in which it does not compute: ``step - busy``. Idle time at the start (waiting
for the first activation), in the middle and at the end all count, on every stage alike.
``bubble_time`` is the idle time averaged over stages and ``bubble_fraction`` is
``bubble_time / step``. Every stage runs the same ``m (t_f + t_b + t_w)`` of work, so with free
links ``step = bubble_time + m (t_f + t_b + t_w)``, exactly the denominator the closed form
``bubble / (bubble + m (t_f + t_b + t_w))`` uses.
"""

from dataclasses import dataclass

from .schedules import PipelinePass, PipeOp
from .stage import PipelineMessage

__all__ = ["OpSpan", "PipelineResult", "op_spans", "measure_pipeline"]


@dataclass(frozen=True)
class OpSpan:
    """One pass as it ran: ``stage`` (pipeline stage), ``op``, ``start`` and ``end`` seconds."""

    stage: int
    op: PipeOp
    start: float
    end: float
    rank: int

    @property
    def label(self):
        """The pass's display label (``F3``); read its meaning from ``op`` or ``record``."""
        return self.op.label()

    @property
    def record(self):
        """The `PipelinePass` of this span: kind, micro-batch, chunk and stage."""
        return PipelinePass.of(self.op, self.stage)


def op_spans(schedule, trace, stage_ranks):
    """The passes of ``schedule`` found in ``trace``, as `OpSpan` sorted by stage then start.

    ``stage_ranks[s]`` is the global rank that ran stage ``s``. A pass is recognised by the
    `PipelinePass` record its compute span carries (``meta``), never by its label; spans of
    other ranks, and spans without a record (a layer's own compute inside a pass), are left
    out. A trace built by hand gives its spans records the same way:
    ``trace.add_compute(rank, start, end, label, PipelinePass.of(op, stage))``.
    """
    rank_stage = {rank: s for s, rank in enumerate(stage_ranks)}
    records = [c for c in trace.computes if isinstance(c.meta, PipelinePass)]
    spans = [
        OpSpan(c.meta.stage, c.meta.op, c.start, c.end, c.rank)
        for c in records
        if rank_stage.get(c.rank) == c.meta.stage
    ]
    spans.sort(key=lambda s: (s.stage, s.start))
    return spans


@dataclass
class PipelineResult:
    """One pipeline training step: trace, timing, memory, gradients and the check.

    Attributes
    ----------
    schedule : Schedule
        What ran (``schedule.table()`` prints it).
    times : dict
        ``{"t_f", "t_b", "t_w"}`` seconds of one micro-batch's pass on a whole stage.
    run : RunResult
        The cluster run: ``run.trace`` (compute spans and transfers), ``run.stats``.
    spans : list of OpSpan
        Every pass with its start and end, read from the trace.
    step_start, step_end : float
        First pass start and last pass end over all stages, seconds.
    busy_time, idle_time : tuple of float
        Per stage, seconds computing and seconds idle inside the step.
    peak_inflight : tuple of int
        Per stage, the most (micro-batch, chunk) activations the stage actually held.
    peak_activation_bytes : tuple of int
        Per stage, the most bytes of held activations (every ``ctx`` array, once).
    inflight : tuple of list
        Per stage, ``(time, held count, held bytes)`` after each pass, for memory pictures.
    stage_ranks : tuple of int
        ``stage_ranks[s]`` is the rank that ran stage ``s``.
    loss : float
        Mean loss over the whole batch.
    grads : dict
        Parameter name -> gradient accumulated over the micro-batches (all stages together).
    match : bool or None
        Gradients (and parameters after the optimizer step) equal one device's; None if not
        checked. ``max_error`` is the largest absolute difference found.
    """

    schedule: object
    times: dict
    run: object
    spans: list
    step_start: float
    step_end: float
    busy_time: tuple
    idle_time: tuple
    peak_inflight: tuple
    peak_activation_bytes: tuple
    inflight: tuple
    loss: float
    grads: dict
    stage_ranks: tuple = ()
    match: object = None
    max_error: float = float("nan")

    @property
    def trace(self):
        """The run's :class:`~collsim.network.trace.Trace`."""
        return self.run.trace

    @property
    def step_time(self):
        """Seconds from the first pass's start to the last pass's end."""
        return self.step_end - self.step_start

    @property
    def bubble_time(self):
        """Idle seconds inside the step, averaged over stages (measured from the trace)."""
        return sum(self.idle_time) / len(self.idle_time)

    @property
    def bubble_fraction(self):
        """``bubble_time / step_time``: the share of the step a stage spends idle."""
        return self.bubble_time / self.step_time if self.step_time > 0 else 0.0

    def formula_bubble_time(self):
        """The schedule's closed form for these times, or None where there is none."""
        try:
            return self.schedule.formula_bubble_time(**self.times)
        except ValueError:  # a hand-built schedule, or zb-h1 with t_w > min(t_f, t_b)
            return None

    def formula_bubble_fraction(self):
        """The closed-form bubble fraction, or None where there is none."""
        try:
            return self.schedule.formula_bubble_fraction(**self.times)
        except ValueError:
            return None

    def formula_peak_inflight(self):
        """The papers' peak in-flight counts per stage, or None for a hand-built schedule."""
        try:
            return self.schedule.formula_peak_inflight()
        except ValueError:
            return None

    def stage_spans(self, stage):
        """The passes of one stage, in the order they ran."""
        return [span for span in self.spans if span.stage == stage]

    def boundary_transfers(self):
        """Pipeline transfers as ``{(src stage, dst stage): [Transfer, ...]}``, from the trace."""
        rank_stage = {rank: stage for stage, rank in enumerate(self.stage_ranks)}
        found = {}
        for t in self.trace.transfers:
            if isinstance(t.tag, PipelineMessage):
                key = (rank_stage.get(t.src), rank_stage.get(t.dst))
                found.setdefault(key, []).append(t)
        return found

    def to_dict(self):
        """The figures as plain JSON-ready data (the keys of ``collsim pipeline --json``)."""
        sched = self.schedule
        return {
            "schedule": sched.name,
            "stages": sched.stages,
            "microbatches": sched.microbatches,
            "virtual": sched.virtual,
            "t_forward_s": self.times["t_f"],
            "t_backward_s": self.times["t_b"],
            "t_weight_s": self.times["t_w"],
            "step_time_s": self.step_time,
            "busy_time_s": list(self.busy_time),
            "idle_time_s": list(self.idle_time),
            "bubble_time_s": self.bubble_time,
            "bubble_fraction": self.bubble_fraction,
            "formula_bubble_time_s": self.formula_bubble_time(),
            "formula_bubble_fraction": self.formula_bubble_fraction(),
            "peak_inflight_microbatches": list(self.peak_inflight),
            "formula_peak_inflight_microbatches": _list_or_none(self.formula_peak_inflight()),
            "peak_activation_bytes": list(self.peak_activation_bytes),
            "bytes_sent": sum(self.run.stats.bytes_sent),
            "loss": self.loss,
            "match": self.match,
            "max_error": self.max_error,
        }


def _list_or_none(value):
    return None if value is None else list(value)


def measure_pipeline(schedule, times, run, outcomes, stage_ranks, grads):
    """A `PipelineResult` read from ``run``'s trace: the passes of the stages on ``stage_ranks``
    (their `PipelinePass` spans), and what each stage's `StageOutcome` held."""
    spans = op_spans(schedule, run.trace, stage_ranks)
    step_start = min((s.start for s in spans), default=0.0)
    step_end = max((s.end for s in spans), default=0.0)
    busy = [0.0] * schedule.stages
    for span in spans:
        busy[span.stage] += span.end - span.start
    return PipelineResult(
        schedule=schedule,
        times=times,
        run=run,
        spans=spans,
        step_start=step_start,
        step_end=step_end,
        busy_time=tuple(busy),
        idle_time=tuple((step_end - step_start) - b for b in busy),
        peak_inflight=tuple(o.peak_inflight for o in outcomes),
        peak_activation_bytes=tuple(o.peak_activation_bytes for o in outcomes),
        inflight=tuple(o.inflight for o in outcomes),
        loss=sum(o.loss for o in outcomes),
        grads=grads,
        stage_ranks=stage_ranks,
    )
