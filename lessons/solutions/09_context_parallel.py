"""Solutions to lesson 9 (context parallelism).  Each name is the lesson's answer slot of the
same name: a formula or a function, never a number copied from the lesson's output."""

CP_CONTIGUOUS = 8  # exercise 9.2's cp


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


# 9.1
ring_layer_bytes_answer = ring_layer_bytes
# 9.2: rank cp−1 does cp − 1/2 tile pairs, the mean is cp/2: (2cp−1)/cp
last_rank_share_answer = (2 * CP_CONTIGUOUS - 1) / CP_CONTIGUOUS
# 9.3
balanced_positions_answer = balanced_positions
