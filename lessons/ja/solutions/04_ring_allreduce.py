"""Solutions to lesson 4: ring all-reduce, step by step.  Each name is the lesson's answer
slot of the same name."""


def chunk_sent(rank, step, K):
    """Steps are numbered from 1.  Reduce-scatter step s: rank r sends chunk (r - s) mod K
    (the one it received last, starting from the chunk just before its own).  All-gather step
    s = K - 1 + s': rank r forwards chunk (r + 1 - s') mod K, which is (r - s) mod K again."""
    return (rank - step) % K


# 4.1: K = 8、N·b = 64 MiB として 2(K-1)/K · N · b
ring_bytes_answer = 2 * (8 - 1) / 8 * 64 * 2**20
# 4.2
chunk_sent_answer = chunk_sent
# 4.3: 集めるステップで、バッファ K - 1 = 7 個分が丸ごとルートの下りリンクに届く
root_link_bytes_answer = (8 - 1) * 64 * 2**20
