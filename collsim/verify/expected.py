"""The bytes each rank of a ``collsim verify`` run should send, by the closed forms.

Nothing here writes a ring factor out: every figure is a count of collective calls times
:func:`collsim.collectives.formulas.closed_form`'s bytes per rank -- the function the
simulator's own tests check -- for the ring algorithm the trainers run.  Ring all-reduce
sends 2(K-1)/K·S per rank, reduce-scatter and all-gather (K-1)/K·S each, where S is the
buffer of one call and K the ranks of its mesh dimension.

Examples
--------
>>> expected_bytes("tp-mlp", dp=1, tp=2, micro_batch=4, accumulation=1, steps=2, seq=4,
...                hidden=8, ffn=32, layers=1, local_params=528)
{('tp', 'all_reduce'): 4096.0}

Two steps, each with an all-reduce forward (g) and one backward (f) of a (4, 4, 8) float64
activation: 2 · 2 · 2(2-1)/2 · 1024 B = 4096 B.
"""

from dataclasses import dataclass

from ..collectives import formulas
from ..plan.memory import model_state_bytes
from .problems import BYTES

__all__ = [
    "expected_bytes",
    "ALGORITHM",
    "ModelStateFormula",
    "model_state_formula",
    "gathered_units",
    "sharded_bytes",
    "hsdp_inter_node_bytes",
]

ALGORITHM = "ring"  # what the gradient buckets and the tensor-parallel layers call


def _sent(collective, ranks, size):
    """Bytes one rank sends in one ``collective`` of ``size`` bytes over ``ranks`` ranks.

    The bytes do not depend on the link, so any α and β do.
    """
    cost = formulas.closed_form(collective, ALGORITHM, ranks, size, alpha=0.0, beta=1.0)
    return cost.bytes_per_rank


def expected_bytes(
    scheme,
    *,
    dp,
    tp,
    micro_batch,
    accumulation,
    steps,
    seq,
    hidden,
    ffn,
    layers,
    local_params,
    sp=False,
):
    """Bytes each rank should send over the run, by the closed forms; keys as
    :attr:`MeshRun.bytes_by_group`.  ``local_params`` is P of one rank's shard.

    The data-parallel gradient all-reduce runs once per step on the P·b bytes of a shard;
    each tensor-parallel collective once per forward or backward pass of a micro-batch, on
    an activation of N = micro_batch·seq·hidden elements (ffn wide for ``tp-column``'s
    all-gather).
    """
    out = {}
    if dp > 1:  # the gradient all-reduce, once per step
        out[("dp", "all_reduce")] = steps * _sent("all_reduce", dp, local_params * BYTES)
    if tp == 1:
        return out
    calls = steps * accumulation  # forward + backward passes of the run
    act = micro_batch * seq * hidden * BYTES  # one (B, S, H) activation
    all_reduce = _sent("all_reduce", tp, act)
    if scheme == "tp-column":  # all-gather Y forward (ffn wide), all-reduce dX backward
        wide = micro_batch * seq * ffn * BYTES  # the (B, S, ffn) output every rank ends with
        out[("tp", "all_gather")] = calls * _sent("all_gather", tp, wide)
        out[("tp", "all_reduce")] = calls * all_reduce
    elif scheme == "tp-row":
        out[("tp", "all_reduce")] = calls * all_reduce
    elif scheme in ("tp-mlp", "tp-attention"):  # f backward, g forward
        out[("tp", "all_reduce")] = calls * 2 * all_reduce
    elif sp or scheme == "sp":  # per layer 4 reduce-scatters + 4 all-gathers, and the
        # all-reduce of the 6·hidden LayerNorm and bias gradients that see local tokens
        out[("tp", "reduce_scatter")] = calls * layers * 4 * _sent("reduce_scatter", tp, act)
        out[("tp", "all_gather")] = calls * layers * 4 * _sent("all_gather", tp, act)
        norms = 6 * hidden * BYTES
        out[("tp", "all_reduce")] = calls * layers * _sent("all_reduce", tp, norms)
    else:  # TP transformer blocks: four all-reduces per layer
        out[("tp", "all_reduce")] = calls * layers * 4 * all_reduce
    return out


# --- the sharding schemes: ZeRO stages, FSDP and HSDP (Rajbhandari et al. 2020) -----------


@dataclass(frozen=True)
class ModelStateFormula:
    """The ZeRO paper's model state of one rank, in bytes at the declared precisions, and
    how it reads (``"2Ψ + 14Ψ/N"``)."""

    params: int
    grads: int
    optimizer: int
    text: str

    @property
    def total(self):
        return self.params + self.grads + self.optimizer


def model_state_formula(params, stage, shard_degree, optimizer_bytes=12):
    """One rank's model state under ZeRO ``stage`` over ``shard_degree`` ranks, for
    ``params`` (Ψ) parameters: the planner's estimate
    (:func:`collsim.plan.memory.model_state_bytes`, bf16 parameters and gradients and
    12 B of fp32 Adam state per parameter), its optimizer part scaled to
    ``optimizer_bytes`` per parameter (4 for plain SGD: the master weights alone).

    >>> f = model_state_formula(6560, stage=2, shard_degree=4)
    >>> f.text, f.params, f.grads, f.optimizer, f.total == 2 * 6560 + 14 * 6560 // 4
    ('2Ψ + 14Ψ/N', 13120, 3280, 19680, True)
    """
    p, g, o = model_state_bytes(params, zero=stage, shard_degree=shard_degree)
    o = o * optimizer_bytes / 12  # the planner counts Adam's 12 B
    k = optimizer_bytes
    text = {0: f"{4 + k}Ψ", 1: f"4Ψ + {k}Ψ/N", 2: f"2Ψ + {2 + k}Ψ/N", 3: f"{4 + k}Ψ/N"}[stage]
    return ModelStateFormula(_exact(p), _exact(g), _exact(o), text)


def _exact(value):
    """A byte count that divides evenly stays an int; otherwise the float says it did not."""
    return int(value) if float(value).is_integer() else value


def gathered_units(n_units, reshard_after_forward=True, prefetch="none"):
    """How many units' gathered parameters a ZeRO-3 / FSDP schedule holds at its peak: one
    (gathered before each pass, freed after it), two with prefetch (the next unit's
    all-gather runs while the current one computes), all of them without resharding after
    the forward (SHARD_GRAD_OP: kept from the forward for the backward).

    >>> gathered_units(2), gathered_units(4, prefetch="forward"), gathered_units(4, False)
    (1, 2, 4)
    """
    if not reshard_after_forward:
        return n_units
    return min(n_units, 1 if prefetch == "none" else 2)


def sharded_bytes(
    *, stage, dp_shard, dp_replicate=1, params, steps, accumulation=1, reshard_after_forward=True
):
    """Bytes each rank should send over the run, by collective, for ``params`` (Ψ)
    float64 parameters sharded over ``dp_shard`` ranks (and, for HSDP, replicated over
    ``dp_replicate`` groups): every figure a count of calls times
    :func:`~collsim.collectives.formulas.closed_form`'s bytes per rank.

    * stage 0 (DDP): one all-reduce per step, 2Ψ(N-1)/N·b;
    * stages 1 and 2: reduce-scatter and all-gather, (N-1)/N·Ψ·b each per step, the same
      2Ψ(N-1)/N·b (stage 2 reduce-scatters after every micro-batch's backward);
    * stage 3: per micro-batch, all-gather before the forward and again before the backward
      (once without resharding after the forward), reduce-scatter after the backward:
      3Ψ(N-1)/N·b, 1.5 × DDP's bytes;
    * HSDP: the shard group's stage 3, then the replica group's all-reduce of the Ψ/N
      shard after each reduce-scatter.

    >>> sharded_bytes(stage=3, dp_shard=4, params=6560, steps=1)
    {'all_gather': 78720.0, 'reduce_scatter': 39360.0}
    """
    size = params * BYTES
    micro = steps * accumulation
    if stage == 0:
        return {"all_reduce": steps * _sent("all_reduce", dp_shard, size)}
    if stage in (1, 2):
        scatters = micro if stage == 2 else steps
        return {
            "reduce_scatter": scatters * _sent("reduce_scatter", dp_shard, size),
            "all_gather": steps * _sent("all_gather", dp_shard, size),
        }
    gathers = 2 if reshard_after_forward else 1
    out = {
        "all_gather": micro * gathers * _sent("all_gather", dp_shard, size),
        "reduce_scatter": micro * _sent("reduce_scatter", dp_shard, size),
    }
    if dp_replicate > 1:
        out["all_reduce"] = micro * _sent("all_reduce", dp_replicate, size / dp_shard)
    return out


def hsdp_inter_node_bytes(*, dp_shard, dp_replicate, params, steps, accumulation=1):
    """Bytes that cross between nodes, summed over all ``dp_replicate · dp_shard`` ranks,
    when each shard group fills one node: the replica group's all-reduce alone (every
    ring neighbour of a replica group sits on another node).

    >>> hsdp_inter_node_bytes(dp_shard=2, dp_replicate=2, params=6560, steps=1)
    104960.0
    """
    per_rank = sharded_bytes(
        stage=3,
        dp_shard=dp_shard,
        dp_replicate=dp_replicate,
        params=params,
        steps=steps,
        accumulation=accumulation,
    ).get("all_reduce", 0.0)
    return dp_replicate * dp_shard * per_rank
