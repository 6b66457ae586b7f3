"""Solutions to lesson 5: cost models.  Each name is the lesson's answer slot of the same
name."""

import math


def crossover(K, alpha, beta):
    """Solve 2L(α + S/β) = 2(K-1)(α + S/(Kβ)) for S, with L = ⌈log2 K⌉:
    S·(L - (K-1)/K)/β = (K - 1 - L)·α."""
    L = math.ceil(math.log2(K))
    return (K - 1 - L) * alpha * beta / (L - (K - 1) / K)


# 5.1: α + n/β with n = 1 MiB
send_time_answer = 5e-6 + 2**20 / 100e9
# 5.2: 2(K-1)·α = 2(K-1)/K·S/β  =>  S = K·α·β
balance_size_answer = 8 * 5e-6 * 100e9
# 5.3
crossover_answer = crossover
# 5.4: every link carries two transfers at once, so each gets half the bandwidth
misordered_slowdown_answer = 2
