"""Routings with the imbalance dialled: which experts a batch's tokens prefer.

A generator draws, for every token, ``top_k`` distinct target experts from a popularity
over the experts, and returns a *prior*: ``strength`` at the targets, 0 elsewhere, added
to the router's logits (:meth:`collsim.nn.MoE.forward`'s ``prior``).  It is data, like the
tokens: the router's weights and their gradients keep their form.

==============  =============================================================================
routing         popularity of expert i (E experts, ep ranks)
==============  =============================================================================
uniform         1: every expert alike (the "balanced" case simulators assume)
zipf            1/(i+1)^1.2: a few experts take most tokens (Zipf-skewed)
lognormal       exp(N(0, 1)) per expert, drawn from the seed: the per-expert loads seen in
                trained models are close to log-normal
hot             E for expert 0, 1 for the others: one hot expert
adversarial     1 for the experts of rank 0 (and the next, if fewer than top_k), 0 else:
                every token to one rank, the others receive none
==============  =============================================================================

Examples
--------
>>> import numpy as np
>>> prior = routing_prior("adversarial", 6, experts=8, top_k=2, ep=4, rng=np.random.default_rng(0))
>>> sorted(set(np.nonzero(prior)[1].tolist()))  # rank 0 holds experts 0 and 1
[0, 1]
"""

import numpy as np

from ...errors import check_choice

__all__ = [
    "ROUTINGS",
    "PRIOR_STRENGTH",
    "expert_popularity",
    "routing_prior",
    "routing_bias",
]

ROUTINGS = ("uniform", "zipf", "lognormal", "hot", "adversarial")
PRIOR_STRENGTH = 10.0  # logits: e^10 ≈ 22,000 to 1, so the targets are chosen
ZIPF_EXPONENT = 1.2


def check_routing(kind):
    """``kind`` if it is a routing generator's name, else a ConfigError naming the nearest."""
    return check_choice(kind, "routing", ROUTINGS)


def expert_popularity(kind, experts, top_k, ep, rng):
    """(E,) probabilities of each expert being one of a token's targets, before the draw
    without replacement."""
    check_routing(kind)
    i = np.arange(experts)
    if kind == "uniform":
        weights = np.ones(experts)
    elif kind == "zipf":
        weights = 1.0 / (i + 1.0) ** ZIPF_EXPONENT
    elif kind == "lognormal":
        weights = rng.lognormal(0.0, 1.0, experts)
    elif kind == "hot":
        weights = np.where(i == 0, float(experts), 1.0)
    else:  # the experts of rank 0, widened to top_k if it holds fewer
        weights = (i < max(experts // ep, top_k)).astype(float)
    return weights / weights.sum()


def routing_prior(kind, tokens, experts, top_k, ep, rng, strength=PRIOR_STRENGTH):
    """(tokens, E) prior: ``strength`` at each token's ``top_k`` drawn targets."""
    p = expert_popularity(kind, experts, top_k, ep, rng)
    prior = np.zeros((tokens, experts))
    for t in range(tokens):
        prior[t, rng.choice(experts, size=top_k, replace=False, p=p)] = strength
    return prior


def routing_bias(kind, experts, top_k, ep, rng, strength=PRIOR_STRENGTH):
    """(E,) expert bias with the popularity of ``kind``: ``strength · p_i / max p``.

    The per-token prior is data a single MoE call takes; a model trained on the mesh routes
    its own activations, so there the imbalance is dialled through the expert bias instead
    (it moves the choices, never the gates, as DeepSeek-V3's balancing bias does):
    ``"adversarial"`` sends every token to rank 0's experts and the other ranks get none.

    >>> routing_bias("adversarial", 4, 1, 2, np.random.default_rng(0)).tolist()
    [10.0, 10.0, 0.0, 0.0]
    """
    p = expert_popularity(kind, experts, top_k, ep, rng)
    return strength * p / p.max()
