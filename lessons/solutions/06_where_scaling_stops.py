"""Solutions to lesson 6: where scaling stops paying.  Each name is the lesson's answer slot
of the same name."""


def compute_to_comm(params, global_batch, seq, gpus, bandwidth, compute_rate, grad_bytes):
    """(6·N·D/P) / (2·N·b/BW) = 3·D·BW/(P·b).  N (params) cancels; D is the tokens one GPU
    processes per step."""
    tokens_per_gpu = global_batch * seq / gpus
    return 3 * tokens_per_gpu * bandwidth / (compute_rate * grad_bytes)


# 6.1
compute_to_comm_answer = compute_to_comm
# 6.2: P is in the denominator: twice the compute rate halves the ratio
faster_gpu_answer = 1 / 2
# 6.3: 3·(G·s/K)·BW/(P·b) = 1  =>  K = 3·G·s·BW/(P·b)
break_even_gpus_answer = 3 * 512 * 2048 * 25e9 / (150e12 * 2)
