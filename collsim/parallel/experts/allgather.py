"""Megatron-Core's all-gather token dispatcher, for comparison with the all-to-all one.

Every rank all-gathers every rank's tokens and its routing (a ``(T, E)`` map of which slots
it sends to which expert and with which gate), computes its own experts on the tokens
routed to them, and the gate-weighted outputs are summed back to their tokens' ranks by a
reduce-scatter.  It moves ``(ep−1)·T·d·b`` a rank each way whatever the routing (plus the
maps), where the all-to-all moves only the rows whose expert is elsewhere; it needs no
count exchange and no uneven splits, which is why Megatron-Core keeps it for small ep.

The backward pass all-gathers the output's gradient, and reduce-scatters the input's
gradient and the gates' gradient (each expert's rank holds the output a gate multiplies).

Examples
--------
>>> import numpy as np, collsim
>>> from collsim.nn import MoE, RouterConfig
>>> from collsim.runtime.group import Group
>>> from collsim.parallel.experts import ExpertParallelMoE
>>> rng = np.random.default_rng(0)
>>> full = MoE.init(4, 8, RouterConfig(experts=4, top_k=2), rng)
>>> x = rng.normal(size=(6, 4))
>>> def program(rank):
...     layer = ExpertParallelMoE.from_full(full, Group([0, 1]), rank.id, dispatcher="allgather")
...     y, ctx = yield from layer.forward(rank, x[3 * rank.id : 3 * rank.id + 3])
...     return y
>>> y = np.concatenate(collsim.Cluster(collsim.topology.switch(2)).run(program).returns)
>>> bool(np.allclose(y, full.forward(x, ranks=2)[0], rtol=0, atol=1e-13))
True
"""

import numpy as np

from ...nn.routing import gate_gradient_to_logits
from ..modules import layer_compute

__all__ = ["allgather_forward", "allgather_backward_input"]


def _maps(routing, experts):
    """(T, 2E): which slots go to which expert (1.0, padding included) and their gates."""
    T = routing.scores.shape[0]
    sent, gate = np.zeros((T, experts)), np.zeros((T, experts))
    sent[routing.slot_token, routing.slot_expert] = 1.0
    gate[routing.slot_token, routing.slot_expert] = routing.slot_gate
    return np.concatenate([sent, gate], axis=1)


def allgather_forward(layer, rank, x, routing):
    """``(partial y, ctx)``: the MoE output for this rank's tokens, without the residual."""
    E, group = layer.config.experts, layer.group
    every_x = yield from rank.all_gather(x, group=group)  # (ep·T, d), ranks in order
    maps = yield from rank.all_gather(_maps(routing, E), group=group)  # (ep·T, 2E)
    tokens, experts = [], []
    for e in range(layer.local.start, layer.local.stop):  # expert-major, tokens in order
        mine = np.nonzero(maps[:, e])[0]
        tokens.append(mine)
        experts.append(np.full(len(mine), e))
    tokens, experts = np.concatenate(tokens), np.concatenate(experts)
    per_expert = np.bincount(
        experts - layer.local.start, minlength=layer.local.stop - layer.local.start
    )
    gates = maps[tokens, E + experts]
    flops = layer._flops(per_expert)
    yield layer_compute(rank, "forward", f"{layer.name}.experts", flops[0])
    out, saved = layer.experts.forward(every_x[tokens], per_expert)
    summed = np.zeros_like(every_x)
    np.add.at(summed, tokens, gates[:, None] * out)
    y = yield from rank.reduce_scatter(summed, group=group)  # this rank's tokens
    ctx = {"tokens": tokens, "experts": experts, "gates": gates, "out": out, "saved": saved}
    ctx["per_expert"], ctx["rows"] = per_expert, len(every_x)
    return y, ctx


def allgather_backward_input(layer, rank, ctx, dy):
    """``dL/dx`` through the experts and the gates, for this rank's tokens (plus ``dy``,
    the residual's, and the router's); keeps the expert gradients and ``dlogits`` in ctx."""
    group, routing, inner = layer.group, ctx["routing"], ctx["allgather"]
    tokens, gates, out = inner["tokens"], inner["gates"], inner["out"]
    every_dy = yield from rank.all_gather(dy, group=group)  # (ep·T, d)
    dout = gates[:, None] * every_dy[tokens]
    flops = layer._flops(inner["per_expert"])
    yield layer_compute(rank, "backward_input", f"{layer.name}.experts", flops[1])
    drows, ctx["expert_grads"] = layer.experts.backward(inner["saved"], dout, inner["per_expert"])
    partial = np.zeros((inner["rows"], dy.shape[1]))
    np.add.at(partial, tokens, drows)
    dx_experts = yield from rank.reduce_scatter(partial, group=group)
    dgate_map = np.zeros((inner["rows"], layer.config.experts))
    dgate_map[tokens, inner["experts"]] = np.einsum("nd,nd->n", every_dy[tokens], out)
    dgate_map = yield from rank.reduce_scatter(dgate_map, group=group)  # (T, E) mine
    dgates = np.take_along_axis(dgate_map, routing.selected, axis=-1)
    ctx["dlogits"] = gate_gradient_to_logits(routing, dgates, layer.config, ctx["aux_grad"])
    return dy + dx_experts + ctx["dlogits"] @ layer.router.T
