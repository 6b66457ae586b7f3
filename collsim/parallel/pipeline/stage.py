"""One pipeline stage as a rank program: the passes of a `Schedule` run for real, in order.

The executor (:mod:`collsim.parallel.pipeline`) builds one `StageJob` per rank and runs
:func:`stage_program` on the cluster. For every pass the stage

1. waits for its input: the micro-batch from the data loader (virtual stage 0), the activation
   from the previous virtual stage, or the gradient from the next one;
2. runs the real numpy forward / backward of its layers (a `Sequential` slice);
3. occupies its compute stream for the pass's simulated time (``rank.compute``), the span
   carrying a `~collsim.parallel.pipeline.schedules.PipelinePass` record of which pass it is;
4. posts the output to its neighbour with ``isend`` and moves on without waiting for it.

Every receive a stage will ever need is posted with ``irecv`` before its first pass. Sends are
rendezvous (a transfer starts when both sides have posted), so posting receives early means a
transfer starts the moment its sender has the data; a stage never waits for a neighbour that
is busy computing, only for data that does not exist yet. With free links a pass therefore
starts exactly when its stage is free and its inputs are done, which is what the closed-form
bubble assumes. (Real runtimes keep one or two receive buffers per neighbour; collsim keeps
unbounded ones so that the trace shows the schedule, not a buffer policy. Received activations
waiting for their pass are not counted as held activations.)

A chunk's ``forward`` / ``backward_input`` / ``backward_weight`` may also be generators that
``yield`` rank operations (tensor-parallel layers with their collectives inside); they are
then run with ``yield from``.
"""

import inspect
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from ...nn import ctx_nbytes
from .schedules import PipelinePass

__all__ = [
    "StageJob",
    "StageOutcome",
    "PipelineMessage",
    "stage_program",
    "activation_tag",
    "gradient_tag",
]


class PipelineMessage(NamedTuple):
    """The tag of a pipeline transfer: what it carries, for which micro-batch, to where.

    A typed record that matches a send with its receive (hashable, equal field by field);
    read its fields, not its positions. ``kind`` is ``"act"`` (an activation, forward) or
    ``"grad"`` (a gradient, backward).

    >>> activation_tag(3, 2)
    PipelineMessage(kind='act', microbatch=3, virtual_stage=2)
    """

    kind: str  # "act" or "grad"
    microbatch: int
    virtual_stage: int  # the virtual stage it enters: chunk * p + stage

    @property
    def what(self):
        """``"activation"`` or ``"gradient"``, for display."""
        return "activation" if self.kind == "act" else "gradient"

    def to_args(self):
        """The fields as a JSON-ready dict, for the Chrome/Perfetto export's ``args``."""
        return self._asdict()


def activation_tag(microbatch, virtual_stage):
    """Tag of the activation that enters ``virtual_stage`` for ``microbatch``."""
    return PipelineMessage("act", microbatch, virtual_stage)


def gradient_tag(microbatch, virtual_stage):
    """Tag of the gradient that enters ``virtual_stage`` (from above) for ``microbatch``."""
    return PipelineMessage("grad", microbatch, virtual_stage)


@dataclass
class StageJob:
    """Everything one stage needs: its passes, its layers, its data and its neighbours.

    ``pp_ranks[s]`` is the global rank running stage ``s`` of this pipeline (in a 3-D mesh,
    the ranks that share this rank's dp and tp coordinates). ``chunks[c]`` is this stage's
    model chunk ``c``. ``inputs`` are the micro-batches (used by virtual stage 0), ``targets``
    (used by the last virtual stage). ``seconds[kind][c]`` is the simulated time of one pass.
    ``loss(pred, target) -> (loss, dpred)`` is a mean-reduced loss; the stage scales it by
    ``1 / m`` so that the accumulated gradient is the one of the mean over the whole batch.
    ``scatter`` and ``gather`` (both or neither) let the ranks of a tensor-parallel group
    each send a share of an activation and reassemble it on arrival (Megatron's
    scatter-gather of pipeline messages); by default the whole array is sent.
    """

    schedule: object
    stage: int
    pp_ranks: tuple
    chunks: tuple
    inputs: list
    targets: list
    seconds: dict
    loss: object
    show_chunk: bool = False
    scatter: object = None  # array -> the part this rank sends (TP: its 1/tp share)
    gather: object = None  # generator (rank, part) -> the whole array (TP: all-gather)


@dataclass
class StageOutcome:
    """What a stage returns: its accumulated gradients and what it held."""

    grads: dict  # parameter name -> gradient summed over micro-batches
    loss: float  # this stage's share of the batch loss (non-zero on the last stage only)
    peak_inflight: int  # most (micro-batch, chunk) activations held at once
    peak_activation_bytes: int  # most bytes of activations (ctx) held at once
    inflight: list = field(default_factory=list)  # (time, count, bytes) after every pass


def _run(value):
    """``yield from`` a generator (a layer that communicates); pass a plain value through."""
    if inspect.isgenerator(value):
        return (yield from value)
    return value


def _post_receives(rank, job):
    """Post every receive this stage will need; return {(kind, mb, chunk): handle}."""
    sched, stage = job.schedule, job.stage
    p, last = sched.stages, sched.stages * sched.virtual - 1
    inbox = {}
    for op in sched.ops[stage]:
        here = op.chunk * p + stage  # virtual stage
        key = (op.kind, op.microbatch, op.chunk)
        if op.kind == "F" and here > 0:
            src = job.pp_ranks[(here - 1) % p]
            inbox[key] = yield rank.irecv(src, tag=activation_tag(op.microbatch, here))
        elif op.kind in ("B", "BW") and here < last:
            src = job.pp_ranks[(here + 1) % p]
            inbox[key] = yield rank.irecv(src, tag=gradient_tag(op.microbatch, here))
    return inbox


def stage_program(rank, job):
    """Run ``job``'s passes on ``rank``; return a `StageOutcome` (use with ``yield from``)."""
    sched, stage = job.schedule, job.stage
    p, m = sched.stages, sched.microbatches
    last = p * sched.virtual - 1
    inbox = yield from _post_receives(rank, job)
    held = {}  # (mb, chunk) -> ctx: the activations this stage holds
    loss_grads = {}  # mb -> d loss / d output, on the last virtual stage
    pending_w = {}  # (mb, chunk) -> the dy its B used, for its W (the stash key)
    grads, sends, inflight = {}, [], []
    loss = 0.0
    for op in sched.ops[stage]:
        mb, chunk = op.microbatch, op.chunk
        here = chunk * p + stage
        module = job.chunks[chunk]
        key = (op.kind, mb, chunk)
        out = None  # (destination stage, array, tag) to send after the pass
        if op.kind == "F":
            x = job.inputs[mb] if here == 0 else (yield from _receive(rank, job, inbox, key))
            y, ctx = yield from _run(module.forward(x))  # (B, S, H)
            held[(mb, chunk)] = ctx
            if here == last:
                mb_loss, dy = job.loss(y, job.targets[mb])
                loss += float(mb_loss) / m
                loss_grads[mb] = dy / m  # mean over the whole batch, not this micro-batch
            else:
                out = ((here + 1) % p, y, activation_tag(mb, here + 1))
        elif op.kind in ("B", "BW"):
            dy = (
                loss_grads.pop(mb) if here == last else (yield from _receive(rank, job, inbox, key))
            )
            ctx = held[(mb, chunk)]
            dx = yield from _run(module.backward_input(ctx, dy))
            if op.kind == "BW":
                _accumulate(grads, (yield from _run(module.backward_weight(ctx, dy))))
                del held[(mb, chunk)]
            else:
                pending_w[(mb, chunk)] = dy  # W must see this very object to use B's stash
            if here > 0:
                out = ((here - 1) % p, dx, gradient_tag(mb, here - 1))
        else:  # W
            ctx = held.pop((mb, chunk))
            dy = pending_w.pop((mb, chunk))
            _accumulate(grads, (yield from _run(module.backward_weight(ctx, dy))))
        label = op.label(job.show_chunk)  # for display; the record says which pass it is
        record = PipelinePass.of(op, stage)
        yield rank.compute(seconds=job.seconds[op.kind][chunk], label=label, meta=record)
        if out is not None:  # the data exists once the pass is done: send it now
            dst_stage, array, tag = out
            array = array if job.scatter is None else job.scatter(array)
            what = f"{tag.what} {label}"
            sends.append((yield rank.isend(job.pp_ranks[dst_stage], array, tag, label=what)))
        inflight.append((rank.now, len(held), _held_bytes(held)))
    if sends:
        yield rank.wait(*sends)
    return StageOutcome(
        grads=grads,
        loss=loss,
        peak_inflight=max((n for _, n, _ in inflight), default=0),
        peak_activation_bytes=max((b for _, _, b in inflight), default=0),
        inflight=inflight,
    )


def _receive(rank, job, inbox, key):
    """Wait for the input of pass ``key`` (posted at the start); reassemble it if shared."""
    part = yield rank.wait(inbox.pop(key))
    if job.gather is None:
        return part
    return (yield from job.gather(rank, part))


def _accumulate(total, grads):
    """Add a micro-batch's gradients into the running sums (gradient accumulation)."""
    for name, grad in grads.items():
        if name in total:
            total[name] = total[name] + grad
        else:
            total[name] = np.array(grad, copy=True)


def _held_bytes(held):
    return sum(ctx_nbytes(ctx) for ctx in held.values())
