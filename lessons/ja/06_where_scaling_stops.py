# %% [markdown]
# # 6. スケールさせても得をしなくなる点
# 計算 6·N·D/P と通信 2·N·b/BW を比べると N は消え、GPU あたりのトークン数・帯域幅・計算速度・勾配のバイト数で決まります。
#
# データ並列学習を、百人で 1 冊の辞書を改訂する仕事にたとえてみます。書く作業は簡単に
# 分担できますが、各自の修正は全員の手元の辞書に反映しなければなりません。修正のたびに
# 会議を開いていたら、会議の時間が執筆の時間を上回ります。ある人数を超えると、人を増やす
# ほど仕事は遅くなります。見積もるべき数は **計算時間 ÷ 通信時間** です。
#
# このレッスンではプランナ (`collsim.plan`) を使います。プランナの計算時間と通信時間は、
# レッスン 4 と 5 の閉形式そのものです。これでその比を求め、比がどの量に依存するかを調べ、
# 比がスケーリングの止まる位置を決める様子を見ます。
#
# これまでと同じく、各 `..._answer = None` を自分の予想に置き換えてからチェックを実行して
# ください。

# %%
from collsim import teach
from collsim.plan import plan
from collsim.units import format_flops, format_rate, format_time
from collsim.viz.scaling import DEFAULT_JOB, scaling_figure, scaling_rows

# %% [markdown]
# ## 計算と通信
#
# 学習にはトークン 1 個あたりおよそ $6N$ FLOP かかります (順伝播で $2N$、逆伝播で $4N$。
# Kaplan et al. 2020)。各 GPU が 1 ステップに $D$ トークンを処理し、実効の計算速度が
# $P$ FLOP/s なら、計算にかかる時間は次のとおりです。
#
# $$T_\text{compute} = \frac{6 N D}{P}$$
#
# 続いて勾配の all-reduce です。リングは GPU あたり $\frac{2(K-1)}{K}N b \approx 2Nb$ バイトを
# 送ります (レッスン 4)。$b$ は勾配 1 要素あたりのバイト数で、帯域幅 $\mathrm{BW}$ の
# リンクを通るとすると、次のようになります。
#
# $$T_\text{comm} \approx \frac{2 N b}{\mathrm{BW}}$$
#
# プランナの例は、7B モデル、64 GPU (8 GPU のノードが 8 台)、グローバルバッチは 2048
# トークンの系列 512 本、勾配は bf16、純粋なデータ並列です。(モデルがメモリに載るかどうかは
# レッスン 1 の問題です。ZeRO を使えば載るようになり、送るバイト数は変わりません。ここで
# 問題にするのは時間だけです。)

# %%
job = dict(params="7B", world_size=64, global_batch=512, seq=2048)
report = plan(**job)
dp = report.communication["dp"]
tokens_per_gpu = report.scaling["tokens_per_dp_rank"]
print(f"D = {report.derived['global_batch']} x {job['seq']} / {report.derived['dp']} "
      f"= GPU 1 台・1 ステップあたり {tokens_per_gpu:,.0f} トークン")  # fmt: skip
print(f"P = GPU あたり {format_flops(report.config.compute_rate)}, "
      f"BW = {format_rate(dp['bandwidth'])} ({dp['link']}), b = {report.derived['element_bytes']} B")  # fmt: skip
print(f"1 ステップの計算:              {format_time(report.compute['time_s'])}")
print(f"1 ステップの勾配の all-reduce: {format_time(dp['time_s'])} "
      f"(リングのステップ {dp['ops']['gradient_all_reduce']['steps_per_call']} 回)")  # fmt: skip
print(f"計算 / 通信:                   {report.compute['time_s'] / dp['time_s']:.4g}")

# %% [markdown]
# ## N は消える
#
# 一方を他方で割ります。
#
# $$\frac{T_\text{compute}}{T_\text{comm}} = \frac{6ND/P}{2Nb/\mathrm{BW}}
# = \frac{3\,D\,\mathrm{BW}}{P\,b}$$
#
# パラメータ数が消えました。モデルが大きくなると計算も通信も増えますが、増え方の割合は
# 同じです。モデルサイズだけを変え、ほかは何も変えずにプランナを回すと、次のようになります。

# %%
print(f"{'N':>6} {'compute':>10} {'all-reduce':>11} {'ratio':>7} {'3·D·BW/(P·b)':>13}")
for size in ("1.3B", "7B", "70B", "175B"):
    r = plan(**{**job, "params": size})
    t_comm = r.communication["dp"]["time_s"]
    print(f"{size:>6} {format_time(r.compute['time_s']):>10} {format_time(t_comm):>11} "
          f"{r.compute['time_s'] / t_comm:>7.4g} {r.scaling['compute_to_communication']:>13.4g}")  # fmt: skip

# %% [markdown]
# 2 つの時間の比 (ratio) が $3D\,\mathrm{BW}/(Pb)$ より少し大きいのは、リングが送るのが
# ちょうど 2 バッファ分ではなく $\frac{2(K-1)}{K}$ バッファ分だからです。比は $N$ によって
# ほとんど動きません。わずかなずれはリングのレイテンシ項 $2(K-1)\alpha$ によるもので、
# all-reduce の中で $N$ とともに増えない唯一の部分です。
#
# **演習 6.1.** `compute_to_comm(params, global_batch, seq, gpus, bandwidth, compute_rate,
# grad_bytes)` を書いてください。`gpus` 台の GPU で純粋なデータ並列を行うときの比
# $3D\,\mathrm{BW}/(Pb)$ を返す関数です。(すべての引数が必要でしょうか。) チェックでは、
# いくつかのジョブについてプランナの `scaling["compute_to_communication"]` と比べます。

# %%
compute_to_comm_answer = None  # 関数を書く: def compute_to_comm(params, global_batch, seq, gpus, bandwidth, compute_rate, grad_bytes): ...


# %%
def planner_ratio(params, global_batch, seq, gpus, bandwidth, compute_rate, grad_bytes):
    r = plan(params=params, global_batch=global_batch, seq=seq, world_size=gpus,
             intra_bandwidth=bandwidth, inter_bandwidth=bandwidth, compute_rate=compute_rate,
             precision={2: "bf16", 4: "fp32"}[grad_bytes])  # fmt: skip
    return r.scaling["compute_to_communication"]


cases = [(7e9, 512, 2048, 64, 25e9, 150e12, 2), (70e9, 512, 2048, 64, 25e9, 150e12, 2),
         (1.3e9, 256, 1024, 32, 50e9, 400e12, 4), (175e9, 1536, 2048, 768, 25e9, 150e12, 2),
         (7e9, 64, 4096, 8, 300e9, 150e12, 2)]  # fmt: skip
teach.check_function("6.1", compute_to_comm_answer, planner_ratio, cases,
                     compare=lambda got, want: abs(got - want) <= 1e-9 * want, unit="x")  # fmt: skip

# %% [markdown]
# ## つまみは 3 つではなく 4 つ
#
# 比を決める量としてよく挙げられるのは 3 つ、GPU あたりのトークン数 $D$、帯域幅
# $\mathrm{BW}$、勾配の精度 $b$ です。しかし式には 4 つめの量、計算速度 $P$ が分母に
# あります。速い GPU は計算を短くしますが all-reduce は短くしないので、同じネットワーク
# では計算の陰に隠せる通信が減ります。ネットワークを強化せずに GPU だけを強化すると、比は
# *下がる* のです。
#
# **演習 6.2.** 上のジョブを、同じネットワークのまま、計算速度が 2 倍の GPU に移します。
# 新しい計算/通信比を元の比で割った値を予想してください。

# %%
faster_gpu_answer = None  # 予想: P を 2 倍にしたときの比 / 元の比

# %%
base = report.scaling["compute_to_communication"]
changes = {
    "as above": {},
    "2x tokens per GPU (global batch 1024)": {"global_batch": 1024},
    "2x bandwidth (50 GB/s between nodes)": {"inter_bandwidth": "50GB/s"},
    "2x compute rate (300 TFLOP/s)": {"compute_rate": "300TFLOP/s"},
    "2x gradient bytes (fp32)": {"precision": "fp32"},
}
print(f"{'change':<40} {'ratio':>6} {'x before':>8} {'step':>9} {'efficiency':>10}")
for name, change in changes.items():
    s = plan(**{**job, **change}).scaling
    ratio = s["compute_to_communication"]
    print(f"{name:<40} {ratio:>6.4g} {ratio / base:>8.3g} {format_time(s['step_time_s']):>9} "
          f"{s['efficiency']:>10.1%}")  # fmt: skip
faster = plan(**job, compute_rate="300TFLOP/s").scaling["compute_to_communication"]
teach.check("6.2", faster_gpu_answer, expected=faster / base, unit="x")

# %% [markdown]
# 表の行は、上から順に「元のまま」「GPU あたりのトークン数を 2 倍 (グローバルバッチ
# 1024)」「帯域幅を 2 倍 (ノード間 50 GB/s)」「計算速度を 2 倍 (300 TFLOP/s)」「勾配の
# バイト数を 2 倍 (fp32)」です。速い GPU でもステップ自体は早く終わります (step の列を
# 比べてください)。しかしステップのうちネットワークを待つ割合が増えます。つまり効率
# (efficiency: 有効な計算 $6ND/P$ がステップに占める割合) が下がります。ほかの 3 つの
# つまみを悪い方向に回しても同じことが起きます。GPU あたりのトークン数を減らす、
# ネットワークを遅くする、勾配のバイト数を増やす、のいずれでもです。
#
# ## 強スケーリング: どこで止まるか
#
# グローバルバッチを固定したまま GPU を増やします。各 GPU が受け持つトークン数
# $D = \frac{\text{global batch}\cdot s}{K}$ は減りますが、all-reduce はほぼ $2Nb$ のまま
# なので、比は $1/K$ に比例して下がります。比が 1 より大きいうちは、all-reduce を計算の陰に
# 隠せます (レッスン 2 のバケット)。1 を下回ると、GPU を 1 台足すたびに増えるのはほとんど
# 待ち時間です。
#
# **演習 6.3.** 上のジョブ (2048 トークンの系列 512 本のグローバルバッチ、150 TFLOP/s、
# ノード間 25 GB/s、bf16 の勾配) で、$3D\,\mathrm{BW}/(Pb)$ がちょうど 1 になるのは
# GPU が何台のときでしょうか。(整数でなくてもかまいません。)

# %%
break_even_gpus_answer = None  # 予想: 比が 1 になる GPU 台数

# %%
print(f"{'GPUs':>5} {'D (tokens)':>10} {'ratio':>7} {'ratio x GPUs':>12}")
for gpus in (16, 64, 256, 1024):
    s = plan(**{**job, "world_size": gpus}).scaling
    ratio = s["compute_to_communication"]
    print(f"{gpus:>5} {s['tokens_per_dp_rank']:>10,.0f} {ratio:>7.4g} {ratio * gpus:>12.6g}")
# 1 ノードを超えると ratio x GPUs はどの K でも同じ: 比が 1 になるのは K がその積のとき
break_even = ratio * gpus
teach.check("6.3", break_even_gpus_answer, expected=break_even, rel=1e-3, unit="GPUs")

# %% [markdown]
# 次の図は、collsim の既定のスケーリングジョブ (上と同じジョブで、最初に表示します) に
# ついて GPU 台数を変えていったものです。左はステップの各部分の時間、右は各部分が
# ステップに占める割合と効率です。点線は、データ並列のグループが 1 ノードに収まらなく
# なり、帯域幅がノード内の値からノード間の値に落ちる位置です。

# %%
print("ジョブ:", DEFAULT_JOB)
for row in scaling_rows(DEFAULT_JOB, gpus=[8, 16, 256, 512]):
    print(f"{row['gpus']:>4} GPU ({row['link']}): 計算 {format_time(row['compute_s']):>9}、"
          f"通信 {format_time(row['comm_bandwidth_s'] + row['comm_latency_s']):>9}、"
          f"効率は何も重ね合わせなければ {row['efficiency']:.1%}、"
          f"all-reduce を計算の陰に隠せば {row['efficiency_overlapped']:.1%}")  # fmt: skip
teach.show(scaling_figure(DEFAULT_JOB), "06_strong_scaling")

# %% [markdown]
# 1 ノードの中では all-reduce はほぼただです。ノードの境界で帯域幅が落ちるので、そこで
# 跳ね上がります。その先では all-reduce の時間は横ばいのまま計算時間だけが半分ずつに
# なっていき、演習 6.3 の損益分岐点の近くで両者が交差します。それを超えると、完全に
# 重ね合わせても all-reduce は隠しきれません (効率の破線が下がります)。レイテンシ項は
# リングの $2(K-1)$ ステップとともに増えますが、ここでは小さいままです。
#
# 弱スケーリングでは代わりに $D$ を固定します (下では GPU あたり `batch_per_gpu` 本の
# 系列)。GPU を増やしても比は一定で、ノードの境界を越えたあとの効率も変わりません。
# 大規模なジョブが GPU 台数に合わせてグローバルバッチを大きくするのはこのためです。
# ただし、オプティマイザが許す範囲に限られます (学習率は実効バッチサイズに合わせて
# スケールします: Goyal et al. 2017)。

# %%
teach.show(scaling_figure(DEFAULT_JOB, weak=True, batch_per_gpu=4), "06_weak_scaling")

# %% [markdown]
# ## まとめ
#
# - 1 ステップあたり、計算は $6ND/P$、リング all-reduce は約 $2Nb/\mathrm{BW}$ です。
#   その比 $3D\,\mathrm{BW}/(Pb)$ はモデルサイズ $N$ に依存 **しません**。
# - 比を決めるのは 4 つの量です。GPU あたりのトークン数 $D$、帯域幅 $\mathrm{BW}$、勾配の
#   バイト数 $b$ (よく挙げられる 3 つ) と、計算速度 $P$ です。同じネットワークで GPU を
#   速くすると比は下がります。
# - 比が 1 より大きければ通信を計算の陰に隠せます。1 より小さいと、足した GPU はほとんど
#   待っているだけです。強スケーリング (グローバルバッチ固定) では $D$ が、したがって比も
#   $1/K$ に比例して下がります。ノードの外に出ると $\mathrm{BW}$ が一気に落ちます。
# - 対策は式から導けます。GPU あたりのトークン数を増やす (バッチを大きくするか勾配蓄積)、
#   リンクを速くする (重い通信はノード内に収める)、勾配のバイト数を減らす (bf16)、
#   そして重ね合わせる (バケット) ことです。
# - 次のレッスン 7 ではモデルそのものを分割します (テンソル並列)。その通信は、それほど
#   簡単には隠せません。
