"""Which pipeline pass a compute span is: the typed record the stage program attaches to it.

The stage program (:mod:`collsim.parallel.pipeline.stage`) hands a `PipelinePass` to
``rank.compute(..., meta=...)`` for every pass it runs; the trace keeps it on the compute
span (``trace.computes[i].meta``) and the Chrome/Perfetto export writes its fields in the
event's ``args``. The bubble, the per-stage spans and the timeline read these fields; the
span's label (``F3``, ``B3.1``) is for display only (DESIGN.md, principle 4).

The field names are Megatron's (``forward_step`` / ``backward_step``, the zero-bubble
schedules' input- and weight-gradient halves, ``microbatch_id``, ``model_chunk_id``, the
pipeline rank) without the ``_id`` suffixes, as on `PipeOp`.

Examples
--------
>>> from collsim.parallel.pipeline.schedules import PipeOp
>>> record = PipelinePass.of(PipeOp("B", 3, chunk=1), stage=2)
>>> record
PipelinePass(kind='backward_input', microbatch=3, chunk=1, stage=2)
>>> record.op                      # back to the schedule's pass
PipeOp(kind='B', microbatch=3, chunk=1)
>>> record.to_args()               # what the Chrome export shows
{'kind': 'backward_input', 'microbatch': 3, 'chunk': 1, 'stage': 2}
"""

import difflib
from dataclasses import asdict, dataclass

from ....errors import ConfigError
from .schedule import PipeOp

__all__ = ["PASS_KINDS", "PipelinePass"]

#: The schedule's short kinds (`PipeOp.kind`) and the names a pass record carries.
PASS_KINDS = {
    "F": "forward",
    "B": "backward_input",  # gradient w.r.t. the stage input: what the previous stage awaits
    "W": "backward_weight",  # gradient w.r.t. the weights: nobody waits for it
    "BW": "backward",  # both halves at once, for schedules that do not split the backward
}
_SHORT = {name: short for short, name in PASS_KINDS.items()}


@dataclass(frozen=True)
class PipelinePass:
    """One pass of one micro-batch through one model chunk on one pipeline stage.

    Parameters
    ----------
    kind : {"forward", "backward_input", "backward_weight", "backward"}
        What the pass computes (`PASS_KINDS` maps the schedule's ``F``/``B``/``W``/``BW``).
    microbatch : int
        Micro-batch index, ``0 <= microbatch < m``.
    chunk : int
        Model chunk on this stage, ``0 <= chunk < v`` (0 unless interleaved).
    stage : int
        Pipeline stage (the pipeline-parallel rank) that ran it, ``0 <= stage < p``.
    """

    kind: str
    microbatch: int
    chunk: int
    stage: int

    def __post_init__(self):
        if self.kind not in _SHORT:
            guess = difflib.get_close_matches(str(self.kind), list(_SHORT), n=1, cutoff=0)
            raise ConfigError(
                f"PipelinePass kind {self.kind!r} is not one of {', '.join(_SHORT)}; "
                f"nearest valid choice: {guess[0]!r}"
            )
        for name in ("microbatch", "chunk", "stage"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"PipelinePass {name} must be an integer >= 0, got {value!r}")

    @classmethod
    def of(cls, op, stage):
        """The record of schedule pass ``op`` (a `PipeOp`) run on ``stage``."""
        return cls(PASS_KINDS[op.kind], op.microbatch, op.chunk, stage)

    @property
    def op(self):
        """The schedule's `PipeOp` this pass ran."""
        return PipeOp(_SHORT[self.kind], self.microbatch, self.chunk)

    def to_args(self):
        """The fields as a JSON-ready dict, for the Chrome/Perfetto export's ``args``."""
        return asdict(self)
