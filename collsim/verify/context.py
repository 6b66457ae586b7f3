"""``collsim verify cp | nd``: context parallelism and the N-D mesh, checked against one device.

``cp`` splits every sequence over ``cp`` ranks (times ``dp`` plain replicas) and runs the
attention of each transformer block across them: ring attention (K/V blocks travel round
the ring, an online softmax folds them in) or all-to-all (DeepSpeed-Ulysses: re-shard by
heads, attend over the full sequence, re-shard back).  ``nd`` lays out Accelerate's sizes
``dp_replicate × dp_shard × cp × tp`` (plus ``pp`` stages): ZeRO-3 over the shard group
(dp_shard × cp, as Accelerate and Megatron form it) when ``dp_shard > 1``, plain data
parallelism otherwise.  Both train causal transformer blocks with Adam for a few steps, on
the cluster and on one device, and compare every step (:mod:`.compare`).

Beyond the match, :class:`ContextFindings` holds what the layouts change:

* the bytes each rank sent along cp, next to the closed form of one source --
  :func:`~collsim.parallel.context.formulas.context_parallel_bytes` (ring attention or
  all-to-all for the rank's tp share of the heads) per layer and micro-batch, times the
  rank's layers, micro-batches and steps;
* each rank's attention FLOPs over the run: the cp module's own ``attention_flops`` for
  the rank's input shape, once for every attention pass the trace shows on that rank (a
  :class:`~collsim.parallel.context.ring.RingStep` span of step 1, or a Ulysses
  ``.core`` span).  The trace's compute spans carry no FLOP count, only times, so the
  passes come from the trace and the exact counts from the module.  Ring, causal,
  contiguous: the last rank does nearly (2·cp−1)/cp times the mean (one score per pair
  the mask keeps, :func:`~collsim.parallel.context.formulas.causal_balance`); balanced:
  every rank the mean.  All-to-all's dense kernel does the same work on every rank;
* the busiest rank's memory peak, the bytes by link class, time and exposed communication.

Examples
--------
>>> report = verify_context("cp", cp=2, batch=2, hidden=8, heads=2, seq=8, layers=1, steps=1)
>>> report.match, report.context.formula_cp_bytes == report.context.cp_bytes_per_rank
(True, True)
>>> report.context.attention_flops_per_rank[0] == report.context.attention_flops_per_rank[1]
True
"""

from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError
from ..network.memory import busiest, memory_peaks
from ..nn import Adam, Sequential, TransformerBlock
from ..parallel.accounting import bytes_by_link_class
from ..parallel.context.formulas import CP_PASSES, context_parallel_bytes
from ..parallel.context.ring import RingAttention, RingStep
from ..parallel.context.ulysses import UlyssesAttention
from ..parallel.mesh_setup import oracle_model
from ..parallel.modules import LayerPass
from ..parallel.pipeline.schedules.layers import split_layers
from ..parallel.tensor.attention import ParallelAttention
from ..runtime.group import Group
from .compare import compare_steps
from .config import verify_config
from .context_checks import (
    CONTEXT_SCHEMES,
    resolve_mesh,
)
from .nd_experts import moe_blocks, moe_shown
from .problems import BYTES, Problem, make_batches
from .training import report_of, single_device, train_on_cluster

__all__ = ["CONTEXT_SCHEMES", "ContextFindings", "verify_context", "resolve_mesh"]

CP_COLLECTIVE = {"ring": "send", "all-to-all": "all_to_all"}  # how each variant moves bytes


@dataclass
class ContextFindings:
    """What ``verify cp`` and ``verify nd`` measure beyond the match."""

    mesh: dict  # Accelerate's sizes: dp_replicate, dp_shard, cp, tp, pp
    zero: int  # 3 when dp_shard > 1 (FSDP over dp_shard × cp), else 0
    variant: str
    layout: str
    causal: bool
    gpus_per_node: int
    cp_collective: str | None  # "send" (ring) or "all_to_all"; None when cp = 1
    cp_bytes_per_rank: list  # measured along cp, whole run
    formula_cp_bytes: list  # by the closed form, per rank, whole run
    formula_cp_bytes_per_layer: dict  # {"forward": B, "backward": B}, one micro-batch
    attention_flops_per_rank: list  # FLOPs, whole run
    peak: dict  # the busiest rank's MemoryPeak.to_dict()
    peak_rank: int
    peak_per_rank: list
    bytes_by_link_class: dict  # {"intra_node": B, "inter_node": B}, summed over ranks

    @property
    def flops_max_over_mean(self):
        """The busiest rank's attention FLOPs over the mean (1.0: even work)."""
        flops = self.attention_flops_per_rank
        mean = sum(flops) / len(flops)
        return max(flops) / mean if mean else 1.0

    def to_dict(self):
        """The ``--json`` keys ``cp`` and ``nd`` add."""
        return {
            "mesh": dict(self.mesh),
            "zero": self.zero,
            "cp_variant": self.variant,
            "cp_layout": self.layout,
            "causal": self.causal,
            "cp_collective": self.cp_collective,
            "cp_bytes_per_rank": list(self.cp_bytes_per_rank),
            "formula_bytes": list(self.formula_cp_bytes),
            "formula_bytes_per_layer": dict(self.formula_cp_bytes_per_layer),
            "attention_flops_per_rank": list(self.attention_flops_per_rank),
            "attention_flops_max_over_mean": self.flops_max_over_mean,
            "peak_memory": dict(self.peak),
            "peak_memory_rank": self.peak_rank,
            "peak_memory_per_rank": [dict(p) for p in self.peak_per_rank],
            "bytes_by_link_class": dict(self.bytes_by_link_class),
            "gpus_per_node": self.gpus_per_node,
        }


def _problem(rng, *, hidden, heads, ffn, layers, causal, tp, sp, experts=None):
    """The blocks, handed to the trainer whole: it cuts them itself, into cp blocks, tp
    blocks or both (a model built here for tp alone would not run context parallelism);
    with ``experts`` their MLPs are MoEs, split over ep."""
    if experts is None:
        blocks = [
            TransformerBlock.init(hidden, heads, rng, ffn, causal=causal) for _ in range(layers)
        ]
        model = Sequential(*blocks)
    else:
        model = moe_blocks(
            rng, experts, hidden=hidden, heads=heads, ffn=ffn, layers=layers, causal=causal
        )
    what = f"{layers} {'causal ' if causal else ''}transformer block(s)"
    if experts is not None:
        what += f" with MoE MLPs ({experts.router.experts} experts, top-{experts.router.top_k})"
    layout = "seq" if sp else "full"
    return Problem(model, model, layout, layout, 1, tp, what + (", tensor parallel" * (tp > 1)))


def _attention_flops(trace, config, block, rows, seq, n_ranks):
    """Each rank's attention FLOPs over the run: its cp module's ``attention_flops`` for
    its input and its tp share of the heads, once per attention pass the trace shows."""
    cp = config.cp
    if cp == 1:
        return [0.0] * n_ranks  # no cp module: each rank attends over its own samples
    mesh = config.mesh()
    counts = [{} for _ in range(n_ranks)]
    for span in trace.computes:
        meta = span.meta
        ring = isinstance(meta, RingStep) and meta.step == 1  # one ring pass: cp step spans
        core = type(meta) is LayerPass and meta.layer.endswith(".core")  # Ulysses' attention
        if ring or core:
            counts[span.rank][meta.kind] = counts[span.rank].get(meta.kind, 0) + 1
    group = Group(list(range(cp)))
    cls = RingAttention if config.cp_variant == "ring" else UlyssesAttention
    out = []
    for r in range(n_ranks):
        where = mesh.coords(r)
        heads = block.attn  # a tp rank attends for its share of the heads
        if config.tp > 1:
            heads = ParallelAttention.from_full(
                block.attn, Group(list(range(config.tp))), where["tp"]
            ).shard
        module = cls(heads, group, where["cp"], config.cp_layout)
        per_pass = module.attention_flops((rows, seq // cp, block.attn.d_model))
        out.append(float(sum(n * per_pass.get(kind, 0) for kind, n in counts[r].items())))
    return out


def _formula_cp_bytes(config, *, rows, seq, hidden, layers, steps):
    """(per rank over the run, per layer and micro-batch) by the one closed form,
    :func:`~collsim.parallel.context.formulas.context_parallel_bytes`."""
    if config.cp == 1:
        return [0] * config.world_size, {"forward": 0, "backward": 0}
    sizes = dict(
        batch=rows, seq=seq, hidden=hidden, cp=config.cp, bytes_per_element=BYTES, tp=config.tp
    )
    per_layer = {
        p: context_parallel_bytes(config.cp_variant, passes=(p,), **sizes) for p in CP_PASSES
    }
    stages = [sum(len(span) for span in spans) for spans in split_layers(layers, config.pp)]
    mesh = config.mesh()
    per_rank = [
        context_parallel_bytes(
            config.cp_variant,
            layers=stages[mesh.coords(r)["pp"]],
            microbatches=config.microbatches,
            steps=steps,
            **sizes,
        )
        for r in range(config.world_size)
    ]
    return per_rank, per_layer


def verify_context(config, /, **options):
    """Train causal transformer blocks with ``config``'s scheme (``"cp"`` or ``"nd"``) and
    on one device for ``steps`` Adam steps; a :class:`~collsim.verify.VerifyReport` whose
    ``context`` is the :class:`ContextFindings`.

    ``config`` is a :class:`~collsim.verify.config.VerifyConfig`, or the scheme's name with
    its fields as keywords.  Defaults: cp 2 (``cp``), every ``nd`` size 1; batch
    2·dp·micro-batches (pp micro-batches with a pipeline, else 1); lr 0.01.
    ``gpus_per_node`` lays the ranks on :func:`~collsim.topology.hierarchical` nodes (default:
    one switch).  Every refusal comes from ``config.resolved``, before any training.
    """
    given = verify_config(config, options)
    if given.scheme not in CONTEXT_SCHEMES:
        raise ConfigError(
            f"unknown scheme {given.scheme!r}: choose one of "
            f"{', '.join(CONTEXT_SCHEMES)} (or call verify)"
        )
    resolved = given.resolved
    config, sizes = resolved.parallel, resolved.mesh
    variant, layout, causal = resolved.variant, resolved.layout, resolved.causal
    sp = resolved.sequence_parallel
    hidden, heads, seq, layers = given.hidden, given.heads, given.seq, given.layers
    steps = given.steps
    ffn, batch, rows, m, lr = (
        resolved.ffn_hidden,
        resolved.batch,
        resolved.micro_batch,
        resolved.accumulation,
        resolved.lr,
    )
    world, dp_total = config.world_size, resolved.dp
    gpus_per_node = resolved.gpus_per_node
    nodes = world if gpus_per_node is None else gpus_per_node
    rng = np.random.default_rng(given.seed)
    problem = _problem(
        rng,
        hidden=hidden,
        heads=heads,
        ffn=ffn,
        layers=layers,
        causal=causal,
        tp=sizes["tp"],
        sp=sp,
        experts=resolved.experts,
    )
    batches = make_batches("dp", rng, batch=batch, seq=seq, hidden=hidden, ffn=ffn, steps=steps)
    optimizer = Adam(lr=lr)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        # MoE layers route each rank's micro-batch on its own, with its own capacity
        oracle = single_device(oracle_model(problem.model, config), batches, optimizer)
        run = train_on_cluster(
            problem,
            config,
            batches,
            optimizer,
            bandwidth=given.bandwidth,
            latency=given.latency,
            compute_rate=given.compute_rate,
            gpus_per_node=gpus_per_node,
        )
    found = compare_steps(run.steps, oracle)

    collective = CP_COLLECTIVE[variant] if config.cp > 1 else None
    measured = list(run.bytes_by_group.get(("cp", collective), [0] * world))
    formula, per_layer = _formula_cp_bytes(
        config, rows=rows, seq=seq, hidden=hidden, layers=layers, steps=steps
    )
    peaks = memory_peaks(run.trace, world)
    top = busiest(peaks)
    findings = ContextFindings(
        mesh=dict(sizes),
        zero=config.zero,
        variant=variant,
        layout=layout,
        causal=causal,
        gpus_per_node=nodes,
        cp_collective=collective,
        cp_bytes_per_rank=measured,
        formula_cp_bytes=formula,
        formula_cp_bytes_per_layer=per_layer,
        attention_flops_per_rank=_attention_flops(
            run.trace, config, problem.model[0], rows, seq, world
        ),
        peak=top.to_dict(),
        peak_rank=top.rank,
        peak_per_rank=[p.to_dict() for p in peaks],
        bytes_by_link_class=bytes_by_link_class(run.trace, nodes),
    )
    shown = {
        "dp": dp_total,
        "tp": sizes["tp"],
        "cp": config.cp,
        "pp": config.pp,
        "dp_replicate": sizes["dp_replicate"],
        "dp_shard": sizes["dp_shard"],
        "cp_variant": variant,
        "cp_layout": layout,
        "causal": causal,
        "batch": batch,
        "micro_batch": rows,
        "accumulation": m,
        "hidden": hidden,
        "heads": heads,
        "ffn_hidden": ffn,
        "seq": seq,
        "layers": layers,
        "steps": steps,
        "seed": given.seed,
        "lr": lr,
        "sequence_parallel": sp,
        "optimizer": "Adam",
        "mesh_zero": config.zero,
        "gpus_per_node": nodes,
        "bandwidth": given.bandwidth,
        "latency": given.latency,
        "compute_rate": given.compute_rate,
        "topology": "switch" if gpus_per_node is None else "hierarchical",
        **moe_shown(resolved.experts),
    }
    formula_by_group = {}
    if collective is not None and len(set(formula)) == 1:
        formula_by_group[("cp", collective)] = formula[0]
    return report_of(given.scheme, shown, problem, found, run, formula_by_group, context=findings)
