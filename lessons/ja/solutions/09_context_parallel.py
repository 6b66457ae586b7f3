"""レッスン 9 (コンテキスト並列) の解答。各名前はレッスン中の同じ名前の解答欄に対応します。
中身は式か関数で、レッスンの出力からコピーした数値ではありません。"""

CP_CONTIGUOUS = 8  # 演習 9.2 の cp


def ring_layer_bytes(batch, seq, d_model, cp, b):
    """K/V ブロック 1 つは 2·B·(S/cp)·D·b バイト。順伝播で cp−1 ホップ、逆伝播で cp−1 (K/V)
    + cp (dK/dV) ホップ、1 層あたり 3cp−2 ブロック。"""
    block = 2 * batch * (seq // cp) * d_model * b
    return (3 * cp - 2) * block if cp > 1 else 0


def balanced_positions(seq, cp, i):
    """2·cp 個のうちチャンク i、続いてチャンク 2cp−1−i。"""
    chunk = seq // (2 * cp)
    early = range(i * chunk, (i + 1) * chunk)
    late = range((2 * cp - 1 - i) * chunk, (2 * cp - i) * chunk)
    return [*early, *late]


# 9.1
ring_layer_bytes_answer = ring_layer_bytes
# 9.2: ランク cp−1 はタイルの組 cp − 1/2 個分、平均は cp/2: (2cp−1)/cp
last_rank_share_answer = (2 * CP_CONTIGUOUS - 1) / CP_CONTIGUOUS
# 9.3
balanced_positions_answer = balanced_positions
