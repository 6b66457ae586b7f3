"""レッスン 8 (パイプライン並列) の解答。各名前は、レッスンの同じ名前の解答欄に対応します。
どれも式か関数で、レッスンの出力から数値を写したものではありません。"""

import math

P, M = 4, 8  # レッスンのステージ数とマイクロバッチ数
T_F = T_B = T_W = 1e-3  # pipeline_step の既定のパスの時間 (秒)
TARGET = 0.10


def bubble(p, m, v):
    """アイドル時間 (p-1)(t_f+t_b+t_w)/v を、それに m(t_f+t_b+t_w) を足したステップ時間で割る。"""
    return (p - 1) / (v * m + p - 1)


# 8.1: GPipe: (p-1)/(m+p-1)
gpipe_bubble_answer = (P - 1) / (M + P - 1)
# 8.2: (p-1)/(m+p-1) <= x  <=>  m >= (p-1)(1-x)/x
microbatches_needed_answer = math.ceil((P - 1) * (1 - TARGET) / TARGET - 1e-9)
# 8.3: 1F1B: ステージ 0 はウォームアップで p 回順伝播し、
# その後は新しいマイクロバッチが 1 つ来るごとに 1 つを解放する
peak_inflight_answer = min(P, 16)
# 8.4
bubble_answer = bubble
# 8.5: ZB-H1: (p-1)(t_f+t_b-t_w) (秒)
zb_idle_time_answer = (P - 1) * (T_F + T_B - T_W)
