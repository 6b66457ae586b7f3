"""Solutions to lesson 1: why one device is not enough.  Each name is the lesson's answer
slot of the same name."""


def activation_bytes(L, B, s, h, a):
    """Korthikanti et al. 2022, Table 2: s·b·h·(34 + 5·a·s/h) bytes per layer, times L."""
    return L * s * B * h * (34 + 5 * a * s / h)


# 1.1: 2 (bf16 weights) + 2 (bf16 gradients) + 4 + 4 + 4 (fp32 copy, Adam m, v) per parameter
model_state_bytes_answer = (2 + 2 + 4 + 4 + 4) * 7e9
# 1.2
activation_bytes_answer = activation_bytes
# 1.3: twice the tokens, and the attention-score term 5as/h doubles as well
seq_growth_answer = activation_bytes(1, 1, 4096, 4096, 32) / activation_bytes(1, 1, 2048, 4096, 32)
# 1.4: forward 2N + backward 4N, plus one more forward 2N
recompute_flops_answer = (2 + 4 + 2) / (2 + 4)
