"""レッスン 5 (コストモデル) の解答。各名前は、レッスンの同じ名前の解答欄に対応します。"""

import math


def crossover(K, alpha, beta):
    """L = ⌈log2 K⌉ として 2L(α + S/β) = 2(K-1)(α + S/(Kβ)) を S について解く:
    S·(L - (K-1)/K)/β = (K - 1 - L)·α。"""
    L = math.ceil(math.log2(K))
    return (K - 1 - L) * alpha * beta / (L - (K - 1) / K)


# 5.1: n = 1 MiB として α + n/β
send_time_answer = 5e-6 + 2**20 / 100e9
# 5.2: 2(K-1)·α = 2(K-1)/K·S/β  =>  S = K·α·β
balance_size_answer = 8 * 5e-6 * 100e9
# 5.3
crossover_answer = crossover
# 5.4: どのリンクも同時に 2 つの転送を運ぶので、それぞれが帯域幅の半分しか得られない
misordered_slowdown_answer = 2
