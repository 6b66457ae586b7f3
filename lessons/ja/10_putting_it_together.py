# %% [markdown]
# # 10. 全部を組み合わせる: ランクの格子と守るべき規則
# GPU を tp × dp × pp の格子に並べ、world = tp·pp·dp とグローバルバッチ = micro·dp·accum を確かめ、Megatron の 784 GPU エラーを計画ツールで調べます。
#
# 実際の学習ジョブでは 3 つを組み合わせます。層の内部を分ける**テンソル並列** (レッスン 7)、
# 層をまたいで分ける**パイプライン並列** (レッスン 8)、そしてモデルのコピー間で分ける
# **データ並列** (レッスン 2) です。これを「3 次元並列」あるいは PTD-P 並列と呼びます
# (Narayanan et al. 2021)。このレッスンでは、それぞれの通信が適切なリンクに載るように GPU を
# どう並べるか、各サイズがどの等式を満たさなければならないか (Megatron-LM の引数チェック、
# megatron/training/arguments.py の `validate_args`)、そして満たさないと何が起きるかを見ます。
#
# これまでと同じく、`..._answer = None` をそれぞれ自分の予想に置き換えてから、チェックを実行して
# ください。

# %%
import math

from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

import collsim
from collsim import teach
from collsim.parallel.accounting import collective_bytes, mesh_dimension
from collsim.parallel.config import ParallelConfig
from collsim.parallel.mesh import train
from collsim.parallel.pipeline.runner import toy_batch, toy_model
from collsim.plan import plan
from collsim.runtime.group import RankGrid
from collsim.units import format_size, format_time
from collsim.viz.traffic import traffic_figure

# %% [markdown]
# ## ランクの格子: TP がいちばん内側、次に DP、最後に PP
#
# `world = tp · dp · pp` 台の GPU を、格子 `RankGrid((pp, dp, tp), ("pp", "dp", "tp"))` に
# 並べます。この格子では**最後の次元がいちばん速く変わります**。ランク `r` の位置は
#
#     tp_rank = r mod tp,    dp_rank = (r div tp) mod dp,    pp_rank = r div (tp · dp)
#
# で、ランク `0 … tp−1` が最初の TP グループになります。GPU の番号は 1 台のマシンを埋めてから
# 次のマシンへ進むので、連続したランクは同じマシンに載ります。その結果、1 層・1 マイクロバッチ
# あたり 4 回の all-reduce を行う TP が NVLink を使い、DP の勾配 all-reduce (1 ステップに 1 回)
# がその次に来て、パイプラインの小さな 1 対 1 通信のメッセージがいちばん外側、つまりマシン間に
# 回ります。これが Megatron-LM の並べ方です (Narayanan et al. 2021, §3)。
#
# 32 GPU の例です。8 GPU のマシンが 4 台で、`tp = 4`、`dp = 2`、`pp = 4` とします。

# %%
GPUS_PER_NODE = 8
big_mesh = RankGrid((4, 2, 4), ("pp", "dp", "tp"))
print(big_mesh)
for r in (0, 5, 13, 31):
    print(f"ランク {r:>2}: {big_mesh.coords(r)}、マシン {r // GPUS_PER_NODE}。"
          f"TP グループ {list(big_mesh.group('tp', r).ranks)}、"
          f"DP グループ {list(big_mesh.group('dp', r).ranks)}、"
          f"PP グループ {list(big_mesh.group('pp', r).ranks)}")  # fmt: skip


def grid_figure(mesh, gpus_per_node):
    """マシンごとに GPU を 1 行に並べる。色はパイプラインのステージ、ラベルは (tp, dp, pp) ランク。"""
    nodes = math.ceil(mesh.size / gpus_per_node)
    fig = Figure(figsize=(1.25 * gpus_per_node + 1, 1.1 * nodes + 1.2), layout="constrained")
    ax = fig.add_subplot()
    colours = ["#4C72B0", "#55A868", "#DD8452", "#8172B3", "#C44E52", "#937860"]
    for r in range(mesh.size):
        c = mesh.coords(r)
        node, slot = divmod(r, gpus_per_node)
        ax.add_patch(Rectangle((slot, -node), 0.92, 0.85, color=colours[c["pp"] % 6], alpha=0.85))
        ax.text(slot + 0.46, -node + 0.42, f"r{r}\ntp{c['tp']} dp{c['dp']}\npp{c['pp']}",
                ha="center", va="center", fontsize=9, color="white", fontweight="bold")  # fmt: skip
    for g in mesh.groups("tp"):  # TP グループごとに枠で囲む
        first, last = g.ranks[0], g.ranks[-1]
        node = first // gpus_per_node
        ax.add_patch(Rectangle((first % gpus_per_node - 0.04, -node - 0.05),
                               last - first + 1, 0.95, fill=False, lw=2.5, ec="black"))  # fmt: skip
    for node in range(nodes):
        ax.text(-0.15, -node + 0.42, f"machine {node}", ha="right", va="center", fontsize=10)
    ax.set_xlim(-1.6, gpus_per_node + 0.1)
    ax.set_ylim(-nodes + 0.8, 1.0)
    ax.axis("off")
    shape = ", ".join(f"{n}={s}" for n, s in zip(mesh.names, mesh.shape))
    ax.set_title(f"RankGrid({shape}): black boxes = TP groups, colour = pipeline stage")
    return fig


teach.show(grid_figure(big_mesh, GPUS_PER_NODE), "10_rank_grid")

# %% [markdown]
# **演習 10.1 — 対応を書く。** この格子上のグローバルランクから、タプル
# `(pp_rank, dp_rank, tp_rank)` を返す `coords(rank, pp, dp, tp)` を書いてください。チェックは、
# `pp=4, dp=3, tp=8` の 96 GPU を含むいくつかの格子で `RankGrid.coords` と比べます。

# %%
coords_answer = None  # 自分の関数: def coords(rank, pp, dp, tp): return (pp_rank, dp_rank, tp_rank)


def mesh_coords(rank, pp, dp, tp):
    c = RankGrid((pp, dp, tp), ("pp", "dp", "tp")).coords(rank)
    return (c["pp"], c["dp"], c["tp"])


cases = [(5, 2, 2, 2), (37, 4, 3, 8), (95, 4, 3, 8), (0, 1, 1, 1), (13, 2, 4, 2), (6, 1, 8, 1)]
teach.check_function("10.1", coords_answer, mesh_coords, cases)

# %% [markdown]
# ## 3 つを同時に使い、単一デバイスと照合する
#
# メッシュ用のトレーナー `train(model, batches, ParallelConfig(...))` は、小さな Transformer を
# `dp · pp · tp` 個のランクで 1 ステップ実行します。各ステージの内部ではテンソル並列の層、
# ステージ間では 1F1B のパイプライン、レプリカ間では DDP と同じ方式のデータ並列の勾配
# all-reduce を使います。設定は Megatron と同じ名前 (`dp`、`tp`、`pp`、`microbatches`、
# `schedule` など) を持つ 1 つのオブジェクトです。4 GPU のマシン 2 台で `tp = dp = pp = 2` と
# したとき、それぞれの通信はどこを流れるでしょうか。

# %%
topo = collsim.topology.hierarchical(2, 4)
model = toy_model(layers=4, hidden=8, heads=2)
x, target = toy_batch(batch=8)  # dp=2 レプリカ × m=2 マイクロバッチ × 2 系列
config = ParallelConfig(dp=2, pp=2, tp=2, microbatches=2)
three_d = train(model, [(x, target)], config, cluster=collsim.Cluster(topo, compute_rate=math.inf))
print(f"メッシュ {three_d.mesh}。勾配とパラメータは単一デバイスと一致: {three_d.match}")

per_node = topo.graph["gpus_per_node"]
by_dim = collective_bytes(three_d.run.trace, three_d.mesh.size, three_d.mesh)
crossing = {}  # 次元 -> [マシン内のバイト数, マシン間のバイト数]
for t in three_d.run.trace.transfers:
    dim = mesh_dimension(three_d.mesh, t.src, t.dst)
    crossing.setdefault(dim, [0, 0])[t.src // per_node != t.dst // per_node] += t.nbytes
print(f"\n{'dimension, collective':<24}sent by rank 0")
for (dim, name), per_rank in sorted(by_dim.items()):
    print(f"{dim + ', ' + name:<24}{format_size(per_rank[0]):>10}")
print(f"\n{'dimension':<10}{'inside a machine':>18}{'between machines':>18}   (all ranks)")
for dim, (inside, between) in sorted(crossing.items()):
    print(f"{dim:<10}{format_size(inside):>18}{format_size(between):>18}")
teach.show(traffic_figure(topo, three_d.run, title="one 3-D step, tp=dp=pp=2"), "10_3d_traffic")

# %% [markdown]
# マシン間のネットワークを通るのは、パイプラインの 1 対 1 通信のメッセージだけです。TP と DP は
# それぞれのマシンのスイッチの中で完結します。(各 TP ランクは活性値のうち自分の `1/tp` の分だけを
# 次のステージへ送り、受け取った側でそれを all-gather します。これは Megatron がパイプラインの
# メッセージに使う scatter/gather で、表の小さな `tp, all_gather` の行がそれです。)
#
# ## 守るべき規則 (Megatron-LM の引数チェック)
#
# | 規則 | 理由 |
# |---|---|
# | `world_size = tp · pp · dp` | どの GPU も格子上にちょうど 1 つの位置を持つ |
# | `global_batch = micro_batch · dp · accumulation` | どう分割しても、オプティマイザの 1 ステップが見るサンプル数は同じ |
# | `hidden % tp == 0`、`heads % tp == 0` | TP は列とアテンションのヘッド (丸ごと) を均等に分ける |
# | `layers % pp == 0` (推奨) | そうでないと、いちばん遅いステージが全体の速さを決めてしまう |
# | `tp ≤ ノードあたりの GPU 数` (推奨) | TP の all-reduce は NVLink 上に収める必要がある (レッスン 7) |
#
# `world`、`tp`、`pp` が決まれば、格子から `dp = world / (tp·pp)` が決まります。グローバル
# バッチとマイクロバッチ (これはメモリで決まります) が決まれば、規則から勾配蓄積のステップ数が
# 決まります。`collsim.plan.plan` はすべての規則を一度に確かめ、メモリと時間を見積もります。

# %%
report = plan(world_size=64, tp=4, pp=2, layers=24, hidden=2048, heads=16, seq=2048,
              global_batch=256, micro_batch=2)  # fmt: skip
d = report.derived
print(f"有効: {report.valid}。dp = {d['dp']}、勾配蓄積 = {d['accumulation']}、"
      f"グローバルバッチ = {d['micro_batch']}·{d['dp']}·{d['accumulation']} = {d['global_batch']}")  # fmt: skip

# %% [markdown]
# **演習 10.2 — 予想してから確かめる。** 同じジョブで、マイクロバッチがメモリに収まらなく
# なったとします。グローバルバッチは 256 のまま `micro_batch = 1` にし、64 GPU で `tp = 4`、
# `pp = 2` です。オプティマイザの 1 ステップに、勾配蓄積のステップはいくつ必要になるでしょうか。

# %%
smaller = plan(world_size=64, tp=4, pp=2, layers=24, hidden=2048, heads=16, seq=2048,
               global_batch=256, micro_batch=1)  # fmt: skip

accumulation_answer = None  # 自分の予想: 勾配蓄積のステップ数

teach.check("10.2", accumulation_answer, expected=smaller.derived["accumulation"],
            unit="accumulation steps")  # fmt: skip

# %% [markdown]
# フレームワークは最初に失敗したアサーションで止まりますが、計画ツール (planner) は破られた
# 規則をすべて、具体的な数値と最も近い有効な選択肢とともに挙げます。次の例では 3 つの問題が
# 同時に起きています。

# %%
bad = plan(world_size=64, tp=16, pp=3, layers=24, hidden=2048, heads=24, seq=2048,
           global_batch=256, micro_batch=2)  # fmt: skip
for finding in bad.violations + bad.warnings:
    kind = "エラー" if finding in bad.violations else "警告"
    print(f"[{kind}] {finding.rule}: {finding.message}\n         ヒント: {finding.hint}")

# %% [markdown]
# ## Megatron の 784 GPU エラー
#
# 実際に起きた失敗です。784 GPU で `tp = 8`、`pp = 4` として起動した Megatron-LM は、引数
# チェックの段階で `AssertionError: world size (784) is not divisible by tensor parallel size (8) times pipeline parallel size (4)`
# を出して止まります (最近の版では `times context parallel size (1)` が付きます)。
# `data_parallel_size = 784 / (8 * 4)` が整数にならないためです (megatron/training/arguments.py
# の `validate_args`)。GPT-3 規模のモデル (96 層、隠れ次元 12288、ヘッド 96 個、系列長 2048、
# グローバルバッチ 1536 系列。Brown et al. 2020) について、メモリが問題にならないよう ZeRO-1 を
# 使って、`examples/plan_784_gpus.py` と同じ計画を立ててみましょう。

# %%
GPT3 = dict(layers=96, hidden=12288, heads=96, seq=2048)
megatron784 = plan(world_size=784, tp=8, pp=4, global_batch=1536, micro_batch=1, zero=1, **GPT3)
print(f"有効: {megatron784.valid}。破られた規則: {[v.rule for v in megatron784.violations]}")

# %% [markdown]
# **演習 10.3 — 予想してから確かめる。** `784 / (8·4)` から得られるデータ並列の並列度はいくつ
# でしょうか。

# %%
dp_answer = None  # 自分の予想

teach.check("10.3", dp_answer, expected=megatron784.derived["dp"], unit="replicas")

# %% [markdown]
# Megatron はここで止まります。計画ツールのメッセージも同じことを言い、ヒントには代わりに
# うまくいく構成が並びます。

# %%
print(f"{megatron784.violations[0].message}\n\nヒント: {megatron784.violations[0].hint}")

# %% [markdown]
# **演習 10.4 — 予想してから確かめる。** ヒントには `tp·pp` の倍数になる world サイズが 2 つ
# 挙がっています。784 の両側に 1 つずつ、どちらも 784 から同じだけ離れています。`tp = 8`、
# `pp = 4` とグローバルバッチを変えないとき、計画ツールが提案するのはどちらでしょうか。
# (グローバルバッチも割り切れなければなりません。`global_batch = micro · dp · accumulation`
# なので、`dp` がグローバルバッチを割り切る必要があります。)

# %%
fixed_world = megatron784.suggestions[0].config.world_size

world_size_answer = None  # 自分の予想: GPU の台数

teach.check("10.4", world_size_answer, expected=fixed_world, unit="GPUs")

# %% [markdown]
# 784 GPU のまま、代わりに `tp` か `pp` を変えればよいのでは、と思うかもしれません。それが
# うまくいかない理由は計画ツールが説明してくれます。ほかの解決策も挙がっています。

# %%
print("\n".join(megatron784.notes))
print("\n提案 (変更の少ない順):")
for s in megatron784.suggestions:
    print(f"  {s.describe()}")
fixed = plan(megatron784.suggestions[0].config)
print(f"\n{fixed_world} GPU の場合: 有効 {fixed.valid}、dp = {fixed.derived['dp']}、"
      f"勾配蓄積 = {fixed.derived['accumulation']}、"
      f"GPU あたり {format_size(fixed.memory['total'])}、1 ステップ ≈ {format_time(fixed.step_time_s)}")  # fmt: skip

# %% [markdown]
# ## Accelerate のバッチの式を Accelerate 自身と照らし合わせる
#
# Hugging Face の Accelerate ND-parallel ガイド (2025) は、実効バッチサイズを
# `micro_batch_size · gradient_accumulation_steps · dp_world_size`、ただし
# `dp_world_size = (dp_shard_size · dp_replicate_size) / tp_size` と書いています。
#
# 一方、Accelerate 自身の `ParallelismConfig` は `data_parallel_size = dp_replicate_size ·
# dp_shard_size`、`total_size = dp_replicate_size · dp_shard_size · tp_size · cp_size` と定義して
# います。TP (と CP) のランクは、**同じ**バッチを受け取る*追加の* GPU なのです。データ並列の
# 並列度は `dp_replicate · dp_shard` で、`tp` では割りません。ガイドの式は `tp` でもう一度
# 割ってしまっています。計画ツールは Accelerate の定義に従い、次の 2 式を使います。
#
# - `world = dp_replicate · dp_shard · tp · cp · pp`
# - `global batch = micro · (dp_replicate · dp_shard) · accumulation`
#
# 16 GPU で考えます。`dp_replicate = 2`、`dp_shard = 4` の HSDP に `tp = 2` を組み合わせ、
# マイクロバッチは 2、勾配蓄積は 4 ステップとします。

# %%
acc = dict(dp_replicate=2, dp_shard=4, tp=2, micro_batch=2, accumulation=4)
hsdp = plan(world_size=16, layers=4, hidden=1024, heads=16, seq=1024, **acc)
print(f"有効: {hsdp.valid}。計画ツール: dp = {hsdp.derived['dp']}、"
      f"グローバルバッチ = {hsdp.derived['global_batch']}")  # fmt: skip
print(hsdp.notes[0])

# どの GPU が異なるデータを受け取るか? (dp_replicate, dp_shard) の座標ごとにバッチのシャードが 1 つ
mesh = RankGrid((2, 4, 2), ("dp_replicate", "dp_shard", "tp"))  # Accelerate のメッシュの順序
shards = {(mesh.coords(r)["dp_replicate"], mesh.coords(r)["dp_shard"]) for r in range(mesh.size)}
print(f"\n{mesh.size} GPU に対して、異なるバッチのシャードは {len(shards)} 個 "
      f"(TP のペアごとに 1 つを共有: ランク {list(mesh.group('tp', 0).ranks)} は同じサンプルを見る)")  # fmt: skip

h = hsdp.derived
guide_dp = h["dp_shard"] * h["dp_replicate"] / hsdp.config.tp
guide_batch = h["micro_batch"] * h["accumulation"] * guide_dp
print(f"ガイドの式: dp_world_size = {guide_dp:g}、実効バッチサイズ = {guide_batch:g}"
      f"  — {hsdp.derived['global_batch'] / guide_batch:g} 分の 1 に過小評価 (tp 倍の差)")  # fmt: skip

# %% [markdown]
# **演習 10.5 — 予想してから確かめる。** この 16 GPU のジョブでは、オプティマイザの 1 ステップが
# 何サンプルを見るでしょうか。

# %%
samples_answer = None  # 自分の予想: オプティマイザ 1 ステップあたりのサンプル数

teach.check("10.5", samples_answer, expected=hsdp.derived["global_batch"], unit="samples")

# %% [markdown]
# ## Accelerate の ND 並列ガイドにあるすべての戦略
#
# Hugging Face の Accelerate ND-parallel ガイド (2025) は 9 つの戦略を挙げています。どれも
# `ParallelismConfig` の 4 つのサイズ (`dp_replicate_size`、`dp_shard_size`、`cp_size`、
# `tp_size`。メッシュはこの順に並び、`tp` がいちばん内側) の選び方の 1 つです。
#
# | 戦略 | 1 より大きいサイズ | 何を分割するか |
# |---|---|---|
# | DP | `dp_replicate` | バッチ。どのランクもモデル全体を持つ (レッスン 2) |
# | FSDP | `dp_shard` | バッチと、ランク間でシャーディングしたモデルの状態 (レッスン 3) |
# | TP | `tp` | 各層の行列を、ノードの中で分割 (レッスン 7) |
# | CP | `cp` | 系列。リングアテンションか all-to-all を使う (レッスン 9) |
# | HSDP | `dp_replicate`、`dp_shard` | ノード内で FSDP、ノード間でレプリカ (レッスン 3) |
# | FSDP+TP | `dp_shard`、`tp` | テンソル並列のモデルをシャーディングしたレプリカ |
# | FSDP+CP | `dp_shard`、`cp` | FSDP のシャードグループが `dp_shard × cp` にまたがる |
# | HSDP+TP | `dp_replicate`、`dp_shard`、`tp` | テンソル並列のモデルの HSDP |
# | HSDP+TP+CP | 4 つすべて | 以上のすべてを 1 つのメッシュ上で |
#
# `collsim strategies` は、同じモデル、同じ系列長、4 GPU のノード 2 台で 9 つすべてを実行し、
# 戦略ごとに 1 行ずつ出力します。単一デバイスと一致するか、ランクあたりのピークメモリ、ノード内と
# ノード間のリンクを流れたバイト数、ステップ時間、計算に隠れずに表に出た通信時間を、ガイドの
# 主張と並べて表示します。`collsim verify cp` と `collsim verify nd` は、好きな構成を 1 つ実行して
# 単一デバイスと照合します。(どれもターミナルで使うコマンドで、ここでは実行しません。)

# %% [markdown]
# ## まとめ (Takeaways)
#
# - GPU は **TP をいちばん内側**にした格子 `(pp, dp, tp)` を作ります。TP グループは 1 台の
#   マシンの NVLink を共有し、DP グループがその次に来て、マシン間をまたぐ必要があるのは
#   パイプラインの 1 対 1 通信のメッセージだけです (Narayanan et al. 2021)。
# - Megatron-LM の規則: **`world = tp·pp·dp`** と **`global_batch = micro·dp·accumulation`**。
#   `tp` は隠れ次元とヘッド数を割り切ること、`layers` は `pp` で割り切れること、`tp ≤ ノードあたりの
#   GPU 数` であること。`tp`、`pp`、マイクロバッチを決めれば、`dp` と勾配蓄積のステップ数が
#   決まります。
# - 784 GPU で `tp = 8`、`pp = 4` とすると、`dp = 784/32` が整数になりません。計画ツールは
#   破られた規則をすべて挙げ、構成全体として成り立つ案を提案します。ここでは、`dp` がグローバル
#   バッチも割り切るような world サイズです。
# - Accelerate のデータ並列の並列度は `dp_replicate · dp_shard` で、TP のランクは同じバッチを
#   共有します。ガイドの `/ tp` は TP による分割を二重に数えており、実効バッチサイズを `tp`
#   分の 1 に過小評価します。
# - ガイドの 9 つの戦略 (DP、FSDP、TP、CP、HSDP、FSDP+TP、FSDP+CP、HSDP+TP、HSDP+TP+CP) は、
#   どれもこれらのサイズの選び方です。`collsim strategies` で、それらを並べて測れます。
#
# 次のレッスン 11 では、この格子のランクどうしの足並みがそろわなくなり、ジョブがハングしたときに
# 何が起きるかを見ます。
