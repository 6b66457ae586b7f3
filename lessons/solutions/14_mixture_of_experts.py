"""Solutions to lesson 14 (mixture of experts).  Each name is the lesson's answer slot of the
same name, derived from the lesson's setup and the definitions, never a number copied from
the lesson's output."""

import math

from collsim import hardware

# 14.1: token 0's logits are 2, 1, 0, -1; top-2 picks experts 0 and 1, and the gate of
# expert 0 is its softmax score renormalised over the two: e^2 / (e^2 + e^1)
first_gate_answer = math.exp(2.0) / (math.exp(2.0) + math.exp(1.0))

# 14.2: a rank holds E/ep experts; a token misses it when all k experts are among the other
# E - E/ep: C(E - E/ep, k) / C(E, k); the ranks reached are ep times the chance of a hit
E, K, EP = 256, 8, 8
destination_ranks_answer = EP * (1 - math.comb(E - E // EP, K) / math.comb(E, K))

# 14.3: the off-diagonal entries of rank 0's row of the lesson's table, 16 float64 values a
# row; the lesson prints the table as it came out of its routing, so this reads the same
# routing again (the seed and generator of the lesson)


def _rank0_rows_elsewhere():
    import numpy as np

    from collsim.nn import MoE, RouterConfig
    from collsim.parallel.experts.generators import routing_prior

    rng = np.random.default_rng(14)
    moe = MoE.init(16, 32, RouterConfig(8, 2), rng)
    x = rng.normal(size=(64, 16))
    rng.normal(size=(64, 16))  # the targets, drawn next
    prior = routing_prior("zipf", 64, 8, 2, 4, rng)
    routing = moe.forward(x[:16], prior=prior[:16])[1]["routing"]  # rank 0 routes its 16
    on_rank = routing.slot_expert // 2  # 2 experts a rank
    return int((on_rank != 0).sum()), routing


_elsewhere, _routing = _rank0_rows_elsewhere()
dispatch_bytes_answer = _elsewhere * 16 * 8

# 14.4: capacity = ceil(T·k/E·cf) of rank 0's T = 16 tokens; each expert's choices over it
# are dropped
_capacity = math.ceil(16 * 2 / 8 * 1.1)
dropped_answer = sum(max(0, int(n) - _capacity) for n in _routing.tokens_per_expert[0])

# 14.5: each rank's loss is the mean over its T/ep tokens, so an expert's gradient weighs
# every token by ep/T instead of 1/T: ep times one device's, ep = 2
expert_grad_factor_answer = 2.0


# 14.6: average the replicated router over the group; divide the experts' by ep
def fixed_sync_answer(rank, layer, grads):
    router = yield from rank.all_reduce(grads["router"], group=layer.group, op="avg")
    experts = {key: grads[key] / layer.ep for key in ("w_gate", "w_up", "w_down")}
    return {"router": router, **experts}


# 14.7: the tokens of rank 0 with an expert on node 1 cross once each, in FP8 (1 byte a
# value and a 4-byte scale per 128 values), through one NIC at its effective rate


def _crossing():
    from collsim.parallel.experts.deepep import DeepEPConfig, deepep_routing

    config = DeepEPConfig(tokens=512)
    reaches = deepep_routing(config, nodes=2, gpus_per_node=8)
    return int(reaches[0, :, 8:].any(axis=1).sum()), config


_tokens, _config = _crossing()
_row = round(_config.hidden * (1 + 4 / 128))
rdma_leg_answer = _tokens * _row / hardware.preset("dgx-h100").inter.effective_rate
