"""The pipeline bubble, measured: GPipe, 1F1B, interleaved 1F1B and ZB-H1 on 4 virtual GPUs.

Every schedule runs one real training step of a small transformer (4 or 8 blocks over 4
stages, 8 micro-batches): activations and gradients are numpy arrays moving between ranks, the
gradients are checked against one device, and the bubble is read from the trace and printed
next to its closed form.  What to look for:

* GPipe and 1F1B idle exactly as long, (p-1)(t_f+t_b+t_w), i.e. (p-1)/(m+p-1) of the step,
  but 1F1B's stage s holds min(p-s, m) micro-batches of activations instead of all m;
* interleaving v = 2 chunks per stage halves the bubble, for more activations and twice the
  messages;
* ZB-H1 moves the weight-gradient passes W into the bubble: (p-1)(t_f+t_b-t_w);
* a bigger m shrinks the bubble fraction, at the cost of smaller micro-batches.

Run it with ``python examples/pipeline_bubble.py``; one schedule from the command line::

    collsim pipeline --stages 4 --microbatches 8 --schedule 1f1b --latency 0 --bandwidth inf
"""

from collsim.parallel.runs.pipeline import pipeline_step
from collsim.units import format_size, format_time

P, M = 4, 8
FREE = {"bandwidth": "inf", "latency": 0}  # links that cost nothing: the compute bubble only
TIMES = {"t_f": 1e-3, "t_b": 1e-3, "t_w": 1e-3}  # seconds per micro-batch per stage

print(f"p={P} stages, m={M} micro-batches, t_f = t_b = t_w = 1 ms, free links\n")
print(
    f"{'schedule':<16} {'bubble':>8} {'formula':>8} {'fraction':>9} {'formula':>8}  "
    f"{'peak in-flight per stage':<26} match"
)
for name, v in (("gpipe", 1), ("1f1b", 1), ("interleaved", 2), ("zb-h1", 1)):
    r = pipeline_step(name, P, M, virtual=v, **TIMES, **FREE)
    label = f"{name} v={v}" if v > 1 else name
    print(
        f"{label:<16} {format_time(r.bubble_time):>8} {format_time(r.formula_bubble_time()):>8} "
        f"{r.bubble_fraction:>9.2%} {r.formula_bubble_fraction():>8.2%}  "
        f"{str(r.peak_inflight):<26} {r.match}"
    )

print("\n1F1B: the bubble fraction (p-1)/(m+p-1) falls as m grows")
for m in (1, 2, 4, 8, 16, 32):
    r = pipeline_step("1f1b", P, m, **TIMES, **FREE)
    print(f"  m={m:>2}: measured {r.bubble_fraction:6.2%}   formula {(P - 1) / (m + P - 1):6.2%}")

print("\nWith real links (10 GB/s, 20 us per message) the measured bubble includes the waits:")
r = pipeline_step("1f1b", P, M, **TIMES, bandwidth="10GB/s", latency="20us")
print(
    f"  1f1b: {r.bubble_fraction:.2%} measured against {r.formula_bubble_fraction():.2%} for "
    f"free links; {format_size(sum(r.run.stats.bytes_sent))} in {len(r.trace.transfers)} messages"
)
