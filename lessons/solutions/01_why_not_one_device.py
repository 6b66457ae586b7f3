"""Solutions to lesson 1: why one device is not enough."""


def activation_bytes(L, B, s, h, a):
    """Korthikanti et al. 2022, Table 2: s·b·h·(34 + 5·a·s/h) bytes per layer, times L."""
    return L * s * B * h * (34 + 5 * a * s / h)


SOLUTIONS = {
    # 2 (bf16 weights) + 2 (bf16 gradients) + 4 + 4 + 4 (fp32 copy, Adam m, v) per parameter
    "1.1": (2 + 2 + 4 + 4 + 4) * 7e9,
    "1.2": activation_bytes,
    # twice the tokens, and the attention-score term 5as/h doubles as well
    "1.3": activation_bytes(1, 1, 4096, 4096, 32) / activation_bytes(1, 1, 2048, 4096, 32),
    # forward 2N + backward 4N, plus one more forward 2N
    "1.4": (2 + 4 + 2) / (2 + 4),
}
