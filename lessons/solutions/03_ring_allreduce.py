"""Solutions to lesson 3: ring all-reduce, step by step."""


def chunk_sent(rank, step, K):
    """Reduce-scatter step s: rank r sends chunk (r - s - 1) mod K (the one it received last,
    starting from the chunk just before its own).  All-gather step s' = s - (K - 1): rank r
    forwards chunk (r - s') mod K, which is (r - s + K - 1) mod K = (r - s - 1) mod K again."""
    return (rank - step - 1) % K


SOLUTIONS = {
    # 2(K-1)/K · N · b with K = 8 and N·b = 64 MiB
    "3.1": 2 * (8 - 1) / 8 * 64 * 2**20,
    "3.2": chunk_sent,
    # the gather step: K - 1 = 7 whole buffers arrive on the root's down-link
    "3.3": (8 - 1) * 64 * 2**20,
}
