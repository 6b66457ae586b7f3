"""Solutions to lesson 2: data parallel and all-reduce.  Each name is the lesson's answer
slot of the same name."""


def accumulation_steps(global_batch, dp, micro_batch):
    """Megatron-LM's batch rule, global_batch = micro_batch · dp · accumulation, solved for
    the accumulation steps."""
    return global_batch // (micro_batch * dp)


# 2.1: the all-reduce sums dp = 4 gradients, each as large as the mean one
forgot_division_answer = 4
# 2.2
accumulation_steps_answer = accumulation_steps
# 2.3: the gradients are added up locally; the all-reduce still runs once per step
accumulation_bytes_answer = 1
