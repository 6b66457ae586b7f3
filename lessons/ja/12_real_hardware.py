# %% [markdown]
# # 12. 実機: ノード、レール、プロトコル、ストラグラー
# テンソル並列の all-reduce 1 回を NVSwitch と InfiniBand で比べ、複数ノードの busbw に NIC が課す上限、NCCL の LL/LL128/Simple の切り替わり、リングとツリーでの遅いリンク 1 本の影響、そしてウォッチドッグのレポートを見ます。
#
# ここまでのトポロジはどれも汎用的なものでした。リング、スイッチ 1 台、2 段のスイッチで、
# 帯域幅も自分で打ち込んだ値です。実際の学習が動くマシンは数種類しかなく、レッスン 5〜7
# で一般論として述べたことの大半は、そのマシンの数値で決まります。collsim にはそのうち
# 3 種類がプリセット (`collsim.hardware`) として入っていて、どの数値にもコード中に出典を
# 付けてあります。
#
# - **`dgx-a100`**: NVSwitch で結ばれた A100 GPU 8 基 (GPU あたり NVLink3 を 12 本、
#   1 本あたり片方向 25 GB/s) と、GPU 1 基に 1 枚ずつの 200 Gbit/s HDR InfiniBand NIC
#   8 枚です。
# - **`dgx-h100`**: NVSwitch で結ばれた H100 GPU 8 基 (GPU あたり NVLink4 を 18 本、
#   片方向 450 GB/s)、400 Gbit/s の NDR NIC 8 枚、そしてスイッチ内リダクション
#   (NVLink SHARP) ができるスイッチです。
# - **`pcie-8gpu`**: A100 の PCIe カード 8 枚です。PCIe スイッチ 1 台にカードが 2 枚、
#   CPU ソケット 1 つに PCIe スイッチが 2 台つながります。
#
# `hardware.topology(name, nodes)` はこのマシンを `nodes` 台組み立てます。各ノードの
# NIC `j` はリーフスイッチ `rail{j}` につながり (**レール整列型** (rail-aligned) の
# ファブリックです。どのノードの GPU 3 も、同じレール 3 を共有します)、リーフスイッチ
# どうしはスパインで結ばれます。各リンクには**実効**レート、つまりラインレートに、NCCL
# 自身のトポロジモデルが想定する割合 (NIC については実測の割合) を掛けた値が設定されて
# いて、ネットワークはこの値を使います。
#
# これまでと同じく、`..._answer = None` をそれぞれ自分の予想に置き換えてから、チェックを
# 実行してください。

# %%
import math

import numpy as np
from matplotlib.figure import Figure

import collsim
from collsim import hardware, teach
from collsim.collectives.degraded import degraded_ring_all_reduce_time
from collsim.collectives.formulas import bus_factor, closed_form
from collsim.errors import WatchdogTimeout
from collsim.hardware.protocols import PROTOCOLS, message_alpha_beta
from collsim.runtime.faults import Faults
from collsim.units import format_rate, format_size, format_time
from collsim.viz.sweep import size_axis

for name, machine in hardware.PRESETS.items():
    intra, inter = machine.intra, machine.inter
    fabric = "NVSwitch" if intra.kind == "nvswitch" else "PCIe"
    print(f"{name}: GPU {machine.gpus_per_node} 基 ({fabric} 接続)、"
          f"GPU あたり {format_rate(intra.effective_rate)} (ラインレート "
          f"{format_rate(intra.per_gpu_rate)})、NIC {inter.nics} 枚 x "
          f"{format_rate(inter.effective_rate)} (ラインレート {format_rate(inter.nic_rate)})")  # fmt: skip


# ネットワークが 1 通のメッセージに課す (α, β): α は経路上のリンクのレイテンシに、経路中で
# いちばん遅いリンク種別に対するプロトコルのレイテンシを足したもの、β は最も細いリンクの
# レートにプロトコルのペイロード割合を掛けたもの
hop = message_alpha_beta


def busbw(result):
    """集団通信の結果から求める nccl-tests のバス帯域幅: all-reduce なら S/t · 2(n−1)/n。"""
    return result.size_bytes / result.time * bus_factor(result.collective, result.group.size)


# %% [markdown]
# ## 1. テンソル並列をノード内に留める理由
#
# レッスン 7 で見たとおり、テンソル並列の層は部分出力を all-reduce (オールリデュース) で
# 足し合わせます。その回数は Transformer の 1 層・1 マイクロバッチあたり 4 回 (順伝播で
# 2 回、逆伝播で 2 回) で、どれもクリティカルパス上にあります。1 回で運ぶのは活性値
# 1 つ分、bf16 で `B·s·h` 要素です。Llama 2 70B の形 (隠れ次元 8192、80 層。Touvron
# et al. 2023) を使い、1 マイクロバッチを 4096 トークンの系列 1 本として、8 GPU に
# またがるテンソル並列を次の 3 通りに配置してみます。
#
# - **DGX H100 1 台**: 8 GPU が NVSwitch で互いにつながります。
# - **DGX H100 8 ノードに 1 GPU ずつ**: どのメッセージも NDR NIC を通り、レール 0 を
#   渡ります。
# - **PCIe サーバー 1 台**: PCIe スイッチ 1 台を GPU 2 基が共有し、そのスイッチから CPU
#   へのアップリンクは 1 本だけです。さらに 2 つの CPU ソケットが 1 本のリンクを共有
#   します。
#
# どの all-reduce も、カウントのみのモード (`count=`, `dtype=`。データを持たずにサイズ
# だけを扱い、スケジュールとネットワークは同じです) で、リングアルゴリズムと NCCL の
# Simple プロトコルを使って実行します (プロトコルは第 3 節で扱います)。したがって
# レッスン 5 の閉形式がそのまま当てはまります。どのメッセージも、リンクのレイテンシに
# 加えてプロトコル自身のレイテンシ (Simple では NVLink 経由で 3.4 µs、ネットワーク経由で
# 14 µs。NCCL がリングの 1 ステップに見込む値です) を払います。上の `hop()` はこの 2 つを
# 足しています。

# %%
SEQ, HIDDEN, LAYERS = 4096, 8192, 80  # Llama 2 70B、1 マイクロバッチに 4096 トークンの系列 1 本
TP = 8
TP_COUNT = SEQ * HIDDEN  # (1, s, h) の活性値 1 つの要素数: テンソル並列の all-reduce 1 回が足す量
TP_BYTES = TP_COUNT * 2  # bf16
SIMPLE = PROTOCOLS["simple"]

PLACEMENTS = {  # 名前: (トポロジ, テンソル並列グループのランク)
    "NVSwitch (1 x dgx-h100)": (hardware.topology("dgx-h100"), list(range(TP))),
    "InfiniBand (8 x dgx-h100, GPU 0 of each)": (hardware.topology("dgx-h100", nodes=8),
                                                 list(range(0, 8 * TP, 8))),
    "PCIe (1 x pcie-8gpu)": (hardware.topology("pcie-8gpu"), list(range(TP))),
}  # fmt: skip
CLUSTERS = {name: collsim.Cluster(g, protocol="simple") for name, (g, _) in PLACEMENTS.items()}


def tp_all_reduce(name, count=TP_COUNT):
    """配置 ``name`` でのテンソル並列の all-reduce 1 回、bf16 で ``count`` 要素 (count-only)。"""
    group = PLACEMENTS[name][1]
    return CLUSTERS[name].all_reduce(count=count, dtype="bfloat16", group=group, algorithm="ring")


def tp_closed_form(name, size=TP_BYTES):
    """リングの閉形式 2(K−1)(α + S/(K·β))。α と β は隣り合う GPU 間の 1 ホップのもの。"""
    graph, group = PLACEMENTS[name]
    alpha, beta = hop(graph, group[0], group[1], SIMPLE)
    return closed_form("all_reduce", "ring", len(group), size, alpha, beta)


print(f"テンソル並列の all-reduce 1 回: bf16 で {TP_COUNT:,} 要素 = {format_size(TP_BYTES)}、"
      f"1 マイクロバッチあたり {4 * LAYERS} 回")  # fmt: skip
print(f"{'placement':<42} {'α':>8} {'β':>10} {'simulated':>10} {'closed form':>11} "
      f"{'per micro-batch':>15}")  # fmt: skip
tp_time = {}  # 配置ごとの、テンソル並列の all-reduce 1 回のシミュレーション時間
for name, (graph, group) in PLACEMENTS.items():
    tp_time[name] = tp_all_reduce(name).time
    alpha, beta = hop(graph, group[0], group[1], SIMPLE)
    print(f"{name:<42} {format_time(alpha):>8} {format_rate(beta):>10} "
          f"{format_time(tp_time[name]):>10} {format_time(tp_closed_form(name).time_s):>11} "
          f"{format_time(4 * LAYERS * tp_time[name]):>15}")  # fmt: skip

# %% [markdown]
# NVSwitch 上でもレール 0 上でも、リングの各ステップは 2 GPU の間でスイッチを 1 台通る
# だけで、2 つのメッセージが同じリンクを共有することもありません。そのため
# シミュレーションと閉形式 `2(K−1)(α + S/(K·β))` は最後の桁まで一致します。PCIe では
# そうはいきません。GPU はスイッチのアップリンクとソケット間のリンクを共有しますが、
# 1 本の経路しか見ない閉形式にはそれが見えません。そのためリングは式よりさらに遅く
# なります。
#
# **演習 12.1 — 予想してから確かめる。** 閉形式によると、テンソル並列の all-reduce は
# InfiniBand をまたぐと、NVSwitch 上の何倍の時間がかかるでしょうか。式を打ち直さずに、
# 閉形式 (`collsim.collectives.formulas` の `closed_form("all_reduce", "ring", 8, S, α, β)`)
# を、各配置の `α` と `β` を `hop()` から取って呼んでください。計算する前に考えて
# みましょう。この比は `β` の比と `α` の比のどちらに近く、それはなぜでしょうか。

# %%
tp_slowdown_answer = None  # あなたの予想: IB をまたぐときの閉形式の時間 / NVSwitch 上の時間

# %%
nvswitch, infiniband = list(PLACEMENTS)[:2]
by_formula = tp_closed_form(infiniband).time_s / tp_closed_form(nvswitch).time_s
teach.check("12.1", tp_slowdown_answer, expected=by_formula, rel=1e-6, unit="x")
print(f"シミュレーション: {tp_time[infiniband] / tp_time[nvswitch]:.4g} 倍遅い")

# %% [markdown]
# 64 MiB ではバイト数が支配的なので、比はリンクのレートの比に近くなります。NVLink4 の
# 370.8 GB/s に対して、NDR NIC 1 枚は 47 GB/s です。レイテンシの分だけ、比は少し
# 小さくなります。下の図はメッセージサイズを振ったものです。小さなメッセージは
# レイテンシ律速で、そこでの比は `α` の比になります。大きなメッセージでは `β` の比が
# まるごと効きます。いずれにしても、InfiniBand 越しのテンソル並列の all-reduce は
# すべての層のクリティカルパス上に乗ります。だからこそ Megatron-LM は
# `tensor_parallel_size` を 1 ノードの GPU 数以下に抑え (Narayanan et al. 2021)、
# Accelerate の ND-parallelism ガイドも PCIe 越しのテンソル並列を勧めていません。

# %%
SIZES = [2**e for e in range(10, 31, 2)]  # 1 KiB .. 1 GiB


# 図の中の文字は英語のままにしています (日本語フォントのない環境でも文字化けしないように)
def mark_size(ax, size, text, y=0.03, ha="left", ls=":"):
    """``size`` に縦線を引き、その横に枠付きのラベルを置く (``y`` は軸に対する割合)。"""
    ax.axvline(size, color="#333333", ls=ls, lw=1.5)
    ax.text(size, y, text, transform=ax.get_xaxis_transform(), va="top" if y > 0.5 else "bottom",
            ha=ha, fontsize=10, bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "#999999"})  # fmt: skip


def tp_placement_figure():
    """テンソル並列の all-reduce の時間と busbw をサイズに対して描く。配置ごとに 1 本の線。"""
    fig = Figure(figsize=(13, 5.4), layout="constrained")
    ax_t, ax_b = fig.subplots(1, 2)
    styles = [("#4C72B0", "o", "-"), ("#C44E52", "s", "--"), ("#8172B3", "^", "-.")]
    for name, (colour, marker, ls) in zip(PLACEMENTS, styles):
        runs = [tp_all_reduce(name, count=s // 2) for s in SIZES]
        style = dict(color=colour, marker=marker, ls=ls, lw=2.2, label=name)
        ax_t.plot(SIZES, [r.time for r in runs], **style)
        ax_b.plot(SIZES, [busbw(r) / 1e9 for r in runs], **style)
    for ax in (ax_t, ax_b):
        size_axis(ax, SIZES)
        ax.set_yscale("log")
        mark_size(ax, TP_BYTES, f" one TP all-reduce\n (Llama 2 70B: {format_size(TP_BYTES)})")
    ax_t.set_ylabel("time (s)", fontsize=12)
    ax_t.set_title("time of one all-reduce: lower is better", fontsize=12)
    ax_b.set_ylabel("bus bandwidth (GB/s)", fontsize=12)
    ax_b.set_title("busbw = S/t · 2(n−1)/n: higher is better", fontsize=12)
    ax_t.legend(title=f"TP group of {TP} GPUs", fontsize=10, loc="upper left")
    fig.suptitle("The same TP all-reduce on NVSwitch, InfiniBand and PCIe "
                 "(ring, Simple, count-only)", fontsize=14, fontweight="bold")  # fmt: skip
    return fig


teach.show(tp_placement_figure(), "12_tp_placement")

# %% [markdown]
# ## 2. ノードをまたぐと、busbw は NIC で決まる
#
# データ並列はテンソル並列と違って、ノードの外へ出ざるを得ません。勾配の all-reduce は
# すべてのノードにまたがります。では、どこまで速くできるでしょうか。DGX A100 2 ノード、
# 16 GPU を例に、NVIDIA が示している数値と比べます。ノードあたり HDR NIC 8 枚で、
# all-reduce の busbw はおよそ 192 GB/s です。
#
# 一方のノードから他方へ渡るバイトは、すべて NIC を通って出ていきます。16 GPU 全体で
# 1 本のリングを組むと、リングはノード間を 2 回横切り、`2(K−1)` ステップのそれぞれで、
# 各横断が `S/K` のチャンクを 1 つずつ運びます。合計すると NIC 1 枚を各方向に
# `2(K−1)/K · S` が通ることになり、`busbw = S/t · 2(K−1)/K` に直すと
# **busbw ≤ NIC 1 枚のレート** になります。NCCL はもっとうまくやります (ここでは
# `nccl_ring`)。バッファを `C` 個に分け、部分ごとに 1 本のリング (**チャネル**) を走らせ
# ます。どのリングもすべてのノードの GPU を通り、それぞれ自分のレールでノード間を渡る
# ので、`C` 枚の NIC が並んでトラフィックを運び、それぞれがその `1/C` を受け持ちます。
# つまり **busbw ≤ C × NIC 1 枚** です。ノード内では、GPU あたり 240 GB/s の NVLink が
# 上限になります。

# %%
A100 = hardware.preset("dgx-a100")
NIC_RATE = A100.inter.effective_rate  # NCCL が駆動したときの HDR NIC 1 枚のレート
print(f"dgx-a100: NIC {A100.inter.nics} 枚 x {format_rate(NIC_RATE)}、NVSwitch は GPU あたり "
      f"{format_rate(A100.intra.effective_rate)}")  # fmt: skip
BUSBW_COUNT = 2**32  # bf16 で 8 GiB、NVIDIA の nccl-tests が測る範囲の最大サイズ
runs = {  # (ノード数, アルゴリズム)
    "1 node, ring (NVSwitch only)": (1, "ring"),
    "2 nodes, one ring of 16 GPUs": (2, "ring"),
    "2 nodes, nccl_ring (8 channels)": (2, "nccl_ring"),
    "4 nodes, nccl_ring (8 channels)": (4, "nccl_ring"),
    "2 nodes, hierarchical (2-D)": (2, "hierarchical"),
}
a100_busbw = {}
for name, (nodes, algorithm) in runs.items():
    cluster = collsim.Cluster(hardware.topology(A100, nodes=nodes))
    result = cluster.all_reduce(count=BUSBW_COUNT, dtype="bfloat16", algorithm=algorithm)
    a100_busbw[name] = busbw(result)
    print(f"{name:<34} {format_size(result.size_bytes)}: busbw {format_rate(a100_busbw[name]):>11}")

# %% [markdown]
# **演習 12.2 — 予想してから確かめる。** NCCL のリングを NIC 1 枚につき 1 チャネルで
# 使うとき、DGX A100 2 ノードの all-reduce の busbw に NIC が課す上限はいくらでしょうか
# (バイト/秒で、または `"100GB/s"` のような文字列で答えます)。NIC の枚数とレートは
# `hardware.preset("dgx-a100")` から読んでください (`.inter.nics`,
# `.inter.effective_rate`)。

# %%
nic_ceiling_answer = None  # あなたの予想: バイト/秒、または "100GB/s" のような文字列

# ranks=: NIC の枚数。NIC 1 枚分のレートを答えると、上限の 1/8 だと指摘される
teach.check("12.2", nic_ceiling_answer, expected=A100.inter.nics * NIC_RATE, unit="B/s",
            ranks=A100.inter.nics)  # fmt: skip
for name in ("2 nodes, nccl_ring (8 channels)", "4 nodes, nccl_ring (8 channels)"):
    print(f"{name}: NIC による上限の {a100_busbw[name] / (A100.inter.nics * NIC_RATE):.1%}")

# %% [markdown]
# この上限はノード数によりません。4 ノードなら各リングはノード間を 4 回横切りますが、
# それでも 1 枚の NIC が運ぶのは 1 チャネル分の横断、各方向に `2(K−1)/K · S/C` だけです。
# ノードを増やすと増えるのはステップ数で、そのレイテンシは小さなサイズで表に出ますが、
# NIC あたりのバイト数は増えません。2 次元の階層型 all-reduce (各ノード内で
# reduce-scatter (リデューススキャッター)、各シャードをノード間で all-reduce、ノード内で
# all-gather (オールギャザー)) は、ネットワークには GPU あたり `S/G` しか送りません。
# しかし NVLink のフェーズとネットワークのフェーズが交互に動くため、両方を同時に
# 働かせ続けるリングには、ここでは届きません。
#
# ## 3. プロトコル: LL、LL128、Simple
#
# レッスン 5 の `α` は、リンクごとに 1 つの数でした。NCCL はこれとは別に、メッセージごとに
# 独自のコストを払います。その大きさは、データが届いたことをどう知らせるかで決まります
# (NCCL のドキュメント、`NCCL_PROTO`)。
#
# - **LL** (low latency) は、8 バイトのワードごとに 4 バイトのデータと 4 バイトの
#   フラグを格納します。受信側はデータそのものをポーリングするのでレイテンシは最も低く
#   なりますが、回線を流れるバイトの半分はフラグです。
# - **LL128** は、128 バイトのラインごとに 120 バイトのデータと 8 バイトのフラグを
#   格納します。帯域幅はほぼすべて使え、レイテンシは少し増えます。
# - **Simple** はデータをそのまま送り、メモリフェンスで到着を知らせます。帯域幅は
#   すべて使えますが、レイテンシは最も大きくなります。
#
# 各プロトコルは、`efficiency` (回線上の 1 バイトあたりのペイロード) と、リンク種別ごとの
# メッセージあたりのレイテンシで表されます (NCCL の `src/graph/tuning.cc`)。

# %%
for p in PROTOCOLS.values():
    print(f"{p.name:>6}: 帯域幅の {p.efficiency:.4g}、メッセージあたりのレイテンシは NVLink 経由で "
          f"{format_time(p.latency_for('nvlink'))}、ネットワーク経由で "
          f"{format_time(p.latency_for('net'))}")  # fmt: skip

# %% [markdown]
# 同じリングの all-reduce を DGX H100 1 台で、`Cluster(topology, protocol=...)` により
# 各プロトコルに固定して (`NCCL_PROTO` がしていることです)、サイズを変えながら実行します。
# あわせてクラスタの既定値 `protocol="auto"` でも実行します。こちらは NCCL のチューナーと
# 同じように、呼び出しごとに閉形式からプロトコルを 1 つ選びます。

# %%
H100 = hardware.topology("dgx-h100")
NAMES = list(PROTOCOLS)  # ll, ll128, simple
PROTOCOL_SIZES = [2**e for e in range(4, 31, 2)]  # 16 B .. 1 GiB
by_protocol = {p: collsim.Cluster(H100, protocol=p) for p in NAMES}
auto = collsim.Cluster(H100)  # protocol="auto"、ハードウェアのプリセットでの既定値
protocol_times = {p: [] for p in NAMES}
auto_choice = []
print(f"{'S':>9} " + " ".join(f"{p:>10}" for p in NAMES) + "  auto の選択")
for size in PROTOCOL_SIZES:
    for p in NAMES:
        result = by_protocol[p].all_reduce(count=size // 2, dtype="bfloat16", algorithm="ring")
        protocol_times[p].append(result.time)
    auto_choice.append(auto.all_reduce(count=size // 2, dtype="bfloat16",
                                       algorithm="ring").protocol.name)  # fmt: skip
    print(f"{format_size(size):>9} " + " ".join(f"{format_time(protocol_times[p][-1]):>10}"
                                                for p in NAMES) + f"  {auto_choice[-1]}")  # fmt: skip


def ring_time(size, protocol):
    """DGX H100 1 台で ``protocol`` を使うときのリングの閉形式。α と β は 1 ホップのもの。"""
    alpha, beta = hop(H100, 0, 1, protocol)
    return closed_form("all_reduce", "ring", 8, size, alpha, beta).time_s


worst = max(abs(protocol_times[p][i] / ring_time(s, PROTOCOLS[p]) - 1)
            for p in NAMES for i, s in enumerate(PROTOCOL_SIZES))  # fmt: skip
print(f"シミュレーションと閉形式の差: 最大 {worst:.1e}")

# %% [markdown]
# 小さなメッセージでは LL が勝ちます。リングの 14 ステップはすべてレイテンシで、LL の
# レイテンシが最も低いからです。大きなメッセージでは Simple が勝ちます。バイト数が
# 支配的になり、LL はその 2 倍のバイトを送るからです。その中間を LL128 が受け持ちます。
# 各プロトコルの時間は `S` の一次式 `2(K−1)(α_p + S/(K·β·e_p))` なので、2 つの
# プロトコルは直線どうしが交わるところで入れ替わります。
#
# **演習 12.3 — 予想してから確かめる。** DGX H100 1 台 (K = 8) のリング all-reduce で、
# LL128 が LL と同じ速さになるのは、サイズ `S` (バイト) がいくつのときでしょうか。
# 各プロトコルの 1 ステップには `α + λ_p + S/(K·β·e_p)` かかります。`α` と `β` は
# リンクのレイテンシとレート (`path_alpha_beta(H100, 0, 1)`)、`λ_p` はプロトコルの
# `latency_for("nvlink")`、`e_p` はその `efficiency` です。2 つを等しいとおいて `S` に
# ついて解いてください (リンクの `α` は打ち消し合います)。

# %%
ll128_crossover_answer = None  # あなたの予想: バイト数、または "4MiB" のような文字列


# %%
def crossover(a, b):
    """プロトコル ``a`` と ``b`` の閉形式が交わるサイズ: どちらも S の一次式。"""
    big = 2.0**30  # 各直線の 2 点 (S = 0 は使わない: 0 バイトの呼び出しはすぐ返る)
    slope = {p: (ring_time(2 * big, p) - ring_time(big, p)) / big for p in (a, b)}
    at_zero = {p: ring_time(big, p) - slope[p] * big for p in (a, b)}  # 各直線の切片
    return (at_zero[b] - at_zero[a]) / (slope[a] - slope[b])


ll_to_ll128 = crossover(PROTOCOLS["ll"], PROTOCOLS["ll128"])
ll128_to_simple = crossover(PROTOCOLS["ll128"], PROTOCOLS["simple"])
teach.check("12.3", ll128_crossover_answer, expected=ll_to_ll128, rel=1e-6, unit="B")
print(f"LL128 と Simple が交わるのは {format_size(ll128_to_simple)}")


# %%
def protocol_figure():
    """DGX H100 1 台でのリングの時間と busbw をプロトコルごとに描く。背景の色は ``auto`` が
    選んだもの、破線は閉形式が交わるところ。"""
    fig = Figure(figsize=(13, 5.4), layout="constrained")
    ax_t, ax_b = fig.subplots(1, 2)
    colours = {"ll": "#55A868", "ll128": "#DD8452", "simple": "#4C72B0"}
    markers = {"ll": "s", "ll128": "^", "simple": "o"}
    edges = ([PROTOCOL_SIZES[0]] + [math.sqrt(a * b) for a, b in
             zip(PROTOCOL_SIZES, PROTOCOL_SIZES[1:])] + [PROTOCOL_SIZES[-1]])  # fmt: skip
    for ax in (ax_t, ax_b):
        for i, chosen in enumerate(auto_choice):
            ax.axvspan(edges[i], edges[i + 1], color=colours[chosen], alpha=0.12, lw=0)
        for where, text, y in ((ll_to_ll128, "LL = LL128", 0.97),
                               (ll128_to_simple, "LL128 = Simple", 0.80)):  # fmt: skip
            if ax is ax_t:  # ラベルは一度だけ。busbw 側では線がパネルの上端まで届く
                mark_size(ax, where, f"{text}\nat {format_size(where)} ", y=y, ha="right", ls="--")
            else:
                ax.axvline(where, color="#333333", ls="--", lw=1.5)
    for p in NAMES:
        style = dict(color=colours[p], marker=markers[p], lw=2.2, label=p)
        ax_t.plot(PROTOCOL_SIZES, protocol_times[p], **style)
        bus = [s / t * bus_factor("all_reduce", 8) / 1e9
               for s, t in zip(PROTOCOL_SIZES, protocol_times[p])]  # fmt: skip
        ax_b.plot(PROTOCOL_SIZES, bus, **style)
    for ax in (ax_t, ax_b):
        size_axis(ax, PROTOCOL_SIZES)
        ax.set_yscale("log")
    ax_t.set_ylabel("time (s)", fontsize=12)
    ax_t.set_title("time: lower is better (shading: what protocol=auto chose)", fontsize=12)
    ax_b.set_ylabel("bus bandwidth (GB/s)", fontsize=12)
    ax_b.set_title("busbw: LL tops out at half of Simple", fontsize=12)
    ax_t.legend(title="NCCL_PROTO", fontsize=10, loc="center left")
    fig.suptitle("Ring all-reduce on one DGX H100 with each protocol (count-only)",
                 fontsize=14, fontweight="bold")  # fmt: skip
    return fig


teach.show(protocol_figure(), "12_protocols")

# %% [markdown]
# これが、nccl-tests が小さなサイズで示すレイテンシの床です。数百 KiB より下では、時間は
# `S` にほとんど左右されず、時間を決めるのはリンクではなくプロトコルのレイテンシです。
# `auto` は閉形式が交わるちょうどその点で切り替わります。`auto` の中身が閉形式*そのもの*
# だからです。NCCL のチューナーも、独自のレイテンシと帯域幅の表を使って同じことをして
# いて、しかもアルゴリズムごとに比べます。`algorithm="auto"` を (`protocol="auto"` と
# 並べて) 指定すると、collsim も NVLS、NCCL のレール上のリング、ダブルバイナリツリー、
# 2 次元の階層型 all-reduce を比べます。そして結果の `choice` が、何をなぜ選んだかを
# `NCCL_DEBUG=INFO` と同じように出力します。

# %%
for size in (2**12, 2**30):
    choice = auto.all_reduce(count=size // 2, dtype="bfloat16", algorithm="auto").choice
    print(choice.info_line())
a100x2 = collsim.Cluster(hardware.topology("dgx-a100", nodes=2))
for size in (2**12, 2**30):
    print(a100x2.all_reduce(count=size // 2, dtype="bfloat16", algorithm="auto").choice.info_line())

# %% [markdown]
# ## 4. 遅いリンクが 1 本: リングは全員が待ち、ツリーは一部が待つ
#
# リンクトレーニングで低いレートに落ちたケーブル、リンクのフラップを繰り返す NIC など、
# 1 本のリンクだけがほかより遅く動くことがあります。`collsim.runtime.faults` はこうした
# 障害を記述し、`Cluster(..., faults=...)` がそれを適用します。ここでは DGX H100 1 台で
# GPU 5 の NVLink ポートが本来のレートの 4 分の 1 で動くとし (コマンドラインの
# `--slow-link 5-nvswitch0:0.25` です)、64 MiB の all-reduce をリングとツリー (レッスン 5)
# で、正常時と劣化時のそれぞれについて実行します。各ランクについて見るのは、自分の担当を
# 終えた時刻 (送信か受信かを問わず、最後の転送が終わった時刻) です。

# %%
SLOW_LINK = "5-nvswitch0:0.25"
SLOW_RANK = 5  # リンクの遅い側の端にある GPU
healthy = collsim.Cluster(H100, protocol="simple")
degraded = collsim.Cluster(H100, protocol="simple", faults=Faults.parse(slow_link=[SLOW_LINK]))
print(degraded.faults.describe()[0])


def finish_times(result):
    """グループの各ランクが自分の担当を終えた時刻: 最後の転送が終わった時刻。"""
    last = {}
    for t in result.trace.transfers:
        for r in (t.src, t.dst):
            last[r] = max(last.get(r, 0.0), t.end)
    return [last[r] for r in result.group.ranks]


finished = {}
for algorithm in ("ring", "tree"):
    for name, cluster in (("healthy", healthy), ("slow link", degraded)):
        result = cluster.all_reduce(count=TP_COUNT, dtype="bfloat16", algorithm=algorithm)
        finished[algorithm, name] = finish_times(result)
    ratios = [
        s / h for s, h in zip(finished[algorithm, "slow link"], finished[algorithm, "healthy"])
    ]
    print(f"{algorithm}: 正常時 {format_time(max(finished[algorithm, 'healthy']))}、"
          f"遅いリンクありで {format_time(max(finished[algorithm, 'slow link']))}。各ランクの"
          f"終了時刻の、正常時に対する倍率: {' '.join(f'{r:.2f}' for r in ratios)}")  # fmt: skip

# %% [markdown]
# **リング。** `2(K−1)` ステップのどれでも、ランク 4 はランク 5 に、ランク 5 はランク 6 に
# 送り、どちらも遅いポートを通ります。そしてどのランクも、このステップのチャンクが
# 届くまでは次のステップを始められません。そのため、すべてのステップが遅いリンクの
# ペースで進み、それがすべてのランクに及びます。`t = 2(K−1)(α + S/(K·f·β))`、ただし
# `f = 1/4` です (`collsim.collectives.degraded`)。
#
# **演習 12.4 — 予想してから確かめる。** この閉形式
# (`degraded_ring_all_reduce_time(k, size, alpha, beta, factor)`。`α` と `β` は
# `hop(H100, 0, 1, SIMPLE)` から得る NVSwitch 1 ホップのもの) によると、64 MiB のリング
# all-reduce は、ポートが 4 分の 1 のとき、正常時 (`factor=1`) の何倍の時間がかかる
# でしょうか。

# %%
slow_ring_answer = None  # あなたの予想: 劣化時のリングの時間 / 正常時のリングの時間

# %%
alpha, beta = hop(H100, 0, 1, SIMPLE)
ring_slowdown = (degraded_ring_all_reduce_time(8, TP_BYTES, alpha, beta, factor=0.25)
                 / degraded_ring_all_reduce_time(8, TP_BYTES, alpha, beta, factor=1.0))  # fmt: skip
teach.check("12.4", slow_ring_answer, expected=ring_slowdown, rel=1e-6, unit="x")
simulated = max(finished["ring", "slow link"]) / max(finished["ring", "healthy"])
print(f"シミュレーション: {simulated:.4g} 倍")

# %% [markdown]
# **ツリー。** レッスン 5 の二項ツリーは `log2 K` ステップでランク 0 へリデュースし、
# そのあと broadcast (ブロードキャスト) で結果を戻します。ランク 5 が自分のポートを使う
# のは 6 ステップのうち 2 回です。1 回は自分のバッファを親へ送るとき、もう 1 回は親から
# 結果を受け取るときです。遅れたリデュースは全員が待ちますが、broadcast で再び遅れるのは
# 遅いリンクの下にある枝だけです。大半のランクは正常時のおよそ 1.5 倍で終わり、2 つの
# ランクはおよそ 2 倍かかります。
#
# **演習 12.5 — 実行結果を読む。** 遅いリンクがあるツリーで、ランク 5 のほかに最後に
# 終わるのはどのランクでしょうか。スケジュールの最初のステップ
# (`cluster.all_reduce(..., algorithm="tree").schedule.steps[0]`) か、上の倍率を見て
# ください。

# %%
tree_slow = finished["tree", "slow link"]
tree_ratio = [s / h for s, h in zip(tree_slow, finished["tree", "healthy"])]
others = [r for r in range(TP) if r != SLOW_RANK]
late = max(others, key=lambda r: tree_slow[r])
slow_partner_answer = None  # あなたの答え: ランク番号

teach.check_rank("12.5", slow_partner_answer, expected=late, ranks=TP,
                 why=f"ツリーでランク {SLOW_RANK} の親にあたり、遅いポート越しにランク "
                     f"{SLOW_RANK} のバッファを受け取り、broadcast では結果をそのポート越しに"
                     f"送り返します (正常時の {tree_ratio[late]:.2f} 倍)",
                 about={r: f"正常時の {tree_ratio[r]:.2f} 倍で終わります。遅れたリデュースは"
                           f"待ちますが、遅い broadcast の影響は受けません" for r in others
                        if r != late})  # fmt: skip


# %%
def slow_link_figure():
    """各ランクの終了時刻を、正常時と遅いリンクありについて、リングとツリーで描く。"""
    fig = Figure(figsize=(13, 5), layout="constrained")
    axes = fig.subplots(1, 2, sharey=True)
    x = np.arange(TP)
    for ax, algorithm in zip(axes, ("ring", "tree")):
        ax.bar(x - 0.2, np.array(finished[algorithm, "healthy"]) * 1e3, 0.4, color="#9DB4D3",
               label="healthy")  # fmt: skip
        slow = np.array(finished[algorithm, "slow link"]) * 1e3
        ax.bar(x + 0.2, slow, 0.4, color="#DD6B20", label=f"GPU {SLOW_RANK}'s NVLink at 1/4")
        for r in x:  # 正常時の終了時刻の何倍か
            times = slow[r] / (finished[algorithm, "healthy"][r] * 1e3)
            ax.text(r + 0.2, slow[r], f"{times:.2f}x", ha="center", va="bottom", fontsize=9)
        ax.set_xticks(x, [f"rank {r}" for r in x], fontsize=10)
        ax.get_xticklabels()[SLOW_RANK].set_fontweight("bold")
        ax.set_title(f"{algorithm}: {'every rank waits' if algorithm == 'ring' else 'the branch below the link waits most'}",
                     fontsize=12)  # fmt: skip
        ax.grid(True, axis="y", alpha=0.3)
    axes[0].set_ylim(0, 1.12 * max(max(v) for v in finished.values()) * 1e3)  # ラベルの余白
    axes[0].set_ylabel("rank finished its part (ms, simulated)", fontsize=12)
    axes[0].legend(fontsize=10, loc="upper left")
    fig.suptitle(f"A {format_size(TP_BYTES)} all-reduce on one DGX H100 with one slow link",
                 fontsize=14, fontweight="bold")  # fmt: skip
    return fig


teach.show(slow_link_figure(), "12_slow_link")

# %% [markdown]
# ここではツリーのほうが劣化したリングよりもまだ遅いのですが、それはツリーが毎ステップ
# バッファ全体を送るからです。見てほしいのは障害の広がり方です。リングではすべての
# バイトがすべてのリンクを通るため、いちばん遅いリンクがジョブ全体のペースを決めます。
# 何千本ものケーブルのうち 1 本が悪いだけで全体が遅くなり、ジョブの busbw はそのリンクが
# 運べる量まで落ちます。大きなジョブを始める前に、運用担当者がノードをまたいで
# nccl-tests を走らせ、そうしたリンクを探すのはこのためです。ツリーでは、遅いリンクは
# 自分の枝をまるごと遅らせますが、残りは遅れたリデュースの分しか遅れません。
#
# ## 5. クラッシュしたランクとウォッチドッグのレポート
#
# GPU がバスから消える、プロセスが kill される、といったことが起きると、残りのランクは
# 次の集団通信に入り、そのランクを待ち続けます。何も失敗せず、何も進みません。PyTorch の
# NCCL ウォッチドッグがそれに気づくのは、集団通信がプロセスグループのタイムアウト
# (`init_process_group(timeout=...)`) 以内に終わらなかったときだけです。そのとき PyTorch
# のフライトレコーダ (`TORCH_NCCL_TRACE_BUFFER_SIZE`, `TORCH_NCCL_DUMP_ON_TIMEOUT=1`) が、
# ランクごとに、最後に入った集団通信と最後に完了した集団通信を教えてくれます。
#
# collsim はシミュレーション時間の上で同じことをします。障害を含む実行が、ウォッチドッグの
# タイムアウトの間まったく進まなければ、`collsim.errors.WatchdogTimeout` で終わります。
# そのレポートがフライトレコーダの出力にあたります。ここでは 8 ランクが学習し、1 ステップ
# ごとに 1 ms の計算と勾配の all-reduce を 1 回行います。そしてランク 5 が t = 2.3 ms で
# クラッシュします (`--crash-rank 5@2.3ms`)。

# %%
COMPUTE = 1e-3  # 1 ステップあたりの順伝播 + 逆伝播の秒数
CRASH = Faults.parse(crash_rank=["5@2.3ms"], watchdog="10s")


def train(rank, steps):
    grad = np.ones(1024, dtype=np.float32)
    for step in range(steps):
        yield rank.compute(seconds=COMPUTE, label=f"step {step + 1}")  # 順伝播 + 逆伝播
        grad = yield from rank.all_reduce(grad)  # 勾配の all-reduce
    return rank.now


try:
    collsim.Cluster(H100, faults=CRASH).run(train, 5)
except WatchdogTimeout as error:
    report = error
    print(f"WatchdogTimeout:\n{error}")


# %% [markdown]
# フライトレコーダのダンプと同じように読みます。まずはランクごとの行です。7 つのランクは
# 同じ all-reduce に入り、その中でそれぞれ相手のランクを待っています。1 つのランクだけ、
# 行の内容が違います。ウォッチドッグが発火したのは最後の進捗から 10 s (タイムアウト)
# 後で、クラッシュよりずっと後です。
#
# **演習 12.6 — レポートを読む。** 止まったのはどのランクでしょうか。

# %%
stopped_rank_answer = None  # あなたの答え: ランク番号

teach.check_rank("12.6", stopped_rank_answer, expected=report.culprit.rank, ranks=TP,
                 why=f"その行に CRASHED at t={format_time(report.culprit.time)} とあります。"
                     "ほかのランクは、このランクが入らなかった all-reduce の中で待っています",
                 about={r: f"all_reduce #{line.entered[0]} の中で待っています"
                        for r, line in report.ranks.items() if line.crashed_at is None})  # fmt: skip

# %% [markdown]
# **演習 12.7 — レポートを読み、次にプログラムを読む。** ほかの 7 ランクが待っているのは、
# 各ランクが順に呼ぶ all-reduce の列の何番目 `#N` (0 から数えます) でしょうか。
# プログラムからも導いてください。各ステップは 1 ms の計算のあとに 4 KiB の all-reduce を
# 行い、その all-reduce はマイクロ秒単位で終わります。t = 2.3 ms は、この列のどこに
# あたるでしょうか。

# %%
waiting_in = {line.entered[0] for line in report.ranks.values() if line.crashed_at is None}
hang_position_answer = None  # あなたの答え: 位置 N

teach.check("12.7", hang_position_answer, expected=waiting_in.pop(), unit="(position N)")

# %% [markdown]
# 同じ経緯を図にしたものです。エラーが持っているトレース (`error.trace`) から描いて
# います。ランクごとの計算と各 all-reduce の開始、クラッシュ、そしてランク 5 がたどり
# 着かなかった all-reduce の中で待つ 7 つのランクが見えます。


# %%
def crash_figure(report):
    """実行が止まるまでの各ランクの計算と all-reduce を、レポートが持つトレースから描く:
    ランク 5 がどこでクラッシュし、ほかのランクがどこで待っているか。"""
    trace, last = report.trace, report.last_progress
    right = last * 1.3 * 1e3  # 表示する範囲 (ms): 最後の進捗より少し先まで
    fig = Figure(figsize=(12, 4.8), layout="constrained")
    ax = fig.add_subplot()
    for c in trace.computes:
        ax.broken_barh([(c.start * 1e3, (c.end - c.start) * 1e3)], (c.rank - 0.3, 0.6),
                       color="#9DB4D3", zorder=2)  # fmt: skip
    calls = {}  # (ランク, 位置) -> 各ランクの all-reduce で、最初の転送が始まった時刻
    for t in trace.transfers:
        for r in (t.src, t.dst):
            key = (r, t.tag.call)
            calls[key] = min(calls.get(key, t.start), t.start)
    for (r, position), start in sorted(calls.items()):
        ax.plot(start * 1e3, r, marker="v", color="#4C72B0", ms=9, zorder=3)
        ax.annotate(f"#{position}", (start * 1e3, r), xytext=(4, 7), textcoords="offset points",
                    fontsize=9)  # fmt: skip
    for r, line in report.ranks.items():
        if line.crashed_at is not None:
            ax.plot(line.crashed_at * 1e3, r, marker="X", color="#C53030", ms=14, zorder=4)
            ax.annotate(f"rank {r} crashed at {format_time(line.crashed_at)}",
                        (line.crashed_at * 1e3, r), xytext=(10, -4), textcoords="offset points",
                        fontsize=10, color="#C53030", fontweight="bold")  # fmt: skip
        else:
            entered = max(c.end for c in trace.computes if c.rank == r)
            ax.broken_barh([(entered * 1e3, right - entered * 1e3)], (r - 0.3, 0.6),
                           facecolor="none", edgecolor="#DD6B20", hatch="///", zorder=1)  # fmt: skip
            ax.text(right, r, f"waits in all_reduce #{line.entered[0]} ", ha="right",
                    va="center", fontsize=9, color="#9C4221",
                    bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none"})  # fmt: skip
    ax.set_xlim(0, right)
    ax.set_ylim(TP - 0.5, -0.5)
    ax.set_yticks(range(TP), [f"rank {r}" for r in range(TP)])
    ax.set_xlabel("simulated time (ms)", fontsize=12)
    ax.set_title(f"blue bars: 1 ms of compute per step; triangles: an all-reduce starts (#N, from "
                 f"0); hatched: waiting, until the watchdog fires at t = "
                 f"{format_time(report.time)}", fontsize=10)  # fmt: skip
    fig.suptitle("Training with a rank that crashes: what the flight recorder saw",
                 fontsize=14, fontweight="bold")  # fmt: skip
    return fig


teach.show(crash_figure(report), "12_crash")

# %% [markdown]
# ## 6. NCCL の設定と、collsim での対応
#
# 実際のクラスタで設定するつまみと、同じ選択を collsim のどこで行うかの対応表です。
#
# | NCCL / PyTorch | collsim の API | collsim のコマンドライン |
# |---|---|---|
# | `NCCL_ALGO=Ring`, `Tree`, `NVLS` | `cluster.all_reduce(..., algorithm="nccl_ring")`, `"double_tree"`, `"nvls"` | `--algorithm nccl_ring` (`double_tree`, `nvls`) |
# | `NCCL_PROTO=Simple` (`LL`, `LL128`) | `Cluster(topology, protocol="simple")` | `--protocol simple` |
# | どちらも設定しない: チューナーが選ぶ | `algorithm="auto"`, `protocol="auto"` (プリセットでの既定値) | `--algorithm auto` |
# | `NCCL_DEBUG=INFO` (チューナーが選んだもの) | `result.choice.info_line()` | `--algorithm auto` で出力される |
# | ウォッチドッグのタイムアウト | `Faults(..., watchdog_timeout=10.0)` | `--watchdog-timeout 10s` |
# | フライトレコーダのダンプ | `WatchdogTimeout.ranks` とそのレポート | ウォッチドッグが発火したときに出力される |
#
# このレッスンで実行したものは、コマンドラインでは次のとおりです。
#
# - DGX H100 1 台での NVLS を、8 バイトから 8 GiB まで: `collsim run all-reduce --topology dgx-h100 --algorithm nvls --min-bytes 8 --max-bytes 8GiB --count-only`
# - DGX A100 2 ノードでの NCCL のリング (第 2 節): `collsim run all-reduce --topology dgx-a100 --nodes 2 --algorithm nccl_ring --size 8GiB --count-only`
# - LL128 プロトコルを固定して、サイズを変えながら (第 3 節): `collsim run all-reduce --topology dgx-h100 --protocol ll128 --min-bytes 16 --max-bytes 1GiB --factor 4 --count-only`
# - 遅いリンクが 1 本あるリング (第 4 節): `collsim run all-reduce --topology dgx-h100 --algorithm ring --slow-link 5-nvswitch0:0.25 --size 64MiB --count-only`
# - クラッシュするランクとウォッチドッグ (第 5 節): `collsim run all-reduce --topology dgx-h100 --algorithm ring --size 64MiB --crash-rank 5@100us --watchdog-timeout 10s --count-only`
# - 小さな all-reduce に対するチューナーの選択 (第 3 節): `collsim run all-reduce --topology dgx-a100 --nodes 2 --algorithm auto --size 4KiB --count-only`
#
# そのうち 2 つを、ここから実行してみます (`collsim` コマンドが呼んでいるのは
# `collsim.cli.main` です)。1 つは DGX H100 1 台での NVLS で、スイッチが加算を行うので、
# 各 GPU は自分のバッファを 1 回送って 1 回受け取るだけで済みます。もう 1 つは、DGX A100
# 2 ノードでの小さな all-reduce に対するチューナーの選択です。

# %%
from collsim.cli import main

for command in ("run all-reduce --topology dgx-h100 --algorithm nvls --min-bytes 1KiB "
                "--max-bytes 1GiB --factor 1024 --count-only",
                "run all-reduce --topology dgx-a100 --nodes 2 --algorithm auto --size 4KiB "
                "--count-only"):  # fmt: skip
    print(f"$ collsim {command}")
    main(command.split())

# %% [markdown]
# ## まとめ
#
# - **テンソル並列はノード内に留めます。** その all-reduce は、すべての層のクリティカル
#   パス上にあるからです。同じ 64 MiB の all-reduce でも、GPU あたり NIC 1 枚を通すと
#   NVSwitch のおよそ 7 倍の時間がかかり (大きなメッセージではリンクの `β` の比、小さな
#   メッセージでは `α` の比)、PCIe ではさらに長くかかります。
# - **ノードをまたぐと、busbw は NIC で決まります。** すべての GPU を通る 1 本のリングは
#   NIC 1 枚で頭打ちになります。NCCL のリングは NIC 1 枚につき 1 チャネルをそれぞれの
#   レールに載せるので、NIC 1 枚の `C ×` に達します (DGX A100 2 台で 191 GB/s、NVIDIA の
#   数値では約 192 GB/s)。これはノード数によりません。
# - **プロトコルはレイテンシと帯域幅を交換します。** 小さなメッセージには LL、中間には
#   LL128、大きなメッセージには Simple です。どれも 1 ステップあたり
#   `α_p + S/(K·β·e_p)` の直線で、チューナー (NCCL のものでも `auto` でも) は直線が
#   交わるところで切り替えます。小さなメッセージでの床は、プロトコルのレイテンシです。
# - **遅いリンクが 1 本あると、リング全体がそのペースに落ちます。** どのランクもです。
#   ツリーでは、そのリンクは自分の枝をまるごと遅らせ、ほかの枝は遅れたリデュースの分
#   だけ遅れます。
# - **クラッシュしたランクは、エラーではなくハングになります。** フライトレコーダの
#   ランクごとの行を読み、ほかのランクが待っている集団通信に入らなかった 1 つを見つけ
#   ます。
# - NCCL のつまみには、collsim にも対応するものがあります。`algorithm=`、`protocol=`、
#   INFO 行を出す `auto`、ウォッチドッグのタイムアウトとレポートです。
#
# 自分のマシンは TOML ファイルで記述できます (`base = "dgx-h100"` と、違うフィールド
# だけを書きます。読み込むのは `collsim.hardware.load` です)。それを
# `--topology box.toml` として第 6 節のコマンドに渡してください。実行がハングしたら、
# まずフライトレコーダのランクごとの行を読みましょう。次のレッスン 13 では、人が実際に
# 書くプログラムを、これらのマシンの上で動かします。mpi4py のコードは手を加えずにそのまま、
# torch.distributed 風のコードは `collsim.distributed` の上で動きます。
