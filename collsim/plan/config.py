"""The planner's inputs: one frozen dataclass with commented defaults, and file loading.

Everything is in SI base units inside (bytes, bytes/s, seconds, FLOP/s); human strings
(``"80GiB"``, ``"300GB/s"``, ``"2us"``, ``"150TFLOP/s"``, ``"175B"`` parameters) are
accepted and parsed when a :class:`PlanConfig` is made.

A file is TOML or JSON (read with :mod:`tomllib` / :mod:`json`, never executed): flat keys,
or keys grouped in tables such as ``[model]`` and ``[parallel]`` (the table names are only
for the reader).  Megatron-LM and Accelerate spellings are accepted as aliases, e.g.
``tensor_model_parallel_size`` or ``tp_size`` for ``tp`` and ``dp_shard_size`` for
``dp_shard``.

Examples
--------
>>> cfg = PlanConfig(layers=2, hidden=64, heads=4, gpu_memory="16GiB", compute_rate="10TFLOP/s")
>>> cfg.gpu_memory, cfg.compute_rate
(17179869184, 10000000000000.0)
>>> PlanConfig(params="7B").params
7000000000.0
>>> PlanConfig(tp=0)
Traceback (most recent call last):
...
collsim.errors.ConfigError: tp = 0 must be a whole number >= 1
"""

import dataclasses
import difflib
import json
import math
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from .. import units
from ..errors import ConfigError
from ..units import parse_rate, parse_size, parse_time

__all__ = ["PlanConfig", "load_config", "parse_count", "parse_flops", "RECOMPUTE", "SCHEDULES"]

RECOMPUTE = ("none", "selective", "full")
SCHEDULES = ("gpipe", "1f1b", "interleaved")
PRECISIONS = ("bf16", "fp16", "fp32")


@dataclass(frozen=True)
class PlanConfig:
    """A training job to plan: model, cluster, parallelism, batch and training choices.

    Any field may be left at its default; ``None`` means "derive it from the others".
    """

    # --- model (give layers/hidden/heads, or params alone for memory only) -----------
    layers: int | None = None  # transformer layers L
    hidden: int | None = None  # hidden size h
    heads: int | None = None  # attention heads a
    ffn_hidden: int | None = None  # MLP inner size; None = 4·hidden as in GPT
    vocab: int = 51200  # vocabulary V (GPT-2's 50257 padded, as Megatron pads it)
    seq: int = 2048  # sequence length s, tokens per sample
    params: float | None = None  # parameter count N; None = counted from the shape
    # --- cluster ----------------------------------------------------------------------
    world_size: int | None = None  # GPUs in the job; None = tp·pp·cp·dp
    gpus_per_node: int = 8  # GPUs sharing the fast intra-node links (NVLink/NVSwitch)
    gpu_memory: int = 80 * 2**30  # bytes per GPU (an 80 GB A100/H100)
    compute_rate: float = 150e12  # FLOP/s one GPU achieves (about half an A100's bf16 peak)
    intra_bandwidth: float = 300e9  # bytes/s per direction between GPUs of one node
    inter_bandwidth: float = 25e9  # bytes/s per GPU between nodes (200 Gb/s InfiniBand)
    intra_latency: float = 2e-6  # s, α of one intra-node step
    inter_latency: float = 5e-6  # s, α of one inter-node step
    # --- parallelism --------------------------------------------------------------------
    tp: int = 1  # tensor-parallel degree t (Megatron column/row split of each layer)
    pp: int = 1  # pipeline stages p
    dp: int | None = None  # data-parallel degree; None = world / (tp·pp·cp)
    cp: int = 1  # context-parallel degree (sequence split across GPUs, ring attention)
    vpp: int = 1  # virtual pipeline stages v per GPU (interleaved 1F1B when > 1)
    sp: bool = False  # Megatron sequence parallelism (needs tp > 1)
    zero: int | None = None  # ZeRO stage 0-3 (3 = FSDP); None = 0, or 3 with dp_shard > 1
    dp_replicate: int | None = None  # Accelerate dp_replicate_size (HSDP replicas)
    dp_shard: int | None = None  # Accelerate dp_shard_size (FSDP shards)
    # --- batch: any two of global/micro/accumulation determine the third --------------
    global_batch: int | None = None  # samples per optimizer step
    micro_batch: int | None = None  # samples per forward/backward on one replica
    accumulation: int | None = None  # micro-batches per step (gradient accumulation)
    # --- training ------------------------------------------------------------------------
    recompute: str = "none"  # activation recomputation: none, selective or full
    precision: str = "bf16"  # bf16/fp16 mixed precision with Adam, or plain fp32
    schedule: str | None = None  # gpipe, 1f1b, interleaved; None = 1f1b (interleaved if vpp > 1)

    def __post_init__(self):
        set_ = object.__setattr__
        for name in ("gpu_memory",):
            set_(self, name, _parsed(name, getattr(self, name), parse_size))
        for name in ("intra_bandwidth", "inter_bandwidth"):
            set_(self, name, _parsed(name, getattr(self, name), parse_rate))
        for name in ("intra_latency", "inter_latency"):
            set_(self, name, _parsed(name, getattr(self, name), parse_time))
        set_(self, "compute_rate", _parsed("compute_rate", self.compute_rate, parse_flops))
        if self.params is not None:
            set_(self, "params", _parsed("params", self.params, parse_count))
        for name in _POSITIVE_INTS:
            value = getattr(self, name)
            if value is not None:
                set_(self, name, _whole(name, value))
        set_(self, "sp", _flag("sp", self.sp))
        if self.zero is not None:
            zero = 3 if isinstance(self.zero, str) and self.zero.lower() == "fsdp" else self.zero
            if isinstance(zero, bool) or zero not in (0, 1, 2, 3):
                raise ConfigError(
                    f"zero = {self.zero!r} must be a ZeRO stage 0, 1, 2 or 3 (or 'fsdp')"
                )
            set_(self, "zero", int(zero))
        _choice(self, "recompute", RECOMPUTE)
        _choice(self, "precision", PRECISIONS)
        if self.schedule is not None:
            _choice(self, "schedule", SCHEDULES)
        if self.params is None and (self.layers is None or self.hidden is None):
            raise ConfigError(
                "the model is not described: give params (e.g. '7B') or layers, hidden and heads"
            )
        if self.hidden is not None and self.heads is None:
            raise ConfigError(f"hidden = {self.hidden} needs heads too (the attention head count)")

    def replace(self, **changes):
        """A copy with some inputs changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self):
        """The inputs as plain data, in base units."""
        return dataclasses.asdict(self)


_POSITIVE_INTS = (
    "layers hidden heads ffn_hidden vocab seq world_size gpus_per_node tp pp dp cp vpp "
    "dp_replicate dp_shard global_batch micro_batch accumulation"
).split()

# other spellings accepted in files (Megatron-LM arguments and Accelerate ParallelismConfig)
ALIASES = {
    "num_layers": "layers",
    "hidden_size": "hidden",
    "num_attention_heads": "heads",
    "ffn_hidden_size": "ffn_hidden",
    "vocab_size": "vocab",
    "seq_length": "seq",
    "sequence_length": "seq",
    "num_params": "params",
    "tensor_model_parallel_size": "tp",
    "tensor_parallel_size": "tp",
    "tp_size": "tp",
    "pipeline_model_parallel_size": "pp",
    "pipeline_parallel_size": "pp",
    "pp_size": "pp",
    "data_parallel_size": "dp",
    "dp_size": "dp",
    "context_parallel_size": "cp",
    "cp_size": "cp",
    "virtual_pipeline_model_parallel_size": "vpp",
    "sequence_parallel": "sp",
    "zero_stage": "zero",
    "dp_replicate_size": "dp_replicate",
    "dp_shard_size": "dp_shard",
    "global_batch_size": "global_batch",
    "micro_batch_size": "micro_batch",
    "gradient_accumulation_steps": "accumulation",
    "recompute_granularity": "recompute",
}


def load_config(path, **overrides):
    """Read a TOML or JSON file into a :class:`PlanConfig`; ``overrides`` win over the file."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".toml", ".json"):
        raise ConfigError(f"config file {str(path)!r}: the name must end in .toml or .json")
    try:
        text = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read config file {str(path)!r}: {exc.strerror}") from None
    try:
        data = tomllib.loads(text.decode()) if suffix == ".toml" else json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"config file {str(path)!r} is not valid {suffix[1:].upper()}: {exc}"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {str(path)!r} must hold a table of settings")
    return config_from_mapping({**_flatten(data, str(path)), **overrides})


def config_from_mapping(mapping):
    """A :class:`PlanConfig` from a dict with canonical names or aliases."""
    known = {f.name for f in dataclasses.fields(PlanConfig)}
    values = {}
    for key, value in mapping.items():
        name = ALIASES.get(key, key)
        if name not in known:
            close = difflib.get_close_matches(key, sorted(known | set(ALIASES)), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(f"unknown setting {key!r}{hint}")
        if name in values:
            raise ConfigError(f"setting {name!r} is given twice (as {key!r} and another name)")
        values[name] = value
    return PlanConfig(**values)


def _flatten(data, where):
    flat = {}
    for key, value in data.items():
        items = _flatten(value, where).items() if isinstance(value, dict) else [(key, value)]
        for inner, item in items:
            if inner in flat:
                raise ConfigError(f"config file {where!r} sets {inner!r} twice")
            flat[inner] = item
    return flat


_COUNT_RE = re.compile(r"^([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*([KkMBbGTt]?)$")
_COUNT_PREFIX = {"": 1, "K": 1e3, "k": 1e3, "M": 1e6, "B": 1e9, "b": 1e9, "G": 1e9}
_COUNT_PREFIX.update({"T": 1e12, "t": 1e12})
_SI = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}


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


def _parsed(name, value, parser):
    if isinstance(value, int | float) and not isinstance(value, bool):
        return parser(value)
    try:
        return parser(value)
    except ConfigError as exc:
        raise ConfigError(f"{name}: {exc}") from None


def _whole(name, value):
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name} = {value!r} must be a whole number >= 1")
    return value


def _flag(name, value):
    if isinstance(value, bool):
        return value
    if value in (0, 1):
        return bool(value)
    raise ConfigError(f"{name} = {value!r} must be true or false")


def _choice(cfg, name, choices):
    value = getattr(cfg, name)
    if not isinstance(value, str) or value.lower() not in choices:
        raise ConfigError(f"{name} = {value!r}: choose one of {', '.join(choices)}")
    object.__setattr__(cfg, name, value.lower())
