"""Solutions to lesson 13 (from toy programs to real code).  Each name is the lesson's answer
slot of the same name, derived from the lesson's setup, never a number copied from its
output."""

import numpy as np

K, N, B = 4, 1024, 8  # ranks, float64 elements per rank, bytes per element
ALPHA, BETA = 2e-6, 25e9  # the ping-pong's link: 2 us, 25 GB/s
ROWS, COLS = 16, 24  # the heat stencil's plate, on a 2 x 2 grid of ranks


def fit_alpha_beta(sizes, times):
    """t = alpha + n / beta is a line in n: the intercept is alpha, the slope 1 / beta."""
    slope, intercept = np.polyfit(np.asarray(sizes, float), np.asarray(times, float), 1)
    return intercept, 1.0 / slope


# 13.1: each of the 2(K-1) steps sends one chunk of N/K elements: 2(K-1)/K · N · b
mpi_ring_bytes_answer = 2 * (K - 1) / K * N * B
# 13.2: K ranks send one message at each of the 2(K-1) steps
ring_messages_answer = 2 * K * (K - 1)
# 13.3: alpha + n / beta for n = 1 MiB
one_mib_time_answer = ALPHA + 2**20 / BETA
# 13.4
fit_alpha_beta_answer = fit_alpha_beta
# 13.5: n / (alpha + n / beta) = beta / 2  <=>  n = alpha · beta
half_bandwidth_size_answer = ALPHA * BETA
# 13.6: rank 0 (top left) has neighbours below and to the right only (PROC_NULL above and
# to the left): one halo row of COLS/2 + 2 values and one column of ROWS/2 + 2, 8 B each
halo_bytes_answer = ((COLS // 2 + 2) + (ROWS // 2 + 2)) * B
