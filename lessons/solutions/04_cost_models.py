"""Solutions to lesson 4: cost models."""

import math


def crossover(K, alpha, beta):
    """Solve 2L(α + S/β) = 2(K-1)(α + S/(Kβ)) for S, with L = ⌈log2 K⌉:
    S·(L - (K-1)/K)/β = (K - 1 - L)·α."""
    L = math.ceil(math.log2(K))
    return (K - 1 - L) * alpha * beta / (L - (K - 1) / K)


SOLUTIONS = {
    # α + n/β with n = 1 MiB
    "4.1": 5e-6 + 2**20 / 100e9,
    # 2(K-1)·α = 2(K-1)/K·S/β  =>  S = K·α·β
    "4.2": 8 * 5e-6 * 100e9,
    "4.3": crossover,
    # every link carries two transfers at once, so each gets half the bandwidth
    "4.4": 2,
}
