"""Which layers each (stage, chunk) holds: Megatron's layout of layers over pipeline stages.

Layers are cut into ``p * v`` consecutive blocks. Block ``k`` is virtual stage ``k``, which lives
on stage ``k mod p`` as chunk ``k // p``, so with ``v = 2`` stage 0 holds the first block and the
block just past the middle.

Examples
--------
>>> split_layers(8, p=2, v=2)
((range(0, 2), range(4, 6)), (range(2, 4), range(6, 8)))
"""

import warnings

from ....errors import ConfigError
from ._checks import check_count, nearest_multiples

__all__ = ["split_layers"]


def split_layers(n_layers, p, v=1):
    """The layer ranges of every (stage, chunk): ``split_layers(...)[stage][chunk]``.

    Parameters
    ----------
    n_layers : int
        Layers in the model.
    p : int
        Pipeline stages.
    v : int, default 1
        Model chunks per stage (interleaved schedule).

    Returns
    -------
    tuple of tuple of range
        ``result[s][c]`` is the layers of chunk ``c`` on stage ``s`` (virtual stage ``c p + s``).

    Raises
    ------
    ConfigError
        If ``n_layers < p * v`` (some chunk would be empty), or ``v > 1`` and ``n_layers`` is not
        a multiple of ``p * v`` (Megatron requires equal chunks for the interleaved schedule).

    Warns
    -----
    UserWarning
        If ``v == 1`` and ``n_layers`` is not a multiple of ``p``. The split is still valid
        (the first ``n_layers mod p`` stages get one layer more, like ``numpy.array_split``),
        but the slowest stage sets the pace of the whole pipeline; divisibility is recommended,
        not required (Megatron-LM lets the first and last stage sizes be set apart).

    Examples
    --------
    >>> split_layers(12, p=4)
    ((range(0, 3),), (range(3, 6),), (range(6, 9),), (range(9, 12),))
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     split_layers(10, p=4)
    ((range(0, 3),), (range(3, 6),), (range(6, 8),), (range(8, 10),))
    >>> print(caught[0].message)
    n_layers=10 is not a multiple of p=4: stages get 3, 3, 2, 2 layers and the slowest ...
    """
    check_count("n_layers", n_layers)
    check_count("p", p)
    check_count("v", v)
    chunks = p * v
    if n_layers < chunks:
        raise ConfigError(
            f"n_layers={n_layers} is fewer than p*v={p}*{v}={chunks} model chunks; every chunk "
            f"needs at least one layer; nearest valid choice: n_layers={chunks}"
        )
    if v > 1 and n_layers % chunks:
        choices = " or ".join(f"n_layers={c}" for c in nearest_multiples(n_layers, chunks))
        raise ConfigError(
            f"with v={v} model chunks per stage, n_layers={n_layers} must be a multiple of "
            f"p*v={chunks} so every chunk is the same size; nearest valid choice: {choices}"
        )
    base, extra = divmod(n_layers, chunks)
    sizes = [base + (k < extra) for k in range(chunks)]  # extra is 0 whenever v > 1
    if extra:
        choices = " or ".join(f"n_layers={c}" for c in nearest_multiples(n_layers, p))
        warnings.warn(
            f"n_layers={n_layers} is not a multiple of p={p}: stages get "
            f"{', '.join(map(str, sizes))} layers and the slowest stage sets the pace of the "
            f"pipeline; for an even split use {choices}",
            UserWarning,
            stacklevel=2,
        )
    starts = [sum(sizes[:k]) for k in range(chunks)]
    blocks = [range(start, start + size) for start, size in zip(starts, sizes)]
    return tuple(tuple(blocks[c * p + s] for c in range(v)) for s in range(p))
