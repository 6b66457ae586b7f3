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

from ..collectives import formulas
from .problems import BYTES

__all__ = ["expected_bytes", "ALGORITHM"]

ALGORITHM = "ring"  # what the gradient buckets and the tensor-parallel layers call


def _sent(collective, ranks, size):
    """Bytes one rank sends in one ``collective`` of ``size`` bytes over ``ranks`` ranks.

    The bytes do not depend on the link, so any α and β do.
    """
    cost = formulas.closed_form(collective, ALGORITHM, ranks, size, alpha=0.0, beta=1.0)
    return cost.bytes_per_rank


def expected_bytes(scheme, *, dp, tp, micro_batch, accumulation, steps, seq, hidden, ffn,
                   layers, local_params, sp=False):  # fmt: skip
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
