"""レッスン 6 (スケールさせても得をしなくなる点) の解答。各名前は、レッスンの同じ名前の
解答欄に対応します。"""


def compute_to_comm(params, global_batch, seq, gpus, bandwidth, compute_rate, grad_bytes):
    """(6·N·D/P) / (2·N·b/BW) = 3·D·BW/(P·b)。N (params) は消える。D は GPU 1 台が
    1 ステップで処理するトークン数。"""
    tokens_per_gpu = global_batch * seq / gpus
    return 3 * tokens_per_gpu * bandwidth / (compute_rate * grad_bytes)


# 6.1
compute_to_comm_answer = compute_to_comm
# 6.2: P は分母にあるので、計算速度が 2 倍なら比は半分になる
faster_gpu_answer = 1 / 2
# 6.3: 3·(G·s/K)·BW/(P·b) = 1  =>  K = 3·G·s·BW/(P·b)
break_even_gpus_answer = 3 * 512 * 2048 * 25e9 / (150e12 * 2)
