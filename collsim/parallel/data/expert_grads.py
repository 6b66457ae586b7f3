"""Which group reduces a parameter's gradient, the experts' or the dense one, and by how much.

Dense parameters (attention, norms, the MoE router) are copies on every data × context-
parallel rank of a stage and tensor-parallel coordinate: their gradients are averaged over
that group (DDP), or reduce-scattered over ZeRO's shard group.  An MoE expert's slice lives
on the ranks of its expert-data-parallel group (:mod:`collsim.parallel.experts.folding`),
and its gradient on one rank already sums the tokens of every rank that sent it some: it is
divided by those ranks' worth (:func:`expert_grad_share`) and averaged over the edp group
only, whatever ep is.  Megatron-Core once tagged the experts as dense when ep = 1, so with
etp > 1 their gradients were averaged over the dense group, mixing different columns of an
expert (Megatron-LM issue 1628); :func:`is_expert_gradient` is the one place that decides.

>>> import numpy as np
>>> expert_grad_share(np.array([4.0, 6.0]), 2).tolist()
[2.0, 3.0]
"""

__all__ = ["expert_grad_share", "is_expert_gradient"]


def expert_grad_share(grad, shards):
    """An expert's gradient on its rank, as its share of the edp group's average.

    The rank's experts received the tokens of ``shards`` ranks' worth of the batch (ep
    ranks, times etp when those gather their own tokens;
    :func:`~collsim.parallel.experts.folding.expert_token_shards`), each
    weighted by its own rank's loss scale: averaging it over the edp group and dividing by
    ``shards`` gives the mean over every dp x cp rank.  Leaving out the division is the
    doubled gradient with ep = 2.
    """
    return grad / shards


def is_expert_gradient(name, me):
    """Whether parameter ``name`` of rank setup ``me`` is synced as an expert's (over its
    expert-data-parallel group), not as a dense parameter's."""
    return name in me.expert_names
