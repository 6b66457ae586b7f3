"""The words of ``collsim tour``, English and Japanese side by side, so they cannot drift.

Each entry is ``key: (English, Japanese)`` with the same ``{placeholders}`` and format
specs in both (a test holds them equal); the tour computes every number once and fills
the chosen language's sentence.  The Japanese terms follow ``lessons/ja/GLOSSARY.md``.

Examples
--------
>>> tour_text("p2p_received", "ja", values=[3.0, 0.0, 1.0, 2.0])
'受け取った値: [3.0, 0.0, 1.0, 2.0]'
>>> display_width("リング") == 6
True
"""

from ..course.width import display_width, rjust

__all__ = ["TOUR", "display_width", "rjust", "tour_text"]

TOUR = {
    "p2p_title": (
        "1. point to point: four ranks on a ring, 100 GB/s links, 5 us latency",
        "1. 1 対 1 通信: リング上の 4 ランク、100 GB/s のリンク、レイテンシ 5 us",
    ),
    "p2p_what": (
        "each rank sends np.full(4, rank) to its right neighbour and receives from its left",
        "各ランクは np.full(4, rank) を右隣のランクに送り、左隣のランクから受け取ります",
    ),
    "p2p_received": ("values received: {values}", "受け取った値: {values}"),
    "p2p_transfer": (
        "  r{src} -> r{dst}  {size}  {start} .. {end}  via {path} -> {last}",
        "  r{src} -> r{dst}  {size}  {start} .. {end}  経路 {path} -> {last}",
    ),
    "p2p_time": (
        "simulated time {time} = 5 us latency + 32 B / 100 GB/s",
        "シミュレーション時間 {time} = レイテンシ 5 us + 32 B / 100 GB/s",
    ),
    "dp_title": (
        "2. data parallel: batch 64 on dp=4, 16 samples per rank",
        "2. データ並列: バッチ 64 を dp=4 で分け、1 ランクあたり 16 サンプル",
    ),
    "dp_what": (
        "each rank: forward and backward on its 16 rows, then all-reduce(sum) / 4",
        "各ランクは自分の 16 行で順伝播と逆伝播を行い、all-reduce(sum) / 4 で勾配を平均します",
    ),
    "dp_diff": (
        "largest |averaged gradient - one-device gradient| = {diff}",
        "|平均した勾配 - 単一デバイスの勾配| の最大値 = {diff}",
    ),
    "dp_sent": (
        "rank 0 sent {sent} B ({size}) for {params} float64 gradients: "
        "2(K-1)/K * P * 8 B = {formula} B",
        "ランク 0 は float64 の勾配 {params} 個のために {sent} B ({size}) を送りました: "
        "2(K-1)/K * P * 8 B = {formula} B",
    ),
    "ring_title": (
        "3. ring all-reduce on 4 ranks: reduce-scatter, then all-gather",
        "3. 4 ランクのリング all-reduce: reduce-scatter のあとに all-gather",
    ),
    "ring_legend": (
        "",  # the English views need no key
        "(各ステップの表示は `collsim step` と同じ書式です: initial state = 転送前の初期状態、"
        "step 1 of 6 = 全 6 ステップの 1 番目、chunk = チャンク、reduce = 受け取って加算、"
        "copy = 受け取って上書き)",
    ),
    "ring_start": (
        "new values: rank r now starts with r + 1 in every element, not r as in part 1\n"
        "(so that rank 0 adds something): {values}; rN below is rank N's contribution",
        "ここでは値を変えます: ランク r はすべての要素に r + 1 を持って始めます "
        "(1. では r でした。\n"
        "r + 1 ならランク 0 も和に寄与します): {values}。下の rN はランク N の寄与です",
    ),
    "ring_end": (
        "every rank ends with {values}... = {terms}, the sum of the starting values",
        "最後にはどのランクも {values}... = {terms} (初めの値の和) を持ちます",
    ),
    "bytes_title": (
        "4. bytes each rank sends for a 64 MiB buffer",
        "4. 64 MiB のバッファで各ランクが送るバイト数",
    ),
    "bytes_ring": ("ring, per rank", "リング (各ランク)"),
    "bytes_fraction": ("fraction of S", "S に対する比"),
    "bytes_naive": ("naive, at root", "naive (ルート)"),
    "bytes_summary": (
        "ring: 2(K-1)/K -> 2 whatever K is; naive: the root sends (K-1) whole buffers",
        "リング: K によらず 2(K-1)/K -> 2; naive: ルートがバッファ全体を (K-1) 回送ります",
    ),
    "time_title": (
        "5. time on one switch (8 ranks, 100 GB/s, 5 us per link), 64 MiB",
        "5. 1 台のスイッチでの時間 (8 ランク、100 GB/s、リンクあたり 5 us)、64 MiB",
    ),
    "time_row": (
        "  {algorithm:>17}: {steps:>2} steps, simulated {sim:>10}, closed form {form:>10}",
        "  {algorithm:>17}: {steps:>2} ステップ、シミュレーション {sim:>10}、閉形式 {form:>10}",
    ),
    "next": (
        "\nmore: collsim step all-reduce --ranks 4 | collsim run all-reduce --help | "
        "collsim plan --help\nnext: collsim lesson init, then collsim lesson 1",
        "\nほかに: collsim step all-reduce --ranks 4 | collsim run all-reduce --help | "
        "collsim plan --help\n"
        "次は: collsim lesson init --lang ja、続けて collsim lesson 1 --lang ja",
    ),
}

_COLUMN = {"en": 0, "ja": 1}


def tour_text(key, lang="en", **fields):
    """The tour's sentence ``key`` in ``lang`` ("en" or "ja") with ``fields`` filled in."""
    return TOUR[key][_COLUMN.get(lang, 0)].format(**fields)
