"""レッスン 13 (おもちゃのプログラムから実際のコードへ) の解答です。各名前はレッスンの同じ
名前の解答欄にあたり、レッスンの出力から数値を写すのではなく、レッスンの設定から導いて
います。"""

import numpy as np

K, N, B = 4, 1024, 8  # ランク数、ランクあたりの float64 要素数、要素あたりのバイト数
ALPHA, BETA = 2e-6, 25e9  # ピンポンのリンク: 2 us、25 GB/s


def fit_alpha_beta(sizes, times):
    """t = alpha + n / beta は n の直線: 切片が alpha、傾きが 1 / beta。"""
    slope, intercept = np.polyfit(np.asarray(sizes, float), np.asarray(times, float), 1)
    return intercept, 1.0 / slope


# 13.1: 2(K-1) ステップのそれぞれで N/K 要素のチャンクを 1 つ送る: 2(K-1)/K · N · b
mpi_ring_bytes_answer = 2 * (K - 1) / K * N * B
# 13.2: 2(K-1) ステップのそれぞれで、K 個のランクが 1 通ずつメッセージを送る
ring_messages_answer = 2 * K * (K - 1)
# 13.3: n = 1 MiB での alpha + n / beta
one_mib_time_answer = ALPHA + 2**20 / BETA
# 13.4
fit_alpha_beta_answer = fit_alpha_beta
# 13.5: n / (alpha + n / beta) = beta / 2  <=>  n = alpha · beta
half_bandwidth_size_answer = ALPHA * BETA
