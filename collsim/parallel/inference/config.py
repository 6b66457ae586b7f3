"""How an inference run is split: tensor-, context- and pipeline-parallel degrees and the
all-reduce.

The ranks form a ``(pp, cp, tp)`` grid with tp innermost (Megatron's order: a TP group sits
on one NVLink island), so global rank ``(stage · cp + cp_rank) · tp + tp_rank``.  The rules
are Megatron-LM's: tp divides the heads, the hidden width and the MLP's inner width (each
TP rank holds ``1/tp`` of each); pp divides the layers (each stage holds ``layers/pp``
consecutive ones); cp divides the prompt (each CP rank prefills ``prompt/cp`` consecutive
tokens and keeps their keys and values).

Examples
--------
>>> from collsim.nn import DecoderConfig
>>> split = InferenceSplit(tp=2, pp=2)
>>> split.check(DecoderConfig(hidden=64, heads=4, layers=4)).world_size
4
>>> InferenceSplit(tp=3).check(DecoderConfig(hidden=64, heads=4, layers=4))
Traceback (most recent call last):
...
collsim.errors.ConfigError: tensor parallel degree tp=3 must divide hidden=64 (64/3 = 21.33) \
and heads=4 (4/3 = 1.333) and ffn_hidden=256 (256/3 = 85.33): each TP rank holds 1/tp of each; \
tp values that divide hidden=64 and heads=4 and ffn_hidden=256, nearest first: 2, 4, 1
"""

from dataclasses import dataclass

from ...errors import ConfigError, nearest_first
from ...runtime.group import RankGrid
from ..batch import divisors
from ..tensor.comm import check_tp

__all__ = ["InferenceSplit"]


@dataclass(frozen=True)
class InferenceSplit:
    """The parallel degrees of a decode run and the all-reduce algorithm its TP groups use."""

    tp: int = 1  # tensor-parallel degree: heads and MLP columns split over tp ranks
    pp: int = 1  # pipeline stages: layers split into pp consecutive runs
    algorithm: str | None = None  # all-reduce algorithm (None: the cluster's default)
    cp: int = 1  # context-parallel degree: the prompt (and its KV cache) split by tokens

    def __post_init__(self):
        for name in ("tp", "pp", "cp"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name}={value!r} must be a positive integer")

    @property
    def world_size(self):
        return self.tp * self.cp * self.pp

    @property
    def grid(self):
        """The ``(pp, cp, tp)`` rank grid, tp varying fastest."""
        return RankGrid((self.pp, self.cp, self.tp), ("pp", "cp", "tp"))

    def check_prompt(self, prompt_len):
        """Refuse a prompt that cp does not split into equal runs of tokens."""
        if prompt_len % self.cp:
            choices = nearest_first(self.cp, divisors(prompt_len))
            raise ConfigError(
                f"context parallel degree cp={self.cp} must divide the prompt's {prompt_len} "
                f"tokens: each CP rank prefills prompt/cp of them; cp values that divide "
                f"{prompt_len}, nearest first: {', '.join(map(str, choices))}"
            )
        return prompt_len // self.cp

    def check(self, model_config):
        """Raise a ConfigError naming every size this split does not divide; return self."""
        ffn = model_config.ffn_hidden or 4 * model_config.hidden
        check_tp(self.tp, hidden=model_config.hidden, heads=model_config.heads, ffn_hidden=ffn)
        if model_config.layers % self.pp:
            choices = nearest_first(self.pp, divisors(model_config.layers))
            raise ConfigError(
                f"pipeline parallel degree pp={self.pp} must divide layers="
                f"{model_config.layers}: each stage holds layers/pp of them; pp values that "
                f"divide {model_config.layers}, nearest first: {', '.join(map(str, choices))}"
            )
        return self

    def stage_layers(self, stage, layers):
        """The layer indices stage ``stage`` holds: ``range(stage·L/pp, (stage+1)·L/pp)``."""
        per = layers // self.pp
        return range(stage * per, (stage + 1) * per)
