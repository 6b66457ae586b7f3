"""Megatron-Core's MoE parallel folding: the expert groups of one pipeline stage.

Attention splits a stage's ranks as tp-cp-dp (tp innermost); the MoE layers split the same
ranks as etp-ep-edp, etp innermost (Megatron-Core's ``RankGenerator`` for experts,
torchtitan's ``ep`` carved from ``dp_shard × cp``).  Rank ``i`` of the stage (in
``(dp, cp, tp)`` order) is etp rank ``i % etp``, ep rank ``(i // etp) % ep`` and edp rank
``i // (etp·ep)``, so ``ep · etp`` must divide ``dp · cp · tp`` and the expert-data-parallel
group (the ranks holding the same slice of the same experts) has
``dp·cp·tp / (ep·etp)`` ranks.

Each expert's gradient on its rank sums the tokens of every rank that sent it some, each
weighted by its own rank's loss scale, so it is :func:`expert_token_shards` ranks' worth;
divided by that, and averaged over the edp group, it is the whole batch's gradient.

>>> groups = expert_groups(range(8), 5, ep=2, etp=2)  # 8 ranks of a stage, tp = 1
>>> groups.etp.ranks, groups.ep.ranks, groups.edp.ranks
((4, 5), (5, 7), (1, 5))
>>> expert_token_shards(ep=2, etp=2, tp=1, sp=False)  # 2 ep x 2 etp ranks' tokens
4
"""

from dataclasses import dataclass

from ...errors import ConfigError
from ...runtime.group import Group

__all__ = ["ExpertGroups", "expert_groups", "expert_token_shards", "tokens_replicated"]


@dataclass(frozen=True)
class ExpertGroups:
    """Rank ``r``'s three MoE groups inside its pipeline stage."""

    ep: Group  # ranks that split the experts among them (the token all-to-all runs here)
    etp: Group  # ranks that split each expert's MLP by columns and rows
    edp: Group  # ranks holding the same slice of the same experts (gradients reduced here)
    replicated: bool = False  # the etp ranks hold the same tokens (tp without sp): the
    # expert outputs are all-reduced; else each holds its own and they are gathered


def expert_groups(stage_ranks, rank_id, ep, etp=1, replicated=False):
    """The ep, etp and edp groups of ``rank_id`` among ``stage_ranks`` (its stage's ranks
    in ``(dp, cp, tp)`` order): etp takes consecutive ranks, then ep, then edp."""
    ranks = [int(r) for r in stage_ranks]
    if len(ranks) % (ep * etp):
        raise ConfigError(
            f"ep x etp = {ep} x {etp} does not divide the {len(ranks)} ranks of a stage it "
            "is folded over (dp x cp x tp)"
        )
    i = ranks.index(int(rank_id))
    etp_start = i - i % etp
    block = ep * etp
    ep_start = i - i % block + i % etp
    return ExpertGroups(
        ep=Group(ranks[ep_start : ep_start + block : etp], dim="ep"),
        etp=Group(ranks[etp_start : etp_start + etp], dim="etp"),
        edp=Group(ranks[i % block :: block], dim="edp"),
        replicated=replicated and etp > 1,
    )


def tokens_replicated(tp, sp):
    """Whether the tp ranks of a stage hold the same tokens (tensor parallelism without
    sequence parallelism): then an etp group inside tp shares its tokens."""
    return tp > 1 and not sp


def expert_token_shards(ep, etp, tp, sp):
    """Ranks' worth of tokens an expert's gradient on one rank sums, in units of one dp x cp
    rank's batch share: the ep ranks' tokens, times the etp ranks' when each holds its own,
    over tp when the tp ranks split a sample's tokens (sp: each loss is scaled by 1/tp)."""
    if tokens_replicated(tp, sp):
        return ep  # the etp ranks (inside tp) share their tokens; the tp losses are whole
    return ep * etp / tp if tp > 1 else ep * etp
