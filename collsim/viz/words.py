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
    "every rank r sends to {partners} (mod {k})": "各ランク r が {partners} へ送る (mod {k})",
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
    "dispatch": "ディスパッチ",
    "combine": "コンバイン",
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
    "MoE step: rank {rank}'s experts computed longest; the combine waits for them "
    "(dashed: the last combine message)": (
        "MoE のステップ: ランク {rank} のエキスパートの計算が最も長く, コンバインはそれを待つ "
        "(破線: 最後のコンバインのメッセージ)"
    ),
    # ---- serving: a decode step (decode_step.py), the all-reduce choice (all_reduce_choice.py)
    "other collective": "その他の集団通信",
    "stage hand-off": "ステージ間の受け渡し",
    "Decode step {step}: {time} {unit}; rank 0 spends {share} in {calls} all-reduces of {size}": (
        "デコードステップ {step}: {time} {unit}; ランク 0 は {size} の all-reduce {calls} 回に"
        " {share} を使う"
    ),
    "ring": "リング",
    "ring ×{ratio}": "リング ×{ratio}",
    "message size S (bytes a GPU)": "メッセージサイズ S (GPU あたりのバイト数)",
    "vLLM changes its choice": "vLLM が選択を変える位置",
    "Fastest all-reduce on one {machine} node (closed forms, α–β)": (
        "{machine} 1 ノードで最速の all-reduce (閉形式, α–β)"
    ),
    # ---- titles, notes and captions with their numbers formatted in (issue 28) ----
    "initial state": "初期状態",
    "step {step}": "ステップ {step}",
    "step {step}: {what}": "ステップ {step}: {what}",
    "{phase} {at}/{of}  (step {number} of {steps})": (
        "{phase} {at}/{of}  (全 {steps} ステップ中 {number})"
    ),
    "{name} of {size} on {k} ranks": "{k} ランクでの {size} の {name}",
    "{size} per arrow": "矢印 1 本あたり {size}",
    "{name} on {k} ranks, step by step": "{k} ランクでの {name} (ステップごと)",
    "{names}, step by step": "{names} (ステップごと)",
    "{name} done": "{name} 完了",
    "{name}: done in {steps} steps": "{name}: {steps} ステップで完了",
    "{what} of {size} on {k} ranks: {head}": "{k} ランクでの {size} の {what}: {head}",
    "simulated time ({unit}): each step a span; the current one outlined": (
        "シミュレーション時間 ({unit}): 1 ステップが 1 区間, 今のステップを枠で囲む"
    ),
    "t = {time} of {total}": "t = {time} (全 {total} 中)",
    "buffers read outward:\nchunk 0 nearest the rank;\noutlined = written now": (
        "バッファは外向きに読む:\nチャンク 0 がランクに最も近い;\n枠 = このステップで書いた"
    ),
    "whole": "全体",
    "input of rank": "入力のランク",
    "both": "両方",
    "{what} to Σ": "{what} を Σ へ",
    "{what} to cast": "{what} をマルチキャストへ",
    "{what} cast": "{what} をマルチキャスト",
    "Σ reduce\nmulticast": "Σ リダクション\nマルチキャスト",
    "chunk {first}": "チャンク {first}",
    "chunks {first}-{last}": "チャンク {first}-{last}",
    "tree": "ツリー",
    "channel": "チャネル",
    "machine {n}": "マシン {n}",
    "{node} switch": "{node} スイッチ",
    # faults (collsim.viz.faults)
    "detour: traffic rerouted off a failed link": "迂回: 故障したリンクを避けた通信",
    "slow link {link}: x{factor} bandwidth": "遅いリンク {link}: 帯域幅 x{factor}",
    "link {link} down at t={time}": "リンク {link} が t={time} で故障",
    "rank {rank} crashed at t={time}": "ランク {rank} が t={time} でクラッシュ",
    "slow rank {rank}: compute x{factor} (no row: links only)": (
        "遅いランク {rank}: 計算 x{factor} (行なし: リンクのみ)"
    ),
    "stage {stage}\n(x{factor} slow)": "ステージ {stage}\n(x{factor} 遅い)",
    # the phases of the schedules (collsim.collectives), as the step titles name them
    "in-switch reduce": "スイッチ内リダクション",
    "in-switch multicast": "スイッチ内マルチキャスト",
    "tree reduce across nodes": "ノード間のツリーでリデュース",
    "tree broadcast across nodes": "ノード間のツリーでブロードキャスト",
    "multicast": "マルチキャスト",
    "reduce + multicast": "リデュース + マルチキャスト",
    "reduce + broadcast": "リデュース + ブロードキャスト",
    "all-gather (all peers)": "all-gather (全ピアから)",
    "all-gather (doubling)": "all-gather (倍増)",
    "reduce-scatter (halving)": "reduce-scatter (半減)",
    "reduce-scatter (all peers at once)": "reduce-scatter (全ピアへ同時に)",
    "every rank reads every peer": "各ランクが全ピアを読む",
    "fold-in": "折り込み",
    "gather to root": "ルートへ集める",
    "send back": "送り返す",
    "intra-node reduce-scatter": "ノード内 reduce-scatter",
    "intra-node all-gather": "ノード内 all-gather",
    "inter-node reduce-scatter": "ノード間 reduce-scatter",
    "inter-node all-gather": "ノード間 all-gather",
    # memory
    "GPU memory\n{size} GiB": "GPU メモリ\n{size} GiB",
    "fits": "収まる",
    "does not fit": "収まらない",
    "(configured)": "(設定中)",
    "ZeRO-0\nnothing sharded\n(DDP)": "ZeRO-0\nシャードなし\n(DDP)",
    "ZeRO-1\noptimizer\nsharded": "ZeRO-1\nオプティマイザ状態を\nシャード",
    "ZeRO-2\n+ gradients\nsharded": "ZeRO-2\n+ 勾配を\nシャード",
    "ZeRO-3 / FSDP\n+ parameters\nsharded": "ZeRO-3 / FSDP\n+ パラメータを\nシャード",
    "{count} parameters": "パラメータ {count}",
    "ZeRO shards over {n} GPUs": "ZeRO は {n} GPU でシャード",
    "micro-batch {micro} × seq {seq}, recompute {recompute}": (
        "マイクロバッチ {micro} × 系列長 {seq}, 再計算 {recompute}"
    ),
    "none": "なし",
    "selective": "選択的",
    "full": "全体",
    "forward": "順伝播",
    "backward": "逆伝播",
    "rank {rank}": "ランク {rank}",
    "peak {size}": "ピーク {size}",
    "{collective} (top strip)": "{collective} (上の帯)",
    "Memory per rank over simulated time · busiest: rank {rank}, peak {size}": (
        "シミュレーション時間に沿ったランクごとのメモリ · 最大: ランク {rank}, ピーク {size}"
    ),
    "{what} on {dp} ranks{extra}: memory of rank {ranks}": (
        "{dp} ランクでの {what}{extra}: ランク {ranks} のメモリ"
    ),
    ", prefetch {prefetch}": ", プリフェッチ {prefetch}",
    "memory over time": "時間に沿ったメモリ",
    "pipeline step over time": "時間に沿ったパイプラインのステップ",
    # sweep, traffic, utilization
    "algorithm": "アルゴリズム",
    ": higher is better": ": 高いほど良い",
    "{algorithm}\nfastest": "{algorithm}\nが最速",
    "latency-bound ←   → bandwidth-bound": "レイテンシ律速 ←   → 帯域幅律速",
    "count-only simulation": "カウントのみのシミュレーション",
    "closed forms": "閉形式",
    "{name} on {where}, {k} ranks ({how})": "{where} の {k} ランクでの {name} ({how})",
    "{before} → {after}\nat ~{size}": "約 {size} で\n{before} → {after}",
    "link load: {what}": "リンクの負荷: {what}",
    "{name} of {size} on ": "{size} の {name}, トポロジ ",
    "{busiest}  ·  all links together: {total}  ·  grey = unused": (
        "{busiest}  ·  全リンクの合計: {total}  ·  灰色 = 未使用"
    ),
    "no link carried any bytes": "どのリンクもバイトを運んでいない",
    "busiest link {link}: {load}": "最も混むリンク {link}: {load}",
    "all {links} links tie at {load} each": "{links} 本のリンクすべてが {load} で同じ",
    "{n} links tie as busiest at {load} each ({shown})": (
        "{n} 本のリンクが {load} で最も混む ({shown})"
    ),
    "link utilisation over time: {what}on {name}": "時間に沿ったリンク使用率: {name} での {what}",
    "link utilisation over time": "時間に沿ったリンク使用率",
    "run time {time}, {bins} time slices; busiest slice {busiest}": (
        "実行時間 {time}, 時間区間 {bins} 個; 最も混む区間 {busiest}"
    ),
    "; blue lines: end of each step": "; 青い線: 各ステップの終わり",
    "; STALLED: no progress after t={time}, the watchdog stopped the run": (
        "; 停止: t={time} 以降進まず, ウォッチドッグが実行を止めた"
    ),
    "colours count payload: protocol {parts} of its wire bytes are data, so a link it "
    "keeps busy shows that much": (
        "色はペイロードを数える: プロトコル {parts} は送るバイトのうちデータの割合で, "
        "リンクはその分だけ埋まって見える"
    ),
    # scaling
    "weak scaling: {per} sequences per data-parallel GPU": (
        "弱スケーリング: データ並列の GPU あたり系列 {per} 本"
    ),
    ", so at most {gpus} GPUs (one sequence a replica)": (
        ", よって最大 {gpus} GPU (レプリカあたり系列 1 本)"
    ),
    "strong scaling: global batch fixed at {batch} sequences": (
        "強スケーリング: グローバルバッチは系列 {batch} 本で固定"
    ),
    "where does adding GPUs stop paying?  {model}, {mode}": (
        "GPU を増やしても速くならなくなるのはどこか?  {model}, {mode}"
    ),
    "P = {rate} TFLOP/s per GPU, {gpus} GPUs per node, links {intra} inside a node "
    "and {inter} between": (
        "P = GPU あたり {rate} TFLOP/s, ノードあたり {gpus} GPU, リンクはノード内 {intra}, "
        "ノード間 {inter}"
    ),
    "{seq}-token sequences, {precision} gradients, tp={tp}, pp={pp}, data parallel over the rest": (
        "系列長 {seq} トークン, {precision} の勾配, tp={tp}, pp={pp}, 残りはデータ並列"
    ),
    "data-parallel group\nleaves one node:\n{intra} → {inter}": (
        "データ並列グループが\n1 ノードを出る:\n{intra} → {inter}"
    ),
    "below 50 % from {gpus} GPUs:\ncommunication > compute": (
        "{gpus} GPU から 50 % 未満:\n通信 > 計算"
    ),
    # pipeline timeline
    "{name}: p={p} stages, m={m} micro-batches": "{name}: p={p} ステージ, m={m} マイクロバッチ",
    "{head} · bubble {measured}": "{head} · バブル {measured}",
    " (formula {shape} = {value})": " (式 {shape} = {value})",
    " (formula {value})": " (式 {value})",
    # strategies
    "Accelerate's ND-parallelism strategies, measured": "Accelerate の ND 並列化戦略 (実測)",
    "not run (see below)": "実行せず (下を参照)",
    "{name} not run: {why}": "{name} は実行せず: {why}",
    "sizes beside each name: dp_replicate x dp_shard x cp x tp (Accelerate's names); "
    "each bar stacks every category's own peak, which need not come at the same "
    "moment: the upright line is the peak of their sum": (
        "名前の横の大きさ: dp_replicate x dp_shard x cp x tp (Accelerate の名前); "
        "各棒はカテゴリごとのピークを積むが, それらは同時に来るとは限らない: "
        "縦線は合計のピーク"
    ),
    "causal transformer: {layers} blocks, hidden {hidden}, {heads} heads, seq {seq}, "
    "global batch {batch}, {steps} Adam step(s)": (
        "因果的 Transformer: ブロック {layers} 個, 隠れ次元 {hidden}, ヘッド {heads} 個, "
        "系列長 {seq}, グローバルバッチ {batch}, Adam ステップ {steps} 回"
    ),
    "{nodes} nodes x {gpus} GPUs: {intra} links inside a node, {inter} between nodes, "
    "{flops} per GPU": (
        "{nodes} ノード x {gpus} GPU: ノード内リンク {intra}, ノード間 {inter}, GPU あたり {flops}"
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
