"""Settings files: TOML or JSON read into a :class:`~collsim.plan.config.PlanConfig`.

A file is TOML or JSON (read with :mod:`tomllib` / :mod:`json`, never executed): flat keys,
or keys grouped in tables such as ``[model]`` and ``[parallel]`` (the table names are only
for the reader).  Megatron-LM and Accelerate spellings are accepted as aliases, e.g.
``tensor_model_parallel_size`` or ``tp_size`` for ``tp`` and ``dp_shard_size`` for
``dp_shard``.  Only a regular file of at most :data:`MAX_CONFIG_BYTES` is read (a FIFO or a
device would block or never end), tables nest at most :data:`MAX_DEPTH` deep, and every
number is validated as the flags are (a 5,000-digit integer or ``"world_size": 1e18`` is
refused with its value named).

Examples
--------
>>> config_from_mapping({"tensor_model_parallel_size": 2, "params": "1B"}).tp
2
"""

import dataclasses
import difflib
import json
import stat
import tomllib
from pathlib import Path

from ...errors import ConfigError
from .job import PlanConfig

__all__ = ["load_config", "config_from_mapping", "ALIASES", "MAX_CONFIG_BYTES", "MAX_DEPTH"]

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
    text = _read_bounded(path)
    try:
        data = tomllib.loads(text.decode()) if suffix == ".toml" else json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"config file {str(path)!r} is not valid {suffix[1:].upper()}: {exc}"
        ) from None
    except RecursionError:
        raise ConfigError(
            f"config file {str(path)!r} nests tables deeper than the {MAX_DEPTH} levels a "
            "settings file may have"
        ) from None
    except ValueError as exc:  # e.g. an integer of thousands of digits
        where = str(path)
        raise ConfigError(f"config file {where!r} holds a number it cannot read: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {str(path)!r} must hold a table of settings")
    return config_from_mapping({**_flatten(data, str(path)), **overrides})


MAX_CONFIG_BYTES = 1 << 20  # a settings file is a few hundred bytes; 1 MiB is generous
MAX_DEPTH = 4  # [model] and [parallel] tables are one level; allow a little more


def _read_bounded(path):
    """The bytes of a regular file of at most MAX_CONFIG_BYTES (a FIFO would block forever)."""
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(
                f"config file {str(path)!r} is not a regular file (a device, FIFO or folder)"
            )
        if info.st_size > MAX_CONFIG_BYTES:
            raise ConfigError(
                f"config file {str(path)!r} has {info.st_size} bytes, more than the "
                f"{MAX_CONFIG_BYTES} a settings file may have"
            )
        with path.open("rb") as handle:
            return handle.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"cannot read config file {str(path)!r}: {exc.strerror}") from None


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


def _flatten(data, where, depth=1):
    if depth > MAX_DEPTH:
        raise ConfigError(
            f"config file {where!r} nests tables deeper than the {MAX_DEPTH} levels a "
            "settings file may have"
        )
    flat = {}
    for key, value in data.items():
        if isinstance(value, dict):
            items = _flatten(value, where, depth + 1).items()
        else:
            items = [(key, value)]
        for inner, item in items:
            if inner in flat:
                raise ConfigError(f"config file {where!r} sets {inner!r} twice")
            flat[inner] = item
    return flat
