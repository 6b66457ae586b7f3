"""Solutions to lesson 3 (sharding the model state).  Each name is the lesson's answer slot
of the same name: a formula or a function, never a number copied from the lesson's output."""

from collsim.parallel.pipeline.runner import toy_model

LAYERS, HIDDEN = 6, 32  # the lesson's toy transformer
PSI = sum(p.size for p in toy_model(layers=LAYERS, hidden=HIDDEN, heads=2).params.values())
B = 8  # bytes per float64 element the numerics move
REPLICAS, SHARDS = 2, 4  # the HSDP run: dp_replicate x dp_shard


def model_state_per_rank(stage, n, psi):
    """The ZeRO paper's model states per rank: bf16 parameters (2) and gradients (2), fp32
    master weights, m and v (12); stage s shards the last s of the three over n ranks."""
    params = 2 * psi / (n if stage >= 3 else 1)
    grads = 2 * psi / (n if stage >= 2 else 1)
    optimizer = 12 * psi / (n if stage >= 1 else 1)
    return params + grads + optimizer


# 3.1
model_state_per_rank_answer = model_state_per_rank
# 3.2: every unit (block) is gathered before its forward and again before its backward
all_gathers_answer = 2 * LAYERS
# 3.3: each of the R·S ranks sends 2(R-1)/R of its shard (Psi/S elements of B bytes)
hsdp_inter_node_answer = REPLICAS * SHARDS * 2 * (REPLICAS - 1) / REPLICAS * PSI / SHARDS * B
