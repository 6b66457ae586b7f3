"""NCCL's example tuner plugin: rules read from a CSV file that override the cost model.

NCCL loads a tuner plugin (``NCCL_TUNER_PLUGIN``); the example one in NCCL's source
(``ext-tuner/example``) reads ``NCCL_TUNER_CONFIG_FILE``, one rule a line::

    collective,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks[,numPipeOps[,regBuff]]

Lines starting with ``#`` are comments; ``-1`` matches any number of nodes, ranks, pipelined
operations or registered-buffer state, and keeps NCCL's channels.  For a call, the first
rule whose collective matches, whose byte range holds the size (both ends included) and
whose counts match, names the pair NCCL runs -- if the model has that pair enabled.
collsim reads the same file, so a rule file works the same here and under NCCL.

Examples
--------
>>> rules = parse_rules("allreduce,0,65535,tree,simple,-1,-1,-1")
>>> rules[0].collective, rules[0].algorithm, rules[0].max_bytes
('all_reduce', 'tree', 65535)
"""

import csv
import difflib
import io
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError
from .nccl_filters import NCCL_FUNCTIONS
from .nccl_tables import ALGORITHMS, PROTOCOLS

__all__ = ["TunerRule", "parse_rules", "read_rules", "matching_rule"]

FIELDS = ("collective", "min_bytes", "max_bytes", "algorithm", "protocol", "channels")
FIELDS += ("nNodes", "nRanks", "numPipeOps", "regBuff")
REQUIRED = 8


@dataclass(frozen=True)
class TunerRule:
    """One line of a tuner file, with where it came from."""

    collective: str
    min_bytes: int
    max_bytes: int
    algorithm: str
    protocol: str
    channels: int  # -1: NCCL's own
    nodes: int  # -1: any
    ranks: int  # -1: any
    pipe_ops: int = -1
    registered: int = -1
    where: str = ""

    def matches(self, collective, nbytes, nodes, ranks, pipe_ops=1, registered=0):
        return (
            self.collective == collective
            and self.min_bytes <= nbytes <= self.max_bytes
            and self.nodes in (-1, nodes)
            and self.ranks in (-1, ranks)
            and self.pipe_ops in (-1, pipe_ops)
            and self.registered in (-1, registered)
        )


def read_rules(path):
    """The rules of a tuner file; a bad line is refused naming its file and line."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"tuner file {str(path)!r}: {exc.strerror or exc}") from None
    return parse_rules(text, str(path))


def parse_rules(text, where="the tuner file"):
    rules = []
    for number, row in enumerate(csv.reader(io.StringIO(text)), start=1):
        if not row or not "".join(row).strip() or row[0].lstrip().startswith("#"):
            continue
        cells = [c.strip() for c in row]
        at = f"{where}:{number}"
        if not REQUIRED <= len(cells) <= len(FIELDS):
            raise ConfigError(
                f"{at}: {len(cells)} fields; a rule has {REQUIRED} to {len(FIELDS)}: "
                + ",".join(FIELDS)
            )
        rules.append(_rule(cells, at))
    return rules


def matching_rule(rules, collective, nbytes, nodes, ranks, enabled):
    """The first rule that applies to this call and names a pair in ``enabled``, or None."""
    for rule in rules:
        if (
            rule.matches(collective, nbytes, nodes, ranks)
            and (
                rule.algorithm,
                rule.protocol,
            )
            in enabled
        ):
            return rule
    return None


def _rule(cells, at):
    cells += ["-1"] * (len(FIELDS) - len(cells))
    collective = _name(cells[0], NCCL_FUNCTIONS, "collective", at)
    algorithm = _name(cells[3], {a: a for a in ALGORITHMS}, "algorithm", at)
    protocol = _name(cells[4], {p: p for p in PROTOCOLS}, "protocol", at)
    numbers = [_integer(cells[i], FIELDS[i], at) for i in (1, 2, 5, 6, 7, 8, 9)]
    low, high = numbers[0], numbers[1]
    if low < 0 or high < low:
        raise ConfigError(f"{at}: min_bytes {low} .. max_bytes {high}: need 0 <= min <= max")
    return TunerRule(collective, low, high, algorithm, protocol, *numbers[2:], where=at)


def _name(text, names, field, at):
    key = text.lower().replace("-", "_") if field != "collective" else text.lower()
    if key not in names:
        near = difflib.get_close_matches(key, list(names), n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise ConfigError(f"{at}: {field} {text!r}{hint}: choose from {', '.join(names)}")
    return names[key]


def _integer(text, field, at):
    try:
        return int(text)
    except ValueError:
        raise ConfigError(f"{at}: {field} {text!r} is not a whole number (-1 for any)") from None
