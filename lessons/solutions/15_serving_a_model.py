"""Solutions to lesson 15 (serving a model).  Each name is the lesson's answer slot of the same
name, worked out from the datasheets, the models' published shapes and the closed forms by
hand, never a number copied from the lesson's output."""

from collsim import hardware
from collsim.parallel.inference.roofline import ServedShape, weight_elements
from collsim.plan import PlanConfig

# 15.1: at batch 1 a step reads N weights (2 B each) and does 2 FLOP a weight; the HBM read
# is the longer of the two times
H100 = hardware.preset("dgx-h100")
N = weight_elements(ServedShape.of(PlanConfig(model="llama2-7b")))
decode_step_answer = max(2 * N / H100.compute_rate, 2 * N / H100.hbm_bandwidth)

# 15.2: 2·B FLOP per weight at the peak = 2 B per weight at the HBM bandwidth
A100 = hardware.preset("dgx-a100")
a100_critical_batch_answer = A100.compute_rate / A100.hbm_bandwidth * 2 / 2

# 15.3: one step: α, then every peer's whole buffer, (K-1)·S bytes, at β
K, S, ALPHA, BETA = 8, 16 * 2**10, 0.5e-6, 370.8e9
one_shot_answer = ALPHA + (K - 1) * S / BETA

# 15.4: α + (K-1)S/β = 2α + 2(K-1)S/(Kβ)  =>  S = αβ·K / ((K-1)(K-2))
crossover_answer = ALPHA * BETA * K / ((K - 1) * (K - 2))

# 15.5: Llama 2 70B: 80 layers, 8 key/value heads of 128 (config.json); 8 TP ranks hold
# one key/value head each; keys and values, 2 bytes each
kv_per_token_answer = 2 * 80 * (8 // 8) * 128 * 2

# 15.6: keys and values of every layer for every prompt token, float64 arrays
kv_transfer_answer = 2 * 1 * 64 * 64 * 8
