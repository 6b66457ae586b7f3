"""collsim's all-reduce on the hardware presets next to the figures NVIDIA published.

Runs the count-only all-reduce sweep nccl-tests runs (``all_reduce_perf -b 8 -e 8G -f 2``,
float32) on each preset that has a published figure -- one DGX A100 with the default
algorithm, one DGX H100 with the ring and with NVLS, two DGX A100 with the default --
prints collsim's large-message busbw next to the published one, the small-message time
next to its latency floor, and writes the picture docs/commands.md shows.

    python benchmarks/calibration.py                       # docs/calibration.png
    python benchmarks/calibration.py --factor 4 --out /tmp/calibration.png

The published figures, who said them and where: :data:`collsim.viz.calibration.PUBLISHED`.
"""

import argparse
import io
import sys

from collsim.cli.console import progress
from collsim.cli.paths import check_output_path
from collsim.errors import CollsimError
from collsim.units import format_size
from collsim.viz.calibration import (
    CURVES,
    PUBLISHED,
    calibration_figure,
    calibration_sizes,
    measure_curve,
    published_for,
)
from collsim.viz.output import save_figure


def table(curves):
    """The comparison as markdown rows: preset, algorithm, size, busbw, published, ratio."""
    rows = [
        "| preset | GPUs | algorithm (ran) | size | collsim busbw | published busbw | ratio |",
        "|---|---|---|---|---|---|---|",
    ]
    for curve in curves:
        for p in published_for(curve):
            # the largest size measured up to the one the figure was read at
            i = max(j for j, s in enumerate(curve.sizes) if s <= p.size)
            mine = curve.busbw_GBps[i]
            where = p.preset if p.nodes == 1 else f"{p.preset} x{p.nodes}"
            asked = p.algorithm or "auto"
            rows.append(
                f"| {where} | {curve.ranks} | {asked} ({curve.chosen[i]}) | "
                f"{format_size(p.size)} | {mine:.1f} GB/s | ~{p.busbw_GBps:g} GB/s | "
                f"{mine / p.busbw_GBps:.3f} |"
            )
    return "\n".join(rows)


def floors(curves):
    """The small-message end: time at the smallest size against the sum of its steps'
    latencies, and busbw there against busbw at the largest size."""
    rows = [
        "| preset / algorithm | size | ran | steps | time | steps' latencies | "
        "busbw there / at the largest size |",
        "|---|---|---|---|---|---|---|",
    ]
    for curve in curves:
        bw = curve.busbw_GBps
        rows.append(
            f"| {curve.spec.key} | {format_size(curve.sizes[0])} | {curve.chosen[0]} | "
            f"{curve.steps[0]} | {curve.times[0] * 1e6:.2f} µs | "
            f"{curve.floors[0] * 1e6:.2f} µs | {bw[0] / bw[-1]:.1e} |"
        )
    return "\n".join(rows)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--factor", default="2", help="multiply the size by this (default 2)")
    parser.add_argument("--out", default="docs/calibration.png", help="the picture (.png/.svg)")
    parser.add_argument("--dpi", default="100", help="PNG resolution (default 100)")
    parser.add_argument("--progress", action="store_true", help="progress on stderr")
    args = parser.parse_args(argv)
    try:
        out = check_output_path(args.out, "--out", (".png", ".svg"))
        factor = _whole(args.factor, "--factor", 2)
        dpi = _whole(args.dpi, "--dpi", 30)
        sizes = calibration_sizes(8, max(p.size for p in PUBLISHED), factor)
        with progress("calibration", enabled=args.progress) as note:
            curves = [measure_curve(spec, sizes, note=note) for spec in CURVES]
        print("Large messages: collsim (count-only) against the published figures\n")
        print(table(curves))
        print("\nSmall messages: the latency floor\n")
        print(floors(curves))
        save(calibration_figure(curves), out, dpi)
    except CollsimError as error:
        print(f"calibration: error: {error}", file=sys.stderr)
        return 1
    print(f"\nwrote {out}")
    for p in PUBLISHED:
        print(f"  ~{p.busbw_GBps:g} GB/s {p.key}: {p.who}, {p.source} ({p.setup})")
    return 0


def save(fig, out, dpi):
    """Write the figure; a PNG in 128 colours (it has a dozen), so docs/commands.md's picture
    stays near 70 KB rather than 200 (Pillow, which matplotlib itself needs, quantizes:
    the same picture gives the same bytes)."""
    if out.suffix.lower() != ".png":
        save_figure(fig, out, out.suffix, dpi=dpi)
        return
    from PIL import Image

    buffer = io.BytesIO()
    save_figure(fig, buffer, "png", dpi=dpi)
    buffer.seek(0)
    image = Image.open(buffer).convert("RGB")
    image.quantize(colors=128, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(
        out, "PNG", optimize=True
    )


def _whole(text, flag, lowest):
    from collsim.errors import ConfigError

    try:
        value = int(str(text))
    except ValueError:
        value = None
    if value is None or value < lowest:
        raise ConfigError(f"{flag} {text!r}: give a whole number >= {lowest}")
    return value


if __name__ == "__main__":
    sys.exit(main())
