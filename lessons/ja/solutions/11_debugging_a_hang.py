"""レッスン 11 (ハングのデバッグ) の解答。各名前はレッスン中の同じ名前の解答欄に対応します。
中身はレッスンのプログラムから導いた値か関数で、レッスンの出力からコピーした数値ではありません。"""

K, N_SAMPLES = 4, 11

# 各ランクは len(range(rank, n, K)) ステップを実行し、1 ステップごとに all-reduce を 1 回行う
STEPS = [len(range(r, N_SAMPLES, K)) for r in range(K)]
SHORT = [r for r in range(K) if STEPS[r] < max(STEPS)]  # all-reduce 1 回分早く抜けるランク

# レッスン 11 の train_step の勾配サイズ: ランク 3 は間違った設定を読み込んだ
N_PARAMS = [10 if r == 3 else 8 for r in range(K)]


def shift(rank, x):
    """isend はすぐに戻るので、どのランクも recv までたどり着き、どの送信も相手が見つかる。

    もう 1 つの直し方は偶奇で順序を変える方法:
        if rank.id % 2 == 0: send してから recv;  else: recv してから send。
    """
    right, left = (rank.id + 1) % rank.size, (rank.id - 1) % rank.size
    handle = yield rank.isend(right, x)
    got = yield rank.recv(left)
    yield rank.wait(handle)
    return got


# 11.1: ステップ数の少ないランクは all-reduce 1 回分早く抜ける
missing_rank_answer = SHORT[0]
# 11.2: どのランクも min(STEPS) 回の all-reduce (#0 .. #min-1) を終えており、次の 1 回でハングする
hang_position_answer = min(STEPS)
# 11.3: 勾配サイズがほかと異なるただ 1 つのランク
odd_rank_answer = next(r for r in range(K) if N_PARAMS.count(N_PARAMS[r]) == 1)
# 11.4: レッスンのチェックは、ランクのプログラムをいくつかのサイズのリングで実行する
shift_answer = shift
