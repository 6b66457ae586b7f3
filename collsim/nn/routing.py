"""A mixture-of-experts router: scores, top-k, capacity and dropping, and their gradients.

Each token's router logits ``x @ W_r`` become scores (softmax over the experts, as Switch
and Mixtral, or an independent sigmoid per expert, as DeepSeek-V3); the top ``k`` experts
are chosen on the scores plus an optional *expert bias* (DeepSeek-V3's auxiliary-loss-free
balancing: the bias moves the choice, never the weights), optionally only inside the best
``topk_groups`` of ``groups`` expert groups (DeepSeek-V2/V3's group-limited routing). The
chosen scores are the gates, renormalised to sum to 1 when ``normalize`` is set.

With a ``capacity_factor`` each expert takes at most ``ceil(T·k/E·cf)`` tokens of each
source rank's ``T`` (Megatron-Core's ``get_capacity``); the rest are dropped, the lowest
gates first (``drop_policy="probs"``) or the latest tokens first (``"position"``), and a
dropped token passes through the residual only. ``pad_to_capacity`` fills every expert's
slots up to capacity with zero-gate tokens, so every rank sends the same bytes. Without a
capacity factor (the default) nothing is dropped: *dropless*.

The result is a :class:`Routing`: the *slots* (one per token sent to an expert), ordered
by source rank, then expert, then token: the order the dispatch all-to-all sends them in.

Examples
--------
>>> import numpy as np
>>> config = RouterConfig(experts=4, top_k=2)
>>> logits = np.array([[4.0, 3.0, 0.0, 0.0], [0.0, 0.0, 1.0, 2.0]])
>>> routing = route(logits, config)
>>> routing.selected.tolist(), routing.slot_expert.tolist(), routing.slot_token.tolist()
([[0, 1], [3, 2]], [0, 1, 2, 3], [0, 0, 1, 1])
>>> routing.gates.round(3).tolist()  # renormalised over the two chosen experts
[[0.731, 0.269], [0.731, 0.269]]
>>> expert_capacity(tokens=16, top_k=2, experts=8, capacity_factor=1.25)  # ceil(5.0)
5
"""

import math
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError, check_choice

__all__ = [
    "RouterConfig",
    "Routing",
    "route",
    "choose_experts",
    "expert_capacity",
    "gate_gradient_to_logits",
    "aux_loss",
    "updated_expert_bias",
    "SCORE_FUNCTIONS",
    "DROP_POLICIES",
]

SCORE_FUNCTIONS = ("softmax", "sigmoid")
DROP_POLICIES = ("probs", "position")


@dataclass(frozen=True)
class RouterConfig:
    """How tokens choose experts (names as Megatron-Core's ``--moe-router-*`` flags)."""

    experts: int  # E, the routed experts
    top_k: int = 2  # experts per token
    score: str = "softmax"  # "softmax" (Switch, Mixtral) or "sigmoid" (DeepSeek-V3)
    normalize: bool = True  # renormalise the k chosen scores to sum to 1 (Mixtral, DeepSeek-V3)
    groups: int = 1  # expert groups for group-limited routing (DeepSeek-V3: 8)
    topk_groups: int = 1  # groups a token may choose from (DeepSeek-V3: 4); ignored if groups=1
    capacity_factor: float | None = None  # None: dropless; else capacity = ceil(T·k/E·cf)
    drop_policy: str = "probs"  # over capacity: drop the lowest gates, or the latest tokens
    pad_to_capacity: bool = False  # fill every expert's slots to capacity (zero-gate tokens)
    aux_loss_coeff: float = 0.0  # weight of the load-balancing loss E·Σ f_i·P_i (Switch)

    def __post_init__(self):
        _positive_int(self.experts, "experts")
        _positive_int(self.top_k, "top_k")
        if self.top_k > self.experts:
            raise ConfigError(
                f"top_k={self.top_k} is more than experts={self.experts}: a token chooses k "
                f"distinct experts; nearest valid top_k={self.experts}"
            )
        check_choice(self.score, "score", SCORE_FUNCTIONS)
        check_choice(self.drop_policy, "drop_policy", DROP_POLICIES)
        _positive_int(self.groups, "groups")
        _positive_int(self.topk_groups, "topk_groups")
        if self.groups > 1:
            if self.experts % self.groups:
                raise ConfigError(
                    f"groups={self.groups} must divide experts={self.experts} (each group holds "
                    f"E/groups experts); nearest valid groups="
                    f"{_nearest_divisor(self.experts, self.groups)}"
                )
            if not (self.topk_groups <= self.groups and self.top_k % self.topk_groups == 0):
                raise ConfigError(
                    f"topk_groups={self.topk_groups} must be at most groups={self.groups} and "
                    f"divide top_k={self.top_k} (a group's score is the sum of its top "
                    f"k/topk_groups scores); nearest valid topk_groups="
                    f"{_nearest_divisor(self.top_k, min(self.topk_groups, self.groups))}"
                )
            if self.topk_groups * (self.experts // self.groups) < self.top_k:
                raise ConfigError(
                    f"topk_groups={self.topk_groups} groups of {self.experts // self.groups} "
                    f"experts hold fewer than top_k={self.top_k} experts"
                )
        cf = self.capacity_factor
        if cf is not None and (
            isinstance(cf, bool) or not isinstance(cf, int | float) or not 0 < cf < math.inf
        ):
            raise ConfigError(
                f"capacity_factor={cf!r} must be a finite number > 0 (1.0: exactly the "
                "average load), or None for dropless routing"
            )


@dataclass(frozen=True)
class Routing:
    """Where every token went.  ``T`` tokens, ``E`` experts, ``k`` choices, ``N`` slots."""

    scores: np.ndarray  # (T, E) softmax or sigmoid of the logits
    selected: np.ndarray  # (T, k) chosen experts, best first
    gates: np.ndarray  # (T, k) the weights of their outputs (renormalised if configured)
    kept: np.ndarray  # (T, k) bool: False where capacity dropped the choice
    capacity: int | None  # slots per expert per source rank; None when dropless
    tokens_per_expert: np.ndarray  # (ranks, E) choices per source rank, before dropping
    slot_token: np.ndarray  # (N,) token of each slot, ordered (rank, expert, token)
    slot_expert: np.ndarray  # (N,) expert of each slot
    slot_choice: np.ndarray  # (N,) which of the token's k choices, -1 for a padding slot
    slot_rank: np.ndarray  # (N,) source rank (token block) of each slot

    @property
    def slot_gate(self):
        """(N,) the gate each slot's output is weighted by (0 for padding)."""
        gate = np.zeros(len(self.slot_token))
        real = self.slot_choice >= 0
        gate[real] = self.gates[self.slot_token[real], self.slot_choice[real]]
        return gate

    @property
    def dropped(self):
        """Token choices dropped by capacity."""
        return int(np.size(self.kept) - np.count_nonzero(self.kept))

    def counts(self, ranks):
        """(ranks, E) slots each source rank sends to each expert (padding included)."""
        out = np.zeros((ranks, self.scores.shape[1]), dtype=np.int64)
        np.add.at(out, (self.slot_rank, self.slot_expert), 1)
        return out


def expert_capacity(tokens, top_k, experts, capacity_factor):
    """Megatron-Core's ``get_capacity(num_tokens=tokens·k, ...)``: ``ceil(tokens·k/E·cf)``,
    in its float arithmetic."""
    return math.ceil((tokens * top_k / experts) * capacity_factor)


def route(logits, config, expert_bias=None, ranks=1):
    """Route ``T`` tokens by their ``(T, E)`` logits; ``ranks`` equal blocks of tokens are
    the source ranks, each with its own capacity (as each rank routes its own tokens)."""
    logits = np.asarray(logits, dtype=np.float64)
    T, E = logits.shape
    if E != config.experts:
        raise ConfigError(f"router logits have {E} experts, the config {config.experts}")
    if T % ranks:
        raise ConfigError(f"{T} tokens do not split into {ranks} equal source ranks")
    scores, selected = choose_experts(logits, config, expert_bias)
    chosen = np.take_along_axis(scores, selected, axis=-1)
    gates = chosen / chosen.sum(axis=-1, keepdims=True) if config.normalize else chosen
    per_rank = T // ranks
    kept = np.ones_like(selected, dtype=bool)
    counts = np.zeros((ranks, E), dtype=np.int64)
    capacity = None
    if config.capacity_factor is not None:
        capacity = expert_capacity(per_rank, config.top_k, E, config.capacity_factor)
    slots = []  # (rank, expert, token, choice)
    for b in range(ranks):
        block = slice(b * per_rank, (b + 1) * per_rank)
        np.add.at(counts[b], selected[block].ravel(), 1)
        for e in range(E):
            tokens, choices = np.nonzero(selected[block] == e)  # token order
            tokens = tokens + b * per_rank
            if capacity is not None and len(tokens) > capacity:
                if config.drop_policy == "probs":  # keep the highest gates, ties: earlier
                    order = np.argsort(-gates[tokens, choices], kind="stable")[:capacity]
                    keep = np.sort(order)
                else:  # keep the earliest tokens
                    keep = np.arange(capacity)
                drop = np.setdiff1d(np.arange(len(tokens)), keep)
                kept[tokens[drop], choices[drop]] = False
                tokens, choices = tokens[keep], choices[keep]
            slots += [(b, e, t, c) for t, c in zip(tokens.tolist(), choices.tolist())]
            if config.pad_to_capacity and capacity is not None:
                free = np.setdiff1d(np.arange(block.start, block.stop), tokens)
                pad = free[: max(0, min(capacity, per_rank) - len(tokens))]
                slots += [(b, e, t, -1) for t in pad.tolist()]
    slots.sort(key=lambda s: (s[0], s[1], s[2]))
    table = np.array(slots, dtype=np.int64).reshape(-1, 4)
    return Routing(
        scores,
        selected,
        gates,
        kept,
        capacity,
        counts,
        table[:, 2],
        table[:, 1],
        table[:, 3],
        table[:, 0],
    )


def choose_experts(logits, config, expert_bias=None):
    """``(scores, selected)``: each token's scores (T, E) and its ``top_k`` experts (T, k),
    best first, without capacity: the choice :func:`route` starts from (and all a traffic
    count needs).

    >>> choose_experts(np.array([[0.0, 2.0, 1.0]]), RouterConfig(3, 2))[1].tolist()
    [[1, 2]]
    """
    logits = np.asarray(logits, dtype=np.float64)
    if config.score == "softmax":
        z = np.exp(logits - logits.max(axis=-1, keepdims=True))
        scores = z / z.sum(axis=-1, keepdims=True)
    else:
        scores = 1.0 / (1.0 + np.exp(-logits))
    choice = scores if expert_bias is None else scores + expert_bias  # bias: choice only
    return scores, _top_k(choice, config)


def _top_k(choice, config):
    """(T, k) indices of the k best ``choice`` per row (ties: the lower expert), inside the
    best ``topk_groups`` groups when routing is group-limited."""
    T, E = choice.shape
    if config.groups > 1:
        per_group = choice.reshape(T, config.groups, E // config.groups)
        best = -np.sort(-per_group, axis=-1)[..., : config.top_k // config.topk_groups]
        group_order = np.argsort(-best.sum(axis=-1), axis=-1, kind="stable")
        allowed = np.zeros((T, config.groups), dtype=bool)
        np.put_along_axis(allowed, group_order[:, : config.topk_groups], True, axis=-1)
        choice = np.where(np.repeat(allowed, E // config.groups, axis=-1), choice, -np.inf)
    return np.argsort(-choice, axis=-1, kind="stable")[:, : config.top_k]


def gate_gradient_to_logits(routing, dgates, config, aux_grad=None):
    """``dL/dlogits`` (T, E) from ``dL/dgates`` (T, k) (zero where a choice was dropped),
    plus ``aux_grad``, a (T, E) gradient with respect to the scores."""
    g = routing.gates
    dg = np.where(routing.kept, dgates, 0.0)
    if config.normalize:  # g = s / sum(s): ds_j = (dg_j - sum_i dg_i g_i) / sum(s)
        chosen = np.take_along_axis(routing.scores, routing.selected, axis=-1)
        total = chosen.sum(axis=-1, keepdims=True)
        dg = (dg - (dg * g).sum(axis=-1, keepdims=True)) / total
    dscores = np.zeros_like(routing.scores)
    np.put_along_axis(dscores, routing.selected, dg, axis=-1)
    if aux_grad is not None:
        dscores = dscores + aux_grad
    s = routing.scores
    if config.score == "softmax":
        return s * (dscores - (dscores * s).sum(axis=-1, keepdims=True))
    return dscores * s * (1.0 - s)


def aux_loss(routing, config, ranks=1):
    """Switch's load-balancing loss ``coeff·E·Σ_i f_i·P_i`` on each source rank's tokens,
    averaged over the ranks, and its gradient with respect to the scores (T, E).

    ``f_i`` is the fraction of the rank's ``T·k`` choices that went to expert ``i`` (before
    dropping; a count, so no gradient flows through it) and ``P_i`` the mean probability the
    router gave expert ``i`` (sigmoid scores are first normalised per token, as Megatron-Core
    does).  It is smallest, ``coeff``, when both are uniform.

    >>> import numpy as np
    >>> config = RouterConfig(experts=2, top_k=1, aux_loss_coeff=1.0)
    >>> routing = route(np.array([[1.0, 0.0], [0.0, 1.0]]), config)
    >>> float(aux_loss(routing, config)[0])  # balanced: f = P = 1/2, E·Σ f·P = 1
    1.0
    """
    s = routing.scores
    T, E = s.shape
    per_rank = T // ranks
    probs, total = s, None
    if config.score == "sigmoid":
        total = s.sum(axis=-1, keepdims=True)
        probs = s / total
    f = routing.tokens_per_expert / (per_rank * config.top_k)  # (ranks, E)
    P = probs.reshape(ranks, per_rank, E).mean(axis=1)  # (ranks, E)
    loss = config.aux_loss_coeff * E * float((f * P).sum(axis=-1).mean())
    dprobs = np.repeat(config.aux_loss_coeff * E * f / (per_rank * ranks), per_rank, axis=0)
    if total is not None:  # through p = s / sum(s)
        dprobs = (dprobs - (dprobs * probs).sum(axis=-1, keepdims=True)) / total
    return loss, dprobs


def updated_expert_bias(bias, tokens_per_expert, rate):
    """DeepSeek-V3's auxiliary-loss-free update: each expert's bias moves by ``rate``
    towards balance, up if it took fewer tokens than the mean, down if more (Megatron-Core's
    ``get_updated_expert_bias``).  ``tokens_per_expert``: the whole batch's counts.

    >>> updated_expert_bias(np.zeros(3), np.array([6, 2, 1]), 0.001).tolist()
    [-0.001, 0.001, 0.001]
    """
    counts = np.asarray(tokens_per_expert, dtype=np.float64)
    return np.asarray(bias, dtype=np.float64) + rate * np.sign(counts.mean() - counts)


def _positive_int(value, what):
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ConfigError(f"{what}={value!r} must be a whole number >= 1, like {what}=2")


def _nearest_divisor(n, near):
    return min((d for d in range(1, n + 1) if n % d == 0), key=lambda d: (abs(d - near), d))
