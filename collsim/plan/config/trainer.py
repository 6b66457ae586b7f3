"""From a plan to the mesh trainer's configuration (:meth:`PlanConfig.parallel`).

The planner's :class:`~collsim.plan.config.PlanConfig` describes a whole job; the trainer's
:class:`~collsim.parallel.config.ParallelConfig` one training step on the device mesh.  They
share Megatron-LM's names (dp, tp, pp, vpp, sp); the trainer's ``microbatches`` is the plan's
accumulation (Megatron's ``num_microbatches``: global batch / (micro-batch · dp)) and its
``schedule`` the one the planner's closed forms take (:func:`~.derived.pipeline_schedule`).
Every count is derived first, as :func:`collsim.plan.plan` derives it.

ZeRO stages, HSDP (Accelerate's ``dp_replicate`` × ``dp_shard``) and full recomputation map
to the trainer's fields of the same names.  What the trainer does not run yet is refused
rather than dropped: selective recomputation, and (by the trainer's own checks) context
parallelism combined with tp or ZeRO.

Examples
--------
>>> from collsim.plan.config import PlanConfig
>>> cfg = PlanConfig(world_size=16, tp=2, pp=2, vpp=2, layers=8, hidden=64, heads=4,
...                  global_batch=32, micro_batch=2)
>>> p = parallel_config(cfg, t_f=0.002)
>>> p.dp, p.tp, p.pp, p.microbatches, p.schedule, p.vpp, p.t_f
(4, 2, 2, 4, 'interleaved', 2, 0.002)
>>> parallel_config(cfg.replace(cp=2, world_size=32)).dims
{'pp': 2, 'dp': 4, 'cp': 2, 'tp': 2}
>>> parallel_config(cfg.replace(recompute="selective"))
Traceback (most recent call last):
...
collsim.errors.ConfigError: recompute = 'selective': the mesh trainer runs recompute='none' ...
"""

from ...errors import ConfigError
from ...parallel.config import ParallelConfig
from .derived import derive, pipeline_schedule, show

__all__ = ["parallel_config"]


def parallel_config(cfg, **overrides):
    """The :class:`ParallelConfig` of ``cfg`` with ``overrides`` (see the module docstring)."""
    d = derive(cfg)
    _refuse_what_the_trainer_lacks(cfg, d)
    _refuse_fractions(cfg, d)
    schedule, v = pipeline_schedule(d.schedule, cfg.vpp)
    if v != cfg.vpp:
        raise ConfigError(
            f"vpp = {cfg.vpp} with schedule {d.schedule!r}: virtual pipeline stages run only "
            f"in the 'interleaved' schedule (the planner estimates {d.schedule!r} without "
            "them); set schedule='interleaved' or vpp=1"
        )
    values = dict(
        dp=int(d.dp),
        tp=cfg.tp,
        pp=cfg.pp,
        vpp=v,
        sp=cfg.sp,
        microbatches=int(d.accumulation),
        schedule=schedule,
        zero=int(d.zero),  # ZeRO-3 / FSDP when dp_shard > 1 implies it
        # HSDP replicas of a sharded model; without sharding every dp rank is a replica
        dp_replicate=int(d.dp) if d.zero == 0 else int(d.dp_replicate),
        recompute=cfg.recompute,
        cp=cfg.cp,  # the sequence split; the trainer says which combinations it runs
        ep=cfg.ep,  # folded over dp x cp x tp with etp, as the planner's rules fold them
        etp=cfg.etp,  # None: tp, in both (Megatron-Core's default)
    )
    return ParallelConfig().replace(**{**values, **overrides})


def _refuse_what_the_trainer_lacks(cfg, d):
    if cfg.recompute == "selective":
        raise ConfigError(
            "recompute = 'selective': the mesh trainer runs recompute='none' or 'full' (the "
            "planner estimates selective recomputation, Korthikanti et al. 2022); nearest "
            "valid choice: recompute='full'"
        )


def _refuse_fractions(cfg, d):
    """dp, the world and the batch split must be whole numbers of ranks and micro-batches."""
    q = cfg.tp * cfg.pp * cfg.cp
    if not d.whole["dp"]:
        w = cfg.world_size
        near = " or ".join(str(x) for x in ((w // q) * q, (w // q + 1) * q) if x > 0)
        raise ConfigError(
            f"dp = {show(d.dp)} is not a whole number (world_size {w} / tp·pp = {q}): the "
            f"trainer needs whole replicas; nearest valid world_size: {near}"
        )
    if d.world != q * d.dp:
        raise ConfigError(
            f"world_size = {d.world} ≠ tp·pp·dp = {cfg.tp}·{cfg.pp}·{d.dp} = {q * d.dp}: "
            f"the trainer runs tp·pp·dp ranks; nearest valid choice: world_size={q * d.dp}"
        )
    g = cfg.global_batch
    for name, other, rest in (
        ("accumulation", "micro_batch", d.micro_batch),
        ("micro_batch", "accumulation", d.accumulation),
    ):
        if not d.whole[name]:
            step = int(rest * d.dp)  # the other factor is whole: its rule would break first
            near = " or ".join(str(x) for x in ((g // step) * step, (g // step + 1) * step) if x)
            raise ConfigError(
                f"{name} = {show(getattr(d, name))} is not a whole number (global_batch {g} / "
                f"({other} {show(rest)} · dp {d.dp})); nearest valid global_batch: {near}"
            )
