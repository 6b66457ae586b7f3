"""Megatron-LM's batch rule, ``global_batch = micro_batch · dp · accumulation``, and how a
batch is cut over data-parallel ranks.

Each of the ``dp`` ranks takes ``global_batch / dp`` consecutive samples (the batch-64,
dp=4 example: with 64 samples on 4 ranks, rank 0 takes samples 0-15) and runs them as
``accumulation`` micro-batches of ``micro_batch`` samples.

>>> resolve_batch(64, 4), resolve_batch(64, 4, micro_batch=4)
((16, 1), (4, 4))
>>> shard_rows(list(range(8)), 4, 1)
[2, 3]
"""

import numpy as np

from ..errors import ConfigError, nearest_first

__all__ = ["divisors", "resolve_batch", "shard_rows", "split_batch"]


def divisors(n):
    """Positive divisors of ``n`` in ascending order: every degree or size that splits
    ``n`` evenly.  Built from ``n``'s prime factors, so a width like 2**62 takes a
    moment, not a search of every number below it.

    >>> divisors(98), divisors(1), len(divisors(2**62))
    ([1, 2, 7, 14, 49, 98], [1], 63)
    """
    exponents = {}  # prime -> its power in n
    rest, p = n, 2
    while p * p <= rest:
        while rest % p == 0:
            exponents[p] = exponents.get(p, 0) + 1
            rest //= p
        p += 1 if p == 2 else 2
    if rest > 1:
        exponents[rest] = exponents.get(rest, 0) + 1
    found = [1]
    for prime, power in exponents.items():
        found = [d * prime**i for d in found for i in range(power + 1)]
    return sorted(found)


def resolve_batch(global_batch, dp, micro_batch=None, accumulation=None, max_dp=None):
    """``(micro_batch, accumulation)`` with ``global_batch = micro_batch · dp · accumulation``.

    Either may be None (derived from the others; accumulation defaults to 1 when both
    are).  Raises a ConfigError that names all four numbers and the choices that work:
    every dp up to ``max_dp`` (default: any) that divides the batch, nearest first.

    >>> resolve_batch(64, 3, max_dp=64)
    Traceback (most recent call last):
    ...
    collsim.errors.ConfigError: global batch 64 with dp 3 and accumulation 1 needs micro batch \
64/(3·1) = 21.33, not a whole number: global_batch = micro_batch · dp · accumulation \
(Megatron-LM); dp 3 does not divide global batch 64 (dp values that do: 2, 4, 1, 8, 16, 32, 64)

    >>> resolve_batch(64, 4)
    (16, 1)
    >>> resolve_batch(64, 4, micro_batch=4)
    (4, 4)
    >>> resolve_batch(64, 4, micro_batch=3, accumulation=2)
    Traceback (most recent call last):
    ...
    collsim.errors.ConfigError: global batch 64 != micro batch 3 × dp 4 × accumulation 2 = 24: \
global_batch = micro_batch · dp · accumulation (Megatron-LM); with global batch 64 and dp 4 each \
rank takes 16 samples per step, so micro batch × accumulation must be 16: micro batch 1 \
(accumulation 16), 2 (8), 4 (4), 8 (2), 16 (1)
    """
    given = (
        ("global batch", global_batch),
        ("dp", dp),
        ("micro batch", micro_batch),
        ("accumulation", accumulation),
    )
    for name, value in given:
        bad_type = isinstance(value, bool) or not isinstance(value, int | np.integer)
        if value is not None and (bad_type or value < 1):
            raise ConfigError(f"{name} must be a positive integer, got {value!r}")
    if accumulation is None and micro_batch is None:
        accumulation = 1
    per_rank, rest = divmod(global_batch, dp)
    if accumulation is None and not rest and per_rank % micro_batch == 0:
        accumulation = per_rank // micro_batch
    if micro_batch is None and not rest and per_rank % accumulation == 0:
        micro_batch = per_rank // accumulation
    if None not in (micro_batch, accumulation) and micro_batch * dp * accumulation == global_batch:
        return int(micro_batch), int(accumulation)

    if micro_batch is None or accumulation is None:
        name, other, known = ("micro batch", "accumulation", accumulation)
        if accumulation is None:
            name, other, known = ("accumulation", "micro batch", micro_batch)
        head = (
            f"global batch {global_batch} with dp {dp} and {other} {known} needs "
            f"{name} {global_batch}/({dp}·{known}) = {global_batch / (dp * known):.4g}, "
            "not a whole number"
        )
    else:
        head = (
            f"global batch {global_batch} != micro batch {micro_batch} × dp {dp} × "
            f"accumulation {accumulation} = {micro_batch * dp * accumulation}"
        )
    message = f"{head}: global_batch = micro_batch · dp · accumulation (Megatron-LM); "
    if rest:
        fits = [d for d in divisors(global_batch) if max_dp is None or d <= max_dp]
        message += (
            f"dp {dp} does not divide global batch {global_batch} "
            f"(dp values that do: {', '.join(map(str, nearest_first(dp, fits)))})"
        )
    else:
        choices = ", ".join(
            f"{m} ({per_rank // m})" if i else f"{m} (accumulation {per_rank // m})"
            for i, m in enumerate(divisors(per_rank))
        )
        message += (
            f"with global batch {global_batch} and dp {dp} each rank takes {per_rank} samples "
            f"per step, so micro batch × accumulation must be {per_rank}: micro batch {choices}"
        )
    raise ConfigError(message)


def shard_rows(x, parts, index):
    """Rows ``index·n/parts .. (index+1)·n/parts`` of ``x`` (rank ``index``'s samples)."""
    n = len(x)
    if n % parts:
        raise ConfigError(f"cannot split {n} rows into {parts} equal shards")
    per = n // parts
    return x[index * per : (index + 1) * per]


def split_batch(array, m):
    """``m`` equal micro-batches along the first axis; ConfigError if they cannot be equal.

    >>> [part.tolist() for part in split_batch(np.arange(4), 2)]
    [[0, 1], [2, 3]]
    """
    array = np.asarray(array)
    rows = array.shape[0] if array.ndim else 0
    if rows < m or rows % m:
        choices = [c for c in ((rows // m) * m, (rows // m + 1) * m) if c >= m]
        raise ConfigError(
            f"a batch of {rows} rows does not split into m={m} equal micro-batches; the mean "
            f"loss needs equal ones; nearest valid batch: {' or '.join(map(str, choices))}"
        )
    return np.split(array, m)
