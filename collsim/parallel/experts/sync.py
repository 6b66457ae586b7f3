"""Which MoE gradients are reduced over which group, and by how much.

Each rank's loss is the mean over its own tokens (as a data-parallel rank's is), and the
model's loss is the mean of the ranks' losses.  So:

* the **router** is replicated: each rank's gradient is its own loss's, a partial of the
  whole; they are averaged over the ep group (the data-parallel ranks of these tokens).
  Leaving them unsummed is the "router partials never reduced" bug;
* each **expert** lives on one rank and its gradient already sums every source rank's
  tokens, each weighted by its rank's 1/T: it is divided by ep, the token shards it saw,
  and reduced only over the expert-data-parallel group (ranks holding copies of the same
  experts: none here, so no communication).  Omitting the division gives gradients
  exactly ep times too large: with ep = 2 the doubled-gradient bug.

Examples
--------
>>> import numpy as np, collsim
>>> from collsim.runtime.group import Group
>>> class Layer:  # what sync_grads reads of the layer: its group and ep
...     group, ep = Group([0, 1]), 2
>>> def program(rank):
...     grads = {"router": np.full(2, float(rank.id)), "w_up": np.full(2, 4.0)}
...     return (yield from sync_grads(rank, Layer(), grads))
>>> out = collsim.Cluster(collsim.topology.switch(2)).run(program).returns[1]
>>> out["router"].tolist(), out["w_up"].tolist()
([0.5, 0.5], [2.0, 2.0])
"""

__all__ = ["sync_grads", "EXPERT_KEYS"]

EXPERT_KEYS = ("w_gate", "w_up", "w_down")


def sync_grads(rank, layer, grads):
    """The gradients of the model's loss from this rank's (``yield from`` it)."""
    router = yield from rank.all_reduce(grads["router"], group=layer.group, op="avg")
    return {"router": router} | {key: grads[key] / layer.ep for key in EXPERT_KEYS if key in grads}
