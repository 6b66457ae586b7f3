"""The planner's communication ledger: a mesh dimension's link and the collectives charged
to it, each by the simulator's own closed form (:mod:`collsim.collectives.formulas`)."""

from ...collectives.formulas import closed_form

__all__ = ["dimension", "add_op", "group_link"]


def group_link(cfg, size, stride):
    """'intra-node' when a group of ``size`` ranks ``stride`` apart fits inside one node."""
    span = size * stride
    # groups tile the nodes evenly only when their span divides the node; a job that fits
    # in one node keeps every group inside it whatever the span
    one_node = cfg.world_size is not None and cfg.world_size <= cfg.gpus_per_node
    inside = (
        float(span).is_integer()
        and span <= cfg.gpus_per_node
        and (cfg.gpus_per_node % span == 0 or one_node)
    )
    return "intra-node" if inside else "inter-node"


def dimension(cfg, size, stride):
    link = group_link(cfg, size, stride)
    intra = link == "intra-node"
    return {
        "group_size": size,
        "link": link,
        "bandwidth": cfg.intra_bandwidth if intra else cfg.inter_bandwidth,  # bytes/s
        "latency_s": cfg.intra_latency if intra else cfg.inter_latency,
        "ops": {},
        "bytes_per_rank": 0.0,
        "time_s": 0.0,
    }


def add_op(dim, name, collective, size_bytes, calls, ranks=None, algorithm="ring", link=None):
    """Charge ``calls`` runs of one collective to ``dim`` (per step, per GPU)."""
    ranks = dim["group_size"] if ranks is None else ranks
    alpha, beta = (link or dim)["latency_s"], (link or dim)["bandwidth"]
    k = max(1, int(round(ranks)))
    cost = closed_form(collective, algorithm, k, size_bytes, alpha, beta)
    op = {
        "collective": collective,
        "algorithm": algorithm,
        "ranks": k,
        "link": (link or dim)["link"],
        "size_bytes": float(size_bytes),  # S as nccl-tests defines it
        "calls": calls,  # per optimizer step
        "steps_per_call": cost.steps,
        "bytes_per_call": cost.bytes_per_rank,  # sent by one rank
        "time_per_call_s": cost.time_s,
        "bytes_per_rank": calls * cost.bytes_per_rank,
        "time_s": calls * cost.time_s,
    }
    dim["ops"][name] = op
    dim["bytes_per_rank"] += op["bytes_per_rank"]
    dim["time_s"] += op["time_s"]
