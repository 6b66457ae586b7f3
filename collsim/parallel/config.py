"""How one training step is split over the device mesh: a single configuration object.

:class:`ParallelConfig` is what the mesh trainer (:func:`collsim.parallel.mesh.train`) runs,
what ``collsim pipeline`` and ``collsim verify`` build from their flags, and what the
planner's :class:`~collsim.plan.config.PlanConfig` converts to (``PlanConfig.parallel()``),
so no layer re-lists these options as keyword arguments.  The names are Megatron-LM's and the
planner's: ``dp``, ``tp``, ``pp``, ``vpp`` (virtual pipeline stages), ``sp`` (sequence
parallelism), ``microbatches`` (Megatron's ``num_microbatches``: with ``pp = 1`` it is
gradient accumulation).

The mesh is laid out ``(pp, dp, tp)``, TP innermost: neighbouring ranks share a tensor-parallel
group as they share a node's NVLink, then data parallel, then pipeline stages (Megatron's
order).  Rank ``r`` is stage ``r // (dp·tp)``, replica ``(r // tp) % dp``, TP rank ``r % tp``.

Examples
--------
>>> config = ParallelConfig(dp=2, pp=2, tp=2, microbatches=4)
>>> config.world_size, config.mesh()
(8, RankGrid({'pp': 2, 'dp': 2, 'tp': 2}))
>>> config.dims
{'pp': 2, 'dp': 2, 'tp': 2}
>>> ParallelConfig(tp=2, sp=True).replace(tp=1)
Traceback (most recent call last):
...
collsim.errors.ConfigError: sp=True (sequence parallelism) needs tp > 1, got tp=1; set sp=False or \
tp >= 2
"""

import dataclasses
import math
from dataclasses import dataclass

from ..errors import ConfigError
from ..runtime.group import RankGrid
from .context.block import CP_VARIANTS
from .context.layouts import CP_LAYOUTS
from .data.buckets import DEFAULT_BUCKET_BYTES
from .data.sharded import ZERO_STAGES
from .experts.folding import tokens_replicated
from .pipeline.schedules import SCHEDULE_NAMES, Schedule
from .pipeline.schedules._checks import check_times

__all__ = ["ParallelConfig", "MESH_ORDER", "PREFETCH", "RECOMPUTE"]

MESH_ORDER = ("pp", "dp", "cp", "tp")  # outermost first, Accelerate's order; cp only if > 1
PREFETCH = ("none", "forward", "backward", "both")  # FSDP: which passes gather ahead
RECOMPUTE = ("none", "full")


@dataclass(frozen=True)
class ParallelConfig:
    """One training step's parallel layout, batch split, schedule and pass times.

    Every field has a default; ``replace(**changes)`` returns a checked copy.
    """

    # --- mesh dimensions (ranks = pp · dp · tp) ---------------------------------------
    dp: int = 1  # data-parallel replicas; each takes global_batch / dp rows of the batch
    tp: int = 1  # tensor-parallel ranks per layer (Megatron column/row split, heads split)
    pp: int = 1  # pipeline stages; each holds a consecutive slice of the layers
    # --- batch --------------------------------------------------------------------------
    microbatches: int = 1  # m: micro-batches per replica per step (pp = 1: accumulation)
    # --- pipeline -------------------------------------------------------------------------
    schedule: str = "1f1b"  # gpipe, 1f1b, interleaved or zb-h1 (or a built Schedule)
    vpp: int = 1  # virtual stages (model chunks) per pipeline rank; > 1 for interleaved
    # --- context parallel (the sequence split over cp ranks) ---------------------------------
    cp: int = 1  # context-parallel ranks per replica: each holds S/cp tokens of every sample
    cp_variant: str = "ring"  # ring attention (K/V around the ring), or all-to-all (Ulysses)
    cp_layout: str = "balanced"  # balanced: chunks i and 2cp-1-i (even causal work), or
    # contiguous: chunk i (the last rank does the most causal work)
    # --- expert parallel (MoE blocks' experts split over ep ranks) ------------------------
    ep: int = 1  # folded over the dp x cp x tp ranks of a stage (Megatron-Core's MoE
    # parallel folding; torchtitan carves it from dp_shard x cp): each group of ep of them
    # splits every MoE layer's experts, E/ep each, and all-to-alls the tokens
    etp: int | None = None  # expert tensor parallelism: each expert's MLP split by columns
    # and rows over etp ranks; None: tp (Megatron-Core's default). ep x etp divides dp·cp·tp
    # --- tensor parallel ------------------------------------------------------------------
    sp: bool = False  # Megatron sequence parallelism: norms and residuals split by tokens
    # --- memory -------------------------------------------------------------------------
    recompute: str = "none"  # activation recomputation: none, or full (every unit's forward
    # run again in its backward; only its input is kept: Megatron --recompute-granularity)
    # --- time of one micro-batch's pass on one whole stage, in seconds ---------------------
    # charged on top of the layers' own FLOPs at the cluster's compute_rate (free on the
    # default cluster); 0 leaves only the FLOPs (as a data-parallel run on a real GPU rate)
    t_f: float = 1e-3  # forward
    t_b: float | None = None  # backward, input gradient (what the previous stage waits for)
    t_w: float | None = None  # backward, weight gradient; None: t_b and t_w default to t_f
    # --- data-parallel gradient sync --------------------------------------------------------
    zero: int = 0  # ZeRO stage over the dp group: 0 DDP, 1 optimizer state, 2 + gradients,
    # 3 + parameters (FSDP: each unit gathered for its passes); see collsim.parallel.data.sharded
    zero1_gradients: str = "reduce_scatter"  # ZeRO-1: reduce_scatter the gradients, or
    # all_reduce them and keep this rank's part (twice the gradient bytes)
    dp_replicate: int = 1  # HSDP (zero=3): replicas of the sharded model; the dp ranks form
    # dp_replicate x dp_shard, dp_shard = dp / dp_replicate inner (Accelerate's names)
    reshard_after_forward: bool = True  # FSDP: free a unit's gathered parameters after its
    # forward (False: keep them for the backward, SHARD_GRAD_OP: one gather, more memory)
    prefetch: str = "none"  # FSDP: start the next unit's all-gather early: none, forward,
    # backward or both (forward_prefetch / BACKWARD_PRE in PyTorch)
    max_inflight_gathers: int = 2  # FSDP's limit_all_gathers: gathers in flight at once
    bucket_bytes: int = DEFAULT_BUCKET_BYTES  # DDP's bucket_cap_mb=25: a bucket's all-reduce
    # starts once it holds this many bytes, overlapping the rest of the backward

    def __post_init__(self):
        for name in MESH_ORDER + ("microbatches", "vpp"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be an integer >= 1, got {value!r}")
        if isinstance(self.zero, bool) or self.zero not in ZERO_STAGES:
            raise ConfigError(
                f"zero={self.zero!r} is not a ZeRO stage: choose one of "
                f"{', '.join(map(str, ZERO_STAGES))} (0 = plain data parallel)"
            )
        self._check_sharding()
        self._check_context()
        self._check_experts()
        if self.recompute not in RECOMPUTE:
            hint = (
                " (selective recomputes only attention's softmax and dropout, Korthikanti "
                "et al. 2022; the planner estimates it, the trainer runs none or full)"
                if self.recompute == "selective"
                else ""
            )
            raise ConfigError(
                f"recompute={self.recompute!r} is not one of {', '.join(RECOMPUTE)}{hint}"
            )
        if not isinstance(self.sp, bool):
            raise ConfigError(f"sp must be True or False, got {self.sp!r}")
        if self.sp and self.tp == 1:
            raise ConfigError(
                f"sp={self.sp!r} (sequence parallelism) needs tp > 1, got tp={self.tp}; "
                "set sp=False or tp >= 2"
            )
        if not isinstance(self.schedule, Schedule) and self.schedule not in SCHEDULE_NAMES:
            raise ConfigError(
                f"schedule {self.schedule!r} is not one of {', '.join(SCHEDULE_NAMES)}"
            )
        if isinstance(self.schedule, Schedule):
            s = self.schedule
            if (s.stages, s.microbatches, s.virtual) != (self.pp, self.microbatches, self.vpp):
                raise ConfigError(
                    f"the schedule has p={s.stages}, m={s.microbatches}, v={s.virtual} but the "
                    f"config says pp={self.pp}, microbatches={self.microbatches}, "
                    f"vpp={self.vpp}; give matching numbers"
                )
        t_f, t_b, t_w = self.pass_times
        for name, value in (("t_f", t_f), ("t_b", t_b), ("t_w", t_w)):
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ConfigError(f"{name}={value!r} must be a number of seconds >= 0")
            if not math.isfinite(value) or value < 0:
                raise ConfigError(f"{name}={value!r} must be a finite number of seconds >= 0")
        if self.pp > 1:  # a pipeline's bubble needs passes that take time
            check_times(t_f, t_b, t_w)
        if isinstance(self.bucket_bytes, bool) or not isinstance(self.bucket_bytes, int):
            raise ConfigError(f"bucket_bytes={self.bucket_bytes!r} must be a whole number")
        if self.bucket_bytes < 1:
            raise ConfigError(f"bucket_bytes={self.bucket_bytes!r} must be at least 1 byte")

    def _check_sharding(self):
        for name in ("dp_replicate", "max_inflight_gathers"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be an integer >= 1, got {value!r}")
        if self.dp % self.dp_replicate:
            near = [d for d in range(1, self.dp + 1) if self.dp % d == 0]
            raise ConfigError(
                f"dp_replicate={self.dp_replicate} does not divide dp={self.dp}: HSDP lays the "
                f"dp ranks out as dp_replicate x dp_shard; divisors of {self.dp}: "
                f"{', '.join(map(str, near))}"
            )
        plain_replicas = self.dp_replicate == self.dp and self.zero == 0  # DDP, in Accelerate's
        # sizes: dp_replicate = dp, dp_shard = 1
        if self.dp_replicate > 1 and self.zero != 3 and not plain_replicas:
            raise ConfigError(
                f"dp_replicate={self.dp_replicate} (HSDP) shards the model with FSDP: it needs "
                f"zero=3, got zero={self.zero} (or dp_replicate = dp = {self.dp} with zero=0: "
                "plain data parallelism)"
            )
        if self.zero1_gradients not in ("reduce_scatter", "all_reduce"):
            raise ConfigError(
                f"zero1_gradients={self.zero1_gradients!r} is not one of reduce_scatter, all_reduce"
            )
        if self.zero1_gradients == "all_reduce" and self.zero != 1:
            raise ConfigError(
                f"zero1_gradients='all_reduce' is a ZeRO-1 option: it needs zero=1, got "
                f"zero={self.zero}"
            )
        if not isinstance(self.reshard_after_forward, bool):
            raise ConfigError(
                f"reshard_after_forward must be True or False, got {self.reshard_after_forward!r}"
            )
        if self.prefetch not in PREFETCH:
            raise ConfigError(f"prefetch={self.prefetch!r} is not one of {', '.join(PREFETCH)}")
        fsdp_only = {
            "reshard_after_forward": not self.reshard_after_forward,
            "prefetch": self.prefetch != "none",
        }
        for name, set_ in fsdp_only.items():
            if set_ and self.zero != 3:
                raise ConfigError(
                    f"{name}={getattr(self, name)!r} is an FSDP option: it needs zero=3, "
                    f"got zero={self.zero}"
                )

    def _check_context(self):
        if self.cp_variant not in CP_VARIANTS:
            raise ConfigError(
                f"cp_variant={self.cp_variant!r} is not one of {', '.join(CP_VARIANTS)}"
            )
        if self.cp_layout not in CP_LAYOUTS:
            raise ConfigError(f"cp_layout={self.cp_layout!r} is not one of {', '.join(CP_LAYOUTS)}")

    def _check_experts(self):
        for name in ("ep", "etp"):
            value = getattr(self, name)
            if value is None and name == "etp":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be an integer >= 1, got {value!r}")
        ep, etp, tp = self.ep, self.expert_tp, self.tp
        folded = self.dp * self.cp * tp
        if folded % (ep * etp):
            raise ConfigError(
                f"ep x etp = {ep} x {etp} must divide dp x cp x tp = {folded}: MoE parallel "
                "folding lays etp-ep-edp over the ranks of tp-cp-dp; nearest valid "
                + _nearest_folding(folded, ep, etp)
            )
        if tokens_replicated(tp, self.sp) and (tp % etp or (etp < tp and ep > 1)):
            valid = tp if ep > 1 else max(e for e in range(1, tp + 1) if tp % e == 0 and e <= etp)
            raise ConfigError(
                f"etp={etp} with tp={tp}, ep={ep} and sp=False: the tp ranks hold the same "
                "tokens, so an etp or ep group must not mix them with other ranks' (Megatron-"
                f"Core requires sequence parallelism there); nearest valid etp={valid}, or "
                "sp=True"
            )
        if ep * etp > 1 and self.zero == 3 and self.dp_replicate > 1:
            block = self.dp_shard * self.cp * tp
            if block % (ep * etp):
                raise ConfigError(
                    f"ep x etp = {ep} x {etp} with dp_replicate={self.dp_replicate}: HSDP "
                    "shards the experts inside each replica, so ep x etp must divide "
                    f"dp_shard x cp x tp = {block} (torchtitan carves ep from dp_shard x cp); "
                    "nearest valid " + _nearest_folding(block, ep, etp)
                )

    @property
    def expert_tp(self):
        """Expert tensor parallelism: ``etp``, or ``tp`` when not given (Megatron-Core)."""
        return self.tp if self.etp is None else self.etp

    @property
    def dp_shard(self):
        """Ranks one model is sharded over: ``dp / dp_replicate`` (all of dp unless HSDP)."""
        return self.dp // self.dp_replicate

    @property
    def dims(self):
        """``{"pp": ..., "dp": ..., "tp": ...}``, outermost first (with ``"cp"`` before
        ``"tp"`` when cp > 1)."""
        return {n: getattr(self, n) for n in MESH_ORDER if n != "cp" or self.cp > 1}

    @property
    def world_size(self):
        """Ranks the step needs: ``pp · dp · tp``."""
        return math.prod(self.dims.values())

    @property
    def pass_times(self):
        """``(t_f, t_b, t_w)`` in seconds, the defaults filled in."""
        t_b = self.t_f if self.t_b is None else self.t_b
        t_w = self.t_f if self.t_w is None else self.t_w
        return self.t_f, t_b, t_w

    def mesh(self, ranks=None):
        """The :class:`~collsim.runtime.group.RankGrid` of shape ``(pp, dp, tp)``, or
        ``(pp, dp, cp, tp)`` with context parallelism."""
        dims = self.dims
        return RankGrid(tuple(dims.values()), tuple(dims), ranks)

    def replace(self, **changes):
        """A copy with ``changes``, checked like a new config."""
        unknown = sorted(set(changes) - {f.name for f in dataclasses.fields(self)})
        if unknown:
            names = ", ".join(f.name for f in dataclasses.fields(self))
            raise ConfigError(f"ParallelConfig has no field {unknown[0]!r}; its fields: {names}")
        return dataclasses.replace(self, **changes)

    def to_dict(self):
        """The fields as plain values (a built schedule by its name)."""
        out = dataclasses.asdict(self)
        if isinstance(self.schedule, Schedule):
            out["schedule"] = self.schedule.name
        return out


def _nearest_folding(ranks, ep, etp):
    """The nearest ep (keeping etp) whose ep x etp divides ``ranks``, or etp=1 and that ep."""
    keep = [e for e in range(1, ranks + 1) if ranks % (e * etp) == 0]
    if keep:
        return f"ep={min(keep, key=lambda e: (abs(e - ep), e))}"
    near = min((e for e in range(1, ranks + 1) if ranks % e == 0), key=lambda e: (abs(e - ep), e))
    return f"ep={near} with etp=1"
