"""レッスン 10 (全部を組み合わせる) の解答。各名前はレッスン中の同じ名前の解答欄に対応します。
中身は式か関数で、レッスンの出力からコピーした数値ではありません。"""


def coords(rank, pp, dp, tp):
    """最後の次元 (tp) がいちばん速く変わり、次に dp、最後に pp。"""
    return (rank // (tp * dp), (rank // tp) % dp, rank % tp)


def accumulation(world, tp, pp, global_batch, micro_batch):
    dp = world // (tp * pp)  # world = tp·pp·dp
    return global_batch // (micro_batch * dp)  # global = micro·dp·accumulation


def nearest_world(world, tp, pp, global_batch, micro_batch):
    """tp·pp の倍数のうち ``world`` に最も近く、その dp がグローバルバッチを割り切るもの。"""
    step = tp * pp
    candidates = sorted(range(step, 2 * world, step), key=lambda w: abs(w - world))
    return next(w for w in candidates if global_batch % (micro_batch * (w // step)) == 0)


# 10.1
coords_answer = coords
# 10.2
accumulation_answer = accumulation(64, 4, 2, global_batch=256, micro_batch=1)
# 10.3: Megatron の 784 GPU エラー: data_parallel_size = 784 / (8 * 4)
dp_answer = 784 / (8 * 4)
# 10.4
world_size_answer = nearest_world(784, 8, 4, global_batch=1536, micro_batch=1)
# 10.5: Accelerate: micro · accumulation · (dp_replicate · dp_shard)。TP のランクは同じバッチを共有する
samples_answer = 2 * 4 * (2 * 4)
