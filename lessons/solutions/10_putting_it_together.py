"""Solutions to lesson 10 (putting it together).  Each name is the lesson's answer slot of the
same name: a formula or a function, never a number copied from the lesson's output."""


def coords(rank, pp, dp, tp):
    """The last dimension (tp) varies fastest, then dp, then pp."""
    return (rank // (tp * dp), (rank // tp) % dp, rank % tp)


def accumulation(world, tp, pp, global_batch, micro_batch):
    dp = world // (tp * pp)  # world = tp·pp·dp
    return global_batch // (micro_batch * dp)  # global = micro·dp·accumulation


def nearest_world(world, tp, pp, global_batch, micro_batch):
    """The multiple of tp·pp closest to ``world`` whose dp divides the global batch."""
    step = tp * pp
    candidates = sorted(range(step, 2 * world, step), key=lambda w: abs(w - world))
    return next(w for w in candidates if global_batch % (micro_batch * (w // step)) == 0)


# 10.1
coords_answer = coords
# 10.2
accumulation_answer = accumulation(64, 4, 2, global_batch=256, micro_batch=1)
# 10.3: Megatron's 784-GPU error: data_parallel_size = 784 / (8 * 4)
dp_answer = 784 / (8 * 4)
# 10.4
world_size_answer = nearest_world(784, 8, 4, global_batch=1536, micro_batch=1)
# 10.5: Accelerate: micro · accumulation · (dp_replicate · dp_shard); TP ranks share a batch
samples_answer = 2 * 4 * (2 * 4)
