"""Machine files: one's own machine in TOML or JSON, read with the standard library only.

A file names every field of :class:`~collsim.hardware.machine.Machine` (rates and times
as strings with units, as the command line takes them), or starts from a preset with
``base`` and changes only what differs::

    # my-a100-cluster.toml: a DGX A100 pod whose nodes have 4 NICs on one switch
    base = "dgx-a100"
    name = "a100-4nic"

    [inter]
    nics = 4
    fabric = "switch"

Examples
--------
>>> m = loads('base = "dgx-h100"\\n[inter]\\nnics = 4\\n', "toml")
>>> m.name, m.inter.nics, m.intra.links
('dgx-h100', 4, 18)
"""

import dataclasses
import difflib
import json
import tomllib
from pathlib import Path

from ..errors import ConfigError
from ..units import parse_flops, parse_rate, parse_time
from .machine import InterNode, IntraNode, Machine
from .presets import preset

__all__ = ["load", "loads", "FILE_SUFFIXES"]

FILE_SUFFIXES = (".toml", ".json")
_RATES = {"link_rate", "cpu_link_rate", "nic_rate"}
_TIMES = {"latency"}
_SECTIONS = {"intra": IntraNode, "inter": InterNode}


def load(path):
    """The :class:`Machine` a ``.toml`` or ``.json`` file describes."""
    path = Path(path)
    if path.suffix.lower() not in FILE_SUFFIXES:
        raise ConfigError(f"machine file {str(path)!r}: give a .toml or .json file")
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"machine file {str(path)!r}: cannot read it ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise ConfigError(f"machine file {str(path)!r}: not UTF-8 text") from None
    return loads(text, path.suffix.lower().lstrip("."), str(path))


def loads(text, kind="toml", where="the machine file"):
    """The :class:`Machine` in ``text`` (``kind`` ``"toml"`` or ``"json"``)."""
    try:
        data = tomllib.loads(text) if kind == "toml" else json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{where}: not valid {kind.upper()}: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: the top level must be a table of machine fields")
    return _machine(data, where)


def _machine(data, where):
    data = dict(data)
    base = data.pop("base", None)
    start = preset(base) if base is not None else None
    top = {f.name for f in dataclasses.fields(Machine)}
    _known(data, top, where, "")
    values = {}
    for key, value in data.items():
        if key in _SECTIONS:
            if not isinstance(value, dict):
                raise ConfigError(f"{where}: [{key}] must be a table of fields")
            values[key] = _section(key, value, start, where)
        elif key == "compute_rate":
            values[key] = _parsed(parse_flops, value, where, key)
        elif key == "hbm_bandwidth":
            values[key] = _parsed(parse_rate, value, where, key)
        elif key == "sources":
            values[key] = tuple(str(s) for s in value) if isinstance(value, list) else (str(value),)
        else:
            values[key] = value
    if start is not None:
        for key in _SECTIONS:
            values.setdefault(key, getattr(start, key))
        return dataclasses.replace(start, **values)
    required = ("name", "gpu", "gpus_per_node", "compute_rate", "intra")
    missing = [k for k in required if k not in values]
    if missing:
        raise ConfigError(
            f'{where}: missing {", ".join(missing)} (or start from a preset: base = "dgx-a100")'
        )
    values.setdefault("inter", InterNode())
    return Machine(**values)


def _section(key, table, start, where):
    cls = _SECTIONS[key]
    _known(table, {f.name for f in dataclasses.fields(cls)}, where, f"[{key}] ")
    values = {}
    for name, value in table.items():
        if name in _RATES:
            values[name] = _parsed(parse_rate, value, where, f"{key}.{name}")
        elif name in _TIMES:
            values[name] = _parsed(parse_time, value, where, f"{key}.{name}")
        else:
            values[name] = value
    if start is not None:
        return dataclasses.replace(getattr(start, key), **values)
    try:
        return cls(**values)
    except TypeError as exc:  # a required field is missing
        raise ConfigError(f"{where}: [{key}]: {exc}") from None


def _parsed(parse, value, where, key):
    try:
        return parse(value)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {key} = {value!r}: {exc}") from None


def _known(table, names, where, section):
    for key in table:
        if key not in names:
            near = difflib.get_close_matches(key, sorted(names), n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise ConfigError(
                f"{where}: {section}unknown field {key!r}{hint}: fields are "
                f"{', '.join(sorted(names))}"
            )
