"""What each rank of the mesh trainer holds: its coordinates, its groups and its shard of the
model.

:func:`rank_setup` places rank ``r`` on the ``(pp, dp, cp, tp)`` mesh and builds its chunks of
the model: each layer split over tp by :func:`shard_layer`, or (with ``cp``) its attention
across the context-parallel group, wrapped for ZeRO-3 when the config says so.
:mod:`collsim.parallel.mesh` runs them.
"""

import copy
from dataclasses import dataclass

from ..errors import ConfigError
from ..nn import MLP, MoEMLP, MultiHeadAttention, TransformerBlock
from ..runtime.group import Group
from .block import RankBlock
from .context.block import ContextParallelBlock
from .context.tensor import TensorContextAttention, tensor_context_block
from .data import expert_grads
from .data.sharded import ShardedUnit, ShardPart, hsdp_groups
from .experts.block_mlp import EXPERT_KEYS, ExpertParallelMLP, TensorMoEBlock
from .experts.folding import ExpertGroups, expert_groups, expert_token_shards, tokens_replicated
from .modules import Local
from .pipeline.schedules import split_layers
from .tensor import ParallelAttention, ParallelMLP, ParallelTransformerBlock

__all__ = ["RankSetup", "rank_setup", "shard_layer", "oracle_model"]


def shard_layer(layer, group, tp_rank, name, sequence_parallel=False):
    """The rank module holding TP rank ``tp_rank``'s part of ``layer`` (a copy).

    TransformerBlock and MLP are split (tensor parallel); any other layer is replicated.
    """
    if group.size > 1 and isinstance(layer, TransformerBlock):
        return ParallelTransformerBlock.from_full(layer, group, tp_rank, sequence_parallel, name)
    if group.size > 1 and isinstance(layer, MLP):
        return ParallelMLP.from_full(layer, group, tp_rank, sequence_parallel=sequence_parallel)
    return Local(copy.deepcopy(layer), name=name)  # a copy: replicas must not share arrays


@dataclass
class RankSetup:
    """What one rank holds: its coordinates, groups, model chunks and optimizer."""

    stage: int
    replica: int
    tp_rank: int
    pp_ranks: tuple
    dp_group: object
    tp_group: object
    chunks: list  # per model chunk: [(prefix, rank module), ...]
    optimizer: object
    n_layers: int  # layers (units) of the whole model
    cp_rank: int = 0  # its place in the context-parallel group (0 without cp)
    expert_names: frozenset = frozenset()  # its MoE experts' parameters (E/ep of each stack)
    experts: ExpertGroups = None  # its ep, etp and edp groups (MoE parallel folding)
    expert_shards: float = 1  # ranks' worth of tokens its experts' gradients sum


def rank_setup(mesh, r, model, sequential, config, optimizer):
    """Rank ``r``'s coordinates, groups and shard of its stage's layers."""
    where = mesh.coords(r)
    stage, tp_group = where["pp"], mesh.group("tp", r)
    tp_rank, cp_rank = where["tp"], where.get("cp", 0)
    if sequential:
        n_layers = len(model)
        ranges = split_layers(n_layers, config.pp, config.vpp)[stage]
        cp_group = mesh.group("cp", r) if config.cp > 1 else None
        moe_groups = _expert_groups(mesh, r, config)

        def layer_module(i):
            moe = _moe_layer(model[i], moe_groups, r, tp_group, cp_group, str(i), config)
            if moe is not None:
                return moe
            if cp_group is not None:  # attention across the cp group, the rest on its tokens
                return _context_layer(
                    model[i], cp_group, cp_rank, tp_group, tp_rank, str(i), config
                )
            return shard_layer(model[i], tp_group, tp_rank, str(i), config.sp)

        chunks = [[(str(i), layer_module(i)) for i in span] for span in ranges]
        expert_names = frozenset(
            f"{prefix}.{name}"
            for units in chunks
            for prefix, unit in units
            for name in unit.params
            if name.rsplit(".", 1)[-1] in EXPERT_KEYS and _holds_experts(unit)
        )
    else:
        units = list(model(tp_group, tp_rank))
        n_layers = len(units)
        ranges = split_layers(len(units), config.pp, config.vpp)[stage]
        chunks = [[units[i] for i in span] for span in ranges]
        moe_groups, expert_names = expert_groups([r], r, 1), frozenset()
    dp_group = mesh.group("dp", r) if config.cp == 1 else _replica_group(mesh, r)
    setup = RankSetup(
        stage=stage,
        replica=where["dp"],
        tp_rank=tp_rank,
        pp_ranks=mesh.group("pp", r).ranks,
        dp_group=dp_group,
        tp_group=tp_group,
        chunks=chunks,
        optimizer=copy.deepcopy(optimizer),
        n_layers=n_layers,
        cp_rank=cp_rank,
        expert_names=expert_names,
        experts=moe_groups,
        expert_shards=expert_token_shards(config.ep, config.expert_tp, config.tp, config.sp),
    )
    if config.zero == 3:  # ZeRO-3 / FSDP: every unit keeps 1/dp_shard of its parameters
        setup.chunks = [
            [(p, _fsdp_unit(setup, p, u, r, config)) for p, u in units] for units in setup.chunks
        ]
    return setup


def _fsdp_unit(me, prefix, unit, r, config):
    """``unit`` as an FSDP unit: the dense parameters sharded over dp_shard x cp, as
    Accelerate and Megatron form that group, and its MoE experts' over their own edp
    shard group (torchtitan's dp_shard_mod_ep), each replicated over dp_replicate (HSDP)."""
    shard_group, replica_group = hsdp_groups(me.dp_group, config.dp_shard * config.cp, r)
    names = [n for n in unit.params if expert_grads.is_expert_gradient(f"{prefix}.{n}", me)]
    experts = None
    if names:
        edp = me.experts.edp
        shard, replica = hsdp_groups(
            edp, edp.size // config.dp_replicate, r, dims=("edp_shard", "edp_replicate")
        )
        experts = ShardPart("expert_shard", tuple(names), shard, replica, me.expert_shards)
    name = prefix or "unit"
    return ShardedUnit(
        unit, shard_group, r, name, replica_group, config.reshard_after_forward, experts
    )


def _context_layer(layer, group, cp_rank, tp_group, tp_rank, name, config):
    """A layer on one rank of a context-parallel group: a transformer block with its
    attention across the group (and its heads and MLP split over tp); any other layer
    works token by token, so runs as it is."""
    if isinstance(layer, TransformerBlock):
        if tp_group.size > 1:
            return tensor_context_block(
                layer,
                tp_group,
                tp_rank,
                group,
                cp_rank,
                config.cp_variant,
                config.cp_layout,
                name,
                config.sp,
            )
        return ContextParallelBlock.from_full(
            layer, group, cp_rank, config.cp_variant, config.cp_layout, name
        )
    if isinstance(layer, MultiHeadAttention):
        raise ConfigError(
            f"layer {name} is a bare MultiHeadAttention: under context parallelism collsim "
            "runs attention inside transformer blocks; wrap it in a TransformerBlock"
        )
    return Local(copy.deepcopy(layer), name=name)


def oracle_model(model, config):
    """A copy of ``model`` whose MoE layers route as the ranks do: each of the dp x
    micro-batches blocks of the batch on its own, with its own capacity (Megatron-Core
    counts capacity per rank and micro-batch).  Under cp a rank's tokens are not one
    block of the batch, so there only dropless routing is checked."""
    model = copy.deepcopy(model)
    for i, layer in enumerate(model):
        moe = layer.mlp if isinstance(layer, TransformerBlock) else layer
        if not isinstance(moe, MoEMLP):
            continue
        routing = moe.moe.config
        split = f"cp={config.cp}" if config.cp > 1 else "sp=True" if config.sp else None
        if split and (routing.capacity_factor is not None or routing.pad_to_capacity):
            raise ConfigError(
                f"layer {i} drops tokens by capacity (capacity_factor="
                f"{routing.capacity_factor}) under {split}: the one-device check knows each "
                "rank's tokens only when they are one block of the batch (no cp, no sp); use "
                "capacity_factor=None (dropless)"
            )
        if split and routing.aux_loss_coeff:  # f_i·P_i per rank is not per block of the batch
            raise ConfigError(
                f"layer {i} has aux_loss_coeff={routing.aux_loss_coeff} under {split}: the "
                "load-balancing loss is counted over each rank's tokens, which are not one "
                "block of the batch there; use aux_loss_coeff=0"
            )
        moe.ranks = config.dp * config.microbatches
    return model


def _moe_layer(layer, groups, r, tp_group, cp_group, name, config):
    """A block whose MLP is an MoE (or a bare :class:`~collsim.nn.MoEMLP`) on rank ``r``:
    the experts split over ``groups`` (ep, and etp for their columns), attention as the
    other blocks run it; None for any other layer."""
    moe = layer.mlp if isinstance(layer, TransformerBlock) else layer
    if not isinstance(moe, MoEMLP):
        return None
    split = tp_group.size > 1 and config.sp  # each tp rank routes its own tokens
    mlp = ExpertParallelMLP.from_full(
        moe, groups, r, name=f"{name}.mlp", partial=split, aux_scale=1 / config.microbatches
    )
    if moe is layer:
        if tp_group.size > 1:
            raise ConfigError(
                f"layer {name} is a bare MoEMLP: under tp={tp_group.size} collsim runs MoE "
                "layers inside transformer blocks; wrap it in a TransformerBlock"
            )
        return mlp
    if tp_group.size > 1:  # heads over tp (and the sequence over cp); experts over ep
        tp_rank = tp_group.index(r)
        if cp_group is None:
            attn = ParallelAttention.from_full(
                layer.attn, tp_group, tp_rank, config.sp, name=f"{name}.attn"
            )
        else:
            attn = TensorContextAttention.from_full(
                layer.attn,
                tp_group,
                tp_rank,
                cp_group,
                cp_group.index(r),
                config.cp_variant,
                config.cp_layout,
                f"{name}.attn",
                config.sp,
            )
        ln1, ln2 = (
            Local(copy.deepcopy(getattr(layer, p)), name=f"{name}.{p}") for p in ("ln1", "ln2")
        )
        return TensorMoEBlock(ln1, attn, ln2, mlp, tp_group, config.sp, name)
    if cp_group is not None:
        attn = ContextParallelBlock.from_full(
            layer, cp_group, cp_group.index(r), config.cp_variant, config.cp_layout, name
        )
        return ContextParallelBlock(attn.ln1, attn.attn, attn.ln2, mlp, name)
    ln1, attn, ln2 = (
        Local(copy.deepcopy(getattr(layer, part)), name=f"{name}.{part}")
        for part in ("ln1", "attn", "ln2")
    )
    return RankBlock(ln1, attn, ln2, mlp, name)


def _holds_experts(unit):
    """Whether ``unit`` (a rank module) holds a share of an MoE layer's experts."""
    return isinstance(unit, ExpertParallelMLP) or isinstance(
        getattr(unit, "mlp", None), ExpertParallelMLP
    )


def _expert_groups(mesh, r, config):
    """Rank ``r``'s ep, etp and edp groups, folded over its stage's ranks in (dp, cp, tp)
    order (Megatron-Core's MoE parallel folding)."""
    stage = mesh.grid[mesh.coords(r)["pp"]].ravel()
    replicated = tokens_replicated(config.tp, config.sp)
    return expert_groups(stage, r, config.ep, config.expert_tp, replicated)


def _replica_group(mesh, r):
    """The ranks holding the same parameters under context parallelism: every dp and cp
    coordinate of ``r``'s stage and tp rank (gradients are averaged over all of them)."""
    where = mesh.coords(r)
    grid = mesh.grid.reshape(mesh.grid.shape[0], -1, mesh.grid.shape[-1])  # (pp, dp·cp, tp)
    grid = grid[where["pp"], :, where["tp"]]
    return Group([int(x) for x in grid.ravel()], dim="dp_cp")
