# %% [markdown]
# # 5. コストモデル: レイテンシ、帯域幅、輻輳
# α + n/β: レイテンシ律速と帯域幅律速、ツリーとリングが入れ替わる点、共有リンクの輻輳が生むコスト。
#
# レッスン 4 ではバイト数を数えました。時間を見積もるには、リンクごとにあと 2 つの数が
# 要ります。**レイテンシ** $\alpha$ (最初のバイトが届くまでの秒数) と **帯域幅** $\beta$
# (1 秒あたりのバイト数) です。これは MPI や NCCL の開発者が使うコストモデルで (Hockney
# のモデル。Thakur, Rabenseifner & Gropp 2005 が MPICH の集団通信の解析に使っています)、
# `collsim.collectives.formulas` の閉形式もこのモデルで書かれています。シミュレータもリンク
# ごとに同じ $\alpha$ と $\beta$ を使い、そのうえで閉形式が扱わないもの、つまり複数の転送が
# 同時に 1 本のリンクを共有する状況を加えます。
#
# これまでと同じく、各 `..._answer = None` を自分の予想に置き換えてからチェックを実行して
# ください。時間は秒で書いても `"15us"` のような文字列で書いてもかまいません。サイズも
# バイト数か `"64KiB"` のような文字列で書けます。

# %%
from collections import Counter

import collsim
from collsim import CountOnly, teach, topology
from collsim.collectives.formulas import closed_form
from collsim.topology import path_alpha_beta, route
from collsim.units import format_rate, format_size, format_time
from collsim.viz.sweep import sweep, sweep_figure
from collsim.viz.utilization import utilization_figure

# %% [markdown]
# ## 1 つのメッセージ: α + n/β
#
# $$T(n) = \alpha + \frac{n}{\beta}$$
#
# 小さなメッセージはサイズによらずほぼ $\alpha$ かかり (**レイテンシ律速**)、大きな
# メッセージはほぼ $n/\beta$ かかります (**帯域幅律速**)。2 つの項が等しくなるのは
# $n = \alpha\beta$ のときです。
#
# **演習 5.1.** $\alpha = 5\,\mu s$、$\beta = 100$ GB/s ($10^{11}$ バイト/秒) のリンク 1 本で
# 1 MiB を送る時間を秒で予想してください。

# %%
send_time_answer = None  # 予想: 1 MiB を送る秒数 (または "12us" のような文字列)


# %%
def send_time(cluster, nbytes):
    """ランク 0 がランク 1 に ``nbytes`` を送るシミュレーション時間 (データを持たないペイロード)。"""

    def program(rank):
        if rank.id == 0:
            yield rank.send(1, CountOnly(nbytes))
        elif rank.id == 1:
            yield rank.recv(0)

    return cluster.run(program).time


pair = collsim.Cluster(topology.ring(2, bandwidth="100GB/s", latency="5us"))
alpha, beta = path_alpha_beta(pair.topology, 0, 1)
print(f"alpha = {format_time(alpha)}, beta = {format_rate(beta)}, "
      f"alpha*beta = {format_size(alpha * beta)}")  # fmt: skip
print(f"{'n':>10} {'simulated':>10} {'n/beta':>10} {'(n/beta)/alpha':>14}")
for n in (8, 1024, 64 * 1024, int(alpha * beta), 2**20, 64 * 2**20):
    t = send_time(pair, n)
    bound = (
        "レイテンシ律速" if n / beta < alpha else "帯域幅律速" if n / beta > alpha else "釣り合い"
    )
    print(f"{format_size(n):>10} {format_time(t):>10} {format_time(n / beta):>10} "
          f"{n / beta / alpha:>14.3g}  {bound}")  # fmt: skip
teach.check("5.1", send_time_answer, expected=send_time(pair, 2**20), rel=1e-3, unit="s")

# %% [markdown]
# ## 集団通信: ステップ数 · α + バイト数 / β
#
# 集団通信はステップの列です。各ステップは $\alpha$ を 1 回払い、そのステップのバイトを
# $\beta$ で運びます。レッスン 4 のリング all-reduce を $K$ ランクで行うと、次のように
# なります。
#
# $$T_\text{ring} = \underbrace{2(K-1)\,\alpha}_\text{latency term}
# + \underbrace{\frac{2(K-1)}{K}\,\frac{S}{\beta}}_\text{bandwidth term}$$
#
# 第 1 項がレイテンシ項、第 2 項が帯域幅項です。
#
# **演習 5.2.** $K = 8$ ランクのリング ($\alpha = 5\,\mu s$、$\beta = 100$ GB/s) で、
# 2 つの項が等しくなるバッファサイズ $S$ (バイト) はいくつでしょうか。これより小さければ
# all-reduce はレイテンシ律速、大きければ帯域幅律速です。

# %%
balance_size_answer = None  # 予想: レイテンシ項 = 帯域幅項 となる S (バイト)

# %%
k = 8
one_byte = closed_form("all_reduce", "ring", k, 1, alpha, beta)
latency_term = one_byte.steps * alpha  # ステップ数·α: S によらない部分
per_byte = one_byte.time_s - latency_term
balance = latency_term / per_byte
print(f"レイテンシ項 {format_time(latency_term)}、帯域幅項は 1 バイトあたり "
      f"{format_time(per_byte)}、1 MiB あたり {format_time(per_byte * 2**20)}")  # fmt: skip
ring8 = collsim.Cluster(topology.ring(k, bandwidth="100GB/s", latency="5us"))
for size in (balance / 64, balance, 64 * balance):
    t = ring8.all_reduce(count=int(size) // 4, dtype="float32").time
    print(f"S = {format_size(size):>10}: シミュレーション {format_time(t):>10} = "
          f"レイテンシ項の {t / latency_term:6.3g} 倍")  # fmt: skip
teach.check("5.2", balance_size_answer, expected=balance, rel=1e-3, unit="B", ranks=k)

# %% [markdown]
# ## ツリーとリングの比較
#
# 二項ツリーの all-reduce (ルートへ reduce してから broadcast) はステップが
# $2\lceil\log_2 K\rceil$ 回で済みますが、どのステップでもバッファ **全体** を運びます。
#
# $$T_\text{tree} = 2\lceil\log_2 K\rceil\left(\alpha + \frac{S}{\beta}\right)$$
#
# ステップは少なくバイトは多い。そのため小さなバッファではツリーが、大きなバッファでは
# リングが勝ちます。ライブラリがメッセージサイズでアルゴリズムを選ぶのはまさにこのため
# です (Thakur et al. 2005 が MPICH での選び方を説明しています)。
#
# **演習 5.3.** $T_\text{tree} = T_\text{ring}$ となるバッファサイズ $S$ (バイト) を返す
# `crossover(K, alpha, beta)` を書いてください。チェックでは、いくつかのクラスタ
# ($K \ge 4$) について collsim の閉形式を数値的に解いた値と比べます。

# %%
crossover_answer = None  # 関数を書く: def crossover(K, alpha, beta): return ...


# %%
def closed_form_crossover(K, alpha, beta):
    """collsim の閉形式に対する二分法: ツリーとリングの時間が等しくなる S。"""

    def tree_minus_ring(size):
        tree = closed_form("all_reduce", "tree", K, size, alpha, beta).time_s
        return tree - closed_form("all_reduce", "ring", K, size, alpha, beta).time_s

    low, high = 0.0, 1.0
    while tree_minus_ring(high) < 0:
        high *= 2
    for _ in range(200):
        middle = (low + high) / 2
        low, high = (middle, high) if tree_minus_ring(middle) < 0 else (low, middle)
    return (low + high) / 2


cases = [(4, 5e-6, 100e9), (8, 5e-6, 100e9), (16, 10e-6, 100e9), (64, 2e-6, 25e9),
         (12, 1e-6, 300e9), (1000, 5e-6, 50e9)]  # fmt: skip
correct_5_3 = teach.check_function("5.3", crossover_answer, closed_form_crossover, cases,
                                   compare=lambda got, want: abs(got - want) <= 1e-6 * want,
                                   unit="B")  # fmt: skip

# %% [markdown]
# 次はシミュレーションです。16 ランクを 1 台のスイッチにつないだ構成で、ツリーとリングを
# バッファサイズを変えながら比べます。カウントのみモード (シミュレートしたネットワーク上で
# 本物のスケジュールを動かし、データは持たずサイズだけを扱うので、掃引は 1 秒もかかり
# ません) で実行します。スイッチではランク間の経路がリンクを 2 本通るので、経路の $\alpha$
# はリンク 1 本の 2 倍です。破線は最速のアルゴリズムが入れ替わる位置、点線は最速の
# アルゴリズムが帯域幅律速に変わる位置を示します。

# %%
switch16 = collsim.Cluster(topology.switch(16, bandwidth="100GB/s", latency="5us"))
a16, b16 = path_alpha_beta(switch16.topology, 0, 1)
rule = crossover_answer if correct_5_3 and crossover_answer is not None else closed_form_crossover
predicted = rule(16, a16, b16)
data = sweep(switch16, algorithms=["tree", "ring"], sizes=[2**e for e in range(4, 29)])
for i, before, after in data.changes():
    print(f"シミュレーション: {before} が最速なのは {format_size(data.sizes[i])} まで、"
          f"{after} が最速なのは {format_size(data.sizes[i + 1])} から")  # fmt: skip
print(f"閉形式: 交差点は {format_size(predicted)} (経路の alpha {format_time(a16)})")
teach.show(sweep_figure(switch16, data=data), "05_sweep_tree_vs_ring")

# %% [markdown]
# 右のパネルは nccl-tests が報告する *バス帯域幅* (bus bandwidth,
# $\text{busbw} = \frac{S}{t}\cdot\frac{2(K-1)}{K}$) です。大きなバッファでは、リングの値は
# リンクの 100 GB/s に近づきますが、ツリーの値はそれよりずっと低いままです。ツリーは
# どのステップでもバッファ全体を送るからです。
#
# collsim には all-reduce のアルゴリズムがあと 2 つあり、4 つすべてで同じ掃引をすると、
# もっと豊かな絵が見えます。**halving-doubling** ($2\log_2 K$ ステップで、バイト数は
# リングと同じ) は、スイッチ上の大きなバッファでステップ数とバイト数の両方で有利になり、
# ごく小さなバッファでは 2 ステップの **naive** アルゴリズムが勝ちます。バッファが数
# バイトしかなければ、ルートへの集中はほとんど何のコストにもならないからです。

# %%
everything = sweep(switch16, sizes=[2**e for e in range(4, 29, 2)])
teach.show(sweep_figure(switch16, data=everything), "05_sweep_all_algorithms")

# %% [markdown]
# ## 輻輳: 複数の転送が 1 本のリンクを共有するとき
#
# 閉形式は、1 つのステップ内の 2 つの転送が同じリンクを使わないことを前提にしています。
# 使う場合、リンクの帯域幅はそれらの間で分け合われます。collsim のネットワーク
# (`model="maxmin"`、既定値) は各リンクを **max-min 公平** に分け合います。飽和したリンクを
# 通るフローは等しい取り分を得ます。ただし、別のリンクがすでにそれより少ない量に制限して
# いる場合は、その制限が優先します。`model="ideal"` はほかのフローを無視します (輻輳を
# 考慮しないシミュレータのように、どの転送も $\beta$ をまるごと使えます)。2 つの差が、
# 輻輳のコストです。
#
# いちばんわかりやすいのは、8 ランクのスイッチ上でのレッスン 4 の naive all-reduce です。
# ルートの下りリンク 1 本に、7 つのバッファが同時に届きます。

# %%
S = 64 * 2**20
switch8 = topology.switch(8, bandwidth="100GB/s", latency="5us")
naive = {}
for model in ("maxmin", "ideal"):
    naive[model] = collsim.Cluster(switch8, model=model).all_reduce(
        count=S // 4, dtype="float32", algorithm="naive")  # fmt: skip
    print(f"{format_size(S)} の naive all-reduce、{model=}: {format_time(naive[model].time)}")
print(f"max-min / ideal: {naive['maxmin'].time / naive['ideal'].time:.3g} 倍")
teach.show(utilization_figure(switch8, naive["maxmin"],
                              title="naive all-reduce, max-min sharing: the root's link is the bottleneck"),
           "05_utilization_naive_maxmin")  # fmt: skip
teach.show(utilization_figure(switch8, naive["ideal"],
                              title='naive all-reduce, model="ideal": every link looks busy'),
           "05_utilization_naive_ideal")  # fmt: skip

# %% [markdown]
# 2 枚の図を行ごとに読んでください。max-min 共有では、ルートのリンク (gather ステップでは
# `switch → r0`、送り返すステップでは `r0 → switch`) が満杯になり、ほかの各リンクは帯域幅の
# $1/(K-1)$ しか使っていません。ルートを待っているのです。ideal モデルでは、ルートのリンクを
# 7 つのフローがそれぞれ全速で通ります。図の副題にある「最も混んだ区間」(busiest slice) は
# 100 % をはるかに超えています。現実のリンクには運べない負荷で、報告される時間は上に
# 表示した倍率だけ短すぎます。
#
# 輻輳はよく設計されたアルゴリズムにも潜んでいます。8 GPU のリングでリング all-reduce を
# 実行しますが、ランクの並びを 0, 2, 4, 6, 1, 3, 5, 7 にします (ランクをデバイスに不注意に
# 割り当てると、こうなることがあります)。すると「隣」のランクが何リンクも離れ (下の最初の
# 出力行がホップ数を数えています)、リングのどのリンクも同時に 2 つの転送を運ぶことに
# なります。
#
# **演習 5.4.** max-min 共有のもとで、64 MiB のバッファについて、並びの乱れたリングは
# 順番どおりのリングの何倍遅いでしょうか。

# %%
misordered_slowdown_answer = None  # 予想: 時間 (並びが乱れた場合) / 時間 (順番どおり)

# %%
ring_topology = topology.ring(8, bandwidth="100GB/s", latency="5us")
order = [0, 2, 4, 6, 1, 3, 5, 7]
pairs = list(zip(order, order[1:] + order[:1]))  # 各ステップで誰が誰に送るか
hops = [len(route(ring_topology, a, b)) for a, b in pairs]
per_link = Counter(link for a, b in pairs for link in route(ring_topology, a, b))
print(f"{order} の連続するランク間のリンク数: {hops}")
print(f"1 ステップで各リンクを通る転送の数: {sorted(set(per_link.values()))}")
ratios = {}
for model in ("maxmin", "ideal"):
    cluster = collsim.Cluster(ring_topology, model=model)
    in_order = cluster.all_reduce(count=S // 4, dtype="float32")
    shuffled = cluster.all_reduce(count=S // 4, dtype="float32", group=order)
    ratios[model] = shuffled.time / in_order.time
    print(f"model={model!r:<8}: 順番どおり {format_time(in_order.time)}、"
          f"ランク {order}: {format_time(shuffled.time)} ({ratios[model]:.3g} 倍)")  # fmt: skip
teach.check("5.4", misordered_slowdown_answer, expected=ratios["maxmin"], rel=0.02, unit="x")

# %% [markdown]
# ideal モデルが並びの乱れたリングに課すのは、長くなった経路のレイテンシだけで、帯域幅が
# 半分になることを見落とします。各転送をリンクを独占しているかのように見積もる閉形式も、
# 同じくこれを見落とします。

# %% [markdown]
# ## まとめ
#
# - メッセージ 1 つのコストは $\alpha + n/\beta$、集団通信のコストは (ステップ数)$\cdot\alpha$ +
#   (最も混んだリンク上のバイト数)$/\beta$ です (Hockney のモデル。Thakur, Rabenseifner &
#   Gropp 2005)。
# - $S \approx$ ステップ数$\cdot\alpha\beta$ / ($S$ 1 単位あたりのバイト数) より小さいと
#   アルゴリズムは **レイテンシ律速** で、ステップの少ないもの (ツリー、halving-doubling、
#   naive さえも) が勝ちます。それより大きいと **帯域幅律速** で、最も混んだリンク上の
#   バイトが少ないもの (リング、halving-doubling) が勝ちます。リング all-reduce が釣り合う
#   のは $S = K\alpha\beta$ です。
# - ツリーとリングは $2\lceil\log_2 K\rceil(\alpha + S/\beta) = 2(K-1)(\alpha +
#   S/(K\beta))$ となる点で入れ替わります。ライブラリはサイズでアルゴリズムを選びます。
# - 閉形式は、どの転送もリンクを独占できると仮定しています。フローがリンクを共有すると
#   (naive のルート、割り当ての悪いリング)、max-min 共有が帯域幅を分け合い、輻輳を考慮
#   しないモデルは短すぎる時間を報告します。
# - 次のレッスン 6 では、通信を、その陰に隠したい計算と比べます。
