"""An MoE layer run with expert parallelism: the rank module of :class:`collsim.nn.MoE`.

Every rank of the ``ep`` group holds the router (replicated) and ``E/ep`` of the experts,
and routes its own tokens.  Forward: route, dispatch (counts all-to-all, tokens
all-to-allv, permute to expert-major), the grouped expert compute, combine (un-permute,
all-to-allv back), and the gate-weighted sum into each token's residual, on the rank that
owns the token.  Backward sends the outputs' gradients the way the tokens went and the
inputs' gradients back the same way; the router's gradient never leaves the rank (its
partial sums are reduced with the other replicated weights, :mod:`.sync`).

It follows the :class:`~collsim.parallel.modules.RankModule` protocol; ``shard_axes`` says
the experts' stacks are split along axis 0 and the router is whole on every rank.  With an
etp group each expert is further split by columns (``w_gate``, ``w_up`` along axis 2,
``w_down``'s rows along axis 1) and the group exchanges rows around the experts (:mod:`.etp`).

Examples
--------
>>> import numpy as np, collsim
>>> from collsim.nn import MoE, RouterConfig
>>> from collsim.runtime.group import Group
>>> rng = np.random.default_rng(0)
>>> full = MoE.init(4, 8, RouterConfig(experts=4, top_k=2), rng)
>>> x = rng.normal(size=(6, 4))
>>> group = Group([0, 1])
>>> def program(rank):
...     layer = ExpertParallelMoE.from_full(full, group, rank.id)
...     y, ctx = yield from layer.forward(rank, x[3 * rank.id : 3 * rank.id + 3])
...     return y
>>> y = np.concatenate(collsim.Cluster(collsim.topology.switch(2)).run(program).returns)
>>> bool(np.allclose(y, full.forward(x, ranks=2)[0], rtol=0, atol=1e-13))
True
"""

import numpy as np

from ...errors import ConfigError, check_choice
from ...nn.module import FLOP_KEYS
from ...nn.moe import MoE, SwiGLUExperts, router_logit_grad, scatter_rows
from ...nn.moe import combine as weighted_sum
from ...nn.routing import aux_loss, route
from ...runtime.group import Group
from ..modules import layer_compute
from .allgather import allgather_backward_input, allgather_forward
from .dispatch import combine, dispatch, dispatch_again, expert_slice
from .etp import column_shard, gather_again, gather_rows, reduce_rows
from .hierarchical import check_nodes, hierarchical_backward_input, hierarchical_forward

__all__ = ["ExpertParallelMoE", "DISPATCHERS", "check_dispatcher"]

# Megatron-Core's --moe-token-dispatcher-type: all-to-all (counts, then tokens with uneven
# splits) or all-gather (every rank's tokens to every rank, outputs reduce-scattered back)
DISPATCHERS = ("alltoall", "allgather", "hierarchical")  # the last: DeepEP's two levels


def check_dispatcher(dispatcher):
    """``dispatcher`` if it is one of :data:`DISPATCHERS`, else a ConfigError naming it."""
    return check_choice(dispatcher, "dispatcher", DISPATCHERS)


class ExpertParallelMoE:
    """This rank's part of an MoE layer over the ep group ``group``.

    ``router`` (d, E) is whole; ``experts`` holds this rank's ``E/ep`` experts;
    ``expert_bias`` (E,) is whole (every rank chooses among all experts); ``dispatcher``
    is ``"alltoall"`` (:mod:`.dispatch`) or ``"allgather"`` (:mod:`.allgather`).  With an
    ``etp_group`` of more than one rank, ``experts`` are this rank's columns of them
    (:mod:`.etp`; ``replicated``: the etp ranks route the same tokens).
    """

    def __init__(
        self,
        router,
        experts,
        config,
        group,
        ep_rank,
        expert_bias=None,
        name="moe",
        dispatcher="alltoall",
        gpus_per_node=None,
        etp_group=None,
        replicated=False,
    ):
        self.dispatcher = check_dispatcher(dispatcher)
        self.etp_group = Group([group.ranks[ep_rank]]) if etp_group is None else etp_group
        self.replicated = replicated
        if self.etp_group.size > 1 and self.dispatcher != "alltoall":
            raise ConfigError(
                f"dispatcher={dispatcher!r} with etp={self.etp_group.size}: expert tensor "
                "parallelism runs with the all-to-all dispatcher; nearest valid "
                "dispatcher='alltoall'"
            )
        self.router = np.array(router, dtype=np.float64)
        self.experts, self.config, self.group, self.name = experts, config, group, name
        if not 0 <= ep_rank < group.size:
            raise ConfigError(f"ep_rank={ep_rank} is not a position in the ep group {group}")
        self.ep_rank, self.ep = ep_rank, group.size
        self.local = expert_slice(config.experts, self.ep, ep_rank)
        self.gpus_per_node = self.ep if gpus_per_node is None else int(gpus_per_node)
        check_nodes(self.ep, self.gpus_per_node, config.experts)
        E = config.experts
        self.expert_bias = np.zeros(E) if expert_bias is None else np.array(expert_bias, float)
        self.shard_axes = {"router": None, "w_gate": 0, "w_up": 0, "w_down": 0}

    @classmethod
    def from_full(
        cls,
        moe,
        group,
        rank_id,
        name="moe",
        dispatcher="alltoall",
        gpus_per_node=None,
        etp_group=None,
        replicated=False,
    ):
        """This rank's module of ``moe`` (a :class:`collsim.nn.MoE`), weights copied: its
        ``E/ep`` experts, and of each its columns when ``etp_group`` splits them."""
        if not isinstance(moe, MoE):
            raise ConfigError(f"ExpertParallelMoE runs a collsim.nn.MoE, got {type(moe).__name__}")
        ep_rank = group.index(rank_id)
        mine = expert_slice(moe.config.experts, group.size, ep_rank)
        experts = SwiGLUExperts(*(w[mine] for w in moe.experts.params.values()))
        if etp_group is not None and etp_group.size > 1:
            experts = column_shard(experts, etp_group.size, etp_group.index(rank_id))
        return cls(
            moe.router,
            experts,
            moe.config,
            group,
            ep_rank,
            moe.expert_bias,
            name,
            dispatcher,
            gpus_per_node,
            etp_group,
            replicated,
        )

    @property
    def params(self):
        return {"router": self.router, **self.experts.params}

    def forward(self, rank, x, prior=None):
        """``(y, ctx)`` for this rank's tokens ``x`` (T, d); ``prior`` as in MoE.forward."""
        x = np.asarray(x, dtype=np.float64)
        T, d = x.shape
        yield layer_compute(rank, "forward", f"{self.name}.router", 2 * T * d * self.config.experts)
        logits = x @ self.router
        routing = route(logits if prior is None else logits + prior, self.config, self.expert_bias)
        ctx = {"x": x, "routing": routing}
        ctx["aux_loss"], ctx["aux_grad"] = aux_loss(routing, self.config)
        if self.dispatcher == "allgather":
            partial, ctx["allgather"] = yield from allgather_forward(self, rank, x, routing)
            ctx["per_expert"] = ctx["allgather"]["per_expert"]
            gathered = ctx["allgather"]["rows"] * d  # every rank's tokens, kept for backward
            ctx["held"] = self._hold(rank, ctx["per_expert"], gathered)
            return x + partial, ctx
        if self.dispatcher == "hierarchical":
            partial, ctx["hierarchical"] = yield from hierarchical_forward(self, rank, x, routing)
            ctx["per_expert"] = ctx["hierarchical"]["layout"].expert_rows
            rows = int(np.sum(ctx["per_expert"])) * d + ctx["hierarchical"]["arrived"] * d
            ctx["held"] = self._hold(rank, ctx["per_expert"], rows)
            return x + partial, ctx
        counts = np.bincount(routing.slot_expert, minlength=self.config.experts)
        rows, layout = yield from dispatch(rank, self.group, x[routing.slot_token], counts)
        rows, per_expert, ctx["etp"] = yield from gather_rows(
            rank, self.etp_group, self.replicated, rows, layout.expert_rows
        )  # the etp group's rows, for this rank's columns (its own rows without etp)
        ctx["layout"], ctx["per_expert"] = layout, per_expert
        ctx["held"] = self._hold(rank, per_expert, rows.size)
        yield layer_compute(
            rank, "forward", f"{self.name}.experts", self._flops(ctx["per_expert"])[0]
        )
        out_sorted, ctx["saved"] = self.experts.forward(rows, per_expert)
        out_sorted = yield from reduce_rows(rank, ctx["etp"], out_sorted)
        ctx["out"] = yield from combine(rank, self.group, out_sorted, layout)
        return weighted_sum(x, routing.slot_token, routing.slot_gate, ctx["out"]), ctx

    def _hold(self, rank, per_expert, token_elements):
        """Register what the experts keep for backward: the token rows they were given, and
        a, b and silu(a)·b (width f) of each row they computed."""
        f = self.experts.w_gate.shape[2]
        elements = token_elements + 3 * int(np.sum(per_expert)) * f
        return rank.alloc("activations", f"{self.name}.dispatched", elements)

    def _flops(self, per_expert):
        each = [self.experts.flops(int(n)) for n in per_expert]
        return [sum(f[key] for f in each) for key in FLOP_KEYS]  # forward, B, W

    def backward_input(self, rank, ctx, dy):
        if self.dispatcher != "alltoall":
            other = {"allgather": allgather_backward_input}.get(
                self.dispatcher, hierarchical_backward_input
            )
            dx = yield from other(self, rank, ctx, dy)
            rank.free(ctx.pop("held"))
            return dx
        routing, layout = ctx["routing"], ctx["layout"]
        dout = routing.slot_gate[:, None] * dy[routing.slot_token]
        got = yield from dispatch_again(rank, self.group, dout, layout, "dispatch-grad")
        got = yield from gather_again(rank, ctx["etp"], got)
        flops = self._flops(ctx["per_expert"])
        yield layer_compute(rank, "backward_input", f"{self.name}.experts", flops[1])
        drows_sorted, ctx["expert_grads"] = self.experts.backward(
            ctx["saved"], got, ctx["per_expert"]
        )
        drows_sorted = yield from reduce_rows(rank, ctx["etp"], drows_sorted)
        drows = yield from combine(rank, self.group, drows_sorted, layout, "combine-grad")
        rank.free(ctx.pop("held"))
        dx = scatter_rows(dy, routing.slot_token, drows)
        ctx["dlogits"] = router_logit_grad(routing, dy, ctx["out"], self.config, ctx["aux_grad"])
        return dx + ctx["dlogits"] @ self.router.T

    def backward_weight(self, rank, ctx, dy):
        if "expert_grads" not in ctx:
            raise ConfigError("ExpertParallelMoE.backward_weight comes after backward_input")
        T, d = ctx["x"].shape
        flops = self._flops(ctx["per_expert"])[2] + 2 * T * d * self.config.experts
        yield layer_compute(rank, "backward_weight", self.name, flops)
        return {"router": ctx["x"].T @ ctx["dlogits"], **ctx.pop("expert_grads")}

    def backward(self, rank, ctx, dy):
        dx = yield from self.backward_input(rank, ctx, dy)
        grads = yield from self.backward_weight(rank, ctx, dy)
        return dx, grads
