"""What ``collsim verify cp | nd`` refuses before training: the mesh, the flags, the model.

:func:`resolve_mesh` turns the flags into Accelerate's sizes, :func:`parallel_config` into
the trainer's :class:`~collsim.parallel.config.ParallelConfig` (a combination the trainer
refuses is refused here, by the flags, with the trainer's reason), and :func:`check_model`
refuses heads, sequences and widths the cp and tp splits cannot take.  ``names`` maps an
option to its flag (``{"cp": "--cp"}``) so a refusal says what the user typed.

>>> parallel_config(resolve_mesh("nd", dp_shard=2, cp=2), variant="ring", layout="balanced",
...                 microbatches=1).zero
3
"""

import difflib

import numpy as np

from ..errors import ConfigError
from ..parallel.config import ParallelConfig
from ..parallel.context.layouts import check_sequence
from ..parallel.context.ulysses import check_heads
from ..parallel.tensor import check_tp
from .checks import LIMITS

__all__ = [
    "CONTEXT_SCHEMES",
    "PIPELINE_T_F",
    "resolve_mesh",
    "parallel_config",
    "check_model",
    "whole",
    "choice",
    "flag_name",
    "as_given",
]

CONTEXT_SCHEMES = ("cp", "nd")  # context parallel; Accelerate's N-D mesh (+ pp)
PIPELINE_T_F = 1e-9  # s: a pipeline needs passes that take time; 1 ns adds nothing visible


def flag_name(names, key):
    """How the user spelled option ``key`` (``"--cp"``), or the keyword itself."""
    return names.get(key, key)


def as_given(names, key, value):
    """``--cp 0`` when the user gave a flag, else ``cp=0``."""
    what = flag_name(names, key)
    return f"{what} {value}" if what.startswith("-") else f"{what}={value!r}"


def whole(value, key, names):
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        what = flag_name(names, key)
        example = f"{what} 2" if what.startswith("-") else f"{what}=2"
        raise ConfigError(
            f"{as_given(names, key, value)}: must be a whole number >= 1, like {example}"
        )
    return int(value)


def choice(value, key, choices, names):
    if value not in choices:
        guess = difflib.get_close_matches(str(value), choices, n=1, cutoff=0)[0]
        raise ConfigError(
            f"{as_given(names, key, value)}: not one of {', '.join(choices)}; "
            f"nearest valid choice {guess!r}"
        )
    return value


def resolve_mesh(
    scheme, *, cp=None, dp=None, dp_replicate=None, dp_shard=None, tp=None, pp=None, names=None
):
    """Accelerate's sizes ``{"dp_replicate", "dp_shard", "cp", "tp", "pp"}`` of ``scheme``.

    ``cp``: ``dp`` plain replicas (default 1) of a ``cp`` group (default 2); the other
    sizes do not apply.  ``nd``: every size defaults to 1.

    >>> resolve_mesh("cp", cp=4)
    {'dp_replicate': 1, 'dp_shard': 1, 'cp': 4, 'tp': 1, 'pp': 1}
    >>> resolve_mesh("cp", cp=2, tp=2, names={"tp": "--tp"})
    Traceback (most recent call last):
    ...
    collsim.errors.ConfigError: --tp 2: applies to scheme 'nd', not to 'cp' (give verify nd \
--cp C --tp T)
    """
    names = names or {}
    if scheme not in CONTEXT_SCHEMES:
        raise ConfigError(f"unknown scheme {scheme!r}: choose one of {', '.join(CONTEXT_SCHEMES)}")
    if scheme == "cp":
        for key, value in (
            ("dp_replicate", dp_replicate),
            ("dp_shard", dp_shard),
            ("tp", tp),
            ("pp", pp),
        ):
            if value is not None:
                raise ConfigError(
                    f"{as_given(names, key, value)}: applies to scheme 'nd', not "
                    "to 'cp' (give verify nd --cp C --tp T)"
                )
        sizes = {
            "dp_replicate": 1 if dp is None else dp,
            "dp_shard": 1,
            "cp": 2 if cp is None else cp,
            "tp": 1,
            "pp": 1,
        }
        keys = {"dp_replicate": "dp"}
    else:
        if dp is not None:
            raise ConfigError(
                f"{as_given(names, 'dp', dp)}: applies to scheme 'cp'; nd's dp is "
                f"{flag_name(names, 'dp_replicate')} × {flag_name(names, 'dp_shard')}"
            )
        given = {"dp_replicate": dp_replicate, "dp_shard": dp_shard, "cp": cp, "tp": tp, "pp": pp}
        sizes = {k: 1 if v is None else v for k, v in given.items()}
        keys = {}
    for key, value in sizes.items():
        sizes[key] = whole(value, keys.get(key, key), names)
    world = int(np.prod(list(sizes.values())))
    if world > LIMITS["ranks"]:
        shown = " × ".join(as_given(names, keys.get(k, k), v) for k, v in sizes.items() if v > 1)
        raise ConfigError(
            f"{shown} = {world} ranks: more than the {LIMITS['ranks']} a "
            "verification runs in seconds; choose a mesh of at most "
            f"{LIMITS['ranks']} ranks"
        )
    return sizes


def parallel_config(sizes, *, variant, layout, microbatches, names=None):
    """The trainer's :class:`ParallelConfig` for Accelerate's ``sizes``; a combination the
    trainer refuses is refused here, by the flags, with the trainer's reason."""
    names = names or {}
    dp = sizes["dp_replicate"] * sizes["dp_shard"]
    zero = 3 if sizes["dp_shard"] > 1 else 0
    pp = sizes["pp"]
    try:
        return ParallelConfig(
            dp=dp,
            tp=sizes["tp"],
            pp=pp,
            cp=sizes["cp"],
            cp_variant=variant,
            cp_layout=layout,
            zero=zero,
            dp_replicate=sizes["dp_replicate"],
            microbatches=microbatches,
            t_f=PIPELINE_T_F if pp > 1 else 0.0,
            t_b=0.0,
            t_w=0.0,
        )
    except ConfigError as exc:
        flags = " ".join(as_given(names, k, v) for k, v in sizes.items() if v > 1) or "this mesh"
        raise ConfigError(f"{flags}: a combination the mesh trainer refuses: {exc}") from None


def check_model(sizes, *, variant, layout, hidden, heads, ffn, seq, layers, sp, names):
    """Heads, sequence and widths that the cp and tp splits need, named by flag."""
    if hidden % heads:
        raise ConfigError(
            f"{as_given(names, 'heads', heads)} must divide "
            f"{as_given(names, 'hidden', hidden)} (head_dim = hidden/heads)"
        )
    cp, tp = sizes["cp"], sizes["tp"]
    if cp > 1 and variant == "all-to-all" and heads % tp == 0:  # else check_tp refuses it
        given = f"{as_given(names, 'heads', heads)} with {as_given(names, 'cp', cp)}"
        if tp > 1:  # each tp rank splits its own share of the heads over cp
            given += f" and {as_given(names, 'tp', tp)} ({heads // tp} head(s) per tp rank)"
        try:
            check_heads(heads // tp, cp)
        except ConfigError as exc:  # the module's own message, after the flags as given
            raise ConfigError(f"{given}: {exc}") from None
    if cp > 1:
        try:
            check_sequence(seq, cp, layout)
        except ConfigError as exc:
            text = str(exc).replace(
                "nearest valid seq:", f"nearest valid {flag_name(names, 'seq')}"
            )
            raise ConfigError(f"{as_given(names, 'seq', seq)}: {text}") from None
    check_tp(sizes["tp"], hidden=hidden, heads=heads, ffn_hidden=ffn, seq=seq, sequence_parallel=sp)
    if layers < sizes["pp"]:
        raise ConfigError(
            f"{as_given(names, 'pp', sizes['pp'])} needs a layer per stage: "
            f"{as_given(names, 'layers', layers)} is fewer; nearest valid "
            f"{flag_name(names, 'layers')} {sizes['pp']}"
        )
