"""レッスン 12 (実機) の解答です。各名前はレッスンの同じ名前の解答欄にあたり、レッスンの
出力から数値を写すのではなく、プリセット、プロトコル、閉形式から導いています。"""

import math

from collsim import hardware
from collsim.collectives.degraded import degraded_ring_all_reduce_time
from collsim.collectives.formulas import closed_form
from collsim.hardware.protocols import PROTOCOLS
from collsim.runtime.faults import Faults
from collsim.topology import path_alpha_beta

TP, SEQ, HIDDEN = 8, 4096, 8192
TP_BYTES = SEQ * HIDDEN * 2  # bf16 での (1, s, h) の活性値 1 つ
SIMPLE, LL, LL128 = PROTOCOLS["simple"], PROTOCOLS["ll"], PROTOCOLS["ll128"]
H100 = hardware.topology("dgx-h100")
H100X8 = hardware.topology("dgx-h100", nodes=8)


def ring_all_reduce_time(graph, a, b, link_class, protocol, size, k=TP):
    """ホップ a -> b の α, β を使ったリングの閉形式。α はリンクのレイテンシにプロトコルの
    レイテンシを足したもの、β は最も細いリンクのレートにプロトコルのペイロード割合を掛けた
    もの。"""
    alpha, beta = path_alpha_beta(graph, a, b)
    alpha += protocol.latency_for(link_class)
    return closed_form("all_reduce", "ring", k, size, alpha, beta * protocol.efficiency).time_s


# 12.1: 同じ閉形式を 2 つの経路で使う。GPU 0 -> NVSwitch -> GPU 1 と、ノード 0 の GPU 0
# -> レール 0 -> ノード 1 の GPU 0 (ランク 8)
tp_slowdown_answer = ring_all_reduce_time(H100X8, 0, 8, "net", SIMPLE, TP_BYTES) / (
    ring_all_reduce_time(H100, 0, 1, "nvlink", SIMPLE, TP_BYTES)
)

# 12.2: NIC 1 枚につきリング 1 本。各 NIC が運ぶのは自分のチャネルの 2(K-1)/K·S/C なので、
# busbw <= C x NIC 1 枚
A100 = hardware.preset("dgx-a100")
nic_ceiling_answer = A100.inter.nics * A100.inter.effective_rate

# 12.3: 1 ステップあたり λ_LL + S/(K·β·e_LL) = λ_LL128 + S/(K·β·e_LL128) (リンクの α は
# 打ち消し合う) なので、S = K·β·(λ_LL128 - λ_LL) / (1/e_LL - 1/e_LL128)
_, NVLINK = path_alpha_beta(H100, 0, 1)
ll128_crossover_answer = (TP * NVLINK * (LL128.latency_for("nvlink") - LL.latency_for("nvlink"))
                          / (1 / LL.efficiency - 1 / LL128.efficiency))  # fmt: skip

# 12.4: 劣化したリングの閉形式。α と β は Simple での NVSwitch 1 ホップのもの
_alpha, _beta = path_alpha_beta(H100, 0, 1)
_alpha += SIMPLE.latency_for("nvlink")
slow_ring_answer = degraded_ring_all_reduce_time(TP, TP_BYTES, _alpha, _beta, factor=0.25) / (
    degraded_ring_all_reduce_time(TP, TP_BYTES, _alpha, _beta, factor=1.0)
)

# 12.5: 二項ツリーではランク r (r > 0) は r - 2^floor(log2 r) に送る。ランク 5 の親は 1 で、
# リデュースでは遅いポート越しに受け取り、broadcast ではそのポート越しに送り返す
SLOW_RANK = 5  # --slow-link 5-nvswitch0:0.25
slow_partner_answer = SLOW_RANK - 2 ** int(math.log2(SLOW_RANK))

# レッスンの障害 --crash-rank 5@2.3ms を、レッスンと同じように読む。学習の 1 ステップ
# あたりの計算は 1 ms
CRASH = Faults.parse(crash_rank=["5@2.3ms"]).crash_ranks[0]
COMPUTE = 1e-3

# 12.6: フライトレコーダが CRASHED と記したランク。ほかのランクが待っている all-reduce に
# 入らなかったランク
stopped_rank_answer = CRASH.rank

# 12.7: all-reduce はマイクロ秒で終わるので、ステップ n (0 から) の計算はおよそ n ms から
# n + 1 ms まで。2.3 ms のクラッシュはステップ 2 の計算中に起きる。ランク 5 は all-reduce
# #0 と #1 を終えていて、ほかのランクは #2 の中でランク 5 を待つ
hang_position_answer = int(CRASH.at // COMPUTE)
