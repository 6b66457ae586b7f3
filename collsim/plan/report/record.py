"""The planner's answer: a :class:`Report` that prints for people and converts to JSON.

``print(report)`` shows :func:`~collsim.plan.report.text.render`'s text.

``to_dict()`` keys (schema ``collsim.plan/1``): ``valid``, ``violations`` and ``warnings``
(each ``rule``, ``message``, ``hint``), ``notes``, ``suggestions`` (each ``changes`` and a
complete ``config``, best first), ``derived`` (dp, accumulation, ...), ``memory`` (bytes
per GPU: ``params``, ``grads``, ``optimizer``, ``activations``, ``total``,
``activations_per_layer`` for one micro-batch, ...), ``communication`` (per dimension
``tp``/``cp``/``dp``/``pp``: ``bytes_per_rank`` and ``time_s`` per step and ``ops`` by
name), ``compute``, ``scaling`` and ``step_time_s``, plus the ``config`` it answers.
Infinite ratios become ``null``.

Examples
--------
>>> from collsim.plan import plan
>>> report = plan(model="llama2-7b", world_size=8, global_batch=8)
>>> report.valid, report.to_dict()["schema"], report.derived["dp"]
(False, 'collsim.plan/1', 8)
"""

import json
import math
from dataclasses import dataclass, field

from .text import render

__all__ = ["Report", "SCHEMA"]

SCHEMA = "collsim.plan/1"


@dataclass
class Report:
    """What :func:`collsim.plan.plan` found out about one configuration."""

    config: object  # PlanConfig
    resolved: object  # the Derived values (report.derived is the same as a dict)
    violations: list
    warnings: list
    memory: dict
    communication: dict
    compute: dict
    scaling: dict
    suggestions: list = field(default_factory=list)
    notes: list = field(default_factory=list)

    @property
    def valid(self):
        return not self.violations

    @property
    def step_time_s(self):
        return self.scaling["step_time_s"]

    @property
    def derived(self):
        d = self.resolved
        return {
            "world_size": d.world,
            "dp": d.dp,
            "dp_replicate": d.dp_replicate,
            "dp_shard": d.dp_shard,
            "shard_degree": d.shard_degree,
            "zero": d.zero,
            "micro_batch": d.micro_batch,
            "accumulation": d.accumulation,
            "global_batch": d.global_batch,
            "params": d.params,
            "params_from_shape": d.params_from_shape,
            "ffn_hidden": d.ffn_hidden,
            "layers_per_stage": d.layers_per_stage,
            "nodes": d.nodes,
            "tokens_per_step": d.tokens_per_step,
            "schedule": d.schedule,
            "element_bytes": d.elem,
        }

    def to_dict(self):
        data = {
            "schema": SCHEMA,
            "valid": self.valid,
            "violations": [f.to_dict() for f in self.violations],
            "warnings": [f.to_dict() for f in self.warnings],
            "notes": list(self.notes),
            "suggestions": [s.to_dict() for s in self.suggestions],
            "derived": self.derived,
            "memory": self.memory,
            "communication": self.communication,
            "compute": self.compute,
            "scaling": self.scaling,
            "step_time_s": self.step_time_s,
            "config": self.config.to_dict(),
        }
        return _finite(data)

    def to_json(self, indent=2):
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False)

    def __str__(self):
        return render(self)


def _finite(x):
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_finite(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x
