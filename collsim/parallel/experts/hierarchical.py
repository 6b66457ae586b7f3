"""A two-level dispatcher in the manner of DeepEP's normal kernels: across nodes once per
token and node, then inside the node.

The ep ranks are ``nodes × gpus_per_node``; rank (n, l) is GPU l of node n, and node m
holds experts ``m·E/nodes .. (m+1)·E/nodes``.  A token with several experts on node m
crosses the network to it **once**: rank (n, l) sends it to rank (m, l), the GPU with the
same local index (its "rail"), with its gates and a flag for each expert it goes to (2E
values more than the hidden row).  That rank forwards a copy of the token to each GPU of
its node holding one of those experts (:func:`~.dispatch.dispatch` on the node group, over
NVLink).  The combine runs backwards: the experts' outputs go back to the forwarding GPU,
which sums them weighted by the gates, and one row per token and node crosses the network
home.  The DeepSeek-V3 report describes this order (InfiniBand to the same in-node index
first, then NVLink), with tokens limited to a few nodes by group-limited routing.

The backward pass sends the output's gradient the same way out and, back home, the input's
gradient summed on the node and the gates' gradients (the forwarder holds both the output
and its gradient).  With one node it is the all-to-all dispatcher with a local copy first.
"""

import numpy as np

from ...collectives.all_to_allv import direct_all_to_allv, run_all_to_allv
from ...errors import ConfigError
from ...nn.routing import gate_gradient_to_logits
from ...runtime.group import Group
from ..modules import layer_compute
from .dispatch import combine, dispatch, dispatch_again, known_counts

__all__ = ["check_nodes", "hierarchical_forward", "hierarchical_backward_input"]


def check_nodes(ep, gpus_per_node, experts):
    """The number of nodes; refuses a node size that does not divide ep or the experts."""
    if gpus_per_node < 1 or ep % gpus_per_node:
        raise ConfigError(
            f"gpus_per_node={gpus_per_node} must divide ep={ep}: the ep ranks fill whole nodes"
        )
    return ep // gpus_per_node


def _groups(layer):
    G = layer.gpus_per_node
    n, l = divmod(layer.ep_rank, G)
    ranks = layer.group.ranks
    rail = Group([ranks[m * G + l] for m in range(layer.ep // G)])
    node = Group([ranks[n * G + j] for j in range(G)])
    return rail, node, n


def hierarchical_forward(layer, rank, x, routing):
    """``(partial y, ctx)``: this rank's tokens' MoE output, without the residual."""
    E, d = layer.config.experts, x.shape[1]
    rail, node, n = _groups(layer)
    nodes = rail.size
    per_node = E // nodes
    slot_node = routing.slot_expert // per_node
    sent_tokens, rows, counts = [], [], []
    for m in range(nodes):  # one row per token and destination node, tokens in order
        on_m = slot_node == m
        tokens = np.unique(routing.slot_token[on_m])
        row = np.zeros((len(tokens), d + 2 * E))
        row[:, :d] = x[tokens]
        where = np.searchsorted(tokens, routing.slot_token[on_m])
        row[where, d + routing.slot_expert[on_m]] = routing.slot_gate[on_m]
        row[where, d + E + routing.slot_expert[on_m]] = 1.0
        sent_tokens.append(tokens)
        rows.append(row)
        counts.append(len(tokens))
    counts = np.array(counts, dtype=np.int64)
    arriving = yield from rank.all_to_all(counts.reshape(nodes, 1), group=rail)
    known = known_counts(nodes, n, counts, np.asarray(arriving).reshape(nodes))
    out_schedule, back_schedule = direct_all_to_allv(known), direct_all_to_allv(known.T)
    got = yield from run_all_to_allv(
        rank, out_schedule, np.concatenate(rows), rail, "dispatch-inter"
    )
    mine = slice(n * per_node, (n + 1) * per_node)  # this node's experts
    flags, gates = got[:, d + E :][:, mine], got[:, d:][:, :E][:, mine]
    slot_expert, slot_row = np.nonzero(flags.T)  # expert-major, arrivals in order
    slot_gate = gates[slot_row, slot_expert]
    node_counts = np.bincount(slot_expert, minlength=per_node)
    token_rows, layout = yield from dispatch(
        rank, node, got[slot_row, :d], node_counts, "dispatch-intra"
    )
    flops = layer._flops(layout.expert_rows)
    yield layer_compute(rank, "forward", f"{layer.name}.experts", flops[0])
    out_sorted, saved = layer.experts.forward(token_rows, layout.expert_rows)
    out = yield from combine(rank, node, out_sorted, layout, "combine-intra")
    reply = np.zeros((len(got), d))
    np.add.at(reply, slot_row, slot_gate[:, None] * out)
    back = yield from run_all_to_allv(rank, back_schedule, reply, rail, "combine-inter")
    sent_tokens = np.concatenate(sent_tokens)
    partial = np.zeros_like(x)
    np.add.at(partial, sent_tokens, back)
    ctx = {
        "sent_tokens": sent_tokens,
        "slot_row": slot_row,
        "slot_gate": slot_gate,
        "slot_expert": slot_expert + n * per_node,
        "out": out,
        "saved": saved,
        "layout": layout,
        "arrived": len(got),
        "node": node,
        "rail": rail,
        "out_schedule": out_schedule,
        "back_schedule": back_schedule,
    }
    return partial, ctx


def hierarchical_backward_input(layer, rank, ctx, dy):
    """``dL/dx`` for this rank's tokens (the residual's ``dy`` included, and the router's);
    keeps the expert gradients and ``dlogits`` in ctx."""
    routing, inner = ctx["routing"], ctx["hierarchical"]
    E, d = layer.config.experts, dy.shape[1]
    rail, node = inner["rail"], inner["node"]
    dy_rows = dy[inner["sent_tokens"]]
    got = yield from run_all_to_allv(
        rank, inner["out_schedule"], dy_rows, rail, "dispatch-grad-inter"
    )
    slot_row, out = inner["slot_row"], inner["out"]
    dout = inner["slot_gate"][:, None] * got[slot_row]
    layout = inner["layout"]
    moved = yield from dispatch_again(rank, node, dout, layout, "dispatch-grad-intra")
    flops = layer._flops(layout.expert_rows)
    yield layer_compute(rank, "backward_input", f"{layer.name}.experts", flops[1])
    drows_sorted, ctx["expert_grads"] = layer.experts.backward(
        inner["saved"], moved, layout.expert_rows
    )
    drows = yield from combine(rank, node, drows_sorted, layout, "combine-grad-intra")
    reply = np.zeros((inner["arrived"], d + E))  # dx summed on this node, and dgates
    np.add.at(reply[:, :d], slot_row, drows)
    reply[slot_row, d + inner["slot_expert"]] = np.einsum("nd,nd->n", got[slot_row], out)
    back = yield from run_all_to_allv(
        rank, inner["back_schedule"], reply, rail, "combine-grad-inter"
    )
    dx = np.array(dy, dtype=np.float64, copy=True)
    np.add.at(dx, inner["sent_tokens"], back[:, :d])
    dgate_map = np.zeros((len(dy), E))
    np.add.at(dgate_map, inner["sent_tokens"], back[:, d:])
    dgates = np.take_along_axis(dgate_map, routing.selected, axis=-1)
    ctx["dlogits"] = gate_gradient_to_logits(routing, dgates, layer.config, ctx["aux_grad"])
    return dx + ctx["dlogits"] @ layer.router.T
