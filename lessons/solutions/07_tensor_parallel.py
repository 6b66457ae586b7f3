"""Solutions to lesson 7 (tensor parallel).  Each name is the lesson's answer slot of the same
name: a formula or a function, never a number copied from the lesson's output."""

import numpy as np

# the lesson's inputs
TP, BATCH, D_IN, BYTES = 4, 64, 16, 8
B, S, H = 4, 8, 16


def ring_all_reduce_bytes(k, elements, nbytes):
    """Bytes each rank sends in a ring all-reduce: 2(K-1)/K · N · b."""
    return 2 * (k - 1) / k * elements * nbytes


def my_row_shards(x, w, tp):
    """Rank i holds columns i·n/t .. (i+1)·n/t of x and the same rows of w."""
    x_parts = np.split(np.asarray(x), tp, axis=-1)
    w_parts = np.split(np.asarray(w), tp, axis=0)
    return list(zip(x_parts, w_parts))


# 7.4: the cross-node ring; every step waits for a hop GPU -> NIC -> fabric -> NIC -> GPU
ALPHA = 2 * 5e-6  # two links of inter_latency = 5 us
BETA = 50e9  # inter = 50 GB/s
SIZE = 2048 * 12288 * 2  # one (1, 2048, 12288) bf16 activation
K = 4

# 7.1: dX has the shape of X: BATCH × D_IN float64 elements
dx_bytes_answer = ring_all_reduce_bytes(TP, BATCH * D_IN, BYTES)
# 7.2
row_shards_answer = my_row_shards
# 7.3: g in the forward and f in the backward: two all-reduces of one (B, S, H) activation
mlp_bytes_answer = 2 * ring_all_reduce_bytes(TP, B * S * H, BYTES)
# 7.4: T = 2(K-1)(α + S/(Kβ)), in seconds
cross_node_time_answer = 2 * (K - 1) * (ALPHA + SIZE / (K * BETA))
