# %% [markdown]
# # 9. 長い系列: コンテキスト並列
# 系列を分割します: アテンションの S² 個のスコア、リングアテンションのオンライン softmax の各ステップ、リングと all-to-all の通信バイト数、因果マスクによる負荷の偏りとその解消。
#
# データ並列、テンソル並列、パイプライン並列 (レッスン 2、7、8) は、どれもある 1 つの次元を
# 分割せずに残しています。どの GPU も、担当する系列のトークンをすべて見ます。32k トークンを
# 超えると、メモリが足りなくなるのはまさにここです。**コンテキスト並列 (CP)** は系列を `cp` 台の
# GPU に分割します。各 GPU は、どのサンプルについても `S/cp` 個のトークンを、順伝播から逆伝播まで
# 通して受け持ちます。アテンション以外の計算はトークンごとに閉じているので、他のランクから何も
# 受け取る必要がありません。アテンションだけはそれより前のすべてのキーを必要とし、2 つの実現
# 方法の違いはここに現れます。
#
# - **リングアテンション** (Liu et al. 2023, "Ring Attention with Blockwise Transformers for
#   Near-Infinite Context"; Megatron-LM のコンテキスト並列): K/V ブロックが `cp` 個のランク
#   からなるリングを巡回し、各ランクは届いたブロックを、オンライン softmax で自分のクエリの
#   アテンションへ順に畳み込んでいきます。
# - **all-to-all** (Jacobs et al. 2023, "DeepSpeed Ulysses"): 1 回目の all-to-all で Q, K, V を
#   トークン単位の分割からヘッド単位の分割へ組み替えます。各ランクは `H/cp` 個のヘッドについて
#   系列全体でアテンションを計算し、2 回目の all-to-all で出力をトークン単位の分割に戻します。
#
# 以下はすべて仮想クラスタ上で float64 で実行し、単一デバイスでの結果と照合します。ほかの
# レッスンと同じく、`..._answer = None` をそれぞれ自分の予想に置き換え、その直後のチェックを
# 実行してください。

# %%
import math

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

import collsim
from collsim import teach
from collsim.errors import ConfigError
from collsim.nn import Adam
from collsim.parallel.config import ParallelConfig
from collsim.parallel.context import (
    RingAttention,
    RingMessage,
    RingStep,
    causal_attention_flops,
    causal_balance,
    ring_attention_bytes,
    token_positions,
    ulysses_attention_bytes,
)
from collsim.parallel.mesh import train
from collsim.parallel.pipeline.runner import toy_batch, toy_model
from collsim.runtime.group import Group
from collsim.units import format_size

# %% [markdown]
# ## アテンションのメモリが S² で増える理由
#
# 1 つの層の活性値は `B·S·D` 個 (バッチ、系列、幅) の数で、`S` に比例します。アテンションは
# `H` 個のヘッドそれぞれについて、(クエリ, キー) のすべての組にスコアを計算します。これが
# `B·H·S·S` の行列で、その softmax も同じ大きさです。系列を 2 倍にすると、活性値は 2 倍、
# スコアは 4 倍になります。7B 規模の層 (`D = 4096`、ヘッド数 `H = 32`) で、32k トークンの
# 系列 1 本を bf16 で扱うと次のようになります。

# %%
B, S, D, H, BF16 = 1, 32 * 1024, 4096, 32, 2
activations = B * S * D * BF16
scores = B * H * S * S * BF16
print(f"活性値 B·S·D·b   = {B}·{S}·{D}·{BF16} = {format_size(activations)} (1 層あたり)")
print(f"スコア B·H·S²·b  = {B}·{H}·{S}²·{BF16} = {format_size(scores)} (1 層あたり)、"
      f"活性値の {scores / activations:g} 倍 (H·S/D)")  # fmt: skip
for cp in (1, 8):
    block = B * H * (S // cp) ** 2 * BF16  # S/cp 個のクエリ対、S/cp 個のキーからなる 1 ブロック
    kv = 2 * B * (S // cp) * D * BF16  # S/cp トークン分の K と V: これが送られる
    print(f"cp = {cp}: 1 ランクが K/V ブロック 1 つに対して持つスコア {format_size(block):>9}、"
          f"ブロック自体 {format_size(kv):>9}")  # fmt: skip

# %% [markdown]
# 32 層のそれぞれについて 64 GiB のスコアを持てる GPU はありません。FlashAttention (Dao et al.
# 2022) は行列全体を保存しません。キーをブロックごとにたどりながら、クエリごとにそれまでの
# 最大値、和、出力だけを保持します。これが**オンライン softmax** です。リングアテンションは、
# この走査をキーのブロックが他の GPU にある状態で行うものです。ランク `r` は自分のクエリを
# 持ったまま、`cp` 回のステップのそれぞれで誰か 1 ランクの K/V ブロックを受け持ち、それに
# 対するスコアを計算して結果を畳み込み、ブロックをランク `r+1` へ渡します。
#
# ## 1 つのクエリで見るオンライン softmax
#
# クエリ 1 つ、キー 16 個を 4 個ずつ 4 ブロックに分けます (`cp = 4` の各ランクに 1 ブロック)。
# ブロックを 1 つ処理するたびに、それまでの最大値 `m` が大きくなることがあります。そのときは、
# 古い最大値のもとで足し込んだ分を `exp(m_old − m_new)` 倍して補正します。最後に求まる
# `o / l` は、softmax の重みで値を加重和したものにぴったり一致します。

# %%
rng = np.random.default_rng(3)
CP_DEMO = 4
q_scores = rng.normal(0, 2, 16)  # 1 つのクエリの、16 個のキーに対するスコア q·k/√hd
values = rng.uniform(-1, 1, 16)  # キーごとに値の成分を 1 つ
m, l_sum, o = -math.inf, 0.0, 0.0
print(f"{'step':<13}{'block max':>10}{'m_old':>9}{'m_new':>9}{'rescale':>10}{'l':>10}{'o / l':>10}")
for step, (block, v) in enumerate(zip(np.split(q_scores, CP_DEMO), np.split(values, CP_DEMO))):
    m_new = max(m, block.max())
    rescale = math.exp(m - m_new)  # ステップ 1 では 0: まだ何も足していない
    p = np.exp(block - m_new)
    l_sum, o = rescale * l_sum + p.sum(), rescale * o + p @ v
    print(f"{step + 1} of {CP_DEMO:<8}{block.max():>10.3f}{m:>9.3f}{m_new:>9.3f}{rescale:>10.4f}"
          f"{l_sum:>10.4f}{o / l_sum:>10.4f}")  # fmt: skip
    m = m_new
weights = np.exp(q_scores - q_scores.max())
full = weights @ values / weights.sum()
print(f"16 個のキー全体で一度に softmax: {full:.4f}、オンライン: {o / l_sum:.4f}、"
      f"log-sum-exp m + log l = {m + math.log(l_sum):.4f} (逆伝播のために保存)")  # fmt: skip
assert abs(full - o / l_sum) < 1e-12

# %% [markdown]
# collsim の `RingAttention` は、これをすべての (サンプル, ヘッド, クエリ) について一度に
# 行います。逆伝播では、保存しておいた log-sum-exp から各ブロックの確率を再計算するので、
# どのランクも `S × S` の行列を持つことはありません。
#
# ## リングを 1 ステップずつ
#
# 小さな Transformer (`toy_model`、2 ブロック、幅 16、ヘッド 4 個) に、16 トークンの系列を
# 2 本、`cp = 4`、因果アテンションで、Adam を 1 ステップ実行します。`ParallelConfig(cp=4,
# cp_variant="ring", cp_layout=...)` とするとリングアテンションで実行され、リングの各ステップの
# 計算区間には `RingStep` レコード (何ステップ目か、誰の K/V ブロックか) が、送られる各ブロック
# には `RingMessage` タグが付きます。以下は、最初の層の順伝播をトレースから読み出したものです。

# %%
CP, LAYERS, WIDTH, HEADS, SEQ, BATCH = 4, 2, 16, 4, 16, 2
model = toy_model(layers=LAYERS, hidden=WIDTH, heads=HEADS)
batch = toy_batch(batch=BATCH, seq=SEQ, hidden=WIDTH)
RATE = 1e9  # ランクあたり 1 GFLOP/s: 計算区間の長さは FLOPs / RATE


def cp_run(variant, layout, cp=CP, run_model=model, run_batch=batch):
    cluster = collsim.Cluster(collsim.topology.switch(cp, "10GB/s", "5us"), compute_rate=RATE)
    config = ParallelConfig(cp=cp, cp_variant=variant, cp_layout=layout)
    return train(run_model, [run_batch], config, cluster=cluster, optimizer=Adam(lr=1e-2))


runs = {layout: cp_run("ring", layout) for layout in ("contiguous", "balanced")}
ring = runs["contiguous"]
print(f"メッシュ {ring.mesh}。Adam 1 ステップ後のパラメータは単一デバイスと一致: {ring.match}\n")
for step in range(1, CP + 1):
    held = sorted((c.rank, c.meta.kv_owner) for c in ring.trace.computes
                  if isinstance(c.meta, RingStep) and c.meta.kind == "forward"
                  and c.meta.layer == "0.attn" and c.meta.step == step)  # fmt: skip
    sent = sorted((t.src, t.dst) for t in ring.trace.transfers
                  if isinstance(t.tag, RingMessage) and t.tag.kind == "kv"
                  and t.tag.phase == "forward" and t.tag.layer == "0.attn"
                  and t.tag.step == step)  # fmt: skip
    holds = "、".join(f"r{r} が r{owner} の K/V を処理" for r, owner in held)
    sends = "、".join(f"r{a}->r{b}" for a, b in sent) or "なし (最後のブロックはそのまま)"
    print(f"ステップ {step}/{CP}: {holds}。次へ送る: {sends}")

# %% [markdown]
# ステップ `s` でランク `r` が持っているのは、ランク `(r − s + 1) mod cp` のブロックです。
# レッスン 4 のリング all-reduce と同じく、どのランクも毎ステップ右隣へ送り、`cp − 1` 回の
# ホップですべてのブロックがすべてのランクを一巡します。ブロックの送信はそのステップの計算より
# 前に発行されるので、転送は手元に届いているブロックのアテンション計算と重なります。
#
# 下の図は、同じレコードを 2 つのレイアウトについて描いたものです。行がランク、列がステップです。
# セルの色はどのランクのブロックかを、濃さは因果マスクのもとでそのランクがブロックのうち
# どれだけを計算するか (計算区間の長さ × 1 GFLOP/s を、ブロック全体の計算量と比べた割合) を
# 表します。

# %%
COLOURS = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C"]


def ring_steps(run, layer="0.attn", kind="forward"):
    """1 つの層のリングステップを {(rank, step): (kv_owner, FLOPs)} で返す (トレースから読む)。"""
    return {(c.rank, c.meta.step): (c.meta.kv_owner, (c.end - c.start) * RATE)
            for c in run.trace.computes if isinstance(c.meta, RingStep)
            and c.meta.layer == layer and c.meta.kind == kind}  # fmt: skip


full_block = causal_attention_flops(SEQ, CP, "contiguous", batch=BATCH, heads=HEADS,
                                    head_dim=WIDTH // HEADS, causal=False)[0] / CP  # fmt: skip
fig = Figure(figsize=(11, 4.6), layout="constrained")
for ax, (layout, run) in zip(fig.subplots(1, 2), runs.items()):
    steps = ring_steps(run)
    for (r, s), (owner, flops) in steps.items():
        share = min(flops / full_block, 1.0)  # 浮動小数点の丸めで 1 + 2e-16 になることがある
        ax.add_patch(Rectangle((s - 0.47, r - 0.45), 0.94, 0.9, color=COLOURS[owner],
                               alpha=0.15 + 0.85 * share))  # fmt: skip
        ax.text(s - 0.03, r - 0.05, f"K/V of r{owner}\n{share:.0%}", ha="center", va="center",
                fontsize=10, color="black" if share < 0.6 else "white", fontweight="bold")  # fmt: skip
    for r in range(CP):  # 行の合計: この層の順伝播でそのランクがした仕事量
        total = sum(f for (rank, _), (_, f) in steps.items() if rank == r) / full_block
        ax.text(CP + 0.58, r, f"{total:g}\nblocks", ha="left", va="center", fontsize=10)
    positions = [token_positions(SEQ, CP, r, layout) for r in range(CP)]
    ax.set_yticks(range(CP), [f"r{r}: tokens {p[0]}–{p[-1]}" if layout == "contiguous"
                              else f"r{r}: tokens {p[:2].min()}–{p[:len(p) // 2].max()}, "
                              f"{p[len(p) // 2:].min()}–{p.max()}" for r, p in enumerate(positions)])  # fmt: skip
    ax.set_xticks(range(1, CP + 1), [f"step {s} of {CP}" for s in range(1, CP + 1)])
    ax.set_xlim(0.45, CP + 1.2)
    ax.set_ylim(CP - 0.45, -0.55)
    ax.set_title(f"{layout} layout", fontsize=12)
fig.suptitle("Ring attention, forward of layer 0 (cp=4, causal): whose K/V block each rank "
             "scores at each step\n(shade and % = the share of the block the causal mask "
             "leaves to compute; right: the row's total)", fontsize=12)  # fmt: skip
teach.show(fig, "09_ring_steps")

# %% [markdown]
# contiguous レイアウトでは、ランク 0 が先頭のトークンを持ちます。ほかのランクのキーはどれも
# ランク 0 から見て未来にあるので、ランク 0 は自分のブロックの下三角を計算するだけで、ほかには
# 何もしません。この下三角には対角 (各クエリが自分自身のキーを採点する分) も含まれるので、
# ブロックの `L²` 組のうち `L(L+1)/2` 組、この 4 トークンのタイルでは 16 組中 10 組です。
# そのためセルの表示は 50 % ではなく 62 % になります。半分というのは、タイルが大きくなったときに
# 近づく値にすぎません。ランク 3 は末尾のトークンを持ち、すべてのブロックを計算します。balanced
# レイアウトは各ランクに前寄りのチャンクと後ろ寄りのチャンクを 1 つずつ割り当てるので、どの
# ランクも行の合計が同じ仕事量になります。このレイアウトには後でもう一度戻ります。
#
# ## 通信バイト数: リングと all-to-all
#
# K/V ブロック 1 つは `S/cp` トークン分の K と V で、`2·B·(S/cp)·D·b` バイトです。順伝播では、
# ランクは手元のブロックを次へ `cp − 1` 回送ります。逆伝播では K/V がもう一周し (`cp − 1`
# ホップ)、さらに dK/dV の部分和が自分のブロックの 1 ホップ後ろを追いかけ、最後に持ち主の
# ランクへ戻ります (`cp` ホップ)。したがって、1 ランク・1 層あたりの送信量は次のとおりです。
#
#     順伝播  2·(cp−1)·B·(S/cp)·D·b        逆伝播  2·(2cp−1)·B·(S/cp)·D·b
#
# (`collsim.parallel.context.formulas.ring_attention_bytes`)。all-to-all 版は q, k, v をヘッド
# 単位の分割へ移し、出力を元に戻すので、`B·(S/cp)·D·b` の活性値 4 つ分の `(cp−1)/cp` を送り、
# 逆伝播でも同じ量を送ります (`ulysses_attention_bytes`)。下の表は cp = 2 と 4 で両方を実行し、
# トレースで測った値 `run.bytes_by_group[("cp", ...)]` を 1 層あたりに直して閉形式と比べます。
# (b = 8 なのは数値計算が float64 だからです。トレースに現れる `dp_cp` の all-reduce は重みの
# 勾配の同期です。各ランクの勾配は、自分のトークンの分しか含んでいないためです。)

# %%
b = batch[0].dtype.itemsize
print(
    f"{'cp':>3}  {'variant':<11}{'measured/layer':>15}{'closed form':>13}  match   "
    "(B=2, S=16, D=16, b=8)"
)
bytes_runs = {}
for cp in (2, 4):
    for variant in ("ring", "all-to-all"):
        run = cp_run(variant, "balanced", cp=cp)
        bytes_runs[cp, variant] = run
        sent = sum(per_rank[0] for (dim, _), per_rank in run.bytes_by_group.items()
                   if dim == "cp") / LAYERS  # fmt: skip
        formula = ring_attention_bytes if variant == "ring" else ulysses_attention_bytes
        closed = sum(formula(BATCH, SEQ, WIDTH, cp, b, pass_=p) for p in ("forward", "backward"))
        print(
            f"{cp:>3}  {variant:<11}{format_size(sent):>15}{format_size(closed):>13}  {run.match}"
        )
        assert sent == closed

print("\n32k トークン・7B 規模の層を bf16 で、1 ランク・1 層あたり (順伝播 + 逆伝播):")
for cp in (2, 4, 8, 16):
    ring_b = sum(ring_attention_bytes(B, S, D, cp, BF16, pass_=p) for p in ("forward", "backward"))
    a2a_b = sum(
        ulysses_attention_bytes(B, S, D, cp, BF16, pass_=p) for p in ("forward", "backward")
    )
    print(f"  cp = {cp:>2}: リング {format_size(ring_b):>10}、all-to-all {format_size(a2a_b):>10}"
          f"  (リングは {ring_b / a2a_b:.3g} 倍)")  # fmt: skip

# %% [markdown]
# リングは 1 層あたり K/V ブロック `3cp − 2` 個分、つまり `(3cp−2)/cp·2·B·S·D·b` を送ります。
# この量は `cp` が大きくなるほど `6·B·S·D·b` に向かって*増えて*いきます。all-to-all が送るのは
# `8(cp−1)/cp²·B·S·D·b` で、こちらは減っていきます。系列長と GPU 数を一緒に増やせばリンク
# あたりのバイト数は一定に保てる、というのが DeepSpeed-Ulysses 論文の主張です。リングの利点は
# 別のところにあります。送信は計算と重ねられ、送り先は隣のランクだけで、どんな `cp` でも
# 使えます。all-to-all は*ヘッド*を分割するので、`cp` がヘッド数を割り切らなければなりません。

# %%
try:
    cp_run("all-to-all", "balanced", cp=8)  # 4 個のヘッドを 8 ランクに分けようとする
except ConfigError as error:
    print(f"ConfigError: {error}")

# %% [markdown]
# **演習 9.1 — 式を書く。** `ring_layer_bytes(batch, seq, d_model, cp, b)` を書いてください。
# リングアテンションの 1 層で 1 ランクが送るバイト数を、順伝播と逆伝播の合計で返す関数です。
# チェックは、小さなケース (b = 8) ではトレーナーを実際に*実行*し、bf16 の 32k トークンの層
# では閉形式を使います。

# %%
ring_layer_bytes_answer = None  # 自分の関数: def f(batch, seq, d_model, cp, b): return bytes


def measured_ring_layer_bytes(batch_size, seq, d_model, cp, bytes_per_element):
    if bytes_per_element != b:  # 32k トークンの層: 閉形式を使う
        return sum(ring_attention_bytes(batch_size, seq, d_model, cp, bytes_per_element, p)
                   for p in ("forward", "backward"))  # fmt: skip
    one_layer = toy_model(layers=1, hidden=d_model, heads=2)
    run = cp_run("ring", "balanced", cp, one_layer, toy_batch(batch_size, seq, d_model))
    return run.bytes_by_group[("cp", "send")][0]


def same_bytes(got, want):
    return abs(got - want) <= 1e-9 * abs(want)


cases = [(2, 16, 16, 4, 8), (1, 16, 8, 2, 8), (3, 32, 8, 4, 8), (1, S, D, 8, BF16),
         (4, S, D, 16, BF16)]  # fmt: skip
teach.check_function("9.1", ring_layer_bytes_answer, measured_ring_layer_bytes, cases,
                     compare=same_bytes, unit="B")  # fmt: skip

# %% [markdown]
# ## 因果マスクによる負荷の偏りと、負荷分散レイアウト
#
# 因果マスクのもとでは、クエリはそれより前のキーと自分自身のキーしか見ません。系列を `L`
# トークンずつ `cp` 個の連続したタイルに切ると、ランク `i` はタイル `i` 個分を丸ごと、それに
# 対角を含めた自分のタイルの下三角を計算します。(クエリ, キー) の組にして `i·L² + L(L+1)/2`
# 個です。最後のランクは `(cp−1)·L² + L(L+1)/2` 組、平均は `(cp−1)/2·L² + L(L+1)/2` 組で、
# ここ (cp = 4、4 トークンのタイル) では 58 組対 34 組、平均の 1.71 倍の仕事をすることになり、
# 毎ステップ全員がこのランクを待ちます。タイルが大きくなると `L(L+1)/2` は `L²/2` に近づき、
# 比は `(cp − 1/2)/(cp/2) = (2cp−1)/cp` (ここでは 1.75) に近づきます。これは系列が長いときの
# 極限で、正確な数はそのわずかに下にとどまります。Megatron-LM のコンテキスト並列と Llama 3 の学習 (Dubey et al. 2024, "The Llama 3
# Herd of Models", §3.3.2) では、代わりに系列を `2·cp` 個のチャンクに切り、ランク `i` に
# チャンク `i` と `2cp−1−i` を割り当てます。前寄りと後ろ寄りを 1 つずつ持つので、どのランクも
# 同じ仕事量になります。
#
# 3 つの情報源からそれぞれ数を出して比べます。閉形式 (`causal_attention_flops`)、リングの
# モジュール自身の数え上げ (`RingAttention.attention_flops`)、そして実行トレースのリング
# ステップ区間 (長さ × 1 GFLOP/s) で、いずれも 1 層の順伝播についての値です。

# %%
HEAD_DIM = WIDTH // HEADS
attention = model[0].attn
flops = {}
print(f"{'layout':<12}{'rank':>5}{'closed form':>13}{'module':>10}{'trace':>10}{'÷ mean':>8}")
for layout, run in runs.items():
    closed = causal_attention_flops(SEQ, CP, layout, batch=BATCH, heads=HEADS, head_dim=HEAD_DIM)
    steps = ring_steps(run)
    traced = [sum(f for (r, _), (_, f) in steps.items() if r == rank) for rank in range(CP)]
    flops[layout] = traced
    for rank in range(CP):
        module = RingAttention(attention, Group(range(CP)), rank, layout=layout)
        counted = module.attention_flops((BATCH, SEQ // CP, WIDTH))["forward"]
        print(f"{layout:<12}{rank:>5}{closed[rank]:>13,.0f}{counted:>10,.0f}{traced[rank]:>10,.0f}"
              f"{traced[rank] / np.mean(traced):>8.3f}")  # fmt: skip
        assert math.isclose(closed[rank], counted) and math.isclose(counted, traced[rank])
balance = causal_balance(SEQ, CP, "contiguous")
print(f"contiguous、残る組の正確な数: 最大/平均 {balance.max_over_mean:.4f}、最小/平均 "
      f"{balance.min_over_mean:.4f}。タイルが大きくなると (2cp-1)/cp = {balance.max_limit}、"
      f"1/(2cp) = {balance.min_limit}")  # fmt: skip
assert math.isclose(balance.max_over_mean, flops["contiguous"][-1] / np.mean(flops["contiguous"]))

fig = Figure(figsize=(9, 4), layout="constrained")
ax = fig.add_subplot()
width = 0.38
for k, (layout, colour) in enumerate((("contiguous", "#C44E52"), ("balanced", "#4C72B0"))):
    xs = np.arange(CP) + (k - 0.5) * width
    bars = ax.bar(xs, np.array(flops[layout]) / 1e3, width, color=colour, label=layout)
    ratios = np.array(flops[layout]) / np.mean(flops[layout])
    ax.bar_label(bars, [f"{r:.2f}×" for r in ratios], padding=2, fontsize=9)
mean = np.mean(flops["contiguous"]) / 1e3
ax.axhline(mean, color="black", ls="--", lw=1.2, label=f"mean, {mean:.2f} thousand (1.00×)")
ax.set_xticks(range(CP), [f"cp rank {r}" for r in range(CP)])
ax.set_ylabel("attention FLOPs, forward of one layer (thousands)")
ax.set_title(f"Causal attention work per rank, cp={CP}, S={SEQ}: contiguous last rank = "
             f"{flops['contiguous'][-1] / np.mean(flops['contiguous']):.2f}× the mean",
             fontsize=11)  # fmt: skip
ax.set_ylim(0, 1.12 * max(flops["contiguous"]) / 1e3)
ax.legend(loc="upper left", bbox_to_anchor=(0.0, 0.9))
teach.show(fig, "09_causal_work_per_rank")

# %% [markdown]
# **演習 9.2 — 予想してから確かめる。** contiguous レイアウトで `cp = 8`、このレッスンの
# 16 トークンの系列 (2 トークンのタイル) のとき、最後のランクのアテンションの仕事量は平均の
# 何倍でしょうか。因果マスクが残す組を対角も含めて数えてください。この大きさでは、答えはまだ
# タイルが大きいときの `(2cp−1)/cp` にはなりません。(比で答えます。チェックは 8 ランクで
# リングアテンションを実行し、トレースを読みます。)

# %%
last_rank_share_answer = None  # 自分の予想: 最後のランクの仕事量 ÷ 平均 (比)

# %%
eight = cp_run("ring", "contiguous", cp=8)
work8 = [sum(f for (r, _), (_, f) in ring_steps(eight).items() if r == rank) for rank in range(8)]
teach.check("9.2", last_rank_share_answer, expected=work8[-1] / np.mean(work8), unit="x", ranks=8)

# %% [markdown]
# **演習 9.3 — レイアウトを書く。** `balanced_positions(seq, cp, i)` を書いてください。負荷分散
# レイアウトでランク `i` が持つトークンの (系列全体での) 位置を、ランク内での並び順のリストで
# 返します (`2·cp` 個のうちチャンク `i`、続いてチャンク `2cp−1−i`)。チェックは collsim の
# `token_positions` と比べます。リングの因果マスクはこの関数から作られています。

# %%
balanced_positions_answer = None  # 自分の関数: def f(seq, cp, i): return [positions]


def reference_positions(seq, cp, i):
    return token_positions(seq, cp, i, "balanced").tolist()


teach.check_function("9.3", balanced_positions_answer, reference_positions,
                     cases=[(8, 2, 0), (8, 2, 1), (16, 4, 3), (32, 4, 0), (24, 3, 1)])  # fmt: skip

# %% [markdown]
# ## まとめ (Takeaways)
#
# - アテンションのスコアは `B·H·S²`、活性値は `B·S·D` です。32k トークンでは、7B 規模の層
#   1 つで活性値 256 MiB に対してスコアが 64 GiB 必要になります。オンライン softmax (それまでの
#   最大値・和・出力を持ち、`exp(m_old − m_new)` で補正する) なら、スコアを保存せずに済みます。
# - **コンテキスト並列**は系列を `cp` 個のランクに分割します。**リングアテンション** (Liu et
#   al. 2023) は K/V ブロックをリング上で回します。ステップは `cp` 回で、ステップ `s` ではランク
#   `r` がランク `r − s + 1` のブロックを持ちます。1 層あたり、`B·(S/cp)·D·b` のブロックを
#   順伝播で `2(cp−1)` 個、逆伝播で `2(2cp−1)` 個送り、その転送は計算と重なります。
# - **all-to-all** (DeepSpeed-Ulysses, Jacobs et al. 2023) はヘッド単位の分割に組み替えてから
#   元に戻します。1 パスあたり `4(cp−1)/cp²·B·S·D·b` で、`cp` が大きいほどバイト数は減りますが、
#   `cp` がヘッド数を割り切る必要があります。
# - 因果マスクがあると contiguous レイアウトは不公平になり、最後のランクは平均のほぼ
#   `(2cp−1)/cp` 倍の仕事をします (正確にはマスクが残す組を対角も含めて数えた値で、タイルが
#   大きくなると `(2cp−1)/cp` に達します)。**負荷分散レイアウト** (チャンク `i` と `2cp−1−i`。Megatron-LM、Llama 3)
#   なら、どのランクも同じ仕事量になります。
# - どの実行も単一デバイスの結果と一致しました。`collsim verify cp` で、同じチェックを
#   ターミナルから実行できます。
#
# 次のレッスン 10 では、データ並列・シャーディング・テンソル並列・パイプライン並列・コンテキスト
# 並列のすべての次元を、1 つのランクの格子に載せます。
