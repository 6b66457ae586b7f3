"""Solutions to lesson 2: data parallel and all-reduce.  Each name is the lesson's answer
slot of the same name."""


def accumulation_steps(global_batch, dp, micro_batch):
    """Megatron-LM's batch rule, global_batch = micro_batch · dp · accumulation, solved for
    the accumulation steps."""
    return global_batch // (micro_batch * dp)


# 2.1: all-reduce は dp = 4 個の勾配の和を取る。どの勾配も平均の勾配と同じくらいの大きさ
forgot_division_answer = 4
# 2.2
accumulation_steps_answer = accumulation_steps
# 2.3: 勾配は各ランクの手元で足し合わされ、all-reduce は 1 ステップに 1 回のまま
accumulation_bytes_answer = 1
