"""Train a parallel scheme on the virtual cluster and on one device, side by side.

:func:`verify` builds a small model and data from a seed (:mod:`.problems`), trains it for a
few SGD steps (Adam for zero, fsdp and hsdp) twice -- once with plain numpy on "one device"
(the oracle, :func:`single_device`) and once with the scheme on the cluster -- and compares,
after every
step, the outputs, the gradient of the input, every parameter gradient and every parameter
(:mod:`.compare`).  It also checks that data-parallel replicas stay identical, and sets the
bytes each rank sent next to the closed forms (:mod:`.expected`).  ``collsim verify`` prints
its :class:`~collsim.verify.VerifyReport`.

What to run is one :class:`~collsim.verify.config.VerifyConfig`, checked once; the parallel
layout in it travels as one :class:`~collsim.parallel.config.ParallelConfig`, handed to the
trainer in :func:`~collsim.verify.training.train_on_cluster`, its only call.

Examples
--------
>>> report = verify("tp-mlp", tp=2, batch=4, hidden=8, seq=4, steps=2)
>>> report.match, report.max_abs_diff < 1e-12
(True, True)

Each step all-reduces a (4, 4, 8) float64 activation twice (g forward, f backward), each
time 2(t-1)/t of it per rank by the ring's closed form:

>>> from collsim.collectives.formulas import closed_form
>>> ring = closed_form("all_reduce", "ring", ranks=2, size=4 * 4 * 8 * 8, alpha=0, beta=1)
>>> report.bytes_by_group[("tp", "all_reduce")] == [2 * 2 * ring.bytes_per_rank] * 2
True
"""

import numpy as np

from ..nn import SGD, Adam
from ..parallel.data.sharded import optimizer_bytes_per_param
from .compare import compare_steps
from .config import CONTEXT_SCHEMES, verify_config
from .context import verify_context
from .expected import expected_bytes
from .moe import MOE_SCHEMES, verify_moe
from .problems import build_problem, make_batches
from .sharding import measure_sharding
from .training import report_of, single_device, train_on_cluster

__all__ = ["verify"]


def _local_params(problem, config):
    """P of one rank's shard: what the data-parallel all-reduce moves each step."""
    units = problem.make_units(config.mesh().group("tp", 0), 0)
    return sum(v.size for _, unit in units for v in unit.params.values())


def verify(config, /, **options):
    """Run ``config``'s scheme on the cluster and on one device; compare.

    ``config`` is a :class:`~collsim.verify.config.VerifyConfig`, or a scheme's name with
    the config's fields as keywords (``verify("dp", dp=4)``); its fields and defaults are
    documented there. Every rule is applied once, by ``config.resolved``, before any
    training; ``cp`` and ``nd`` run :func:`~collsim.verify.context.verify_context`.

    Defaults: dp 4 for ``dp``, ``zero`` and ``fsdp``, 2 for ``dp-tp``; tp 4 for the TP
    schemes and ``sp``, 2 for ``dp-tp``; batch 64 for ``dp`` (the batch-64, dp=4 example),
    else 4·dp; ffn hidden 4·hidden; lr 0.1 for SGD, 0.01 for Adam.  ``bucket_bytes`` is a
    whole number of bytes or a size such as ``"25MiB"``.

    The sharding schemes train with ``optimizer`` ``"adam"`` (default) or ``"sgd"``:
    ``zero`` runs ZeRO ``stage`` 1, 2 or 3 (default 1) over dp ranks; ``fsdp`` stage 3 with
    ``reshard_after_forward`` and ``prefetch`` (none, forward, backward, both); ``hsdp``
    stage 3 on ``dp_replicate`` × ``dp_shard`` ranks (default 2 × 2) on
    :func:`~collsim.topology.hierarchical` nodes of ``gpus_per_node`` GPUs (default
    ``dp_shard``: each shard group one node).

    Raises ConfigError, before any training, for a scheme it does not know, sizes that do
    not divide, or a batch that does not split (Megatron-LM's batch rule).
    """
    given = verify_config(config, options)
    resolved = given.resolved  # every refusal, before any training
    if given.scheme in CONTEXT_SCHEMES:
        return verify_context(given)
    if given.scheme in MOE_SCHEMES:
        return verify_moe(resolved)
    scheme, parallel = given.scheme, resolved.parallel
    dp, tp, ffn, steps = resolved.dp, resolved.tp, resolved.ffn_hidden, given.steps
    sp, micro = resolved.sequence_parallel, resolved.micro_batch
    accumulation = resolved.accumulation
    hidden, seq, layers = given.hidden, given.seq, given.layers
    rng = np.random.default_rng(given.seed)
    problem = build_problem(
        scheme, rng, dp=dp, tp=tp, hidden=hidden, heads=given.heads, ffn=ffn, layers=layers, sp=sp
    )
    batches = make_batches(
        scheme, rng, batch=resolved.batch, seq=seq, hidden=hidden, ffn=ffn, steps=steps
    )
    adam = resolved.optimizer == "adam"
    optimizer = Adam(lr=resolved.lr) if adam else SGD(lr=resolved.lr)
    # a diverging run (a huge lr) overflows: the report names the non-finite values instead
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        oracle = single_device(problem.model, batches, optimizer)
        run = train_on_cluster(
            problem,
            parallel,
            batches,
            optimizer,
            bandwidth=given.bandwidth,
            latency=given.latency,
            compute_rate=given.compute_rate,
            gpus_per_node=resolved.gpus_per_node,
        )
    found = compare_steps(run.steps, oracle)

    findings = None
    node_gpus = resolved.gpus_per_node or dp  # zero, fsdp: one switch, one "node"
    if resolved.sharded:
        units = problem.make_units(parallel.mesh().group("tp", 0), 0)
        findings = measure_sharding(
            run.trace,
            n_ranks=parallel.world_size,
            stage=parallel.zero,
            dp_shard=parallel.dp_shard,
            dp_replicate=parallel.dp_replicate,
            gpus_per_node=node_gpus,
            unit_params=[sum(v.size for v in unit.params.values()) for _, unit in units],
            optimizer_bytes=optimizer_bytes_per_param(optimizer),
            optimizer_name="Adam" if adam else "SGD",
            steps=steps,
            accumulation=accumulation,
            reshard_after_forward=parallel.reshard_after_forward,
            prefetch=parallel.prefetch,
        )
        # the closed forms by collective, on the dimension it ran along
        dims = {name: dim for dim, name in run.bytes_by_group}
        formula = {
            (dims.get(name, "dp"), name): value for name, value in findings.formula_bytes.items()
        }
    else:
        formula = expected_bytes(
            scheme,
            dp=dp,
            tp=tp,
            micro_batch=micro,
            accumulation=accumulation,
            steps=steps,
            seq=seq,
            hidden=hidden,
            ffn=ffn,
            layers=layers,
            local_params=_local_params(problem, parallel),
            sp=sp,
        )
    shown = {
        "dp": dp,
        "tp": tp,
        "batch": resolved.batch,
        "micro_batch": micro,
        "accumulation": accumulation,
        "hidden": hidden,
        "heads": given.heads,
        "ffn_hidden": ffn,
        "seq": seq,
        "layers": layers,
        "steps": steps,
        "seed": given.seed,
        "lr": resolved.lr,
        "sequence_parallel": sp,
        "bucket_bytes": parallel.bucket_bytes,
        "bandwidth": given.bandwidth,
        "latency": given.latency,
        "compute_rate": given.compute_rate,
    }
    if resolved.sharded:
        shown |= {
            "optimizer": "Adam" if adam else "SGD",
            "zero": parallel.zero,
            "dp_replicate": parallel.dp_replicate,
            "dp_shard": parallel.dp_shard,
            "gpus_per_node": node_gpus,
            "reshard_after_forward": parallel.reshard_after_forward,
            "prefetch": parallel.prefetch,
            "topology": "hierarchical" if resolved.gpus_per_node else "switch",
        }
    return report_of(scheme, shown, problem, found, run, formula, sharding=findings)
