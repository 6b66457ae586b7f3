"""Solutions to lesson 9 (context parallelism).  Each name is the lesson's answer slot of the
same name: a formula or a function, never a number copied from the lesson's output."""

CP_CONTIGUOUS = 8  # exercise 9.2's cp
SEQ = 16  # the lesson's sequence length


def ring_layer_bytes(batch, seq, d_model, cp, b):
    """One K/V block is 2·B·(S/cp)·D·b bytes: cp−1 hops forward, cp−1 (K/V) + cp (dK/dV)
    backward, 3cp−2 blocks per layer."""
    block = 2 * batch * (seq // cp) * d_model * b
    return (3 * cp - 2) * block if cp > 1 else 0


def balanced_positions(seq, cp, i):
    """Chunk i of 2·cp, then chunk 2cp−1−i."""
    chunk = seq // (2 * cp)
    early = range(i * chunk, (i + 1) * chunk)
    late = range((2 * cp - 1 - i) * chunk, (2 * cp - i) * chunk)
    return [*early, *late]


def last_rank_share(seq, cp):
    """The last rank's kept (query, key) pairs over the mean, contiguous layout."""
    tile = seq // cp
    pairs = [i * tile * tile + tile * (tile + 1) // 2 for i in range(cp)]
    return pairs[-1] / (sum(pairs) / cp)


# 9.1
ring_layer_bytes_answer = ring_layer_bytes
# 9.2: tiles of L = S/cp tokens; rank i keeps i·L² + L(L+1)/2 (query, key) pairs, the
# diagonal included; the last rank's over the mean (→ (2cp−1)/cp as the tiles grow)
last_rank_share_answer = last_rank_share(SEQ, CP_CONTIGUOUS)
# 9.3
balanced_positions_answer = balanced_positions
