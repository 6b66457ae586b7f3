"""What ``collsim verify moe`` found, as a record and as the printed report.

>>> from collsim.verify.moe import MoESizes, verify_moe
>>> report = verify_moe(MoESizes.of(ep=2, experts=4, batch=2, seq=2, hidden=4))
>>> print(str(report).splitlines()[0])
MATCH: expert parallelism (ep=2) equals the dense MoE layer (max relative difference ...)
"""

from dataclasses import dataclass

from ..units import format_size, format_time

__all__ = ["MoEReport"]

FORMS = {
    "alltoall": "a rank sends d·b·Σ_(j≠r) N[r][j], N[r][j] its rows for rank j's experts",
    "allgather": "(ep−1)·T·(d + 2E)·b out, (ep−1)·T·d·b back, whatever the routing",
    "hierarchical": "(d+2E)·b a token and other node across, d·b a slot inside the node",
}
OTHER = {
    "alltoall": "  before them, the all-to-all of per-expert counts: {counts} a rank; Megatron's "
    "all-gather dispatcher would send {other} a rank to dispatch, whatever the routing",
    "allgather": "  the all-to-all dispatcher would send at most {other} a rank to dispatch this "
    "routing (only the rows whose expert is elsewhere)",
    "hierarchical": "  the flat all-to-all dispatcher would send at most {other} a rank to "
    "dispatch this routing (one row a slot, straight to the expert's GPU)",
}


@dataclass(frozen=True)
class MoEReport:
    """One moe check: the comparison, each rank's load and the closed forms."""

    sizes: object  # MoESizes
    max_rel_diff: float  # over output, input gradient, router and expert gradients, loss
    tolerance: float
    loads: tuple  # RankLoad per rank, read from the run
    dispatch: object  # RaggedBytes by the dispatcher's closed form (the routing that happened)
    combine: object  # RaggedBytes
    counts_bytes: int  # bytes a rank sends in the all-to-all of per-expert counts (alltoall)
    other_bytes: int  # bytes the busiest rank would send to dispatch with the other dispatcher
    inter_node: list  # bytes each rank sent to other nodes (forward dispatch + combine)
    capacity: int | None  # slots per expert per rank; None when dropless
    time: float  # s: the step's simulated time

    @property
    def numerics_match(self):
        return self.max_rel_diff <= self.tolerance

    @property
    def bytes_match(self):
        """Every rank's dispatch and combine bytes equal the closed form."""
        return all(
            (load.dispatch_sent, load.dispatch_received, load.combine_sent, load.combine_received)
            == (
                self.dispatch.sent[load.rank],
                self.dispatch.received[load.rank],
                self.combine.sent[load.rank],
                self.combine.received[load.rank],
            )
            for load in self.loads
        )

    @property
    def match(self):
        return self.numerics_match and self.bytes_match

    @property
    def straggler(self):
        """The rank whose experts computed longest (the lowest such rank)."""
        return max(self.loads, key=lambda load: (load.expert_compute, -load.rank))

    def to_dict(self):
        s, r = self.sizes, self.sizes.router
        return {
            "scheme": "moe",
            "match": self.match,
            "max_rel_diff": self.max_rel_diff,
            "tolerance": self.tolerance,
            "bytes_match_closed_form": self.bytes_match,
            "ep": s.ep,
            "experts": r.experts,
            "top_k": r.top_k,
            "tokens": s.tokens,
            "routing": s.routing,
            "capacity_factor": r.capacity_factor,
            "capacity_per_expert_per_rank": self.capacity,
            "drop_policy": r.drop_policy,
            "time_s": self.time,
            "counts_bytes_per_rank": self.counts_bytes,
            "dispatcher": s.dispatcher,
            "gpus_per_node": s.gpus_per_node,
            "other_dispatcher_dispatch_bytes": self.other_bytes,
            "ranks": [
                {
                    "rank": load.rank,
                    "tokens_received": load.rows_received,
                    "dropped": load.dropped,
                    "dispatch_sent_bytes": load.dispatch_sent,
                    "dispatch_received_bytes": load.dispatch_received,
                    "combine_sent_bytes": load.combine_sent,
                    "combine_received_bytes": load.combine_received,
                    "inter_node_sent_bytes": load.inter_node_sent,
                    "expert_compute_s": load.expert_compute,
                    "finished_s": load.finished,
                    "peak_activation_bytes": load.peak_memory,
                }
                for load in self.loads
            ],
        }

    def __str__(self):
        s, r = self.sizes, self.sizes.router
        verdict = "MATCH" if self.match else "MISMATCH"
        lines = [
            f"{verdict}: expert parallelism (ep={s.ep}) equals the dense MoE layer "
            f"(max relative difference {self.max_rel_diff:.2e}, tolerance {self.tolerance:.0e}; "
            "output, input gradient, router and expert gradients)"
            if self.numerics_match
            else f"{verdict}: expert parallelism (ep={s.ep}) differs from the dense MoE layer "
            f"by {self.max_rel_diff:.2e} (relative; tolerance {self.tolerance:.0e})",
            f"  {r.experts} experts ({r.experts // s.ep} a rank), top-{r.top_k} {r.score}, "
            f"routing {s.routing}, {s.tokens} tokens ({s.tokens // s.ep} a rank) of hidden "
            f"{s.hidden}, expert ffn {s.ffn_hidden}",
            "  capacity: dropless"
            if self.capacity is None
            else f"  capacity: {self.capacity} tokens per expert per rank "
            f"(ceil(T·k/E·cf), cf {r.capacity_factor}), drop policy {r.drop_policy}"
            + (", padded to capacity" if r.pad_to_capacity else ""),
            "",
            f"  {s.ep // (s.gpus_per_node or s.ep)} node(s) of {s.gpus_per_node or s.ep} GPUs, "
            f"{s.dispatcher} dispatcher",
            "  rank  tokens in  dropped  dispatch sent / recv    combine sent / recv   "
            "   experts   finished   peak act.",
        ]
        for load in self.loads:
            lines.append(
                f"  {load.rank:>4}  {load.rows_received:>9}  {load.dropped:>7}  "
                f"{format_size(load.dispatch_sent):>10} / {format_size(load.dispatch_received):<10}"
                f"  {format_size(load.combine_sent):>9} / {format_size(load.combine_received):<10}"
                f"  {format_time(load.expert_compute):>9}  {format_time(load.finished):>9}"
                f"  {format_size(load.peak_memory):>9}"
            )
        received = [load.rows_received for load in self.loads]
        mean = sum(received) / len(received)
        slow = self.straggler
        lines += [
            "",
            f"  bytes of dispatch and combine equal the {s.dispatcher} dispatcher's closed form "
            f"({FORMS[s.dispatcher]}) for this routing: {'yes' if self.bytes_match else 'NO'}",
            OTHER[s.dispatcher].format(
                counts=format_size(self.counts_bytes), other=format_size(self.other_bytes)
            ),
            f"  across nodes in the forward pass: {format_size(sum(self.inter_node))} in all, "
            f"at most {format_size(max(self.inter_node))} from one rank",
            f"  load: max {max(received)} / mean {mean:.3g} tokens a rank "
            f"({max(received) / mean if mean else 0:.2f}x); rank {slow.rank}'s experts "
            f"computed longest ({format_time(slow.expert_compute)}) and every rank waits "
            f"for it in the combine: step {format_time(self.time)} simulated",
        ]
        return "\n".join(lines)
