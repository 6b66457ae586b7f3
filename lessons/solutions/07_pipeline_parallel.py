"""Solutions to lesson 7 (pipeline parallel). Each answer is a formula or a function, never a
number copied from the lesson's output."""

import math

P, M = 4, 8  # the lesson's stages and micro-batches
T_F = T_B = T_W = 1e-3  # pipeline_step's default pass times, seconds
TARGET = 0.10


def my_bubble(p, m, v):
    """Idle (p-1)(t_f+t_b+t_w)/v out of a step of that plus m(t_f+t_b+t_w)."""
    return (p - 1) / (v * m + p - 1)


SOLUTIONS = {
    # GPipe: (p-1)/(m+p-1)
    "7.1": (P - 1) / (M + P - 1),
    # (p-1)/(m+p-1) <= x  <=>  m >= (p-1)(1-x)/x
    "7.2": math.ceil((P - 1) * (1 - TARGET) / TARGET - 1e-9),
    # 1F1B: stage 0 runs p warm-up forwards, then frees one micro-batch per new one
    "7.3": min(P, 16),
    "7.4": my_bubble,
    # ZB-H1: (p-1)(t_f+t_b-t_w), in ms
    "7.5": (P - 1) * (T_F + T_B - T_W) * 1e3,
}
