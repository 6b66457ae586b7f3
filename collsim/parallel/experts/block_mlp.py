"""An MoE in a transformer block's MLP place, on one rank of an expert-parallel group.

:class:`ExpertParallelMLP` is the rank module of :class:`collsim.nn.MoEMLP`: the block's
``(B, S, d)`` tokens are flattened, routed and sent to the ranks that hold their experts
by :class:`~collsim.parallel.experts.ExpertParallelMoE`, and come back without the MoE's own
residual (the block adds it).  The mesh trainer puts one in every block whose MLP is an
MoE, on the ep and etp groups MoE parallel folding gives it (:mod:`.folding`).  Its
parameter names are the MoE's: ``"router"`` (whole on every rank) and the experts' stacks
``"w_gate"``, ``"w_up"``, ``"w_down"`` (this rank's ``E/ep`` experts, its columns of each
under etp; :data:`EXPERT_KEYS`).

Examples
--------
>>> import numpy as np, collsim
>>> from collsim.nn import MoE, MoEMLP, RouterConfig
>>> from collsim.runtime.group import Group
>>> rng = np.random.default_rng(0)
>>> full = MoEMLP(MoE.init(4, 8, RouterConfig(experts=4, top_k=2), rng), ranks=2)
>>> x = rng.normal(size=(2, 3, 4))  # rank r holds sample r
>>> def program(rank):
...     mlp = ExpertParallelMLP.from_full(full, Group([0, 1]), rank.id)
...     y, ctx = yield from mlp.forward(rank, x[rank.id : rank.id + 1])
...     return y
>>> y = np.concatenate(collsim.Cluster(collsim.topology.switch(2)).run(program).returns)
>>> bool(np.allclose(y, full.forward(x)[0], rtol=0, atol=1e-13))
True
"""

import numpy as np

from ...errors import ConfigError
from ...nn.moe import MoEMLP
from ..block import RankBlock
from ..tensor import sync_partial_grads
from .folding import ExpertGroups, expert_groups
from .layer import ExpertParallelMoE
from .sync import EXPERT_KEYS

__all__ = ["ExpertParallelMLP", "TensorMoEBlock", "ExpertGroups", "expert_groups", "EXPERT_KEYS"]


class ExpertParallelMLP:
    """This rank's part of a :class:`collsim.nn.MoEMLP` over the ep group ``group``.

    ``partial``: its tokens are only its share of the tensor-parallel group's (sequence
    parallelism), so the router's gradient is a partial sum the block adds up over tp (the
    experts' are reduced over their expert-data-parallel group, :mod:`.folding`)."""

    def __init__(self, layer, name="mlp", partial=False, aux_scale=1.0):
        self.layer, self.name = layer, name
        # the load-balancing loss's gradient enters inside backward, past the loss scale of
        # the micro-batch: scaled here as Megatron-Core's MoEAuxLossAutoScaler scales it
        self.aux_scale = aux_scale
        # to the tensor-parallel gather every name is whole; the experts' split is over ep
        self.shard_axes = dict.fromkeys(layer.params)
        self.partial_grad_names = ("router",) if partial else ()

    @classmethod
    def from_full(cls, mlp, groups, rank_id, name="mlp", partial=False, aux_scale=1.0):
        """This rank's module of ``mlp`` (a :class:`collsim.nn.MoEMLP`) on ``groups`` (an
        :class:`~.folding.ExpertGroups`, or an ep group alone), weights copied."""
        if not isinstance(mlp, MoEMLP):
            raise ConfigError(f"ExpertParallelMLP runs a collsim.nn.MoEMLP, got {mlp!r}")
        if not isinstance(groups, ExpertGroups):
            groups = expert_groups(groups.ranks, rank_id, groups.size)
        layer = ExpertParallelMoE.from_full(
            mlp.moe,
            groups.ep,
            rank_id,
            name=name,
            etp_group=groups.etp,
            replicated=groups.replicated,
        )
        return cls(layer, name, partial, aux_scale)

    def __repr__(self):
        return f"ExpertParallelMLP(ep={self.layer.ep}, experts={self.layer.config.experts})"

    @property
    def params(self):
        return self.layer.params

    def forward(self, rank, x):
        x = np.asarray(x, dtype=np.float64)  # (B, S, d): this rank's tokens
        tokens = x.reshape(-1, x.shape[-1])
        y, ctx = yield from self.layer.forward(rank, tokens)
        ctx["aux_grad"] = ctx["aux_grad"] * self.aux_scale
        return (y - tokens).reshape(x.shape), ctx  # the block adds the residual

    def backward_input(self, rank, ctx, dy):
        flat = np.reshape(dy, ctx["x"].shape)
        dx = yield from self.layer.backward_input(rank, ctx, flat)
        return (dx - flat).reshape(np.shape(dy))

    def backward_weight(self, rank, ctx, dy):
        return (yield from self.layer.backward_weight(rank, ctx, np.reshape(dy, ctx["x"].shape)))

    def backward(self, rank, ctx, dy):
        dx = yield from self.backward_input(rank, ctx, dy)
        return dx, (yield from self.backward_weight(rank, ctx, dy))


class TensorMoEBlock(RankBlock):
    """A block with tensor-parallel attention (``attn``: heads split over ``tp_group``) and
    an :class:`ExpertParallelMLP`.  Without sequence parallelism every tp rank routes the
    same tokens, so the router's gradients agree across tp; with it each routes its own
    share and the block sums the router's gradients over tp with the LayerNorms' (Megatron's
    rule for the weights a tp rank sees only its tokens through)."""

    def __init__(self, ln1, attn, ln2, mlp, tp_group, sequence_parallel, name="block"):
        super().__init__(ln1, attn, ln2, mlp, name)
        self.group = tp_group
        attn.sync_partial_grads = False  # summed here with the rest, at once
        self.partial_grad_names = self.partial_names(sequence_parallel)

    def sum_partial(self, rank, grads):
        return (yield from sync_partial_grads(rank, grads, self.partial_grad_names, self.group))
