"""Figures from plans, traces and schedules.

Every function here returns a :class:`matplotlib.figure.Figure` and never calls
``plt.show``: a lesson displays it, a test inspects it, ``collsim viz`` saves it.

* :func:`collsim.viz.memory.memory_figure`: memory per GPU as stacked bars for ZeRO
  stages 0-3 side by side (from :mod:`collsim.plan`).
* :func:`collsim.viz.ring.ring_figure`, :func:`~collsim.viz.ring.ring_animation`: one
  step of a collective on a circle of ranks (arrows per chunk move, buffers coloured by
  contributions), or every step as a GIF or a self-contained HTML page with play and
  step buttons (from the schedule and its trace).  Steps count from 1, as titles say
  ("step 3 of 6"); step 0 is the initial state.
* :func:`collsim.viz.shapes.shape_figure`, :func:`~collsim.viz.shapes.shape_movie`: the
  other algorithms step by step in their own shape (layered trees, the double tree's two
  trees, halving-doubling's exchanges as arcs, NVLS through its switch, NCCL's rings one
  channel at a time; placements in :mod:`collsim.viz.shape_layouts`); buffer cells by
  count or by source rank (:mod:`collsim.viz.cells`).
* :func:`collsim.viz.compare.compare_figure`: two algorithms of one collective side by
  side, at the same step, on one simulated-time axis.
* :mod:`collsim.viz.animation`: any picture that changes over time as a GIF, a lecture
  page (:mod:`collsim.viz.lecture_page`: fitted to the window, stepped by a clicker's
  keys, captions as text) or one PNG a frame; a playhead for finished timelines.
* :func:`collsim.viz.traffic.traffic_figure`: bytes per link drawn on the topology.
* :func:`collsim.viz.utilization.utilization_figure`: links x time heat map of the
  bandwidth in use, with each message's latency phase hatched apart (from the trace).
* :func:`collsim.viz.memory_timeline.memory_timeline_figure`: each rank's memory over
  simulated time, stacked by category, peaks and collectives marked (from the run's
  memory events, what ``rank.alloc`` and ``rank.free`` recorded).
* :func:`collsim.viz.timeline.timeline_figure`: pipeline stages x time, one block per
  pass, idle shaded, bubble fraction in the title (from the pipeline run's trace).
* :func:`collsim.viz.calibration.calibration_figure`: busbw against size on the hardware
  presets next to the figures NVIDIA's NCCL team published, and the small-message latency
  floor (``benchmarks/calibration.py`` draws ``docs/calibration.png`` with it); the
  published figures, with their sources, are in :mod:`collsim.viz.nccl_published`.
* :mod:`collsim.viz.faults`: the marks the utilization and timeline figures add under
  faults (a slow or failed link, a crashed rank, a straggler's stage).
* :func:`collsim.viz.sweep.sweep_figure`: time and busbw against message size per
  algorithm, where the fastest changes marked (count-only runs or closed forms).
* :func:`collsim.viz.scaling.scaling_figure`: step time split into compute and
  communication, and efficiency, against the number of GPUs (the planner's closed forms).
* :func:`collsim.viz.strategies.strategies_figure`: the strategies of Accelerate's
  ND-parallelism guide side by side, memory stacked by category and bytes inside and
  between nodes (from the rows ``collsim strategies`` measures).

* :func:`collsim.viz.decode_step.decode_step_figure`: one decode step of tensor- and
  pipeline-parallel inference, ranks x time: compute, each all-reduce, hand-offs, idle
  (from the run's trace); :func:`collsim.viz.all_reduce_choice.all_reduce_choice_figure`:
  the fastest small-message all-reduce by size and GPU count, with vLLM's thresholds.

* :func:`collsim.viz.mesh.mesh_figure`: a device mesh's TP, CP, EP, DP and PP groups on
  the nodes, in Megatron-LM's or Accelerate's rank order (from a ``RankGrid``).
* :func:`collsim.viz.moe.routing_figure`, :func:`~collsim.viz.moe.traffic_figure`,
  :func:`~collsim.viz.moe.load_figure` and
  :func:`collsim.viz.moe_timeline.moe_timeline_figure`: one mixture-of-experts step (token
  → expert routing, the all-to-all's bytes between ranks, expert and rank load against
  capacity, the ranks on the clock), from its routing and trace.

Shared by all: :mod:`collsim.viz.style` decides how every figure looks (``paper`` or
``slides``, ``light`` or ``dark``, size, the Okabe-Ito palette, the language of
:mod:`collsim.viz.words`), :mod:`collsim.viz.output` saves every format byte-identical run to run,
:mod:`collsim.viz.limits` refuses what a picture cannot show readably (with the limit
named), and :mod:`collsim.viz.ink` picks text colours that contrast with their fill.

The modules import matplotlib when they are imported; ``import collsim.viz`` alone does not.
"""

__all__ = [
    "memory",
    "memory_timeline",
    "ring",
    "shapes",
    "shape_layouts",
    "cells",
    "compare",
    "animation",
    "lecture_page",
    "traffic",
    "utilization",
    "timeline",
    "sweep",
    "scaling",
    "strategies",
    "mesh",
    "moe",
    "moe_timeline",
    "decode_step",
    "all_reduce_choice",
    "style",
    "words",
    "calibration",
    "faults",
    "output",
    "limits",
    "ink",
]
