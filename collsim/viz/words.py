"""The figures' words in English and Japanese, and the font that can draw the Japanese.

A figure writes its titles, axis labels and legends through
:func:`collsim.viz.style.say` with the English text as the key (numbers arrive as
``{fields}``, already formatted, so units and digits are the same in both languages).
:data:`JA` holds the translations, in the terms of
``lessons/ja/GLOSSARY.md``; :mod:`collsim.teach.messages` serves the same entries to the
lessons, so a lesson's sentence and its figure name a thing the same way.

Japanese needs a font with its glyphs; matplotlib's default (DejaVu Sans) has none and
would draw empty boxes.  :func:`cjk_font` looks for one among the installed fonts; when
there is none, the figure keeps its English words and :func:`font_rc` says once how to
install one, instead of drawing boxes.

Examples
--------
>>> JA["simulated time ({unit})"].format(unit="ms")
'シミュレーション時間 (ms)'
"""

import functools
import sys

__all__ = ["JA", "CJK_FONTS", "cjk_font", "font_rc", "INSTALL_HINT"]

# fonts with Japanese glyphs, most common first (Debian, Fedora, macOS, Windows)
CJK_FONTS = (
    "Noto Sans CJK JP",
    "Noto Sans JP",
    "Source Han Sans JP",
    "IPAexGothic",
    "IPAGothic",
    "TakaoGothic",
    "VL Gothic",
    "Hiragino Sans",
    "Yu Gothic",
    "MS Gothic",
)
INSTALL_HINT = (
    "collsim viz: no Japanese font is installed, so the labels stay English (the default "
    "font would draw empty boxes).  Install one and run again: Debian/Ubuntu "
    "`sudo apt install fonts-noto-cjk`, Fedora `sudo dnf install google-noto-sans-cjk-fonts`; "
    "then remove ~/.cache/matplotlib so matplotlib finds it."
)

JA = {
    # ---- shared ----
    "simulated time ({unit})": "シミュレーション時間 ({unit})",
    "memory held (binary units)": "保持しているメモリ (2 進単位)",
    "idle": "アイドル",
    "GPUs": "GPU 数",
    # ---- memory, memory-timeline, strategies: what a rank holds ----
    "memory per GPU (GiB)": "GPU あたりのメモリ (GiB)",
    "Memory per GPU by ZeRO stage": "ZeRO ステージ別の GPU あたりメモリ",
    "parameters": "パラメータ",
    "parameters (bf16)": "パラメータ (bf16)",
    "gradients": "勾配",
    "gradients (bf16)": "勾配 (bf16)",
    "optimizer states (fp32 copy, Adam m, v)": "オプティマイザ状態 (fp32 コピー, Adam の m, v)",
    "optimizer state (Adam m, v)": "オプティマイザ状態 (Adam の m, v)",
    "optimizer (fp32 master, Adam m, v)": "オプティマイザ (fp32 マスター, Adam の m, v)",
    "activations": "活性値",
    "activations (saved for backward)": "活性値 (逆伝播のために保存)",
    "gathered parameters (FSDP)": "集めたパラメータ (FSDP)",
    "gathered parameters (FSDP unit)": "集めたパラメータ (FSDP ユニット)",
    "communication buffers": "通信バッファ",
    "communication buffers (K/V blocks, gradient buffers)": (
        "通信バッファ (K/V ブロック, 勾配バッファ)"
    ),
    "held for an instant (alloc before free)": "一瞬だけ保持 (解放の前に確保)",
    "peak of the sum (total)": "合計のピーク",
    "peak memory of the busiest rank (KiB)": "最も使うランクのピークメモリ (KiB)",
    "memory by category": "カテゴリ別のメモリ",
    "bytes sent per rank (KiB)": "ランクあたりの送信バイト数 (KiB)",
    "communication by link class": "リンクの種類別の通信",
    "inside a node (fast links)": "ノード内 (速いリンク)",
    "between nodes (slow links)": "ノード間 (遅いリンク)",
    # ---- collectives: ring, traffic, utilization, sweep ----
    "contributions in the chunk (ranks)": "チャンクに含まれる寄与 (ランク数)",
    "reduce: receiver adds": "リデュース: 受信側が足す",
    "copy: receiver overwrites": "コピー: 受信側が上書き",
    "bytes carried ({unit})": "運んだバイト数 ({unit})",
    "link (sender → receiver)": "リンク (送信側 → 受信側)",
    "utilisation (% of link bandwidth)": "使用率 (リンク帯域幅の %)",
    "latency α: message sent, no bytes flowing yet": (
        "レイテンシ α: 送信済み, まだバイトは流れていない"
    ),
    "message size S (bytes, as nccl-tests counts them)": (
        "メッセージサイズ S (nccl-tests と同じバイト数)"
    ),
    "time": "時間",
    "bus bandwidth (GB/s)": "バス帯域幅 (GB/s)",
    "time: lower is better": "時間: 低いほど良い",
    # ---- scaling ----
    "time per optimizer step (s)": "オプティマイザステップあたりの時間 (s)",
    "share of the step (%)": "ステップに占める割合 (%)",
    "efficiency (nothing overlapped)": "効率 (オーバーラップなし)",
    "efficiency (DP all-reduce hidden behind compute)": "効率 (DP の all-reduce を計算の裏に隠す)",
    "compute 6·N·tokens / (GPUs·P), + any bubble": "計算 6·N·トークン / (GPU 数·P), + バブル",
    "communication: bandwidth term (bytes/β)": "通信: 帯域幅の項 (バイト/β)",
    "communication: latency term (steps·α)": "通信: レイテンシの項 (ステップ·α)",
    "step = compute + communication": "ステップ = 計算 + 通信",
    "compute": "計算",
    "bandwidth term": "帯域幅の項",
    "latency term": "レイテンシの項",
    # ---- pipeline timeline (timeline.py) ----
    "stage {stage}": "ステージ {stage}",
    "F: forward": "F: 順伝播",
    "B: input gradient": "B: 入力の勾配",
    "B: backward": "B: 逆伝播",
    "W: weight gradient": "W: 重みの勾配",
    "numbers: micro-batch (from 1)": "数字: マイクロバッチ (1 から)",
    "model chunk {chunk}": "モデルチャンク {chunk}",
    "warm-up": "ウォームアップ",
    "steady": "定常",
    "cool-down": "クールダウン",
    "bubble {percent} idle": "バブル: {percent} がアイドル",
    "closed form {ratio}": "閉形式 {ratio}",
    # ---- device mesh (mesh.py) ----
    "{order} order ({names}, innermost last) on {nodes} node(s) of {gpus} GPUs": (
        "{order} の順序 ({names}, 最後が最内側), {gpus} GPU のノード {nodes} 台"
    ),
    "{dim} groups": "{dim} グループ",
    "node {node}": "ノード {node}",
    "rank": "ランク",
    # ---- mixture of experts (moe.py, moe_timeline.py) ----
    "Token → expert routing: top-{k} of {E} experts, {cap}": (
        "トークン → エキスパートのルーティング: {E} エキスパートから上位 {k}, {cap}"
    ),
    "dropless": "ドロップなし",
    "capacity {capacity} per expert per rank": "容量はランクごと・エキスパートごとに {capacity}",
    "dropped by capacity ({count})": "容量でドロップ ({count})",
    "token (blocks: the source rank that routes it)": (
        "トークン (区切り: ルーティングする送信元ランク)"
    ),
    "expert (blocks: the rank that holds it)": "エキスパート (区切り: 持っているランク)",
    "gate weight (0-1)": "ゲートの重み (0-1)",
    "{phase}: tokens out": "{phase}: トークンを送り出す",
    "{phase}: outputs back": "{phase}: 出力を戻す",
    "receiving rank": "受信側ランク",
    "sending rank": "送信側ランク",
    "home": "手元",
    "bytes sent ({unit})": "送信バイト数 ({unit})",
    "All-to-all traffic between ranks: {total} dispatched": (
        "ランク間の all-to-all 通信量: ディスパッチ {total}"
    ),
    "kept: computed": "残った分: 計算した",
    "dropped": "ドロップ",
    "capacity: {ep} ranks × {c} = {limit}": "容量: {ep} ランク × {c} = {limit}",
    "expert": "エキスパート",
    "tokens routed to it": "送られたトークン数",
    "per expert": "エキスパートごと",
    "mean {mean:.1f}": "平均 {mean:.1f}",
    "{n} dropped": "ドロップ {n}",
    "rows its experts computed": "そのエキスパートが計算した行数",
    "per rank: max / mean {ratio:.2f}x": "ランクごと: 最大 / 平均 {ratio:.2f} 倍",
    "Expert load: {dropped} of {choices} choices dropped": (
        "エキスパートの負荷: {choices} 個の選択のうち {dropped} 個をドロップ"
    ),
    "dispatch (tokens out)": "ディスパッチ (トークンを送り出す)",
    "combine (outputs back)": "コンバイン (出力を戻す)",
    "backward: output gradients out": "逆伝播: 出力の勾配を送り出す",
    "backward: input gradients back": "逆伝播: 入力の勾配を戻す",
    "counts, gradient all-reduce": "個数の交換, 勾配の all-reduce",
    "compute: forward": "計算: 順伝播",
    "compute: backward": "計算: 逆伝播",
    "rank {rank}": "ランク {rank}",
    "MoE step: rank {rank}'s experts computed longest; the combine waits for them "
    "(dashed: the last combine message)": (
        "MoE のステップ: ランク {rank} のエキスパートの計算が最も長く, コンバインはそれを待つ "
        "(破線: 最後のコンバインのメッセージ)"
    ),
    # ---- serving: a decode step (decode_step.py), the all-reduce choice (all_reduce_choice.py)
    "all-reduce": "all-reduce",
    "other collective": "その他の集団通信",
    "stage hand-off": "ステージ間の受け渡し",
    "Decode step {step}: {time} {unit}; rank 0 spends {share} in {calls} all-reduces of {size}": (
        "デコードステップ {step}: {time} {unit}; ランク 0 は {size} の all-reduce {calls} 回に"
        " {share} を使う"
    ),
    "one-shot": "one-shot",
    "two-shot": "two-shot",
    "ring": "リング",
    "NVLS": "NVLS",
    "ring ×{ratio}": "リング ×{ratio}",
    "message size S (bytes a GPU)": "メッセージサイズ S (GPU あたりのバイト数)",
    "vLLM changes its choice": "vLLM が選択を変える位置",
    "Fastest all-reduce on one {machine} node (closed forms, α–β)": (
        "{machine} 1 ノードで最速の all-reduce (閉形式, α–β)"
    ),
}


@functools.cache
def cjk_font():
    """The name of an installed font with Japanese glyphs, or None (looked up once)."""
    from matplotlib import font_manager

    installed = {entry.name for entry in font_manager.fontManager.ttflist}
    return next((name for name in CJK_FONTS if name in installed), None)


@functools.cache
def _say_how_to_install():
    print(INSTALL_HINT, file=sys.stderr)


def font_rc(lang):
    """The rcParams that draw ``lang``: a CJK font first for Japanese (DejaVu Sans after
    it, for the symbols), or nothing and the hint, once, when none is installed."""
    if lang != "ja":
        return {}
    font = cjk_font()
    if font is None:
        _say_how_to_install()
        return {}
    return {"font.family": "sans-serif", "font.sans-serif": [font, "DejaVu Sans"]}
