"""Solutions to lesson 12 (real hardware).  Each name is the lesson's answer slot of the same
name, derived from the presets, the protocols and the closed forms, never a number copied
from the lesson's output."""

import math

from collsim import hardware
from collsim.collectives.degraded import degraded_ring_all_reduce_time
from collsim.collectives.formulas import closed_form
from collsim.collectives.nccl_tables import BASE_LATENCY_US, HOP_LATENCY_US
from collsim.hardware.protocols import PROTOCOLS
from collsim.runtime.faults import Faults
from collsim.topology import path_alpha_beta

TP, SEQ, HIDDEN = 8, 4096, 8192
TP_BYTES = SEQ * HIDDEN * 2  # one (1, s, h) activation in bf16
SIMPLE, LL, LL128 = PROTOCOLS["simple"], PROTOCOLS["ll"], PROTOCOLS["ll128"]
H100 = hardware.topology("dgx-h100")
H100X8 = hardware.topology("dgx-h100", nodes=8)


def ring_all_reduce_time(graph, a, b, link_class, protocol, size, k=TP):
    """The ring's closed form with α, β of the hop a -> b: the links' latency plus the
    protocol's, the narrowest rate times the protocol's payload fraction."""
    alpha, beta = path_alpha_beta(graph, a, b)
    alpha += protocol.latency_for(link_class)
    return closed_form("all_reduce", "ring", k, size, alpha, beta * protocol.efficiency).time_s


# 12.1: the same closed form on both paths: GPU 0 -> NVSwitch -> GPU 1, and GPU 0 of node 0
# -> rail 0 -> GPU 0 of node 1 (rank 8)
tp_slowdown_answer = ring_all_reduce_time(H100X8, 0, 8, "net", SIMPLE, TP_BYTES) / (
    ring_all_reduce_time(H100, 0, 1, "nvlink", SIMPLE, TP_BYTES)
)

# 12.2: one ring per NIC, each NIC carrying its channel's 2(K-1)/K·S/C: busbw <= C x one NIC
A100 = hardware.preset("dgx-a100")
nic_ceiling_answer = A100.inter.nics * A100.inter.effective_rate

# 12.3: per step λ_LL + S/(K·β·e_LL) = λ_LL128 + S/(K·β·e_LL128) (the links' α cancels), so
# S = K·β·(λ_LL128 - λ_LL) / (1/e_LL - 1/e_LL128)
_, NVLINK = path_alpha_beta(H100, 0, 1)
ll128_crossover_answer = (TP * NVLINK * (LL128.latency_for("nvlink") - LL.latency_for("nvlink"))
                          / (1 / LL.efficiency - 1 / LL128.efficiency))

# 12.4: the degraded ring's closed form, α and β of one NVSwitch hop with Simple
_alpha, _beta = path_alpha_beta(H100, 0, 1)
_alpha += SIMPLE.latency_for("nvlink")
slow_ring_answer = degraded_ring_all_reduce_time(TP, TP_BYTES, _alpha, _beta, factor=0.25) / (
    degraded_ring_all_reduce_time(TP, TP_BYTES, _alpha, _beta, factor=1.0)
)

# 12.5: in the binomial tree rank r (r > 0) sends to r - 2^floor(log2 r): rank 5's parent is
# 1, which receives over the slow port in the reduce and sends back over it in the broadcast
SLOW_RANK = 5  # --slow-link 5-nvswitch0:0.25
slow_partner_answer = SLOW_RANK - 2 ** int(math.log2(SLOW_RANK))

# the lesson's fault, --crash-rank 5@2.3ms, read as the lesson reads it; 1 ms of compute
# per training step
CRASH = Faults.parse(crash_rank=["5@2.3ms"]).crash_ranks[0]
COMPUTE = 1e-3

# 12.6: the rank the flight recorder marks CRASHED, the one that never entered the
# all-reduce the others wait in
stopped_rank_answer = CRASH.rank

# 12.7: the all-reduces take microseconds, so step n (from 0) computes from about n ms to
# n + 1 ms; the crash at 2.3 ms falls in the compute of step 2: rank 5 completed all-reduces
# #0 and #1, and the others wait for it in #2
hang_position_answer = int(CRASH.at // COMPUTE)

# 12.8: NCCL's cost model at 64 nodes of one GPU, Simple: the ring pays its base and one
# network hop a step, K - 1 steps; PAT 8 us, a hop divided by 3.5 for each of log2(M)
# levels, and 2.8 us for every rank (src/graph/tuning.cc)
_K = 64
_NET_HOP = HOP_LATENCY_US["net"]["tree"].simple  # with one GPU a node, every hop is exposed
_ring_us = BASE_LATENCY_US["ring"].simple + (_K - 1) * _NET_HOP
_pat_us = BASE_LATENCY_US["pat"].simple + math.log2(_K) * _NET_HOP / 3.5 + 2.8 * _K
pat_latency_ratio_answer = _ring_us / _pat_us
