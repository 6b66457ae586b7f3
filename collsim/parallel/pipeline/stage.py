"""One pipeline stage as a rank program: the passes of a `Schedule` run for real, in order.

The mesh trainer (:func:`collsim.parallel.mesh.train`) builds one `StageJob` per rank and
runs :func:`stage_program` on the cluster. For every pass the stage

1. waits for its input: the micro-batch from the data loader (virtual stage 0), the activation
   from the previous virtual stage, or the gradient from the next one -- which messages a pass
   waits for and sends is read from the schedule's ``dependencies()``
   (:func:`pipeline_messages`), not worked out again here;
2. runs the real numpy forward / backward of its layers (a
   :class:`~collsim.parallel.pipeline.chunk.ModelChunk` of rank modules: their FLOPs and
   tensor-parallel collectives run on the way);
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

A chunk's last weight-gradient pass of the step is marked ``final``: the chunk then hands each
summed gradient to the data-parallel buckets as soon as it is done (DDP's hook), so with
``pp = 1`` this program is plain gradient accumulation with an overlapped all-reduce.
"""

from dataclasses import dataclass, field
from typing import NamedTuple

from ...nn import ctx_nbytes
from .schedules import PipelinePass

__all__ = [
    "StageJob",
    "StageOutcome",
    "PipelineMessage",
    "PassMessages",
    "stage_program",
    "pipeline_messages",
    "chunk_seconds",
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


class PassMessages(NamedTuple):
    """The messages of one pass: ``receives`` it waits for, ``sends`` it makes when done."""

    receives: list  # [(source stage, PipelineMessage), ...]
    sends: list  # [(destination stage, PipelineMessage), ...]


def activation_tag(microbatch, virtual_stage):
    """Tag of the activation that enters ``virtual_stage`` for ``microbatch``."""
    return PipelineMessage("act", microbatch, virtual_stage)


def gradient_tag(microbatch, virtual_stage):
    """Tag of the gradient that enters ``virtual_stage`` (from above) for ``microbatch``."""
    return PipelineMessage("grad", microbatch, virtual_stage)


@dataclass
class StageJob:
    """Everything one stage needs: its passes, its layers, its data and its neighbours.

    ``pp_ranks[s]`` is the global rank running stage ``s`` of this pipeline (in a mesh, the
    ranks that share this rank's other coordinates). ``chunks[c]`` is this stage's model
    chunk ``c``, a :class:`~collsim.parallel.pipeline.chunk.ModelChunk`. ``inputs`` are the
    micro-batches (used by virtual stage 0), ``targets`` (used by the last virtual stage).
    ``seconds[kind][c]`` is the simulated time of one pass. ``messages`` is
    :func:`pipeline_messages` of the schedule (who sends what to whom). ``loss(pred, target)
    -> (loss, dpred)`` is a mean-reduced loss; the stage scales its gradient by
    ``loss_scale / m`` so that the accumulated gradient is the one of the mean over the whole
    batch. ``scatter`` and ``gather`` (both or neither) let the ranks of a tensor-parallel
    group each send a share of an activation and reassemble it on arrival (Megatron's
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
    messages: dict
    show_chunk: bool = False
    loss_scale: float = 1.0  # besides 1/m: 1/tp when the output is split over a TP group
    keep_io: bool = False  # keep every micro-batch's output and input gradient (for checks)
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
    outputs: dict = field(default_factory=dict)  # mb -> model output (last stage, keep_io)
    input_grads: dict = field(default_factory=dict)  # mb -> d loss / d input (keep_io)


def pipeline_messages(schedule):
    """Who sends what to whom, read from the schedule's own :meth:`~Schedule.dependencies`.

    Returns ``{(stage, PipeOp): PassMessages}``: the messages a pass waits for
    (``receives``: ``[(src stage, tag), ...]``) and the ones it sends when done (``sends``).
    A dependency on a pass of another virtual stage is a message (an activation forward, a
    gradient backward); one on the same virtual stage (a micro-batch's own ``F`` before its
    ``B``) is local order.

    >>> from collsim.parallel.pipeline.schedules import PipeOp, one_f_one_b
    >>> links = pipeline_messages(one_f_one_b(2, 1))
    >>> links[(1, PipeOp("F", 0))]
    PassMessages(receives=[(0, PipelineMessage(kind='act', microbatch=0, virtual_stage=1))], \
sends=[])
    >>> links[(1, PipeOp("BW", 0))].sends
    [(0, PipelineMessage(kind='grad', microbatch=0, virtual_stage=0))]
    """
    p = schedule.stages
    links = {(s, op): PassMessages([], []) for s, ops in enumerate(schedule.ops) for op in ops}
    for (stage, op), (receives, _) in links.items():
        here = op.chunk * p + stage
        for src_stage, dep in schedule.dependencies(stage, op):
            there = dep.chunk * p + src_stage
            if there == here:
                continue  # same virtual stage: local order, no message
            make = activation_tag if op.kind == "F" else gradient_tag
            tag = make(op.microbatch, here)
            receives.append((src_stage, tag))
            links[(src_stage, dep)].sends.append((stage, tag))
    return links


def _post_receives(rank, job):
    """Post every receive this stage will need; return {(PipeOp, tag): handle}."""
    inbox = {}
    for op in job.schedule.ops[job.stage]:
        for src_stage, tag in job.messages[(job.stage, op)].receives:
            inbox[(op, tag)] = yield rank.irecv(job.pp_ranks[src_stage], tag=tag)
    return inbox


def _final_weight_passes(stage_ops):
    """Per chunk, the position of its last weight-gradient pass (``W`` or ``BW``): after it
    that chunk's gradients are final for the step."""
    last = {}
    for i, op in enumerate(stage_ops):
        if op.kind in ("W", "BW"):
            last[op.chunk] = i
    return last


def stage_program(rank, job):
    """Run ``job``'s passes on ``rank``; return a `StageOutcome` (use with ``yield from``)."""
    sched, stage = job.schedule, job.stage
    p, m = sched.stages, sched.microbatches
    last = p * sched.virtual - 1
    stage_ops = sched.ops[stage]
    final_at = _final_weight_passes(stage_ops)
    inbox = yield from _post_receives(rank, job)
    held = {}  # (mb, chunk) -> ctx: the activations this stage holds
    loss_grads = {}  # mb -> d loss / d output, on the last virtual stage
    sends, inflight = [], []
    loss = 0.0
    outputs, input_grads = {}, {}
    for i, op in enumerate(stage_ops):
        mb, chunk = op.microbatch, op.chunk
        here = chunk * p + stage
        module = job.chunks[chunk]
        final = final_at.get(chunk) == i
        receives, out_messages = job.messages[(stage, op)]
        result = None  # the array this pass sends on
        if op.kind == "F":
            if here == 0:
                x = job.inputs[mb]
            else:
                x = yield from _receive(rank, job, inbox, op, receives)
            y, ctx = yield from module.forward(x)  # (B, S, H)
            held[(mb, chunk)] = ctx
            if here == last:
                mb_loss, dy = job.loss(y, job.targets[mb])
                loss += float(mb_loss) / m
                loss_grads[mb] = dy * (job.loss_scale / m)  # the mean over the whole batch
                if job.keep_io:
                    outputs[mb] = y
            result = y
        elif op.kind in ("B", "BW"):
            if here == last:
                dy = loss_grads.pop(mb)
            else:
                dy = yield from _receive(rank, job, inbox, op, receives)
            ctx = held[(mb, chunk)]
            if op.kind == "BW":
                dx = yield from module.backward(ctx, dy, final=final)
                del held[(mb, chunk)]
            else:
                dx = yield from module.backward_input(ctx, dy)  # ctx keeps what W needs
            if here == 0 and job.keep_io:
                input_grads[mb] = dx
            result = dx
        else:  # W
            yield from module.backward_weight(held.pop((mb, chunk)), final=final)
        label = op.label(job.show_chunk)  # for display; the record says which pass it is
        record = PipelinePass.of(op, stage)
        yield rank.compute(seconds=job.seconds[op.kind][chunk], label=label, meta=record)
        for dst_stage, tag in out_messages:  # the data exists once the pass is done
            array = result if job.scatter is None else job.scatter(result)
            what = f"{tag.what} {label}"
            sends.append((yield rank.isend(job.pp_ranks[dst_stage], array, tag, label=what)))
        inflight.append((rank.now, len(held), _held_bytes(held)))
    if sends:
        yield rank.wait(*sends)
    grads = {}
    for module in job.chunks:
        grads.update(module.grads)
    return StageOutcome(
        grads=grads,
        loss=loss,
        peak_inflight=max((n for _, n, _ in inflight), default=0),
        peak_activation_bytes=max((b for _, _, b in inflight), default=0),
        inflight=inflight,
        outputs=outputs,
        input_grads=input_grads,
    )


def _receive(rank, job, inbox, op, receives):
    """Wait for the input of pass ``op`` (posted at the start); reassemble it if shared."""
    ((_, tag),) = receives  # a pass waits for exactly one message
    part = yield rank.wait(inbox.pop((op, tag)))
    if job.gather is None:
        return part
    return (yield from job.gather(rank, part))


def _held_bytes(held):
    return sum(ctx_nbytes(ctx) for ctx in held.values())


def chunk_seconds(layout, n_layers, t_f, t_b, t_w):
    """``seconds[stage][kind][chunk]``: each pass's time, scaled by the chunk's layer share.

    A chunk holding the even share ``n_layers / (p v)`` of the layers takes exactly ``t / v``.

    >>> chunk_seconds([[range(0, 1)], [range(1, 3)]], 3, 3.0, 3.0, 0.0)[1]["BW"]
    [4.0]
    """
    p, v = len(layout), len(layout[0])
    per_stage = {"F": t_f, "B": t_b, "W": t_w, "BW": t_b + t_w}
    seconds = []
    for chunks in layout:
        share = [len(r) * p * v / n_layers for r in chunks]  # 1.0 for an even split
        seconds.append({k: [t / v * s for s in share] for k, t in per_stage.items()})
    return seconds
