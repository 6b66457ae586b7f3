# %% [markdown]
# # 4. リング all-reduce を 1 ステップずつ
# reduce-scatter のあとに all-gather: 各ランクが送るのは 2(K−1)/K·N·b バイトで、K を増やしてもほとんど増えません。一方、素朴な方法ではルートのリンクが飽和します。
#
# レッスン 2 と 3 は、学習 1 ステップにつき 1 回の all-reduce (オールリデュース)、あるいはその
# 2 つの半分である reduce-scatter (リデューススキャッター) と all-gather (オールギャザー) で
# 終わりました。各ランクは $b$ バイトの要素 $N$ 個からなる自分の勾配を持って始まり、最後には
# 全ランクがその和を持っていなければなりません。このレッスンでは、この集団通信を仮想クラスタ上で
# チャンクごとに開けて見て、そのコストを数えます (Patarasuk & Yuan 2009, "Bandwidth optimal
# all-reduce algorithms for clusters of workstations")。
#
# ステップは `collsim step` の表示 ("step 1 of 6") と同じく 1 から数えます。ステップ 0 は、
# 転送が始まる前の初期状態を表します。
#
# これまでと同じく、`..._answer = None` をそれぞれ自分の予想に書き換えて、チェックを実行して
# ください。

# %%
from functools import lru_cache

import numpy as np

import collsim
from collsim import teach, topology
from collsim.collectives.formulas import closed_form
from collsim.collectives.ring import ring_all_reduce
from collsim.units import format_size, format_time
from collsim.viz.ring import ring_figure
from collsim.viz.traffic import traffic_figure

# %% [markdown]
# ## 素直なやり方と、その問題点
#
# 素直に考えた all-reduce はこうです。全ランクが自分のバッファ全体を 1 つのルートに送り、
# ルートがそれを足し合わせて、和を全員に送り返します。ステップは 2 つだけです。しかし
# ルートはバッファ $K-1$ 個分を丸ごと受け取り、$K-1$ 個分を丸ごと送ります。すべての通信が
# 1 本のリンクに押し寄せるので、ランクが多いほど時間がかかります。これは最後に測ります。
#
# ## リング: reduce-scatter のあとに all-gather
#
# $K$ 個のランクをリング状のトポロジに並べ (ランク $r$ はランク $(r+1) \bmod K$ にだけ送ります)、
# どのバッファも $K$ 個のチャンクに切り分けます。
#
# - **reduce-scatter** (ステップ $1 \ldots K-1$): 各ステップで、全ランクがチャンクを 1 つ右隣に
#   送り、右隣はそれを自分の持つ同じチャンクに *足し込み* ます。チャンクはリングを回りながら
#   1 ステップごとに 1 ランク分ずつ寄与を集めていき、$K-1$ ステップ後には、各ランクが $K$ 個
#   すべてのランクの和を含むチャンクを 1 つずつ持つことになります。
# - **all-gather** (ステップ $K \ldots 2(K-1)$): 全ランクが完成したチャンクを右隣へ渡し、
#   受け取った側はそれで自分のチャンクを *上書き* します。これを全ランクが完成したチャンクを
#   すべて持つまで続けます。
#
# 4 つのランクがそれぞれ 8 個の数を持っているとします。collsim はすべての転送と、各ステップの
# あとに各チャンクが何を含んでいるかを記録します (`r0+r3` は「ランク 0 とランク 3 の値を
# 足したもの」という意味です)。

# %%
K = 4
cluster = collsim.Cluster(topology.ring(K, bandwidth="100GB/s", latency="5us"))
buffers = [np.arange(8.0) + 10 * r for r in range(K)]
result = cluster.all_reduce(buffers, algorithm="ring")
for view in result.steps(include_initial=True):
    print(view)
print("全ランクの出力が numpy の和と一致:",
      all(np.array_equal(out, np.sum(buffers, axis=0)) for out in result.outputs))  # fmt: skip

# %% [markdown]
# 同じものを図にします。6 ステップ中のステップ 3 (reduce-scatter の最後) のあとでは、各ランクが
# 4 つすべての寄与を含むチャンクを 1 つずつ持っています (濃い色)。そのあと、ステップ 4 から
# all-gather がそれらのチャンクを広めていきます。

# %%
teach.show(
    ring_figure(result, step=K - 1), "04_ring_end_of_reduce_scatter"
)  # 6 ステップ中のステップ 3
teach.show(ring_figure(result, step=K), "04_ring_first_all_gather_step")  # 6 ステップ中のステップ 4

# %% [markdown]
# ## ランクあたりのバイト数: 2(K−1)/K · N · b
#
# $2(K-1)$ 回のステップのそれぞれで、全ランクが $b$ バイトの要素 $N/K$ 個からなるチャンクを
# 1 つ送ります。
#
# $$V_\text{rank} = 2(K-1)\cdot\frac{N b}{K} = \frac{2(K-1)}{K}\,N b$$
#
# **演習 4.1.** 64 MiB のバッファ ($N = 16\,\text{Mi}$ 個の float32 要素、$b = 4$) を
# $K = 8$ ランクでリング all-reduce するとき、各ランクが送るバイト数を予想してください。

# %%
ring_bytes_answer = None  # 予想を書く: ランクあたりの送信バイト数

# %%
S = 64 * 2**20  # バイト数: N·b
ring8 = collsim.Cluster(topology.ring(8, bandwidth="100GB/s", latency="5us"))
# count-only: スケジュールもネットワークも同じで、データを持たずにサイズだけを扱う (64 MiB の配列は不要)
big = ring8.all_reduce(count=S // 4, dtype="float32", algorithm="ring")
print(f"ランクあたりの送信バイト数: {format_size(big.stats.bytes_sent[0])}、全ランクで同じ: "
      f"{set(big.stats.bytes_sent) == {big.stats.bytes_sent[0]}} ({big.stats.steps} ステップ)")  # fmt: skip
teach.check("4.1", ring_bytes_answer, expected=big.stats.bytes_sent[0], unit="B", ranks=8)

# %% [markdown]
# ## ランク r はステップ s でどのチャンクを送るのか
#
# 上のステップごとの表示を見てください。ステップ 1 では、ランク 0 がチャンク 3 を、ランク 1 が
# チャンク 0 を送り、…と続きます。次のステップでは、各ランクは直前に受け取ったチャンクを送り
# ます (受け取ったチャンクに自分の分を足し込んで、先へ渡すためです)。
#
# **演習 4.2.** リング all-reduce のステップ `step` (上の表示と同じく 1 から数え、
# $1 \le s \le 2(K-1)$ で両方のフェーズを含みます) で、ランク `rank` が送るチャンクの番号を
# 返す関数 `chunk_sent(rank, step, K)` を書いてください。チェックでは、いくつかの大きさの
# リングのすべてのランクとステップについて、collsim のスケジュールと比べます。
# (ヒント: まず reduce-scatter を考え、それから all-gather が何をしているかを見てください。)

# %%
chunk_sent_answer = None  # 関数を書く: def chunk_sent(rank, step, K): return ...


# %%
@lru_cache
def _schedule(k):
    return ring_all_reduce(
        k
    )  # collsim のリング all-reduce をデータとして: チャンク移動のステップの並び


def schedule_chunk(rank, step, k):
    """``rank`` が ``step`` (1 始まり) で送るチャンク。collsim のスケジュールから読み取る。"""
    move = next(m for m in _schedule(k).steps[step - 1] if m.src == rank)  # Python のリスト
    return move.chunks.start


cases = [(r, s, k) for k in (2, 3, 4, 5, 8) for s in range(1, 2 * (k - 1) + 1) for r in range(k)]
correct_4_2 = teach.check_function("4.2", chunk_sent_answer, schedule_chunk, cases, unit="")

# %% [markdown]
# この規則がアルゴリズムのすべてです。これを **ランクプログラム** として書くと次のようになり
# ます。全ランクが実行するジェネレータで、送信と受信を yield し、シミュレーションされた
# ネットワークがそれを実行します。チェックに通っていればあなたの `chunk_sent` を、そうでなければ
# スケジュールから読み取った規則を使います。


# %%
def my_ring_all_reduce(rank, x, chunk_rule):
    k, me = rank.size, rank.id
    right, left = (me + 1) % k, (me - 1) % k
    chunks = [c.copy() for c in np.array_split(x, k)]
    for step in range(1, 2 * (k - 1) + 1):  # ステップ 1 .. 2(K-1)
        outgoing = chunks[chunk_rule(me, step, k)]
        incoming = chunk_rule(left, step, k)  # 左隣がいま送ってくるチャンク
        handle = yield rank.isend(right, outgoing)
        got = yield rank.recv(left)
        yield rank.wait(handle)
        if step <= k - 1:
            chunks[incoming] = chunks[incoming] + got  # reduce-scatter: 足し込む
        else:
            chunks[incoming] = got  # all-gather: 完成したチャンクをコピーする
    return np.concatenate(chunks)


rule = chunk_sent_answer if correct_4_2 and chunk_sent_answer is not None else schedule_chunk
mine = cluster.run(lambda rank: my_ring_all_reduce(rank, buffers[rank.id], rule))
print("使う規則:", "あなたの chunk_sent" if rule is chunk_sent_answer else "スケジュールの規則")
print("出力が numpy の和と一致:",
      all(np.array_equal(out, np.sum(buffers, axis=0)) for out in mine.returns))  # fmt: skip
print(f"ランクあたりの送信バイト数: {format_size(mine.stats.bytes_sent[0])} "
      f"(collsim の実装: {format_size(result.stats.bytes_sent[0])})、"
      f"全ランクで同じ: {mine.stats.bytes_sent == result.stats.bytes_sent}")  # fmt: skip
print(
    f"シミュレーション時間: {format_time(mine.time)} (collsim の実装: {format_time(result.time)})"
)

# %% [markdown]
# ## なぜ K を増やしてもほとんど増えないのか
#
# $\frac{2(K-1)}{K}$ は $K = 2$ で 1 になり、下から 2 に近づいていきます。つまりランクが 8 個
# でも 1024 個でも、各ランクが送るのは **自分の勾配のおよそ 2 倍** です。リング all-reduce が
# データ並列の標準になったのはこのためです。一方、ステップ数 $2(K-1)$ は $K$ とともに増え、
# ステップごとにリンクのレイテンシ $\alpha$ を 1 回ずつ払います。帯域幅 $\beta$ のリンクで
# 組んだリングでの時間は次のとおりです。
#
# $$T = 2(K-1)\,\alpha + \frac{2(K-1)}{K}\,\frac{N b}{\beta}$$
#
# 次の表では、64 MiB の all-reduce を 2 から 64 ランクのリングで (count-only で) 実行し、
# シミュレーション時間をこの閉形式と比べます。閉形式はレイテンシの項と帯域幅の項に分けて
# 示します。

# %%
alpha, beta = 5e-6, 100e9  # 上と同じリンク: 5 us, 100 GB/s
print(f"{'K':>3} {'steps':>5} {'bytes/rank':>11} {'/ S':>7} {'simulated':>10} "
      f"{'closed form':>11} {'latency':>9} {'bandwidth':>9}")  # fmt: skip
for k in (2, 4, 8, 16, 32, 64):
    run = collsim.Cluster(topology.ring(k, "100GB/s", "5us")).all_reduce(
        count=S // 4, dtype="float32"
    )
    form = closed_form("all_reduce", "ring", k, S, alpha, beta)
    latency = form.steps * alpha
    sent = run.stats.bytes_sent[0]
    print(f"{k:>3} {run.stats.steps:>5} {format_size(sent):>11} {sent / S:>7.4g} "
          f"{format_time(run.time):>10} {format_time(form.time_s):>11} "
          f"{format_time(latency):>9} {format_time(form.time_s - latency):>9}")  # fmt: skip

# %% [markdown]
# 帯域幅の列は頭打ちになり、$K$ とともに増え続けるのはレイテンシの列だけです。勾配が大きければ
# レイテンシの項は小さいままです。どこでレイテンシが支配的になるかは、レッスン 5 で見ます。
#
# ## 素朴な all-reduce と、飽和するルート
#
# 集めて送り返す方法に戻り、今度は 1 台の **スイッチ** の上で動かします。各ランクはスイッチへの
# 上りリンクとスイッチからの下りリンクを 1 本ずつ持ちます (どちらも 100 GB/s)。集める
# ステップでは $K-1$ 個のバッファがすべて同じリンク、つまりスイッチからルートへの下りリンクに
# 届き、その帯域幅を分け合います。
#
# **演習 4.3.** 64 MiB のバッファを 8 ランクで素朴に all-reduce するとき、スイッチから
# ルート (ランク 0) への下りリンクを通るバイト数はいくつでしょうか。

# %%
root_link_bytes_answer = None  # 予想を書く: スイッチ -> r0 のリンクを通るバイト数

# %%
switch8 = topology.switch(8, bandwidth="100GB/s", latency="5us")
naive = collsim.Cluster(switch8).all_reduce(count=S // 4, dtype="float32", algorithm="naive")
ring_on_switch = collsim.Cluster(switch8).all_reduce(
    count=S // 4, dtype="float32", algorithm="ring"
)
print(f"naive: {naive.stats.steps} ステップ、スイッチ -> r0 のバイト数: "
      f"{format_size(naive.stats.link_bytes[('switch', 0)])}")  # fmt: skip
print(f"ring:  {ring_on_switch.stats.steps} ステップ、スイッチ -> r0 のバイト数: "
      f"{format_size(ring_on_switch.stats.link_bytes[('switch', 0)])}")  # fmt: skip
for name, r in (("naive", naive), ("ring", ring_on_switch)):
    loads = r.stats.link_bytes.values()
    print(f"{name:<5}  最も混んだリンク {format_size(max(loads))}、全リンクの合計 "
          f"{format_size(sum(loads))}")  # fmt: skip
teach.check("4.3", root_link_bytes_answer, expected=naive.stats.link_bytes[("switch", 0)],
            unit="B", ranks=8)  # fmt: skip

# %% [markdown]
# どちらのアルゴリズムも、動かすバイト数の合計は同じです (上の表示のとおり)。違うのは、
# それがどこを通るかです。図では、各リンクを運んだバイト数で色分けしています。色のスケールは
# 図ごとに違うので、サブタイトルの数値を読んでください。素朴な方法ではルートの 2 本のリンクが
# それぞれバッファ $(K-1)$ 個分を運び、ほかのリンクは 1 個分ずつしか運びません。リングは
# $\frac{2(K-1)}{K}$ 個分のバッファをすべてのリンクに均等に分散させるので、最も混んだリンクでも
# 運ぶ量はずっと少なくなります。

# %%
teach.show(traffic_figure(switch8, naive), "04_traffic_naive")
teach.show(traffic_figure(switch8, ring_on_switch), "04_traffic_ring")

# %% [markdown]
# 最後に、$K$ を増やしたときの時間です。素朴な方法では、ルートのリンクが 2 つのステップの
# それぞれでバッファ $(K-1)$ 個分を運ぶので、時間は $2(K-1)\,Nb/\beta$ のように増えます。
# 一方、リングの時間は $2\,Nb/\beta$ 付近にとどまります。

# %%
print(f"{'K':>3} {'naive':>10} {'ring':>10} {'naive / ring':>12}")
for k in (2, 4, 8, 16, 32, 64):
    c = collsim.Cluster(topology.switch(k, "100GB/s", "5us"))
    t_naive = c.all_reduce(count=S // 4, dtype="float32", algorithm="naive").time
    t_ring = c.all_reduce(count=S // 4, dtype="float32", algorithm="ring").time
    print(f"{k:>3} {format_time(t_naive):>10} {format_time(t_ring):>10} {t_naive / t_ring:>12.3g}")

# %% [markdown]
# ## まとめ
#
# - リング all-reduce = **reduce-scatter** ($K-1$ ステップ、足し込む) + **all-gather**
#   ($K-1$ ステップ、コピーする)。ステップ $s$ (1 から数える) では、どちらのフェーズでも
#   ランク $r$ がチャンク $(r-s) \bmod K$ を送ります。
# - 各ランクが送るのは $\frac{2(K-1)}{K}\,N b$ バイトで、$K$ がいくつでも自分のバッファの
#   2 倍未満です (Patarasuk & Yuan 2009)。しかも、どのリンクも同じ負荷を運びます。
# - ステップ数 $2(K-1)$ は $K$ とともに増えます。ステップごとにレイテンシ $\alpha$ がかかります。
# - 素朴な all-reduce はステップが 2 つで済みますが、バッファ $(K-1)$ 個分をルートのリンクに
#   押し込むので、時間は $K$ に比例して増えます。
# - 次のレッスン 5 では、レイテンシと帯域幅を 1 つのコストモデルにまとめ、メッセージサイズを
#   変えながらアルゴリズムを比べます。
