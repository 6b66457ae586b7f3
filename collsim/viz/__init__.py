"""Figures from plans, traces and schedules.

Every function here returns a :class:`matplotlib.figure.Figure` and never calls
``plt.show``: a lesson displays it, a test inspects it, ``collsim viz`` saves it.

* :func:`collsim.viz.memory.memory_figure`: memory per GPU as stacked bars for ZeRO
  stages 0-3 side by side (from :mod:`collsim.plan`).
"""

__all__ = ["memory"]
