"""レッスン 7 (テンソル並列) の解答。各名前は、レッスンの同じ名前の解答欄に対応します。
どれも式か関数で、レッスンの出力から数値を写したものではありません。"""

import numpy as np

# レッスンの入力
TP, BATCH, D_IN, BYTES = 4, 64, 16, 8
B, S, H = 4, 8, 16


def ring_all_reduce_bytes(k, elements, nbytes):
    """リング all-reduce で各ランクが送るバイト数: 2(K-1)/K · N · b。"""
    return 2 * (k - 1) / k * elements * nbytes


def my_row_shards(x, w, tp):
    """ランク i は x の列 i·n/t .. (i+1)·n/t と、w の同じ番号の行を持つ。"""
    x_parts = np.split(np.asarray(x), tp, axis=-1)
    w_parts = np.split(np.asarray(w), tp, axis=0)
    return list(zip(x_parts, w_parts))


# 7.4: ノードをまたぐリング。どのステップも GPU -> NIC -> ファブリック -> NIC -> GPU のホップを待つ
ALPHA = 2 * 5e-6  # inter_latency = 5 us のリンク 2 本
BETA = 50e9  # inter = 50 GB/s
SIZE = 2048 * 12288 * 2  # (1, 2048, 12288) の bf16 の活性値 1 つ
K = 4

# 7.1: dX の形状は X と同じ: BATCH × D_IN 個の float64 要素
dx_bytes_answer = ring_all_reduce_bytes(TP, BATCH * D_IN, BYTES)
# 7.2
row_shards_answer = my_row_shards
# 7.3: 順伝播の g と逆伝播の f: (B, S, H) の活性値 1 つの all-reduce が 2 回
mlp_bytes_answer = 2 * ring_all_reduce_bytes(TP, B * S * H, BYTES)
# 7.4: T = 2(K-1)(α + S/(Kβ)) (秒)
cross_node_time_answer = 2 * (K - 1) * (ALPHA + SIZE / (K * BETA))
