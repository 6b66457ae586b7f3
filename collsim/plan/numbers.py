"""Numbers as the planner computes and writes them: divisors and factors for the rules,
hints and suggestions; counts and FLOPs as the report, the search table and the memory
picture print them.

>>> divisors(98)
[1, 2, 7, 14, 49, 98]
>>> show(24.0), show(24.5), show(62.693877)
('24', '24.5', '62.69')
>>> factor(1536), factor(784)
('2^9·3', '2^4·7^2')
>>> format_count(174.6e9), format_flops(3.3e18), format_flops(1.5e14, per_second=True)
('174.6 B', '3.3 EFLOP', '150 TFLOP/s')
"""

import math

from .. import units

__all__ = ["divisors", "show", "factor", "tp_choices", "format_count", "format_flops"]


def divisors(n):
    """Positive divisors of ``n`` in ascending order."""
    small = [i for i in range(1, math.isqrt(n) + 1) if n % i == 0]
    return sorted(set(small + [n // i for i in small]))


def show(x):
    """A count as people write it: 24 for 24.0, else four significant digits."""
    return str(int(round(x))) if float(x).is_integer() else f"{x:.4g}"


def factor(n):
    """Prime factorization as text: ``1536`` -> ``'2^9·3'``."""
    parts, p = [], 2
    while p * p <= n:
        k = 0
        while n % p == 0:
            n, k = n // p, k + 1
        if k:
            parts.append(f"{p}^{k}" if k > 1 else str(p))
        p += 1
    if n > 1:
        parts.append(str(n))
    return "·".join(parts)


def tp_choices(cfg, d, limit=None):
    """tp values that divide hidden, heads, key/value heads and ffn hidden, up to ``limit``
    (default: GPUs per node, or the configured tp if larger)."""
    limit = limit or max(cfg.gpus_per_node, cfg.tp)
    if not cfg.hidden:
        return [t for t in divisors(limit)]
    common = math.gcd(cfg.hidden, cfg.heads, cfg.kv_groups, d.ffn_hidden)
    return [t for t in divisors(common) if t <= limit]


def format_count(n):
    """``174.6e9`` -> ``'174.6 B'`` (B = billion, as parameter counts are written)."""
    for prefix, factor in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= factor:
            return f"{n / factor:.4g} {prefix}"
    return f"{n:.4g}"


def format_flops(n, per_second=False):
    """``3.3e18`` -> ``'3.3 EFLOP'``; ``1.5e14, per_second=True`` -> ``'150 TFLOP/s'``
    (rates are :func:`collsim.units.format_flops`'s)."""
    if per_second:
        return units.format_flops(n)
    unit = "FLOP"
    for prefix, factor in (("E", 1e18), ("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6)):
        if abs(n) >= factor:
            return f"{n / factor:.4g} {prefix}{unit}"
    return f"{n:.4g} {unit}"
