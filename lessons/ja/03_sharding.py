# %% [markdown]
# # 3. モデル状態のシャーディング: ZeRO、FSDP、HSDP
# パラメータ 1 個あたり 16 バイトをデータ並列のランクに分割して、実際に測ります。ZeRO-1/2/3、FSDP の all-gather とプリフェッチ、ノード間の HSDP。
#
# レッスン 2 のデータ並列では、すべての GPU がモデルの完全なコピーを持ちます。パラメータ、
# 勾配、オプティマイザ状態で、パラメータ 1 個あたり 16 バイトです (レッスン 1)。コピーは
# どれも同一なので、このメモリの大半は冗長です。**ZeRO** (Rajbhandari et al. 2020, "ZeRO:
# Memory Optimizations Toward Training Trillion Parameter Models") は、モデル状態を `N` 個の
# データ並列のランクに *シャーディング* することでこの冗長さをなくします。各ランクはその
# `1/N` だけを持ち、必要なものは集団通信でやり取りします。PyTorch の
# FullyShardedDataParallel (FSDP。`torch.distributed.fsdp` のドキュメントと Zhao et al.
# 2023, "PyTorch FSDP") は、独自のスケジュールを持つ ZeRO のステージ 3 です。HSDP はノード内で
# シャーディングし、ノード間では複製します。
#
# 以下はすべて仮想クラスタ上で動きます。小さな Transformer を Adam で学習させ、各ランクの
# シャードや all-gather で集めたパラメータはすべて本物の配列です。ランクが持つ配列はどれも、
# 学習時の精度でそのランクのメモリに計上されます。そして、どの実行も単一デバイスの結果と
# 照合されます。
#
# どのレッスンでも同じく、`..._answer = None` をそれぞれ自分の予想に書き換え、直後のチェックを
# 実行してください (`None` のままだと、編集すべきファイル名と行番号が表示されます)。

# %%
from matplotlib.figure import Figure

import collsim
from collsim import teach, topology
from collsim.collectives.formulas import closed_form
from collsim.network.memory import busiest, memory_peaks, memory_timeline
from collsim.nn import Adam
from collsim.parallel.config import ParallelConfig
from collsim.parallel.mesh import train
from collsim.parallel.pipeline.runner import toy_batch, toy_model
from collsim.plan.memory import model_state_bytes
from collsim.units import format_size, format_time, parse_size
from collsim.viz.memory_timeline import memory_timeline_figure
from collsim.viz.utilization import time_unit

# %% [markdown]
# ## パラメータ 1 個あたり 16 バイトと、シャーディング後に残る分
#
# 混合精度の Adam は、モデルの $\Psi$ 個のパラメータそれぞれについて次のものを保持します
# (記法は ZeRO 論文の 3.1 節と Figure 1 に合わせています)。
#
# | 内容 | 精度 | パラメータ 1 個あたりのバイト数 | ZeRO がシャーディングを始めるステージ |
# |---|---|---|---|
# | 順伝播と逆伝播で使うパラメータ | bf16 | 2 | 3 |
# | 勾配 | bf16 | 2 | 2 |
# | fp32 のマスター重み、Adam の $m$ と $v$ (オプティマイザ状態、$K = 12$) | fp32 | 12 | 1 |
#
# したがって、`N` 個のデータ並列のランクのそれぞれが持つ量は次のとおりです。
#
# | ステージ | 各ランクが持つもの | ランクあたりのモデル状態 |
# |---|---|---|
# | 0 (DDP) | すべて | $16\Psi$ |
# | 1 | オプティマイザ状態の $1/N$ | $4\Psi + 12\Psi/N$ |
# | 2 | ... に加えて勾配の $1/N$ | $2\Psi + 14\Psi/N$ |
# | 3 (FSDP) | ... に加えてパラメータの $1/N$ | $16\Psi/N$ |
#
# 7B メモリの例: $7 \times 10^9$ 個のパラメータには $112 \times 10^9$ バイトのモデル状態が
# 必要で、80 GiB の GPU には収まりません。`collsim.plan.memory.model_state_bytes` はプランナーの
# 式 (レッスン 1 のプランナーが使ったものと同じ) です。ここではまず 8 GPU の場合を計算し、
# 次に ZeRO 論文の Figure 1 の例、$N = 64$ GPU 上の $\Psi = 7.5 \times 10^9$ を計算します。
# 論文はこの例の値を 120、31.4、16.6、1.9 ($10^9$ バイト単位) としています。

# %%
PSI_7B, GPUS = 7e9, 8
GPU_MEMORY = parse_size("80GiB")
whole = sum(model_state_bytes(PSI_7B, zero=0, shard_degree=1))
print(f"パラメータ 7e9 個 x 16 B = {whole:,.0f} B = {format_size(whole)}")
print(f"7B モデルを {GPUS} GPU でデータ並列 (GPU 1 枚の容量は {format_size(GPU_MEMORY)}):")
for stage in range(4):
    params, grads, optimizer = model_state_bytes(PSI_7B, zero=stage, shard_degree=GPUS)
    state = params + grads + optimizer
    print(f"  ZeRO-{stage}: {format_size(params):>10} + {format_size(grads):>10} + "
          f"{format_size(optimizer):>10} = GPU あたり {format_size(state):>10} "
          f"(パラメータ 1 個あたり {state / PSI_7B:5.2f} B)、収まる: {state <= GPU_MEMORY}")  # fmt: skip

PSI_FIGURE_1, GPUS_FIGURE_1 = 7.5e9, 64
print(f"\nZeRO 論文の Figure 1: パラメータ Ψ = 7.5e9 個、{GPUS_FIGURE_1} GPU")
for stage in range(4):
    state = sum(model_state_bytes(PSI_FIGURE_1, zero=stage, shard_degree=GPUS_FIGURE_1))
    print(f"  ZeRO-{stage}: {state:>17,.0f} B = {state / 1e9:5.3g} x 10^9 B ({format_size(state)})")

# %% [markdown]
# ## 各ステージが何をシャーディングするのかを測る
#
# ここからは実際に動かします。6 ブロックのおもちゃの Transformer (`toy_model`)、8 系列の
# バッチを、`N = 4` ランクのデータ並列で Adam の 1 ステップだけ学習させます。ステージ 0 から 3
# までそれぞれ `ParallelConfig(dp=4, zero=stage)` を使います。各ランクは、持っている配列を
# すべてそのカテゴリとともに登録します。ピークは実行結果から読み取り (`memory_peaks`)、
# `busiest` は合計がいちばん大きいランクを選びます。(単一デバイスとの照合を厳密にするため、
# 数値計算は float64 で行います。メモリは上の表の学習時の精度、bf16 と fp32 で計上します。)

# %%
DP, LAYERS, HIDDEN = 4, 6, 32
model = toy_model(layers=LAYERS, hidden=HIDDEN, heads=2)
batch = toy_batch(batch=8, hidden=HIDDEN)
PSI = sum(p.size for p in model.params.values())
UNIT_PSI = PSI // LAYERS  # 1 ブロックのパラメータ数。FSDP がまとめて扱う単位 (ユニット)
print(f"Ψ = パラメータ {PSI:,} 個、ブロックあたり {UNIT_PSI:,} 個")

runs = {}
for stage in range(4):
    config = ParallelConfig(dp=DP, zero=stage)
    runs[stage] = train(model, [batch], config, optimizer=Adam(lr=1e-2))


def model_state(peak):
    """パラメータ + 勾配 + オプティマイザ状態のバイト数 (そのランク自身の分。集めた分は含まない)。"""
    held = peak.to_dict()
    return held["params"] + held["grads"] + held["optimizer"]


FORMULAS = {0: "16Ψ", 1: "4Ψ + 12Ψ/N", 2: "2Ψ + 14Ψ/N", 3: "16Ψ/N"}
print(
    f"\n{DP} ランクのうち最も多く持つランクの、カテゴリ別ピークのバイト数 (model state = params + grads + optimizer)"
)
print(f"{'stage':<7}{'params':>11}{'grads':>11}{'optimizer':>11}{'model state':>13}  "
      f"{'formula':<12}{'formula value':>13}{'gathered':>11}  match")  # fmt: skip
for stage, run in runs.items():
    peak = busiest(memory_peaks(run.trace, run.mesh.size))
    held = peak.to_dict()
    formula = sum(model_state_bytes(PSI, zero=stage, shard_degree=DP))
    print(f"ZeRO-{stage}{format_size(held['params']):>12}{format_size(held['grads']):>11}"
          f"{format_size(held['optimizer']):>11}{format_size(model_state(peak)):>13}  "
          f"{FORMULAS[stage]:<12}{format_size(formula):>13}"
          f"{format_size(held['gathered_params']):>11}  {run.match}")  # fmt: skip
    assert model_state(peak) == formula  # 測った値 = ZeRO 論文の式 (1 バイトまで一致)
print(f"\nbf16 のブロック 1 つ: 2 × {UNIT_PSI:,} = {format_size(2 * UNIT_PSI)}")

# %% [markdown]
# 測ったモデル状態は、どのステージでも式とバイト単位で一致し、Adam の 1 ステップ後の
# パラメータもどの実行も単一デバイスと一致しています (`match`)。ステージ 3 にはもう 1 つ
# 持つものがあります。いま計算しているブロックの **集めたパラメータ** です。これはブロックの
# 順伝播の直前に all-gather (オールギャザー) で集め (逆伝播の直前にもう一度集め)、使い終わると
# すぐに解放します。大きさはブロック 1 つ分、そのパラメータ 1 個あたり 2 バイトです。これが
# パラメータをシャーディングする代償で、ランクは計算のたびにユニット 1 つ分を丸ごと手元に
# 持つ必要があります。
#
# **演習 3.1 — 式を書く。** 関数 `model_state_per_rank(stage, n, psi)` を書いてください。
# パラメータ数 `psi` のモデルを混合精度の Adam で学習するとき、ZeRO のステージ `stage` で
# `n` 個のデータ並列のランクのそれぞれが持つモデル状態 (パラメータ + 勾配 + オプティマイザ状態。
# 集めたユニットは含まない) のバイト数を返します。チェックでは、おもちゃのモデルのケース
# (ほかの `n` も含む) については実際にトレーナーを *動かし*、8 GPU と 64 GPU 上の 7B モデルに
# ついてはプランナーを使います。

# %%
model_state_per_rank_answer = None  # 関数を書く: def f(stage, n, psi): return バイト数


def measured_model_state(stage, n, psi):
    if psi != PSI:  # 7B モデル: プランナーの式を使う
        return sum(model_state_bytes(psi, zero=stage, shard_degree=n))
    run = train(model, [batch], ParallelConfig(dp=n, zero=stage), optimizer=Adam(lr=1e-2))
    return model_state(busiest(memory_peaks(run.trace, run.mesh.size)))


def same_bytes(got, want):
    return abs(got - want) <= 1e-9 * abs(want)


cases = [(0, 4, PSI), (1, 4, PSI), (2, 4, PSI), (3, 4, PSI), (1, 2, PSI), (2, 8, PSI),
         (3, 8, PSI), (3, 8, PSI_7B), (1, 64, PSI_7B), (2, 64, PSI_7B)]  # fmt: skip
teach.check_function("3.1", model_state_per_rank_answer, measured_model_state, cases,
                     compare=same_bytes, unit="B")  # fmt: skip

# %% [markdown]
# ## バイト数: ZeRO-3 はデータ並列の 1.5 倍を送る
#
# シャーディングの代償は通信で払います。リング **all-reduce** (オールリデュース) は
# reduce-scatter (リデューススキャッター) のあとに all-gather を続けたもので (中身はレッスン 4
# で開けて見ます)、どちらもランクあたり $(N-1)/N \cdot \Psi b$ バイトを送ります。つまり素の
# データ並列は 1 ステップあたり $2(N-1)/N \cdot \Psi b$ を送ります。ステージ 1 と 2 が送る量も
# ちょうど同じです。勾配を reduce-scatter し (各ランクが更新に必要なのは自分のシャードだけ)、
# 更新したパラメータを all-gather するからです。ステージ 3 は各ユニットのパラメータを **2 回**
# all-gather し (順伝播の前と、間で解放しているので逆伝播の前にもう一度)、勾配を 1 回
# reduce-scatter します。合計 $3(N-1)/N \cdot \Psi b$ で、1.5 倍です。
#
# `run.bytes_by_group[("dp", collective)]` は、各ランクがデータ並列の次元に沿って送った
# バイト数で、トレースから読み取った値です。このバイト数は実際に動いた配列を数えたもので、
# ここでは float64 (1 要素あたり $b = 8$ バイト) です。実際の bf16 の実行ではその 4 分の 1 を、
# 同じ比率で送ります。`closed_form` は、`N` ランクのリングについての α–β モデルのバイト数です。

# %%
b = batch[0].dtype.itemsize  # 数値計算で動く 1 要素あたりのバイト数 (float64)
ring = {name: closed_form(name, "ring", DP, PSI * b, alpha=0.0, beta=1.0).bytes_per_rank
        for name in ("all_reduce", "reduce_scatter", "all_gather")}  # fmt: skip
expected = {0: ring["all_reduce"], 1: ring["reduce_scatter"] + ring["all_gather"],
            2: ring["reduce_scatter"] + ring["all_gather"],
            3: ring["reduce_scatter"] + 2 * ring["all_gather"]}  # fmt: skip
print(
    f"ランク 0 が 1 ステップに送るバイト数 (1 要素あたり b = {b} B、Ψ·b = {format_size(PSI * b)})"
)
for stage, run in runs.items():
    sent = {name: per_rank[0] for (dim, name), per_rank in run.bytes_by_group.items()}
    total = sum(sent.values())
    parts = ", ".join(f"{name} {format_size(n)}" for name, n in sorted(sent.items()))
    print(f"ZeRO-{stage}: {format_size(total):>10} (閉形式 {format_size(expected[stage]):>10})"
          f" = DDP の {total / runs[0].bytes_by_group[('dp', 'all_reduce')][0]:.2f} 倍:  {parts}")  # fmt: skip
    assert total == expected[stage]

# %% [markdown]
# **演習 3.2 — 予想してから確かめる。** この 6 ブロックのモデルの ZeRO-3 の 1 ステップで、
# ランク 0 は all-gather を何回実行するでしょうか (FSDP のデフォルトどおり、各ブロックが
# 1 つのユニットで、順伝播のあとに解放されるとします)。チェックでは、トレースに現れる
# 別々の all-gather の呼び出しを数えます。

# %%
all_gathers_answer = None  # 予想を書く: 1 ステップあたりの all-gather の呼び出し回数

# %%
calls = {(t.tag.group, t.tag.call) for t in runs[3].trace.transfers
         if t.src == 0 and t.tag.collective == "all_gather"}  # fmt: skip
teach.check("3.2", all_gathers_answer, expected=len(calls), unit="all-gathers")

# %% [markdown]
# (PyTorch FSDP の `reshard_after_forward=False`、つまり `SHARD_GRAD_OP` 戦略では、各ユニットを
# 順伝播から逆伝播まで集めたままにします。all-gather は半分になり、バイト数は ZeRO-2 と同じに
# なりますが、集めたユニットはメモリに残ります。`ParallelConfig(reshard_after_forward=False)`
# で実行できます。)
#
# ## FSDP を時間軸で見る: all-gather とプリフェッチ
#
# ランクがいつどのメモリを持っているかは、タイムラインで見るのがいちばんわかりやすいです。
# 通信にも計算にも時間がかかるクラスタ (10 GB/s のスイッチにつながった 4 ランク、計算は
# 各 1 GFLOP/s。こうすると、実際の GPU で実際のモデルを動かすときと同じく、このおもちゃの
# モデルでも all-gather と計算にかかる時間が同程度になります) の上では、FSDP のステップは
# *ユニットを集める、それで計算する、解放する* の繰り返しです。プリフェッチがないと、各
# all-gather はそのユニットが必要になった時点で初めて始まり、ランクはその完了を待ちます。
# プリフェッチあり (PyTorch の `forward_prefetch=True` と
# `backward_prefetch=BackwardPrefetch.BACKWARD_PRE`) では、いまのユニットを計算している間に
# 次のユニットの all-gather を通信ストリームで走らせます。待ち時間は減りますが、集めた
# ユニットが同時に **2 つ** メモリに載ります。(`t_f=0`: 順伝播・逆伝播のコストは、FLOPs を
# クラスタの演算速度で割った分だけになります。)
#
# 図はランク 0 が持つものを、シミュレーション時間に沿って積み上げて示しています。
# いちばん下が自分のシャード (ステップ中ずっと残ります)、その上に逆伝播のために保存した活性値、集めたユニット、reduce-scatter の
# バッファが載ります。上端の帯は集団通信を表します。

# %%
switch4 = topology.switch(DP, "10GB/s", "5us")
fsdp = {}
for prefetch in ("none", "both"):
    cluster = collsim.Cluster(switch4, compute_rate="1GFLOP/s")
    config = ParallelConfig(dp=DP, zero=3, prefetch=prefetch, t_f=0)
    fsdp[prefetch] = train(model, [batch], config, cluster=cluster, optimizer=Adam(lr=1e-2))
unit_bytes = 2 * UNIT_PSI
for prefetch, run in fsdp.items():
    gathered = busiest(memory_peaks(run.trace, run.mesh.size)).by_category["gathered_params"]
    print(f"prefetch={prefetch:<5} ステップ {format_time(run.time):>9}; ランク 0 の通信 "
          f"{format_time(run.overlap[0].comm_s):>9}、うち隠れない分 {format_time(run.overlap[0].exposed_s):>9};"
          f" 集めたパラメータのピーク {format_size(gathered)} = ブロック {gathered / unit_bytes:g} 個分; "
          f"match {run.match}")  # fmt: skip
longest = max(run.time for run in fsdp.values())  # 2 つの図で時間軸をそろえる
for prefetch, how in (("none", "without"), ("both", "with")):
    title = f"FSDP on 4 ranks {how} prefetch: rank 0's memory over the step"
    fig = memory_timeline_figure(fsdp[prefetch].trace, ranks=[0], title=title,
                                 window=(0, longest))  # fmt: skip
    # この実行のステップが終わる時刻に印を付ける (図の時間軸は time_unit の単位)
    scale, ax = time_unit(longest)[0], fig.axes[0]
    ax.axvline(fsdp[prefetch].time / scale, color="black", ls="--", lw=1.2)
    ax.annotate("step ends", (fsdp[prefetch].time / scale, 0.3), xycoords=("data", "axes fraction"),
                xytext=(-6, 0), textcoords="offset points", ha="right", fontsize=10,
                bbox={"fc": "white", "ec": "#999999"})  # fmt: skip
    teach.show(fig, f"03_fsdp_memory_timeline_prefetch_{prefetch}")

# %% [markdown]
# メモリの大半を占めるのは、ステップ中ずっと残るシャード (パラメータ、勾配、オプティマイザ
# 状態。下の 3 段) です。変化する部分はそれよりずっと薄く見えます。次の図では、両方の実行に
# ついてランク 0 の集めたパラメータだけを、ブロック 1 つを単位として、それを運んでくる
# all-gather と一緒に示します。

# %%
fig = Figure(figsize=(10, 4.2), layout="constrained")
axes = fig.subplots(2, 1, sharex=True, sharey=True)
for ax, (prefetch, run) in zip(axes, fsdp.items()):
    points = memory_timeline(run.trace, 0)
    times = [0.0] + [p.time * 1e3 for p in points]
    units = [0] + [p.by_category["gathered_params"] / unit_bytes for p in points]
    ax.step(times, units, where="post", color="#2A6F97", lw=2)
    ax.fill_between(times, units, step="post", color="#64B5CD", alpha=0.5)
    for t in run.trace.transfers:
        if t.src == 0 and t.tag.collective == "all_gather":
            ax.axvspan(t.start * 1e3, t.end * 1e3, ymin=0.92, ymax=1.0, color="#2A6F97", lw=0)
    ax.set_ylim(0, 2.6)
    ax.set_yticks([0, 1, 2])
    ax.set_ylabel("blocks gathered")
    ax.set_title(f"prefetch={prefetch!r}: step {format_time(run.time)}, exposed communication "
                 f"{format_time(run.overlap[0].exposed_s)} (bars on top: rank 0's all-gathers)",
                 fontsize=11, loc="left")  # fmt: skip
axes[-1].set_xlabel("simulated time (ms)")
fig.suptitle("FSDP, rank 0: gathered parameters without and with prefetch", fontweight="bold")
teach.show(fig, "03_fsdp_gathered_units")

# %% [markdown]
# プリフェッチはメモリと時間の交換です。同時に集めるユニットが 1 つ増える代わりに、隠れずに
# 残る通信が減ります。FSDP の `limit_all_gathers` (ここでは `max_inflight_gathers`、デフォルト
# 2) がどこまで先に集めてよいかを制限するので、増えるメモリはユニット 1 つ分にとどまります。
#
# ## HSDP: ノード内でシャーディングし、ノード間では複製する
#
# ノード内の GPU は NVLink (数百 GB/s) でつながっていますが、ノード間は NIC 経由で、何倍も
# 遅くなります。複数ノードの全 GPU にわたって完全にシャーディングすると、遅いリンクがすべての
# all-gather と reduce-scatter のリングに入り込み、リングはいちばん遅いリンクの速さでしか
# 進みません。**HSDP** (FSDP の `HYBRID_SHARD`。Accelerate の ND-parallel ガイドでは 2 つの
# 次元を `dp_shard_size` と `dp_replicate_size` と呼びます) は、モデルを 1 ノードの GPU に
# シャーディングし、シャーディングしたモデルのレプリカをノードごとに 1 つ持ちます。
# all-gather と reduce-scatter はノード内で完結し、ノード間をまたぐのは、レプリカ間で各
# シャードの勾配を **all-reduce** する通信だけで、それも 1 ステップに 1 回です。
#
# 4 GPU のノード 2 台からなる階層型のトポロジ (`topology.hierarchical(2, 4)`: ノード内
# 900 GB/s、NIC あたり 50 GB/s) で 8 ランクを使い、8 ランク全体での FSDP と、`dp_replicate=2` (ノードごとに
# レプリカ 1 つ)・`dp_shard=4` の HSDP を比べます。ノード間のバイト数は、両端が別々のノードに
# ある転送の合計です (ランク `r` はノード `r // 4` にあります)。
#
# **演習 3.3 — 予想してから確かめる。** HSDP の実行 (`dp_shard = 4` 個のシャードを持つ
# レプリカが `dp_replicate = 2` 個、Ψ は上に表示したおもちゃのモデルの値、1 要素あたり
# `b = 8` バイト) で、1 ステップの間に 2 つのノードの間を流れるバイト数は、8 ランク合わせて
# いくつでしょうか。各ランクは自分の勾配のシャード (Ψ/4 要素) を、もう一方のノードにある
# 自分のレプリカと、2 ランクのリング all-reduce で all-reduce します。all-gather と
# reduce-scatter はノード内にとどまります。

# %%
hsdp_inter_node_answer = None  # 予想を書く: ノード間のバイト数 (8 ランクの合計)

# %%
NODES, PER_NODE = 2, 4
two_nodes = topology.hierarchical(NODES, PER_NODE)
layouts = {"FSDP, shard over 8": ParallelConfig(dp=8, zero=3, t_f=0),
           "HSDP, 2 replicas x 4 shards": ParallelConfig(dp=8, zero=3, dp_replicate=2, t_f=0)}  # fmt: skip
hsdp_runs = {name: train(model, [batch], config, cluster=collsim.Cluster(two_nodes),
                         optimizer=Adam(lr=1e-2)) for name, config in layouts.items()}  # fmt: skip


def inter_node_bytes(run):
    return sum(t.nbytes for t in run.trace.transfers if t.src // PER_NODE != t.dst // PER_NODE)


print(f"{'':<29}{'between nodes':>14}{'all bytes':>12}{'model state/rank':>18}{'step':>10}  match")
for name, run in hsdp_runs.items():
    state = model_state(busiest(memory_peaks(run.trace, run.mesh.size)))
    total = sum(t.nbytes for t in run.trace.transfers)
    print(f"{name:<29}{format_size(inter_node_bytes(run)):>14}{format_size(total):>12}"
          f"{format_size(state):>18}{format_time(run.time):>10}  {run.match}")  # fmt: skip
hsdp = hsdp_runs["HSDP, 2 replicas x 4 shards"]
print("\nHSDP のランクあたりのバイト数 (メッシュの次元別):")
for (dim, name), per_rank in sorted(hsdp.bytes_by_group.items()):
    print(f"  {dim:<13}{name:<15}{format_size(per_rank[0]):>10}")
teach.check("3.3", hsdp_inter_node_answer, expected=inter_node_bytes(hsdp), unit="B", ranks=8)

# %% [markdown]
# HSDP がノード間で送るバイト数は FSDP のごく一部で、ここではステップも速くなっていますが、
# 各ランクが持つモデル状態は 2 倍です (モデルの 1/8 ではなく 1/4 のシャード)。HSDP が有利なのは、
# モデル状態の 1/(ノードあたりの GPU 数) がまだメモリに収まり、ノード間のリンクがボトルネックに
# なっている場合です。メモリが制約になっているなら、より多くの GPU にシャーディングします。

# %% [markdown]
# ## まとめ
#
# - 混合精度の Adam は **パラメータ 1 個あたり 16 バイト** を保持します。2 (bf16 のパラメータ)
#   + 2 (bf16 の勾配) + 12 (fp32 のマスター重み、Adam の m と v) です。7B メモリの例では
#   $112 \times 10^9$ バイトが必要で、80 GiB の GPU 1 枚を超えます。
# - ZeRO はこれを `N` 個のデータ並列のランクにシャーディングします: **16Ψ → 4Ψ + 12Ψ/N
#   (ステージ 1) → 2Ψ + 14Ψ/N (ステージ 2) → 16Ψ/N (ステージ 3)**。ステージ 3 ではこれに、
#   計算中のユニットが加わります (Rajbhandari et al. 2020)。collsim はまさにこのバイト数を
#   測ります。
# - ステージ 1 と 2 が送る量はデータ並列と同じで、ランクあたり $2(N-1)/N \cdot \Psi b$ です。
#   ステージ 3 (FSDP) は各ユニットを 2 回 all-gather し、1 回 reduce-scatter するので
#   $3(N-1)/N \cdot \Psi b$、つまり **1.5 倍** になります。
# - FSDP のプリフェッチは、いまのユニットを計算している間に次のユニットを集めます。隠れない
#   通信が減る代わりに、メモリ上のユニットが 1 つ増えます。
# - **HSDP** はノード内でシャーディングし、ノード間では複製します。遅いリンクを通るのは
#   シャードの勾配の all-reduce だけです。その代わり、シャーディングはクラスタ全体ではなく
#   `dp_shard` 個の GPU の間だけなので、シャードはそのぶん大きくなります。
# - 次のレッスン 4 では、これらすべての土台であるリング all-reduce、reduce-scatter、
#   all-gather を 1 ステップずつ開けて見ます。
