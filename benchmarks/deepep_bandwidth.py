"""DeepEP's published dispatch and combine bandwidth beside collsim's, on the DGX H100 preset.

    python benchmarks/deepep_bandwidth.py            # EP8 (one node), EP16, EP32, EP64
    python benchmarks/deepep_bandwidth.py --ep 8 16  # only these

DeepSeek-V3's setting as DeepEP's README states it (4,096 tokens a rank, hidden 7,168,
top-8 of 256 experts, at most 4 nodes a token, FP8 dispatch and BF16 combine), moved
count-only on ``hardware.topology("dgx-h100", nodes)`` by
:func:`collsim.parallel.experts.deepep.deepep_bandwidth` and counted the way DeepEP's tests
count it.  docs/moe.md quotes this table; tests/test_deepep_figures.py keeps it true.
The figures are simulated time, the same on every machine (it takes a few seconds).
"""

import argparse

from collsim.parallel.experts.deepep import MAX_NODES, deepep_bandwidth

# DeepEP's README (legacy V1 table, normal kernels on H800 with ~160 GB/s NVLink and one
# CX7 400 Gb/s NIC a GPU, ~50 GB/s): bottleneck bandwidth, GB/s, (dispatch, combine)
PUBLISHED = {8: (153, 158), 16: (43, 43), 32: (58, 57), 64: (51, 50)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ep", type=int, nargs="+", default=sorted(PUBLISHED))
    args = parser.parse_args(argv)
    for ep in args.ep:
        if ep < 8 or ep % 8 or ep > 8 * MAX_NODES:
            near = min(max(8, round(ep / 8) * 8), 8 * MAX_NODES)
            parser.error(
                f"--ep {ep}: whole DGX H100 nodes of 8 GPUs, 8 to {8 * MAX_NODES}; "
                f"nearest valid --ep {near}"
            )
    print("| EP | counted | DeepEP on H800: dispatch / combine | collsim DGX H100: dispatch / "
          "combine | legs overlapped: dispatch / combine |")  # fmt: skip
    print("|--:|---|--:|--:|--:|")
    for ep in args.ep:
        bw = deepep_bandwidth(nodes=ep // 8)
        out, back = bw.overlapped
        published = PUBLISHED.get(ep)
        theirs = "-" if published is None else f"{published[0]} / {published[1]} GB/s"
        print(
            f"| {bw.ep} | {bw.link} | {theirs} | {bw.dispatch / 1e9:.0f} / "
            f"{bw.combine / 1e9:.0f} GB/s | {out / 1e9:.0f} / {back / 1e9:.0f} GB/s |"
        )


if __name__ == "__main__":
    main()
