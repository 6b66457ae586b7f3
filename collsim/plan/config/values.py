"""Reading one input of a :class:`~collsim.plan.config.PlanConfig`: counts, rates, bounds.

Every count is a whole number from 1 up to its bound in :data:`MAXIMA` (so every search
over divisors finishes in seconds); a parameter count takes a ``B``/``M`` suffix
(:func:`parse_count`), a compute rate FLOP/s units (:func:`parse_flops`); choices and flags
are checked against their lists.  Each refusal names the setting and the value given.

Examples
--------
>>> parse_count("175B"), parse_flops("10TFLOP/s")
(175000000000.0, 10000000000000.0)
>>> whole("tp", 0, MAXIMA["tp"])
Traceback (most recent call last):
...
collsim.errors.ConfigError: tp = 0 must be a whole number >= 1
"""

import math
import re

from ... import units
from ...errors import ConfigError

__all__ = [
    "parse_count",
    "parse_flops",
    "parsed",
    "whole",
    "flag",
    "choice",
    "MAXIMA",
    "MAX_PARAMS",
    "POSITIVE_INTS",
    "RECOMPUTE",
    "SCHEDULES",
    "PRECISIONS",
    "ARCHITECTURES",
]

RECOMPUTE = ("none", "selective", "full")
SCHEDULES = ("gpipe", "1f1b", "interleaved")
PRECISIONS = ("bf16", "fp16", "fp32")
ARCHITECTURES = ("gpt", "llama")

#: the PlanConfig fields that are whole numbers >= 1 when given
POSITIVE_INTS = (
    "layers hidden heads kv_heads ffn_hidden vocab seq world_size gpus_per_node tp pp dp cp "
    "vpp dp_replicate dp_shard global_batch micro_batch accumulation ep etp experts top_k "
    "moe_ffn_hidden head_dim"
).split()

# Upper bounds on every count, so that every search over divisors and suggestions finishes
# in seconds (the largest published job is tens of thousands of GPUs, 126 layers, 2^17 tokens)
_GPUS = 2**20
MAXIMA = dict(
    world_size=_GPUS,
    tp=_GPUS,
    pp=_GPUS,
    dp=_GPUS,
    cp=_GPUS,
    dp_replicate=_GPUS,
    dp_shard=_GPUS,
    gpus_per_node=1024,
    vpp=1024,
    layers=2**14,
    hidden=2**20,
    ffn_hidden=2**22,
    heads=2**16,
    kv_heads=2**16,
    vocab=2**24,
    seq=2**24,
    global_batch=2**24,
    micro_batch=2**24,
    accumulation=2**24,
    ep=_GPUS,
    etp=_GPUS,
    experts=2**16,
    top_k=2**16,
    moe_ffn_hidden=2**22,
    head_dim=2**16,
)
MAX_PARAMS = 1e15  # thousands of times GPT-3 175B: far past any model

_COUNT_RE = re.compile(r"^([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*([KkMBbGTt]?)$")
_COUNT_PREFIX = {"": 1, "K": 1e3, "k": 1e3, "M": 1e6, "B": 1e9, "b": 1e9, "G": 1e9}
_COUNT_PREFIX.update({"T": 1e12, "t": 1e12})


def parse_count(text):
    """A parameter count: ``"175B"`` (billion), ``"350M"``, ``7e9``.

    >>> parse_count("1.3B"), parse_count("350M"), parse_count(1024)
    (1300000000.0, 350000000.0, 1024.0)
    """
    if isinstance(text, bool):
        raise ConfigError(f"{text!r} is not a count")
    if isinstance(text, int | float):
        value = float(text)
    else:
        match = _COUNT_RE.match(str(text).strip())
        if not match:
            raise ConfigError(f"cannot read count {text!r}: expected e.g. '7B', '350M' or 7e9")
        value = float(match.group(1)) * _COUNT_PREFIX[match.group(2)]
    if not math.isfinite(value) or value <= 0:
        raise ConfigError(f"count {text!r} must be a finite number > 0")
    if value > MAX_PARAMS:
        raise ConfigError(f"count {text!r} is above the planner's limit of {MAX_PARAMS:g}")
    return value


def parse_flops(text):
    """FLOP per second, as :func:`collsim.units.parse_flops` reads it, but finite: the
    planner divides by it.

    >>> parse_flops("150TFLOP/s")
    150000000000000.0
    """
    value = units.parse_flops(text)
    if math.isinf(value):
        raise ConfigError(f"compute rate {text!r} must be finite for the planner")
    return value


def parsed(name, value, parser):
    """``parser(value)``; a refusal of a text is prefixed with the setting's name."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return parser(value)
    try:
        return parser(value)
    except ConfigError as exc:
        raise ConfigError(f"{name}: {exc}") from None


def whole(name, value, maximum):
    """``value`` as an int from 1 to ``maximum`` (a whole float such as 8.0 is accepted)."""
    given = value
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name} = {given!r} must be a whole number >= 1")
    if value > maximum:
        raise ConfigError(
            f"{name} = {given!r} is above the planner's limit of {maximum} (2^"
            f"{maximum.bit_length() - 1}), which keeps its searches within seconds"
        )
    return value


def flag(name, value):
    """``value`` as a bool (True, False, 1 or 0)."""
    if isinstance(value, bool):
        return value
    if value in (0, 1):
        return bool(value)
    raise ConfigError(f"{name} = {value!r} must be true or false")


def choice(name, value, choices):
    """``value`` lower-cased, when it is one of ``choices``."""
    if not isinstance(value, str) or value.lower() not in choices:
        raise ConfigError(f"{name} = {value!r}: choose one of {', '.join(choices)}")
    return value.lower()
