# %% [markdown]
# # 13. おもちゃのプログラムから実際のコードへ
# リング all-reduce を collsim のジェネレータプログラムと mpi4py のプログラムの両方で書き、バイト数も時間も同じになることを確かめます。続いて、実際のクラスタを測るのと同じやり方でピンポンを測ります。
#
# レッスン 1〜12 では、ランクのプログラムをすべて**ジェネレータ**として書いてきました。
# `yield rank.send(...)` や `got = yield rank.recv(...)` という形です。これならすべての
# 操作が目に見えますが、実際の分散コードをこう書く人はいません。学生が学ぶのは
# **mpi4py** (`comm.Send(buf, dest=1)`, `comm.Allreduce(x, out, op=MPI.SUM)`) や
# torch.distributed (`dist.all_reduce(t)`) です。どれも、処理が終わるまでブロックして
# から戻る呼び出しです。
#
# collsim は mpi4py のコードを手を加えずにそのまま実行します。torch.distributed 風のコードは
# `collsim.distributed` に対して書けば実行できます (`import collsim.distributed as dist`。
# torch.distributed と同じ名前で、テンソルの代わりに numpy 配列を使います。
# `torch.distributed` そのものを import するプログラムは、まだここでは動きません)。
#
# - `collsim exec -n 4 script.py` は、`mpirun -n 4 python script.py` と同じように
#   スクリプトを実行します (`examples/mpi_pi.py`、`mpi_ping_pong.py`、
#   `mpi_ring_pass.py` で試してみてください)。
# - `collsim.exec(main, n=4)` は Python の関数を 4 ランクで実行し、各ランクが返した値と
#   出力した内容、そして実行の記録 (時間、バイト数、トレース) を返します。
#
# 各ランクはそれぞれ自分のスレッドで動きますが、ある瞬間に動いているのは 1 つだけで、
# どれを動かすかはエンジンがシミュレーション時間の順に決めます。そのため、どの実行も
# バイト単位まで同じ結果になります。実行の中では `from mpi4py import MPI` で collsim の
# MPI (`collsim.mpi`) が読み込まれ、その呼び出しが実際の配列をシミュレーション上の
# ネットワーク越しに動かします。呼び出しと呼び出しの間の Python の処理は**時間を消費
# しません**。プログラムが `collsim.compute(seconds=...)` や
# `collsim.compute(flops=...)` でコストを明示しない限り、シミュレーション時間はかからない
# のです。時間がかかるのは通信だけで、それはネットワークの時間です。
#
# これまでと同じく、`..._answer = None` をそれぞれ自分の答えに置き換えてから、チェックを
# 実行してください。

# %%
import numpy as np
from matplotlib.figure import Figure

import collsim
from collsim import teach, topology
from collsim.topology import path_alpha_beta
from collsim.units import format_rate, format_size, format_time
from collsim.viz.sweep import size_axis

K, N = 4, 1024  # ランク数、ランクあたりの float64 要素数 (8 KiB)
cluster = collsim.Cluster(topology.ring(K, bandwidth="100GB/s", latency="5us"))
inputs = [np.arange(N, dtype=np.float64) + 1000 * r for r in range(K)]
expected = np.sum(inputs, axis=0)

# %% [markdown]
# ## 1. おもちゃ: ジェネレータプログラム
#
# レッスン 4 のリング all-reduce (オールリデュース) です。バッファを $K$ 個のチャンクに
# 分けます。ステップ $s$ (1 から数えます) で、ランク $r$ はチャンク $(r - s) \bmod K$ を
# 右隣に送り、左隣からチャンクを 1 つ受け取ります。最初の $K-1$ ステップは
# reduce-scatter (リデューススキャッター) で、受け取ったものを足し込みます。最後の
# $K-1$ ステップは all-gather (オールギャザー) で、受け取ったものをそのままコピーします。


# %%
def ring_generator(rank, x):
    k, me = rank.size, rank.id
    right, left = (me + 1) % k, (me - 1) % k
    chunks = [c.copy() for c in np.array_split(x, k)]
    for step in range(1, 2 * (k - 1) + 1):  # ステップ 1 .. 2(K-1)
        incoming = (left - step) % k  # 左隣がいま送ってくるチャンク
        handle = yield rank.isend(right, chunks[(me - step) % k])
        got = yield rank.recv(left)
        yield rank.wait(handle)
        chunks[incoming] = chunks[incoming] + got if step <= k - 1 else got
    return np.concatenate(chunks)


toy = cluster.run(lambda rank: ring_generator(rank, inputs[rank.id]))
print("すべての出力が numpy の和と一致:", all(np.array_equal(o, expected) for o in toy.returns))
print(f"ランクごとの送信バイト数: {[format_size(b) for b in toy.stats.bytes_sent]}")
print(f"シミュレーション時間: {format_time(toy.time)}")

# %% [markdown]
# ## 2. 同じリングを mpi4py で
#
# 同じアルゴリズムを mpi4py のプログラムとして書いたものです。どの行にも、上の
# プログラムに対応する行があります。
#
# | ジェネレータプログラム | mpi4py |
# |---|---|
# | `rank.id`, `rank.size` | `comm.Get_rank()`, `comm.Get_size()` |
# | `handle = yield rank.isend(right, x)` | `request = comm.Isend(x, dest=right)` |
# | `got = yield rank.recv(left)` | `comm.Recv(got, source=left)`。受信先のバッファは自分で確保します |
# | `yield rank.wait(handle)` | `request.Wait()` |
#
# この関数は、普通の MPI プログラムと同じように `mpi4py` を import します。
# `collsim.exec` が、それを上のクラスタで実行します。


# %%
def ring_mpi(inputs):
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    k, me = comm.Get_size(), comm.Get_rank()
    right, left = (me + 1) % k, (me - 1) % k
    chunks = [c.copy() for c in np.array_split(inputs[me], k)]
    for step in range(1, 2 * (k - 1) + 1):
        incoming = (left - step) % k
        got = np.empty_like(chunks[incoming])
        request = comm.Isend(chunks[(me - step) % k], dest=right)
        comm.Recv(got, source=left)
        request.Wait()
        chunks[incoming] = chunks[incoming] + got if step <= k - 1 else got
    return np.concatenate(chunks)


real = collsim.exec(ring_mpi, cluster=cluster, args=(inputs,))
print("すべての出力が numpy の和と一致:", all(np.array_equal(o, expected) for o in real.returns))
print(f"ランクごとの送信バイト数: {[format_size(b) for b in real.bytes_sent]} "
      f"(ジェネレータ版と同じか: {real.bytes_sent == toy.stats.bytes_sent})")  # fmt: skip
print(f"シミュレーション時間: {format_time(real.time)} (ジェネレータ版: {format_time(toy.time)})")

# %% [markdown]
# メッセージも、バイト数も、時間も同じです。ブロッキングのプログラムは、`yield` を
# 呼び出しの中に隠したジェネレータプログラムにほかなりません。各呼び出しは同じエンジンに
# 操作を登録し、エンジンが再開させるまで眠ります。
#
# **演習 13.1.** $K = 4$ ランク、$N = 1024$ 個の float64 要素のとき、`ring_mpi` で各ランクは
# 何バイト送るでしょうか。(レッスン 4 の式を使います。)

# %%
mpi_ring_bytes_answer = None  # あなたの予想: ランクあたりの送信バイト数

# %%
teach.check("13.1", mpi_ring_bytes_answer, expected=real.bytes_sent[0], unit="B", ranks=K)

# %% [markdown]
# ## 3. ライブラリ呼び出し: `comm.Allreduce`
#
# 実際のコードでリングを手で書く人はいません。`comm.Allreduce(x, out, op=MPI.SUM)` が
# 代わりにやってくれます。collsim の上では、この呼び出しは実行に設定されたアルゴリズムで
# 動きます。既定はリング (MPICH が大きなメッセージに選ぶもの) で、`collsim.exec` に
# `algorithm="tree"` (ツリー) や `"halving_doubling"` などを渡すこともできます
# (`collsim exec` では `--algorithm` です)。


# %%
def allreduce_mpi(inputs):
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    out = np.empty_like(inputs[comm.Get_rank()])
    comm.Allreduce(inputs[comm.Get_rank()], out, op=MPI.SUM)
    return out


library = collsim.exec(allreduce_mpi, cluster=cluster, args=(inputs,), algorithm="ring")
print("すべての出力が numpy の和と一致:",
      all(np.array_equal(o, expected) for o in library.returns))  # fmt: skip
print(f"{'program':<28} {'bytes/rank':>11} {'messages':>9} {'time':>10}")
for name, sent, messages, time in (
    ("generator, by hand", toy.stats.bytes_sent[0], len(toy.trace.transfers), toy.time),
    ("mpi4py Isend/Recv, by hand", real.bytes_sent[0], len(real.trace.transfers), real.time),
    ("mpi4py comm.Allreduce", library.bytes_sent[0], len(library.trace.transfers),
     library.time),
):  # fmt: skip
    print(f"{name:<28} {format_size(sent):>11} {messages:>9} {format_time(time):>10}")

# %% [markdown]
# **演習 13.2.** $K = 4$ のとき、リング all-reduce は全ランク合わせて何通のメッセージを
# 送るでしょうか。(各ランクは $2(K-1)$ ステップのそれぞれで、チャンクを 1 つずつ送ります。)

# %%
ring_messages_answer = None  # あなたの予想: all-reduce 全体のメッセージ数

# %%
teach.check("13.2", ring_messages_answer, expected=len(library.trace.transfers),
            unit="messages", ranks=K)  # fmt: skip

# %% [markdown]
# ### 計算は、コストを明示しない限り時間を消費しない
#
# 学習の 1 ステップでは、計算をしてから勾配を all-reduce します。collsim の上では、
# 呼び出しの間の numpy の処理は、手元のノート PC でどれだけ時間がかかっても
# シミュレーション時間を消費しません。計算を時間に数えたいプログラムは、
# `collsim.compute(seconds=...)` (または `flops=...`。クラスタの FLOP/s で換算します) で
# そう明示します。順伝播と逆伝播のモデル化は、こうして行います。


# %%
def train_step(inputs, compute_seconds):
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    gradient = np.tanh(np.outer(inputs[comm.Get_rank()], np.ones(64))).sum(axis=1)  # 実際の計算
    if compute_seconds:
        collsim.compute(seconds=compute_seconds)  # 順伝播 + 逆伝播にかかるはずの時間
    total = np.empty_like(gradient)
    comm.Allreduce(gradient, total, op=MPI.SUM)
    return MPI.Wtime()


for seconds in (0, 1e-3):
    step = collsim.exec(train_step, cluster=cluster, args=(inputs, seconds))
    print(f"collsim.compute(seconds={seconds:g}): ステップはシミュレーション時間で "
          f"{format_time(max(step.returns))} に終わる")  # fmt: skip

# %% [markdown]
# ## 4. リンクを測る: ピンポン
#
# 実際のクラスタのレイテンシ $\alpha$ と帯域幅 $\beta$ は、どうやって調べるのでしょうか。
# どの MPI の講義でも行う方法 (OSU マイクロベンチマークの `osu_latency` と `osu_bw` も
# 同じです) はこうです。ランク 0 が $n$ バイトをランク 1 に送り、ランク 1 はそれをすぐに
# 送り返します。往復時間の半分が片道の時間 $t(n)$ です。これを `MPI.Wtime()` で測り、
# 数回の繰り返しで平均し、1 バイトからメガバイト級までのサイズについて求めます。
# α–β モデル (Hockney 1994) によれば
#
# $$t(n) = \alpha + \frac{n}{\beta}$$
#
# なので、小さなメッセージからは $\alpha$ が、大きなメッセージからは $\beta$ が測れます。
# 下のプログラムがそのベンチマークで、`mpirun -n 2` で実行するときの形そのままです
# (`examples/mpi_ping_pong.py` を関数にしたものです)。collsim の上では、`MPI.Wtime()` は
# シミュレーション上の時計です。


# %%
def ping_pong(sizes, repeats=5):
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()

    def round_trip(buf):
        if rank == 0:
            comm.Send(buf, dest=1)
            comm.Recv(buf, source=1)
        elif rank == 1:
            comm.Recv(buf, source=0)
            comm.Send(buf, dest=0)

    times = []
    for n in sizes:
        buf = np.zeros(n, dtype=np.uint8)
        round_trip(buf)  # ウォームアップ: これ以降は、どちらのランクも相手を待たない
        start = MPI.Wtime()
        for _ in range(repeats):
            round_trip(buf)
        times.append((MPI.Wtime() - start) / (2 * repeats))
    return times


link = topology.ring(2, bandwidth="25GB/s", latency="2us")  # 2 ランク、各方向にリンク 1 本
alpha, beta = path_alpha_beta(link, 0, 1)
sizes = [4**i for i in range(12)]  # 1 B .. 4 MiB
measured = collsim.exec(ping_pong, topology=link, args=(sizes,)).returns[0]
print(f"リンク: alpha = {format_time(alpha)}, beta = {format_rate(beta)}")
print(f"{'size':>10} {'measured t(n)':>14} {'alpha + n/beta':>15} {'bandwidth n/t':>14}")
for n, t in zip(sizes, measured):
    print(f"{format_size(n):>10} {format_time(t):>14} {format_time(alpha + n / beta):>15} "
          f"{format_rate(n / t):>14}")  # fmt: skip

# %% [markdown]
# **演習 13.3.** このリンク (2 us、25 GB/s) で 1 MiB のメッセージを片道送る時間を予想し、
# 上の測定結果と比べてください。

# %%
one_mib_time_answer = None  # あなたの予想: 1 MiB を片道送る秒数

# %%
teach.check("13.3", one_mib_time_answer, expected=measured[sizes.index(2**20)], unit="s")

# %% [markdown]
# **演習 13.4.** 実際のベンチマークが出力するのは表であって、$\alpha$ と $\beta$ では
# ありません。この 2 つはフィッティングで求めます。$t = \alpha + n/\beta$ の最小二乗法で
# `(alpha, beta)` を返す `fit_alpha_beta(sizes, times)` を書いてください ($n$ についての
# 直線で、切片が $\alpha$、傾きが $1/\beta$ です。`np.polyfit(sizes, times, 1)` は
# `[slope, intercept]` を返します)。チェックでは、上の測定結果と、実際のクラスタのように
# ノイズを含んだ表に対して、この関数を実行します。

# %%
fit_alpha_beta_answer = None  # あなたの関数: def fit_alpha_beta(sizes, times): return (a, b)


# %%
def reference_fit(sizes, times):
    slope, intercept = np.polyfit(np.asarray(sizes, float), np.asarray(times, float), 1)
    return intercept, 1.0 / slope


def noisy_table(alpha, beta, seed):
    """実際のクラスタが返すような表: alpha + n/beta に最大 3 % のジッタを加えたもの。"""
    jitter = 1 + 0.03 * np.random.default_rng(seed).random(len(sizes))
    return sizes, list((alpha + np.array(sizes, float) / beta) * jitter)


cases = [(sizes, measured), noisy_table(1.5e-6, 12.5e9, 1), noisy_table(20e-6, 1e9, 2)]
teach.check_function(
    "13.4", fit_alpha_beta_answer, reference_fit, cases,
    compare=lambda got, want: np.allclose(got, want, rtol=1e-6),
)  # fmt: skip
fitted_alpha, fitted_beta = reference_fit(sizes, measured)
print(f"フィッティングの結果: alpha = {format_time(fitted_alpha)}, beta = {format_rate(fitted_beta)}。"
      f"リンク: {format_time(alpha)}, {format_rate(beta)}")  # fmt: skip

# %% [markdown]
# collsim の上では、フィッティングでリンクの値がそのまま戻ってきます。シミュレーション
# 時間にはノイズがないからです。実際のクラスタではそうはいきません。まずジッタがあると
# 考えてください (繰り返し測り、最小値か中央値を取ります)。また、MPI ライブラリが eager
# プロトコル (小さなメッセージをバッファにコピーし、送信はすぐに戻る) から rendezvous
# プロトコル (送信が受信を待つ。NCCL と collsim の大きなメッセージはこの方式です) に
# スイッチするところで、グラフに折れ目が出ます。さらにレイテンシには、回線だけでなく
# ソフトウェアスタックの分も含まれます。
#
# 測った帯域幅 $n / t(n)$ は $\beta$ に向かって増えていきますが、$\beta$ に届くのは大きな
# メッセージだけです。帯域幅が $\beta$ の**半分**に達するサイズが、Hockney の $n_{1/2}$
# です。そこでは $t = 2n/\beta$ なので、$\alpha = n/\beta$ となります。
#
# **演習 13.5.** このリンク (2 us、25 GB/s) の $n_{1/2}$ は何バイトでしょうか。

# %%
half_bandwidth_size_answer = None  # あなたの予想: n/t = beta/2 となるバイト数

# %%
teach.check("13.5", half_bandwidth_size_answer, expected=fitted_alpha * fitted_beta, unit="B")


# %%
# 図の中の文字は英語のままにしています (日本語フォントのない環境でも文字化けしないように)
def ping_pong_figure(sizes, measured, alpha, beta):
    """左: 片道の時間をサイズに対して描く。右: 帯域幅 n/t と、beta および n_1/2。"""
    fig = Figure(figsize=(11, 4.6), layout="constrained")
    left, right = fig.subplots(1, 2)
    n = np.array(sizes, float)
    dense = np.geomspace(n[0], n[-1], 200)  # 閉形式を滑らかな曲線で描くための点
    left.plot(dense, alpha + dense / beta, color="#4C72B0", label="α + n/β (closed form)")
    left.plot(n, measured, "o", color="#DD8452", label="ping-pong, MPI.Wtime()")
    left.set_yscale("log")
    left.axhline(alpha, color="grey", ls=":", lw=1)
    left.text(n[0], alpha * 1.15, f"α = {format_time(alpha)}", fontsize=9, color="grey")
    left.set(ylabel="one-way time t(n) (s)", title="time: flat at α, then n/β")
    right.plot(dense, dense / (alpha + dense / beta) / 1e9, color="#4C72B0",
               label="n / (α + n/β)")  # fmt: skip
    right.plot(n, n / np.array(measured) / 1e9, "o", color="#DD8452", label="n / t(n), measured")
    right.axhline(beta / 1e9, color="#4C72B0", ls="--", lw=1, label=f"β = {format_rate(beta)}")
    half = alpha * beta
    right.plot([half], [beta / 2e9], "s", color="black")
    right.annotate(f"n½ = α·β = {format_size(half)}\n(half of β)", (half, beta / 2e9),
                   xytext=(-12, 0), textcoords="offset points", ha="right", va="center",
                   fontsize=9)  # fmt: skip
    right.set(ylabel="bandwidth (GB/s)", title="bandwidth: half of β at n½")
    right.legend(fontsize=9, loc="upper left")
    for ax in (left, right):
        size_axis(ax, sizes)
        ax.set_xlabel("message size n (bytes)", fontsize=11)
    left.legend(fontsize=9, loc="upper left")
    fig.suptitle("Ping-pong on a 2 us, 25 GB/s link, measured as on a real cluster",
                 fontweight="bold")  # fmt: skip
    return fig


teach.show(ping_pong_figure(sizes, measured, alpha, beta), "13_ping_pong")

# %% [markdown]
# ## まとめ
#
# - **ジェネレータプログラム**と **mpi4py のプログラム**は、同じプログラムです。
#   `yield rank.isend(...)` は `comm.Isend(...)` に、`yield rank.recv(...)` は
#   `comm.Recv(buf, ...)` にあたります。collsim の上では、どちらも同じメッセージを、
#   同じバイト数で、同じシミュレーション時間で送ります。`comm.Allreduce` はライブラリの
#   リングを動かし、どちらとも一致します。
# - `collsim exec -n K script.py` は手を加えていない mpi4py のスクリプトを (仮想クラスタ
#   上の `mpirun -n K` として)、`collsim.exec(main, n=K)` は関数を実行します。出力には
#   `mpirun --tag-output` と同じように、ランクごとのタグが付きます。ハングした実行は、
#   すべてのランクとそれぞれの行を挙げるレポートで終わります。
# - **計算は時間を消費しません。** プログラムがそのコストを明示しない限りです
#   (`collsim.compute(seconds=...)`)。シミュレーション時間がかかるのは通信だけです。
# - **ピンポン**でリンクを測れます。$t(n) = \alpha + n/\beta$ なので、小さなメッセージ
#   からは $\alpha$、大きなメッセージからは $\beta$、最小二乗法のフィッティングからは
#   その両方が得られ、帯域幅は $n_{1/2} = \alpha\beta$ で $\beta$ の半分に達します。
#   collsim では `MPI.Wtime()` の差が閉形式と厳密に一致します。実際のクラスタでは
#   繰り返し測り、ジッタと eager/rendezvous の折れ目があるものと考えてください。
# - 次は、サンプルを実行し (`collsim exec -n 4 examples/mpi_pi.py`)、それから自分の
#   mpi4py の演習問題を動かして、そのトレースを ui.perfetto.dev で読んでみましょう
#   (`--trace run.json`)。
