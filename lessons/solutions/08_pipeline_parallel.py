"""Solutions to lesson 8 (pipeline parallel).  Each name is the lesson's answer slot of the
same name: a formula or a function, never a number copied from the lesson's output."""

import math

P, M = 4, 8  # the lesson's stages and micro-batches
T_F = T_B = T_W = 1e-3  # pipeline_step's default pass times, seconds
TARGET = 0.10


def bubble(p, m, v):
    """Idle (p-1)(t_f+t_b+t_w)/v out of a step of that plus m(t_f+t_b+t_w)."""
    return (p - 1) / (v * m + p - 1)


# 8.1: GPipe: (p-1)/(m+p-1)
gpipe_bubble_answer = (P - 1) / (M + P - 1)
# 8.2: (p-1)/(m+p-1) <= x  <=>  m >= (p-1)(1-x)/x
microbatches_needed_answer = math.ceil((P - 1) * (1 - TARGET) / TARGET - 1e-9)
# 8.3: 1F1B: stage 0 runs p warm-up forwards, then frees one micro-batch per new one
peak_inflight_answer = min(P, 16)
# 8.4
bubble_answer = bubble
# 8.5: ZB-H1: (p-1)(t_f+t_b-t_w), in seconds
zb_idle_time_answer = (P - 1) * (T_F + T_B - T_W)
