# %% [markdown]
# # 7. テンソル並列: 1 つの層を複数の GPU に分ける
# 列分割と行分割、順伝播と逆伝播で all-reduce が 1 回ずつの Megatron の MLP、そしてテンソル並列をノード内に収める理由。
#
# データ並列ではモデル全体をすべての GPU に複製します。1 つの層がそれには大きすぎる
# ときは、**テンソル並列 (TP)** で各重み行列を `t` 台の GPU に分けます。すると各 GPU は
# バッチ *全体* を見ながら、パラメータは `1/t` しか持ちません。そのため GPU どうしは
# 1 ステップに 1 回だけでなく、順伝播と逆伝播の *最中に* 通信しなければなりません
# (Shoeybi et al. 2019, Megatron-LM)。
#
# 題材は、レッスン 2 のバッチ 64・dp=4 の例をモデル並列にしたものです。`mp_size = 4`、
# バッチ 64、全結合層 `Y = X·W` を使います。
#
# これまでと同じく、各 `..._answer = None` を自分の予想に置き換えてからチェックを実行して
# ください。

# %%
import re

import numpy as np

import collsim
from collsim import teach
from collsim.collectives.formulas import closed_form
from collsim.collectives.records import CollectiveStep
from collsim.nn import GELU, MLP, Linear
from collsim.parallel.accounting import collective_bytes
from collsim.parallel.tensor import (
    ColumnParallelLinear,
    ParallelMLP,
    RowParallelLinear,
    split_along,
)
from collsim.runtime.group import Group, RankGrid
from collsim.topology import path_alpha_beta
from collsim.units import format_rate, format_size, format_time
from collsim.verify import verify
from collsim.viz.traffic import traffic_figure

rng = np.random.default_rng(0)
TP = 4  # mp_size = 4
BATCH = 64  # どの GPU もバッチ X 全体 (64 × d_in) を見る
D_IN, D_OUT = 16, 8
BYTES = 8  # float64: collsim は本物の float64 配列を運ぶ

group = Group(range(TP))  # テンソル並列のグループ: ランク 0..3
cluster = collsim.Cluster(collsim.topology.switch(TP))


def collective_calls(trace, rank=0):
    """``rank`` が各集団通信の呼び出しに何回参加したかを、トレースから読み取る。集団通信の
    転送には、その集団通信・グループ・呼び出しを示す型付きのタグが付いている。"""
    calls = {}
    for t in trace.transfers:
        if t.src == rank and isinstance(t.tag, CollectiveStep):
            calls.setdefault(t.tag.collective, set()).add((t.tag.group, t.tag.call))
    return {name: len(seen) for name, seen in calls.items()}


# %% [markdown]
# ## 列分割: 順伝播で all-gather、逆伝播で dX の all-reduce
#
# `W` (形状 `d_in × d_out`) を列のブロックに切り分けて `W = [W0 | W1 | W2 | W3]` とします。
# GPU `i` は `W_i` (形状 `d_in × d_out/t`) を持ち、入力全体から出力の自分の担当分を
# 計算します。
#
#     Y_i = X · W_i                      Y = [Y0 | Y1 | Y2 | Y3]   ->  all-gather
#
# 逆伝播では `dY = [dY0 | ... | dY3]` として次のようになります。
#
#     dW_i = Xᵀ · dY_i                   手元で計算: GPU i は自分の担当分だけで足りる
#     dX   = Σ_i dY_i · W_iᵀ             各 GPU が 1 項ずつ持つ  ->  all-reduce (和)
#
# 下では `ColumnParallelLinear.from_full` が、全体の層からランク `i` の列だけを取り出します。
# ランクのプログラムが仮想クラスタ上で順伝播と逆伝播を実行し、その結果を単一デバイスの層と
# 比べます。

# %%
full = Linear.init(D_IN, D_OUT, rng)
x = rng.uniform(-1, 1, (BATCH, D_IN))
dy = rng.uniform(-1, 1, (BATCH, D_OUT))


def column_program(rank):
    fc = ColumnParallelLinear.from_full(full, group, group.index(rank.id), gather_output=True)
    y, ctx = yield from fc.forward(rank, x)  # Y_i = X W_i のあと all-gather -> Y
    dx, grads = yield from fc.backward(rank, ctx, dy)  # dX_i = dY_i W_iᵀ, all-reduce -> dX
    return fc.shard.weight.shape, y, dx, grads["weight"]


col = cluster.run(column_program)
y_ref, ctx_ref = full.forward(x)
dx_ref, grads_ref = full.backward(ctx_ref, dy)
per = D_OUT // TP
for r, (shape, y, dx, dw) in enumerate(col.returns):
    same_dw = np.allclose(dw, grads_ref["weight"][:, r * per : (r + 1) * per])
    print(f"ランク {r}: W_{r} (形状 {shape}) を保持;  Y == X·W: {np.allclose(y, y_ref)};  "
          f"dX == 単一デバイスの値: {np.allclose(dx, dx_ref)};  dW_{r} == dW の列: {same_dw}")  # fmt: skip
col_bytes = collective_bytes(col.trace, TP)
print(f"\n各ランクが送ったバイト数: {col_bytes}")
print(f"ランクあたりの集団通信の呼び出し回数: {collective_calls(col.trace)}")

# %% [markdown]
# **演習 7.1 — 予想してから確かめる。** リング all-reduce はランクあたり
# `2(K−1)/K · N · b` バイトを送ります (レッスン 4)。`dX` の all-reduce で、各ランクは何
# バイトを送るでしょうか。(`dX` の形状は `X` と同じで、`BATCH × D_IN` 個の float64 要素
# です。)

# %%
dx_bytes_answer = None  # 予想 (バイト)

teach.check("7.1", dx_bytes_answer, expected=col_bytes["all_reduce"][0], unit="B", ranks=TP)

# %% [markdown]
# ## 行分割: 順伝播で all-reduce、逆伝播では足し合わせるものがない
#
# 今度は `W` を行のブロックに切り分けて `W = [W0; W1; W2; W3]` とし、入力もそれに対応する
# 列のブロック `X = [X0 | X1 | X2 | X3]` に分けます。各 GPU は全体と同じ大きさの *部分* 出力を
# 計算します。
#
#     Y = Σ_i X_i · W_i  (+ b, 1 回だけ加える)                  ->  順伝播で all-reduce (和)
#     dX_i = dY · W_iᵀ,  dW_i = X_iᵀ · dY                        手元で計算: 通信なし
#
# all-reduce が逆伝播 (列分割) から順伝播 (行分割) に移りました。

# %%
row_full = Linear.init(D_IN, D_OUT, rng)


def row_program(rank):
    j = group.index(rank.id)
    fc = RowParallelLinear.from_full(row_full, group, j)  # W の行を保持、バイアスは 1 回分だけ
    x_j = split_along(x, group, j, axis=-1)  # X_j: このランクが受け持つ X の列
    y, ctx = yield from fc.forward(rank, x_j)  # 部分和の all-reduce
    dx_j, grads = yield from fc.backward(rank, ctx, dy)  # dX_j = dY W_jᵀ
    return y, dx_j


row = cluster.run(row_program)
y_ref, ctx_ref = row_full.forward(x)
dx_ref = row_full.backward_input(ctx_ref, dy)
dx_joined = np.concatenate([dx_j for _, dx_j in row.returns], axis=-1)
print(f"すべてのランクで Y == X·W: {all(np.allclose(y, y_ref) for y, _ in row.returns)}")
print(f"[dX_0 | dX_1 | dX_2 | dX_3] == 単一デバイスの dX: {np.allclose(dx_joined, dx_ref)}")
print(f"各ランクが送ったバイト数: {collective_bytes(row.trace, TP)}")
print(f"ランクあたりの集団通信の呼び出し回数: {collective_calls(row.trace)}")

# %% [markdown]
# **演習 7.2 — 分割を書く。** `tp` 個の組 `(X_i, W_i)` のリストを返す `row_shards(x, w, tp)`
# を書いてください。ランク `i` が受け持つ `x` の列と `w` の行を、等しい大きさの連続した
# ブロックで取り出し、`Σ_i X_i · W_i == x · w` となるようにします。チェックでは、いくつかの
# 形状について collsim の分割と比べます。

# %%
row_shards_answer = None  # 関数を書く: def row_shards(x, w, tp): return [(X_0, W_0), ...]


def reference_row_shards(x, w, tp):
    g = Group(range(tp))
    return [(split_along(x, g, i, axis=-1), split_along(w, g, i, axis=0)) for i in range(tp)]


cases = []
for tp, rows, inner, out in [(2, 3, 8, 5), (4, 2, 12, 3), (3, 5, 6, 6), (1, 4, 4, 2)]:
    cases.append((rng.uniform(-1, 1, (rows, inner)), rng.uniform(-1, 1, (inner, out)), tp))
teach.check_function("7.2", row_shards_answer, reference_row_shards, cases)

# %% [markdown]
# ## Megatron の MLP: 列分割のあとに行分割、各方向に all-reduce が 1 回
#
# Transformer の MLP は `Y = GeLU(X·A)·B` で、`A` の形状は `h × 4h`、`B` の形状は `4h × h`
# です。Megatron-LM (Shoeybi et al. 2019, §3) は `A` を **列** で、`B` を **行** で分割します。
# GeLU は要素ごとに作用するので、各 GPU は `X·A` のうち自分の列に GeLU を適用し、その結果を
# そのまま自分が持つ `B` の行に渡せます。間に gather は要りません。通信が起きるのは両端だけで、
# 互いに共役な 2 つの演算子の組になります。
#
# | 演算子 | 順伝播 | 逆伝播 |
# |---|---|---|
# | `f` (MLP の入口) | 恒等写像 | `dX` の all-reduce |
# | `g` (MLP の出口) | `Y` の all-reduce | 恒等写像 |
#
# つまり順伝播と逆伝播で all-reduce が 1 回ずつ、どちらも `B·S·h` 要素です。別のやり方、
# つまり列分割の層の出力を gather し、行分割の層でそれをもう一度分ける方法では、幅 `4h` の
# 隠れ層の活性値がネットワークを 2 回通ります。両方を数えてみましょう。

# %%
B, S, H = 4, 8, 16  # バッチ、系列、隠れ次元 (一瞬で終わるよう小さく)
mlp = MLP.init(H, rng)  # h -> 4h -> h
xs = rng.uniform(-1, 1, (B, S, H))
dys = rng.uniform(-1, 1, (B, S, H))


def megatron_program(rank):
    layer = ParallelMLP.from_full(mlp, group, group.index(rank.id))
    y, ctx = yield from layer.forward(rank, xs)  # f = 恒等写像、g = all-reduce
    dx, grads = yield from layer.backward(rank, ctx, dys)  # g = 恒等写像、f = all-reduce
    return y, dx


def unpaired_program(rank):
    """出力を gather する列分割の層、隠れ層全体への GeLU、それをまた分ける行分割の層。"""
    j, gelu = group.index(rank.id), GELU()
    fc1 = ColumnParallelLinear.from_full(mlp.fc1, group, j, gather_output=True)
    fc2 = RowParallelLinear.from_full(mlp.fc2, group, j, input_is_parallel=False)
    h, c1 = yield from fc1.forward(rank, xs)  # (B, S, 4h) の隠れ層の all-gather
    a, c2 = gelu.forward(h)  # どのランクも全体を計算する
    y, c3 = yield from fc2.forward(rank, a)  # Y の all-reduce
    da = yield from fc2.backward_input(rank, c3, dys)  # (B, S, 4h) の dA の all-gather
    dx = yield from fc1.backward_input(rank, c1, gelu.backward_input(c2, da))  # all-reduce
    return y, dx


y_ref, ctx_ref = mlp.forward(xs)
dx_ref = mlp.backward_input(ctx_ref, dys)
results = {}
for name, program in [("Megatron f/g", megatron_program), ("gather, then split", unpaired_program)]:
    run = cluster.run(program)
    ok = all(np.allclose(y, y_ref) and np.allclose(dx, dx_ref) for y, dx in run.returns)
    results[name] = run
    print(f"{name:>18}: 単一デバイスと一致: {ok};  呼び出し {collective_calls(run.trace)};  "
          f"ランクあたり {format_size(run.stats.bytes_sent[0])} 送信")  # fmt: skip
ratio = (
    results["gather, then split"].stats.bytes_sent[0] / results["Megatron f/g"].stats.bytes_sent[0]
)
print(f"\ngather してから分け直す版が運ぶバイト数は、Megatron の f/g の組の {ratio:.3g} 倍")

# `collsim verify tp-mlp` は同じことを SGD の数ステップにわたって単一デバイスと比べる:
report = verify("tp-mlp", tp=TP, batch=B, hidden=H, seq=S, steps=3)
print(f"verify tp-mlp: SGD 3 ステップが単一デバイスと一致: {report.match} "
      f"(最大の相対差 {report.max_rel_diff:.1e})")  # fmt: skip

# %% [markdown]
# **演習 7.3 — 予想してから確かめる。** 上の Megatron の MLP (`t = 4`、活性値は
# `B × S × H` 個の float64) で、順伝播 1 回と逆伝播 1 回に各ランクは何バイトを送る
# でしょうか。ヒント: 表の all-reduce を数え、それぞれに `2(t−1)/t · N · b` を使います。

# %%
mlp_bytes_answer = None  # 予想 (バイト)

teach.check("7.3", mlp_bytes_answer, expected=results["Megatron f/g"].stats.bytes_sent[0],
            unit="B", ranks=TP)  # fmt: skip

# %% [markdown]
# ## テンソル並列をノード内に収める理由
#
# Transformer の層にはこのようなブロックが 2 つ (アテンションと MLP) あるので、テンソル並列
# では **層ごと・マイクロバッチごとに all-reduce が 4 回**、順伝播で 2 回、逆伝播で 2 回
# 走ります。どれもクリティカルパス上にあり、和が届くまで次の層は始められません。そのため
# Megatron-LM は `tensor_parallel_size <= ノードあたりの GPU 数` とし、テンソル並列の通信が
# NVLink/NVSwitch の上だけで済むようにしています (Narayanan et al. 2021、takeaway #1:
# テンソル並列は 1 台のサーバの GPU 数まで)。Hugging Face の Accelerate の ND-parallel
# ガイドも、テンソル並列は高帯域幅のリンクでつながった 1 ノード内で最もよく働き、PCIe
# 越しには勧められないとしています。
#
# 実際に見てみましょう。`hierarchical(2, 4)` は 4 GPU のマシン 2 台です。各マシンの中には
# 高速なスイッチがあり、GPU ごとに 1 つずつ、共有のファブリックへつながる遅めの NIC が
# あります。どのランクがテンソル並列のグループを組むかは **ランクグリッド** で決まります。
# テンソル並列を *最も内側の* (最も速く変わる) 次元にすると、隣り合うランクが同じテンソル
# 並列のグループに入り、隣り合うランクは同じマシンに載ります。逆にテンソル並列を最も外側に
# すると、どのテンソル並列のグループも 2 台のマシンにまたがります。

# %%
topo = collsim.topology.hierarchical(2, 4, intra="900GB/s", inter="50GB/s",
                                     intra_latency="1us", inter_latency="5us")  # fmt: skip
alpha_in, beta_in = path_alpha_beta(topo, 0, 1)  # GPU -> ノードのスイッチ -> GPU
alpha_out, beta_out = path_alpha_beta(topo, 0, 4)  # GPU -> NIC -> ファブリック -> NIC -> GPU
print(f"マシン内:   α = {format_time(alpha_in)}, β = {format_rate(beta_in)}")
print(f"マシン間:   α = {format_time(alpha_out)}, β = {format_rate(beta_out)}")

placements = {
    "TP inside a node": RankGrid((2, 4), ("dp", "tp")),  # テンソル並列が最も内側
    "TP across nodes": RankGrid((4, 2), ("tp", "dp")),  # テンソル並列が最も外側
}
for name, mesh in placements.items():
    print(f"{name}: テンソル並列のグループ {[list(g.ranks) for g in mesh.groups('tp')]}")

# %% [markdown]
# 8 台の GPU すべてで、4 台ずつのテンソル並列のグループ 2 つを並べて Megatron の MLP を
# 実行し、2 通りの配置 (TP inside a node: ノード内、TP across nodes: ノードをまたぐ) を
# 比べます (今回は帯域幅が効いてくるよう、隠れ次元を大きくします)。

# %%
H_BIG = 256
mlp_big = MLP.init(H_BIG, rng)
x_big = rng.uniform(-1, 1, (2, 64, H_BIG))
dy_big = rng.uniform(-1, 1, (2, 64, H_BIG))


def mlp_on_mesh(rank, mesh):
    tp_group = mesh.group("tp", rank.id)
    layer = ParallelMLP.from_full(mlp_big, tp_group, tp_group.index(rank.id))
    y, ctx = yield from layer.forward(rank, x_big)
    dx, grads = yield from layer.backward(rank, ctx, dy_big)
    return np.allclose(y, mlp_big.forward(x_big)[0])


runs = {}
for name, mesh in placements.items():
    runs[name] = collsim.Cluster(topo).run(mlp_on_mesh, mesh)
    print(f"{name:>16}: 順伝播 + 逆伝播のシミュレーション時間 {format_time(runs[name].time):>9} "
          f"(正しい: {all(runs[name].returns)})、ランクあたり {format_size(runs[name].stats.bytes_sent[0])} "
          "送信")  # fmt: skip
slow = runs["TP across nodes"].time / runs["TP inside a node"].time
print(f"\nバイト数も計算も同じなのに、マシンをまたぐとステップは {slow:.3g} 倍遅くなる")

# %%
for name, run in runs.items():
    fig = traffic_figure(topo, run, title=f"Megatron MLP, tp=4: {name}")
    teach.show(fig, "07_" + re.sub(r"\W+", "_", name.lower()))

# %% [markdown]
# 1 枚目の図では、テンソル並列の all-reduce はそれぞれのマシンのスイッチから一度も出ません。
# 2 枚目の図では、どのリングもファブリックを 2 回通り、リングの各ステップはいちばん遅い
# ホップを待ちます。
#
# 実際の規模で考えます。GPT-3 の形状 (系列長 2048、隠れ次元 12288、bf16、マイクロバッチ
# あたり系列 1 本) の活性値 1 つが、テンソル並列の all-reduce 1 回で運ぶ量です。下では
# これをカウントのみモード (データを持たずサイズだけを扱う) で、マシン内とマシン間で
# all-reduce し、GPT-3 の 96 層それぞれの 4 回の all-reduce を掛け合わせます。

# %%
SEQ, HIDDEN, LAYERS = 2048, 12288, 96  # GPT-3 175B (Brown et al. 2020)
count = SEQ * HIDDEN  # (1, S, h) の活性値 1 つの要素数
big = collsim.Cluster(topo)
inside = big.all_reduce(count=count, dtype="bfloat16", group=[0, 1, 2, 3])
across = big.all_reduce(count=count, dtype="bfloat16", group=[0, 2, 4, 6])
size = count * 2  # bf16 のバイト数
print(f"{format_size(size)} の all-reduce 1 回: ノード内 {format_time(inside.time)}、"
      f"ノード間 {format_time(across.time)} ({across.time / inside.time:.3g} 倍遅い)")  # fmt: skip
for name, result in [("ノード内", inside), ("ノード間", across)]:
    total = 4 * LAYERS * result.time
    print(f"  {name}: 4 × {LAYERS} 層 × {format_time(result.time)} = マイクロバッチあたり "
          f"{format_time(total)} のテンソル並列の all-reduce (クリティカルパス上)")  # fmt: skip

# %% [markdown]
# **演習 7.4 — 予想してから確かめる。** リング all-reduce は `2(K−1)` ステップかかり、
# ノードをまたぐリングではどのステップもマシン間のホップを待ちます。
# `T = 2(K−1)(α + S/(K·β))` (レッスン 5) に、上に「マシン間」として表示された `α`、`β` を
# 使ってください。`K = 4` 台の GPU で `S = count · 2` バイトをノード間で all-reduce する時間を
# 予想してください (秒、または `"1.5ms"` のような文字列)。

# %%
cross_node_time_answer = None  # 予想 (秒、または "1.5ms" のような文字列)

teach.check("7.4", cross_node_time_answer, expected=across.time, rel=1e-3, unit="s", ranks=4)
# collsim のプランナが使う閉形式でも同じ値になる:
formula = closed_form("all_reduce", "ring", ranks=4, size=size, alpha=alpha_out, beta=beta_out)
print(f"閉形式: {format_time(formula.time_s)}")

# %% [markdown]
# ## まとめ
#
# - **列分割** `W = [W0|…|W3]`: `Y_i = X·W_i` です。順伝播では all-gather で `Y` を組み立て、
#   `dX = Σ dY_i·W_iᵀ` には **逆伝播での all-reduce** が必要です。
# - **行分割** `W = [W0;…;W3]`: 部分出力 `X_i·W_i` を **順伝播での all-reduce** で足し合わせ
#   ます。逆伝播に通信は要りません。
# - **Megatron の MLP** は列分割を行分割の前に置きます。幅 `4h` の隠れ層は一度も通信されず、
#   ブロックのコストは `B·S·h` 要素の all-reduce が順伝播で 1 回 (`g`)、逆伝播で 1 回 (`f`)
#   です。
# - Transformer の層は、マイクロバッチごとにこの all-reduce を **4 回** クリティカルパス上で
#   行います。そのためテンソル並列には最速のリンクが必要です。`tp ≤ ノードあたりの GPU 数`
#   とし、テンソル並列をランクグリッドの最も内側の次元にします (Narayanan et al. 2021、
#   Accelerate の ND-parallel ガイド)。
# - 上の結果はすべて単一デバイスの numpy と一致し、バイト数は `2(K−1)/K·N·b` と一致しました。
#
# 次のレッスン 8 では、モデルを別の向き、つまり層ごとに分けてパイプラインにします。
