# %% [markdown]
# # 2. データ並列と all-reduce
# バッチ 64・dp=4 の例: 平均した勾配は単一デバイスの勾配と一致し、勾配蓄積は計算を増やしますが通信は増やしません (Megatron-LM のバッチの規則)。
#
# レッスン 1 では、大きなモデルのメモリは分割するしかないことを見ました。いちばん単純な分割で、
# モデルがまだ GPU 1 枚に載るうちは常に第一候補になるのが、**データ** の分割です。各 GPU は
# モデルの完全なコピーを持ち、バッチのうち自分の担当分を処理します。こうすると、GPU どうしで
# 揃えなければならないのは勾配だけになります。このレッスンでは collsim の小さな numpy 製
# ニューラルネット部品 (`collsim.nn`) を使い、4 ランクの仮想クラスタでこれを動かして、
# 単一デバイスの結果と照らし合わせます。
#
# どのレッスンでも同じく、`..._answer = None` をそれぞれ自分の予想に書き換え、直後のチェックを
# 実行してください (`None` のままだと、編集すべきファイル名と行番号が表示されます)。

# %%
import copy

import numpy as np

import collsim
from collsim import teach, topology
from collsim.nn import GELU, SGD, Linear, Sequential, mse_loss
from collsim.parallel.data import resolve_batch, train_data_parallel
from collsim.units import format_size, format_time
from collsim.viz.utilization import time_unit, utilization_figure

# %% [markdown]
# ## バッチ 64・dp=4 の例
#
# データ並列の典型的な例では `dp_size = 4`、`batch = 64`、`mp_size = 1` (モデル並列なし) と
# します。PyTorch の DistributedDataParallel が実装しているのもこの手順です (Li et al.
# 2020, "PyTorch Distributed: Experiences on Accelerating Data Parallel Training")。
#
# 1. バッチを 16 サンプルずつ 4 つに分け、GPU $r$ が $r$ 番目を受け持つ。
# 2. モデル全体を持つ各 GPU が、ローカルな勾配 $g_r = \nabla_\theta L_r$ を計算する。
#    $L_r$ は担当する 16 サンプルの損失の平均。
# 3. **all-reduce** (オールリデュース、ここでは和) によって、全 GPU が
#    $g_\text{global} = g_0 + g_1 + g_2 + g_3$ を受け取る。
# 4. `dp_size` で割る: $g_\text{avg} = g_\text{global} / 4$。
# 5. 全 GPU が同じ更新 $\theta \leftarrow \theta - \text{lr}\cdot g_\text{avg}$ を行うので、
#    コピーはずっと同一のまま保たれる。
#
# これがなぜ単一デバイスでの学習と一致するのでしょうか。バッチ全体の損失は 64 サンプルの
# 平均で、これは 16 サンプルずつの平均 4 つをさらに平均したものに等しく、しかも平均の勾配は
# 勾配の平均だからです。
#
# $$\nabla \frac{1}{64}\sum_{i=1}^{64} \ell_i = \frac{1}{4}\sum_{r=0}^{3} \nabla
# \underbrace{\frac{1}{16}\sum_{i \in \text{part } r} \ell_i}_{L_r} = \frac{1}{4}\sum_r g_r$$
#
# まず、比較の基準となる単一デバイスの結果を作ります。小さな MLP と、64 サンプルのバッチ
# 1 つです。

# %%
DP, BATCH, FEATURES, HIDDEN = 4, 64, 16, 64
rng = np.random.default_rng(4)
model = Sequential(Linear.init(FEATURES, HIDDEN, rng), GELU(), Linear.init(HIDDEN, HIDDEN, rng),
                   GELU(), Linear.init(HIDDEN, FEATURES, rng))  # fmt: skip
x = rng.uniform(-1, 1, (BATCH, FEATURES))
target = rng.uniform(-1, 1, (BATCH, FEATURES))


def gradient(model, x, target):
    """単一デバイス: 順伝播、平均二乗誤差の損失、逆伝播を行い、{名前: 勾配} を返す。"""
    y, ctx = model.forward(x)
    loss, dy = mse_loss(y, target)  # dy は *平均* 損失の勾配
    return model.backward(ctx, dy)[1]


def flat(grads):
    """すべての勾配を 1 本のベクトルにまとめる (並び順は固定で、どのランクでも同じ)。"""
    return np.concatenate([grads[name].ravel() for name in sorted(grads)])


g_single = flat(gradient(model, x, target))
n_params = g_single.size
print(f"パラメータ {n_params:,} 個、単一デバイスの勾配のノルム {np.linalg.norm(g_single):.6g}")

# %% [markdown]
# 次に、バッチ 64・dp=4 の例を手で追います。16 行ずつで 4 つのローカルな勾配を計算し、
# 4 ランクが 1 台のスイッチにつながったトポロジの仮想クラスタで、本物の all-reduce を
# 実行します。
# `cluster.all_reduce(buffers)` はランクごとに 1 つずつ配列を受け取り、全ランクの出力
# (と、送ったバイト数とかかった時間) を返します。
#
# **演習 2.1.** 手順 4 では、all-reduce した和を 4 で割ります。これを忘れて $g_\text{global}$
# のまま更新したとすると、その勾配は単一デバイスの勾配の何倍の大きさになるでしょうか。

# %%
forgot_division_answer = None  # 予想を書く: |g_global| / |g_single|

# %%
cluster = collsim.Cluster(topology.switch(DP, bandwidth="100GB/s", latency="5us"))
per_rank = BATCH // DP
local = [flat(gradient(model, x[r * per_rank : (r + 1) * per_rank],
                       target[r * per_rank : (r + 1) * per_rank])) for r in range(DP)]  # fmt: skip
result = cluster.all_reduce(local, op="sum")
g_global = result.outputs[0]
g_avg = g_global / DP
print(f"全ランクが同じ和を受け取った: {all(np.array_equal(o, g_global) for o in result.outputs)}")
print(f"max |g_avg - g_single| = {np.max(np.abs(g_avg - g_single)):.3g} (float64 の丸め誤差)")
print(f"all-reduce: ランクあたりの送信 {format_size(result.stats.bytes_sent[0])}、"
      f"シミュレーション時間 {format_time(result.time)}")  # fmt: skip
teach.check("2.1", forgot_division_answer,
            expected=np.linalg.norm(g_global) / np.linalg.norm(g_single), unit="x", ranks=DP)  # fmt: skip

# %% [markdown]
# (このバイト数の意味はレッスン 4 で説明します。リング all-reduce がデータをどう動かすのか、
# そしてランクあたりのバイト数がなぜ GPU 数にほとんど依存しないのかを見ます。)
#
# ## クラスタ上の学習ループでも同じ
#
# `train_data_parallel` は、ここまでの処理をすべて *ランクプログラム* の中で行います。各ランクは
# 自分が担当する行で自分のモデルのコピーを学習させ、勾配は PyTorch の
# DistributedDataParallel (DDP) と同じく平均の演算で all-reduce されます。各ランクの勾配と
# パラメータが返ってくるので、単一デバイスで同じ SGD の 1 ステップを行った結果と比べられます。

# %%
run = train_data_parallel(cluster, model, [(x, target)], dp=DP, optimizer=SGD(lr=0.1))
print(f"グローバルバッチ {BATCH} = マイクロバッチ {run.micro_batch} x dp {run.dp} x "
      f"蓄積 {run.accumulation}")  # fmt: skip
g_run = flat(run.steps[0]["grads"])
print(f"max |g_rank0 - g_single| = {np.max(np.abs(g_run - g_single)):.3g}")

reference = copy.deepcopy(model)
SGD(lr=0.1).step(reference.params, gradient(reference, x, target))
worst = max(np.max(np.abs(p[k] - reference.params[k])) for p in run.replicas for k in p)
same = all(np.array_equal(p[k], run.replicas[0][k]) for p in run.replicas for k in p)
print(f"1 ステップ後: max |theta_replica - theta_1_device| = {worst:.3g}、"
      f"4 つのレプリカがビット単位で一致: {same}")  # fmt: skip

# %% [markdown]
# レプリカは近いだけでなく、*ビット単位で* 一致しています。all-reduce は全ランクにまったく
# 同じ和を渡すので、全ランクがまったく同じ更新を行うからです。データ並列では、コピーどうしが
# ずれていくことはありません。その代わりに、毎ステップ all-reduce のコストを払う必要があります。
#
# ## 勾配蓄積: global = micro · dp · accumulation
#
# Megatron-LM は、引数のチェック (megatron/training/arguments.py の `validate_args`。
# Narayanan et al. 2021) で次のバッチの規則を強制しています。
#
# $$\text{global\_batch} = \text{micro\_batch} \cdot \text{dp} \cdot \text{accumulation}$$
#
# マイクロバッチは 1 つの GPU が一度に順伝播・逆伝播に通す量で、これが活性値メモリを決めます
# (レッスン 1)。メモリの都合でマイクロバッチを大きくできないときは、各 GPU が複数の
# マイクロバッチを順に処理してその勾配を **足し合わせ**、それから all-reduce して更新します。
# オプティマイザにとって意味を持つ数であるグローバルバッチは変わりません。
#
# **演習 2.2.** 各 GPU がオプティマイザの 1 ステップあたりに処理するマイクロバッチの数を返す
# 関数 `accumulation_steps(global_batch, dp, micro_batch)` を書いてください。チェックでは、
# いくつかの構成について collsim の `resolve_batch` と比べます。そのうちの 1 つは、Megatron の
# 784 GPU のエラーをプランナーが直した構成です (レッスン 10)。784 GPU は tp·pp = 8·4 で
# 割り切れませんが、768 GPU なら割り切れて dp = 768/(8·4) になります。グローバルバッチは
# 1536、マイクロバッチは 1 です。

# %%
accumulation_steps_answer = None  # 関数を書く: def f(global_batch, dp, micro_batch): ...


# %%
def reference_accumulation(global_batch, dp, micro_batch):
    return resolve_batch(global_batch, dp, micro_batch=micro_batch)[1]


cases = [(64, 4, 16), (64, 4, 4), (64, 4, 1), (1536, 768 // (8 * 4), 1), (512, 8, 2), (96, 3, 8)]
teach.check_function("2.2", accumulation_steps_answer, reference_accumulation, cases,
                     unit="micro-batches")  # fmt: skip

# %% [markdown]
# 規則を満たさない構成は、4 つの数すべてと、成り立つ選択肢を添えて拒否されます。

# %%
try:
    resolve_batch(64, 4, micro_batch=3, accumulation=2)
except collsim.ConfigError as error:
    print(error)

# %% [markdown]
# では実際に動かしてみます。同じ 64 のバッチを dp = 4 で処理しますが、マイクロバッチを 4 に
# するので、各ランクは all-reduce の前に 4 つのマイクロバッチを蓄積します (DDP の `no_sync`)。
#
# **演習 2.3.** 各ランクは 1 ステップあたり、1 回ではなく 4 回の順伝播・逆伝播を行うことに
# なります。勾配蓄積ありで各ランクが 1 ステップに送るバイト数は、蓄積なしの何倍になるかを
# 予想してください。

# %%
accumulation_bytes_answer = None  # 予想を書く: バイト数 (蓄積 4) / (蓄積 1)

# %%
accumulated = train_data_parallel(cluster, model, [(x, target)], dp=DP, micro_batch=4)
print(f"グローバルバッチ {BATCH} = マイクロバッチ {accumulated.micro_batch} x dp {accumulated.dp} x "
      f"蓄積 {accumulated.accumulation}")  # fmt: skip
g_acc = flat(accumulated.steps[0]["grads"])
print(f"max |g_accumulated - g_single| = {np.max(np.abs(g_acc - g_single)):.3g}")
sent_one = run.bytes_by_collective["all_reduce"][0]
sent_acc = accumulated.bytes_by_collective["all_reduce"][0]
print(f"ランクあたりの all-reduce のバイト数: {format_size(sent_one)} (蓄積 1)、"
      f"{format_size(sent_acc)} (蓄積 4)")  # fmt: skip
teach.check("2.3", accumulation_bytes_answer, expected=sent_acc / sent_one, unit="x", ranks=DP)

# %% [markdown]
# ## all-reduce を逆伝播の裏に隠す
#
# 逆伝播は、最後の層から最初の層に向かって勾配を作っていきます。DDP は勾配全体がそろうのを
# 待ちません。できあがった勾配から順に **バケット** (デフォルトは 25 MiB) に詰め、バケットが
# 埋まるたびにすぐその all-reduce を始めるので、その間も逆伝播は手前の層の計算を続けられます。
# ステップを遅らせるのは、逆伝播が終わった時点でまだ通信中の分だけです。
#
# ここでのモデルはとても小さいので、次のセルではクラスタもそれに合わせて小さくし (ランクあたり
# 1 GFLOP/s、リンクの帯域幅 1 GB/s、レイテンシ 1 µs。こうすると、実際の GPU で実際のモデルを動かす
# ときと同じく計算と通信にかかる時間が同程度になります)、バケットを 2 KiB にします。図は
# ステップ中の各リンクの負荷を示しています (破線はランク 0 の順伝播と逆伝播が終わる時刻)。
# 色の付いた帯がバケットごとの all-reduce です。最初の帯は最後の層の勾配ができた直後、
# 逆伝播の途中で始まります。順伝播の間、リンクにはすることがありません。

# %%
slow_topology = topology.switch(DP, bandwidth="1GB/s", latency="1us")
slow = collsim.Cluster(slow_topology, compute_rate=1e9)
one_bucket = train_data_parallel(slow, model, [(x, target)], dp=DP)
buckets = train_data_parallel(slow, model, [(x, target)], dp=DP, bucket_bytes="2KiB")
spans = [c for c in buckets.result.trace.computes if c.rank == 0]
# 各区間には、どの層のどのパスかを表すレコードが付いている (ラベルは表示用にすぎない)
forward_end = max(c.end for c in spans if c.meta.kind == "forward")
backward_end = max(c.end for c in spans)
print(f"ランク 0: 順伝播 0 s .. {format_time(forward_end)}、逆伝播 {format_time(forward_end)}"
      f" .. {format_time(backward_end)}")  # fmt: skip
for name, r in (("バケット 1 個", one_bucket), ("2 KiB のバケット", buckets)):
    o = r.overlap[0]
    print(f"{name:<14} バケットのサイズ {r.buckets!s:<19} ステップ {format_time(r.time):>9}、"
          f"all-reduce {format_time(o.comm_s):>9} (うち隠れない分 {format_time(o.exposed_s):>9})")  # fmt: skip
fig = utilization_figure(slow_topology, buckets.result,
                         title="data-parallel step on 4 ranks: gradient buckets on the links")  # fmt: skip
# ランク 0 の順伝播と逆伝播 (同じトレースから取ったもの) を時間軸に書き込む
ax, scale = fig.axes[0], time_unit(buckets.time)[0]
for start, end, name in ((0, forward_end, "forward"), (forward_end, backward_end, "backward")):
    ax.axvline(end / scale, color="black", ls="--", lw=1.2)
    ax.text((start + end) / 2 / scale, 7.3, name, ha="center", va="center", fontsize=12,
            bbox={"fc": "white", "ec": "#999999"})  # fmt: skip
teach.show(fig, "02_dp_buckets_utilization")

# %% [markdown]
# ## まとめ
#
# - データ並列: 各 GPU がモデル全体とバッチの一部を持ちます。勾配を **all-reduce** して dp で
#   割ると、全 GPU がバッチ全体の勾配を得ます (バッチ 64・dp=4 の例)。これは浮動小数点の丸めを
#   除いて単一デバイスの勾配と一致し、レプリカはビット単位で同一のまま保たれます。
# - dp で割るのを忘れると、更新が dp 倍大きくなります。all-reduce は和を取るからです。
# - **global_batch = micro_batch · dp · accumulation** (Megatron-LM のバッチの規則)。
#   勾配蓄積は計算を増やしますが通信は増やしません。all-reduce はオプティマイザの 1 ステップ
#   につき 1 回のままです。
# - バケットに分けると、最後のほうの層の勾配の all-reduce を、逆伝播が最初のほうの層を計算して
#   いる間に走らせられます。表に出てくる (隠しきれない) のは残りの分だけです。
# - データ並列でも、各 GPU にはモデル全体が必要です (レッスン 1 のパラメータ 1 個あたり
#   16 バイト)。しかも毎ステップ、勾配の all-reduce を 1 回払います。レッスン 3 ではその
#   モデル状態をレプリカ間でシャーディングし (ZeRO、FSDP)、レッスン 4 では all-reduce の中身を
#   開けて見ます。
