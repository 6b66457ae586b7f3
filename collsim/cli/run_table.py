"""The table ``collsim run`` prints: a header that says what ran and how each flag was read,
then one nccl-tests row per size.

Examples
--------
>>> row = {"size_bytes": 1024, "count": 256, "dtype": "float32", "op": "sum", "steps": 14,
...        "time_s": 7.5e-05, "algbw_GBps": 0.01365, "busbw_GBps": 0.0239,
...        "bytes_sent": [1792] * 8, "wrong": 0}
>>> row_line(row)
'            1024         256 float32    sum     14    75.00    0.01    0.02           1792       0'
"""

from .flags_read import link_lines, sizes_line

__all__ = ["header_lines", "row_line"]


def header_lines(row, args, sizes):
    """What ran (collective, ranks, algorithm, topology), every flag as typed and as read, and
    the column titles."""
    name = row["collective"].replace("_", "-")
    if _on_hardware(args):
        lines = [
            f"# collsim run {name}: {row['ranks']} ranks, algorithm "
            f"{args.algorithm or 'auto'}, protocol {args.protocol or 'auto'}, topology "
            f"{row['topology']}, the machine's cited link rates, model "
            f"{args.model}"
        ]
    else:
        lines = [
            f"# collsim run {name}: {row['ranks']} ranks, algorithm {row['algorithm']}, "
            f"topology {row['topology']}, model {args.model}"
        ]
    return [
        *lines,
        *link_lines(args),
        sizes_line(args, sizes),
        "# max sent/rank: bytes the busiest rank sent; #wrong: output elements that differ "
        "from numpy's (n/a without data)",
        "#" + " " * 11 + "size       count    type  redop  steps     time  algbw   busbw"
        "  max sent/rank  #wrong",
        "#" + " " * 11 + " (B)  (elements)                          (us) (GB/s)  (GB/s)"
        "            (B)",
    ]


def _on_hardware(args):
    """Whether --topology names a hardware preset or a machine file (not a generic shape)."""
    from .common import TOPOLOGIES

    return args.topology not in TOPOLOGIES


def row_line(row):
    """One size's row, in nccl-tests' column order."""

    def bw(v):
        return f"{v:7.2f}" if v is not None else "    n/a"

    wrong = "n/a" if row["wrong"] is None else str(row["wrong"])
    op = row["op"] or "none"
    return (
        f"{row['size_bytes']:>16} {row['count']:>11} {row['dtype']:>7} {op:>6} "
        f"{row['steps']:>6} {row['time_s'] * 1e6:>8.2f} {bw(row['algbw_GBps'])} "
        f"{bw(row['busbw_GBps'])} {max(row['bytes_sent'], default=0):>14} "
        f"{wrong:>7}"
    )
