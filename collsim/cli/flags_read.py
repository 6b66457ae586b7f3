"""Each flag as the user typed it beside the value collsim read from it, for a run's header.

A unit read the wrong way is silent in a table of results: ``--bandwidth 100Gbps`` is 12.5
GB/s, not 100, and ``--max-bytes 8G`` is 8 GiB, as nccl-tests reads it.  Printing both
spellings side by side makes a misreading visible before anyone trusts a number.

Examples
--------
>>> import argparse
>>> args = argparse.Namespace(topology="ring", bandwidth="100Gbps", latency="5us")
>>> link_lines(args)
['# links: --bandwidth 100Gbps = 12.5 GB/s per link and direction; --latency 5us = 5 us']
>>> sizes_line(argparse.Namespace(size="64M", min_bytes=None, max_bytes=None), [2**26])
'# size: --size 64M = 67,108,864 B (64 MiB)'
"""

from .. import units

__all__ = ["link_lines", "sizes_line", "read_as"]


def read_as(flag, text, value, formatted):
    """``--flag TEXT = VALUE``: always both, even where they look alike (``100GB/s = 100
    GB/s``), so that every header reads the same way."""
    return f"{flag} {text} = {formatted(value)}"


def link_lines(args):
    """The link flags of a generic topology as typed and as read (none on a hardware preset,
    whose links are the machine's own)."""
    from .common import TOPOLOGIES

    if args.topology not in TOPOLOGIES:
        return []
    lines = [
        f"# links: {_rate('--bandwidth', args.bandwidth)} per link and direction; "
        f"{_time('--latency', args.latency)}"
    ]
    if args.topology == "hierarchical":
        lines.append(
            f"# between nodes of {args.gpus_per_node} GPUs per node: "
            f"{_rate('--inter-bandwidth', args.inter_bandwidth)} per NIC; "
            f"{_time('--inter-latency', args.inter_latency)}"
        )
    return lines


def sizes_line(args, sizes):
    """The size flags as typed and as read: one ``--size``, or the sweep and its length."""
    if len(sizes) == 1 and args.min_bytes is None and args.max_bytes is None:
        text = "1MiB (the default)" if args.size is None else args.size
        return f"# size: {read_as('--size', text, sizes[0], _bytes)}"
    low = "8 (the default)" if args.min_bytes is None else args.min_bytes
    high, largest = (
        ("--min-bytes (the default)", sizes[0])
        if args.max_bytes is None
        else (args.max_bytes, units.parse_size(args.max_bytes))
    )
    count = f"{len(sizes)} size" + ("s" if len(sizes) > 1 else "")
    if sizes[-1] != largest:  # the factor steps past --max-bytes: say where it stops
        count += f", the last {_bytes(sizes[-1])}"
    return (
        f"# sizes: {read_as('--min-bytes', low, sizes[0], _bytes)} .. "
        f"{read_as('--max-bytes', high, largest, _bytes)}, times --factor {args.factor}: "
        f"{count}"
    )


def _bytes(nbytes):
    """``67,108,864 B (64 MiB)``: the exact bytes, and the binary unit where it is shorter."""
    exact = f"{nbytes:,} B"
    return exact if nbytes < 1024 else f"{exact} ({units.format_size(nbytes)})"


def _rate(flag, text):
    return read_as(flag, text, units.parse_rate(text), units.format_rate)


def _time(flag, text):
    return read_as(flag, text, units.parse_time(text), units.format_time)
