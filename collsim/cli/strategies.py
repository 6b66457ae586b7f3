"""``collsim strategies``: the strategy table of Accelerate's ND-parallelism guide, measured.

Every strategy trains the same model on the same 2-node cluster (:mod:`collsim.verify.strategies`)
and prints one row: matches one device, the busiest rank's peak memory by category, bytes per
rank on intra- and inter-node links, step time and exposed communication; then the guide's
claims with the verdict the numbers give.
"""

from .common import Formatter
from .trace_flag import add_trace_argument, check_trace, write_trace

__all__ = ["register", "run", "table_lines"]

DESCRIPTION = """\
The strategy table of Hugging Face's ND-parallelism guide ("Accelerate ND-Parallel: A Guide
to Efficient Multi-GPU Training"), measured: each strategy trains the same small causal
transformer for one Adam step on 8 virtual GPUs in 2 nodes of 4, checked against one device.

terms (sizes as Accelerate's ParallelismConfig names them; their product is the 8 GPUs):
  DP      data parallel (dp_replicate): every GPU holds the whole model and optimizer, takes
          its share of the batch, and the gradients are all-reduced (averaged)
  FSDP    fully sharded data parallel (dp_shard; ZeRO-3, Rajbhandari et al. 2020): parameters,
          gradients and optimizer state are split over the shard group; each layer's
          parameters are all-gathered for its passes and its gradients reduce-scattered
  TP      tensor parallel (tp; Megatron-LM): each layer's weight matrices split by columns or
          rows, an all-reduce per layer per pass: many bytes, so it stays inside a node
  CP      context parallel (cp): each GPU holds a slice of every sequence; attention passes
          key/value shards around a ring (ring attention), so activations shrink with cp
  HSDP    hybrid sharding: FSDP inside a node (dp_shard), plain replicas across nodes
          (dp_replicate), so only a gradient all-reduce crosses the slow links
  + means the sizes combine on one mesh (order dp_replicate, dp_shard, cp, tp, tp innermost)
  EP      expert parallel (ep; not in the guide: torchtitan, Megatron-Core): the same model
          with every MLP a mixture of 8 experts (top-2), the experts split over ep of the
          data-parallel GPUs and each token sent to its experts' GPUs by an all-to-all;
          experts' gradients are reduced only over the GPUs holding copies (edp)

columns:
  R S C T E      dp_replicate, dp_shard, cp, tp, ep
  match          every gradient and parameter equals one device's (float64, 1e-10)
  memory         the busiest rank's peak per category (params, grads, optimizer state,
                 activations saved for backward, FSDP's gathered parameters) and in total
  intra / inter  bytes each rank sent (mean of 8) over links inside a node / between nodes
  step           simulated time of the step; exposed: communication no compute hid (the
                 rank with the most)

Under the rows, the guide's claims (FSDP cuts model-state memory; HSDP trades memory for
fewer inter-node steps; TP belongs inside a node; CP cuts activation memory) each with the
verdict the measured numbers give: agrees, disagrees, or not measured (a row did not run).
A strategy the trainer refuses is listed with its reason.  --json gives the same rows."""


def register(subparsers):
    p = subparsers.add_parser(
        "strategies",
        help="the ND-parallelism strategy table (DP, FSDP, TP, CP, HSDP, ...) measured",
        description=DESCRIPTION,
        formatter_class=Formatter,
    )
    p.add_argument("--json", action="store_true", help="print the rows and claims as JSON")
    add_trace_argument(p, "every strategy's training run, one group of ranks each,")
    p.set_defaults(func=run)


def run(args):
    """Measure every strategy and print the table (or JSON); returns 0."""
    import json

    from ..verify import strategies as measured

    check_trace(args)
    rows = measured.strategy_table()
    verdicts = measured.claims(rows)
    write_trace(args, _trace_parts(rows), quiet=args.json)
    if args.json:
        data = {
            "source": measured.SOURCE,
            "model": measured.SHAPE.describe(),
            "cluster": measured.describe_cluster(),
            "rows": [row.to_dict() for row in rows],
            "claims": [c.to_dict() for c in verdicts],
        }
        print(json.dumps(data, indent=2))
        return 0
    print("\n".join(table_lines(rows, verdicts)))
    return 0


def _trace_parts(rows):
    """One part of the trace file per strategy that ran, its ranks a process group of
    their own ("FSDP: rank 3")."""
    from ..network.chrome import RUN_PIDS, ChromePart

    ran = [row for row in rows if row.trace is not None]
    return [ChromePart(row.trace, row.name, i * RUN_PIDS) for i, row in enumerate(ran)]


def table_lines(rows, verdicts):
    """The printed table: two blocks of rows (memory; traffic and time), then the claims."""
    import textwrap

    from ..units import format_size, format_time
    from ..verify import strategies as measured

    out = [
        "Accelerate's ND-parallelism strategies, measured",
        *textwrap.wrap(
            measured.SOURCE, 99, initial_indent="  source:  ", subsequent_indent=" " * 11
        ),
        f"  model:   {measured.SHAPE.describe()}",
        f"  cluster: {measured.describe_cluster()}",
        "",
        "peak memory of the busiest rank",
        f"{'strategy':<11} {'R S C T E':<10} {'match':<6}"
        + "".join(f"{h:>11}" for h in ("params", "grads", "optimizer", "activ.", "gathered"))
        + f"{'total':>11}",
    ]
    note = (
        "(each category's own peak; total is the peak of their sum, FSDP's communication "
        "buffers included, so it need not equal the sum of the columns)"
    )
    for r in rows:
        head = f"{r.name:<11} {_sizes(r):<10} "
        if r.not_run:
            out += textwrap.wrap(
                f"not run: {r.not_run}", 99, initial_indent=head, subsequent_indent=" " * len(head)
            )
            continue
        mem = r.peak_memory_bytes
        keys = ("params", "grads", "optimizer", "activations", "gathered_params", "total")
        out.append(
            head + f"{_yes(r.match):<6}" + "".join(f"{format_size(mem[k]):>11}" for k in keys)
        )
    out += textwrap.wrap(note, 99)
    out += [
        "",
        "communication and time (bytes sent per rank, mean of 8)",
        f"{'strategy':<11} {'intra-node':>11}{'inter-node':>11}{'step':>11}{'exposed':>11}"
        "   layout",
    ]
    for r in rows:
        if r.not_run:
            out.append(f"{r.name:<11} {'not run':>11}{'':>33}   {r.what}")
            continue
        out.append(
            f"{r.name:<11} {format_size(r.intra_node_bytes):>11}"
            f"{format_size(r.inter_node_bytes):>11}{format_time(r.step_time_s):>11}"
            f"{format_time(r.exposed_comm_s):>11}   {r.what}"
        )
    out += ["", "the guide's claims against these rows:"]
    for c in verdicts:
        out.append(f"  [{c.verdict}] {c.claim}")
        out += textwrap.wrap(c.evidence, 92, initial_indent="      ", subsequent_indent="      ")
    return out


def _sizes(row):
    s = row.sizes
    return f"{s['dp_replicate']} {s['dp_shard']} {s['cp']} {s['tp']} {s.get('ep', 1)}"


def _yes(match):
    return "yes" if match else "NO"
