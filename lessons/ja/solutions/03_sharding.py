"""Solutions to lesson 3 (sharding the model state).  Each name is the lesson's answer slot
of the same name: a formula or a function, never a number copied from the lesson's output."""

from collsim.parallel.pipeline.runner import toy_model

LAYERS, HIDDEN = 6, 32  # レッスンのおもちゃの Transformer
PSI = sum(p.size for p in toy_model(layers=LAYERS, hidden=HIDDEN, heads=2).params.values())
B = 8  # 数値計算で動く float64 の 1 要素あたりのバイト数
REPLICAS, SHARDS = 2, 4  # HSDP の実行: dp_replicate x dp_shard


def model_state_per_rank(stage, n, psi):
    """The ZeRO paper's model states per rank: bf16 parameters (2) and gradients (2), fp32
    master weights, m and v (12); stage s shards the last s of the three over n ranks."""
    params = 2 * psi / (n if stage >= 3 else 1)
    grads = 2 * psi / (n if stage >= 2 else 1)
    optimizer = 12 * psi / (n if stage >= 1 else 1)
    return params + grads + optimizer


# 3.1
model_state_per_rank_answer = model_state_per_rank
# 3.2: どのユニット (ブロック) も、順伝播の前と逆伝播の前にもう一度 all-gather で集める
all_gathers_answer = 2 * LAYERS
# 3.3: R·S 個のランクがそれぞれ、自分のシャード (B バイトの要素が Psi/S 個) の 2(R-1)/R を送る
hsdp_inter_node_answer = REPLICAS * SHARDS * 2 * (REPLICAS - 1) / REPLICAS * PSI / SHARDS * B
