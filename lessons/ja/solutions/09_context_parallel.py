"""レッスン 9 (コンテキスト並列) の解答。各名前はレッスン中の同じ名前の解答欄に対応します。
中身は式か関数で、レッスンの出力からコピーした数値ではありません。"""

CP_CONTIGUOUS = 8  # 演習 9.2 の cp
SEQ = 16  # レッスンの系列長


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


def last_rank_share(seq, cp):
    """contiguous レイアウトで最後のランクが残す組の数 ÷ 平均。"""
    tile = seq // cp
    pairs = [i * tile * tile + tile * (tile + 1) // 2 for i in range(cp)]
    return pairs[-1] / (sum(pairs) / cp)


# 9.1
ring_layer_bytes_answer = ring_layer_bytes
# 9.2: L = S/cp トークンのタイル。ランク i は (クエリ, キー) の組を対角も含めて
# i·L² + L(L+1)/2 個残す。最後のランクの数 ÷ 平均 (タイルが大きくなると (2cp−1)/cp)
last_rank_share_answer = last_rank_share(SEQ, CP_CONTIGUOUS)
# 9.3
balanced_positions_answer = balanced_positions
