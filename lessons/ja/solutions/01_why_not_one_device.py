"""Solutions to lesson 1: why one device is not enough.  Each name is the lesson's answer
slot of the same name."""


def activation_bytes(L, B, s, h, a):
    """Korthikanti et al. 2022, Table 2: s·b·h·(34 + 5·a·s/h) bytes per layer, times L."""
    return L * s * B * h * (34 + 5 * a * s / h)


# 1.1: パラメータ 1 個あたり 2 (bf16 の重み) + 2 (bf16 の勾配) + 4 + 4 + 4 (fp32 コピー, Adam の m, v)
model_state_bytes_answer = (2 + 2 + 4 + 4 + 4) * 7e9
# 1.2
activation_bytes_answer = activation_bytes
# 1.3: トークン数が 2 倍になり、アテンションスコアの項 5as/h も 2 倍になる
seq_growth_answer = activation_bytes(1, 1, 4096, 4096, 32) / activation_bytes(1, 1, 2048, 4096, 32)
# 1.4: 順伝播 2N + 逆伝播 4N に、順伝播をもう 1 回 (2N) 足す
recompute_flops_answer = (2 + 4 + 2) / (2 + 4)
