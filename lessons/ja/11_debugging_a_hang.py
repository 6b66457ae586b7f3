# %% [markdown]
# # 11. ハングのデバッグ
# 参加しないランク、食い違う集団通信、send/recv の循環。collsim のデッドロックレポートを NCCL のフライトレコーダのように読み解きます。
#
# 実際のクラスタでは、分散処理のバグでプログラムがクラッシュすることはめったにありません。
# すべてのランクが集団通信の中で止まったまま、GPU の使用率は 0 %、エラーも出ません。数分後に
# NCCL のウォッチドッグがタイムアウトして、ようやくジョブが強制終了されます。そのときの
# メッセージが伝えるのはタイムアウトした集団通信のことで、原因ではありません。こうしたときに
# よく使われる道具は次の 2 つです。
#
# - **NCCL のフライトレコーダ** (PyTorch のチュートリアル "Flight Recorder for Debugging Stuck
#   Jobs"。`TORCH_NCCL_TRACE_BUFFER_SIZE` を 0 より大きくし、`TORCH_NCCL_DUMP_ON_TIMEOUT=1` を
#   設定します): 各ランクが、自分が入った集団通信をリングバッファに記録し続けます。ハングした
#   後にダンプを見れば、どのランクが `N` 番目の集団通信にたどり着き、どのランクがたどり着かな
#   かったかがわかります。
# - **`TORCH_DISTRIBUTED_DEBUG=DETAIL`**: すべてのランクが同じ形状で同じ集団通信を呼んでいるかを
#   確かめ、そうでないランクを名指しします。
#
# collsim はすべてのランクを 1 つのイベントエンジンで動かしているので、ランクがまだ待っている
# のに**どのイベントももう二度と起こりえない**状態になった瞬間がわかります。その時点で直ちに
# `collsim.DeadlockError` を送出し、待っているすべてのランクと、それぞれが何を待っているか、
# そして止まっている集団通信ごとに、どのランクが参加しどのランクが参加しなかったかをレポート
# します。`.waiting` には同じ内容が dict で入っています。ランクどうしの呼び出しが食い違った
# 場合は、その瞬間に `collsim.errors.CollectiveMismatchError` を送出します。
#
# このレッスンではエラーをすべて捕まえて表示するので、レッスンは最後まで実行されます。これまでと
# 同じく、`..._answer = None` をそれぞれ自分の答えに置き換えてから、チェックを実行してください。

# %%
import re

import networkx as nx
import numpy as np
from matplotlib.figure import Figure

import collsim
from collsim import teach
from collsim.errors import CollectiveMismatchError
from collsim.units import format_time

K = 4  # ランク数
cluster = collsim.Cluster(collsim.topology.switch(K))


def wait_for_edges(waiting):
    """待っているランクが止まっている send/recv のそれぞれについて ``(rank, peer, verb)``。"""
    edges = []
    for rank, whats in waiting.items():
        for what in whats:
            for verb, peer in re.findall(r"(send to|recv from) rank (\d+)", what):
                edges.append((rank, int(peer), verb.split()[0]))
    return edges


def wait_for_figure(waiting, size, title):
    """待ちグラフ: 止まっている各ランクから、それが待っている相手のランクへ矢印を引く。"""
    graph = nx.DiGraph()
    graph.add_nodes_from(range(size))
    edges = wait_for_edges(waiting)
    graph.add_edges_from((a, b) for a, b, _ in edges)
    pos = nx.circular_layout(graph)
    fig = Figure(figsize=(6.4, 5.4), layout="constrained")
    ax = fig.add_subplot()
    colours = ["#F0A150" if r in waiting else "#C44E52" for r in graph.nodes]
    nx.draw_networkx_nodes(graph, pos, ax=ax, node_color=colours, node_size=1500)
    nx.draw_networkx_labels(graph, pos, ax=ax, labels={r: f"rank {r}" for r in graph.nodes},
                            font_size=10, font_weight="bold")  # fmt: skip
    nx.draw_networkx_edges(graph, pos, ax=ax, node_size=1500, arrowsize=22, width=2,
                           connectionstyle="arc3,rad=0.12")  # fmt: skip
    labels = {}
    for a, b, verb in edges:
        labels[(a, b)] = " + ".join(sorted({labels.get((a, b), verb), verb}))
    nx.draw_networkx_edge_labels(graph, pos, ax=ax, edge_labels=labels, font_size=9,
                                 connectionstyle="arc3,rad=0.12")  # fmt: skip
    ax.set_title(title, fontsize=12, fontweight="bold")
    ax.text(0.5, -0.04, "orange: waiting · red: not waiting (finished, or never came)\n"
            "arrow a → b: rank a is blocked on a send to / recv from rank b",
            transform=ax.transAxes, ha="center", va="top", fontsize=9)  # fmt: skip
    ax.axis("off")
    return fig


# %% [markdown]
# ## 1. 参加しないランク
#
# よくある例です。データローダが各ランクに `K` 個おきのサンプル `range(rank, n, K)` を渡すとします。
# `K` がデータセットのサイズ `n` を割り切らないと、バッチが 1 つ少ないランクが出てきます。その
# ランクはループを終えて抜けてしまい、残りのランクはもう 1 回勾配の all-reduce に入って、来ない
# 相手をいつまでも待ち続けます。

# %%
N_SAMPLES = 11  # K の倍数ではない


def train(rank, n_samples):
    steps = len(range(rank.id, n_samples, rank.size))  # このランクが受け持つデータの量
    grad = np.ones(8)
    for step in range(steps):
        yield rank.compute(seconds=1e-3, label=f"step {step + 1}")  # 順伝播 + 逆伝播
        grad = yield from rank.all_reduce(grad)  # 勾配を平均する
    return steps


try:
    cluster.run(train, N_SAMPLES)
except collsim.DeadlockError as error:
    hang = error
    print(f"DeadlockError:\n{error}")

# %% [markdown]
# フライトレコーダのダンプを読むときと同じく、下から上へ読みます。最後の行は集団通信の視点です。
# どの all-reduce か (このグループ上の各ランクの集団通信の列の中での位置 `#N`)、誰が参加し、誰が
# 参加しなかったかを示します。その上の行は 1 対 1 通信の視点です。リング all-reduce の内部で、
# 待っている各ランクは隣のランクとの送信か受信で止まっています。その矢印をたどると、どれも同じ
# ランクに行き着きます。

# %%
teach.show(wait_for_figure(hang.waiting, K, "all-reduce with a missing rank"), "11_waitfor_missing")

# %% [markdown]
# **演習 11.1 — レポートを読む。** all-reduce に参加しなかったのはどのランクでしょうか。

# %%
missing = sorted(set(range(K)) - set(hang.waiting))  # 待っていないランク: ループを抜けたランク
missing_rank_answer = None  # 自分の答え: ランク番号

teach.check_rank("11.1", missing_rank_answer, expected=missing[0], ranks=K,
                 why="レポートの中でただ 1 つ待っていないランクです。サンプルが 11 個なので"
                     "ステップが 1 回少なく、ループを終えて抜けました",
                 about={r: f"このランクは待っています: {whats[0]}" for r, whats in hang.waiting.items()})  # fmt: skip

# %% [markdown]
# **演習 11.2 — レポートを読む。** ジョブがハングしたのは、ランクの all-reduce の列の何番目
# `#N` (0 から数えます) でしょうか。プログラムからも導いてみてください。`K = 4` ランクで
# サンプルが `n = 11` 個のとき、各ランクは何ステップ実行するでしょうか。

# %%
positions = {int(p) for whats in hang.waiting.values() for w in whats
             for p in re.findall(r"all_reduce #(\d+)", w)}  # fmt: skip
hang_position_answer = None  # 自分の答え: 位置 N

teach.check("11.2", hang_position_answer, expected=positions.pop(), unit="(position N)")

# %% [markdown]
# 直すべきは通信ではなくデータです。すべてのランクのステップ数をそろえます。PyTorch の
# `DistributedSampler` がデフォルトでデータセットを world サイズの倍数まで水増しする (あるいは
# `drop_last=True` で末尾を捨てる) のは、まさにこのためです。

# %%
padded = -(-N_SAMPLES // K) * K  # DistributedSampler と同じく、K の倍数に切り上げる
result = cluster.run(train, padded)
print(f"サンプルが {padded} 個なら、各ランクのステップ数は {result.returns}。"
      f"終了時刻 t = {format_time(result.time)}")  # fmt: skip

# %% [markdown]
# ## 2. 食い違う集団通信
#
# 今度はすべてのランクが参加しますが、同じ集団通信ではありません。ここではランク 3 だけが別の
# 設定からモデルを作ってしまい (層が 1 つ多い)、勾配バッファが大きくなっています。NCCL では
# バッファの範囲外を読み書きするか、ハングします。`TORCH_DISTRIBUTED_DEBUG=DETAIL` を使うと、
# PyTorch は先に呼び出しを比べて形状を報告します。collsim はこのチェックをすべての呼び出しで
# 行います。


# %%
def train_step(rank):
    n_params = 10 if rank.id == 3 else 8  # ランク 3 は間違った設定を読み込んだ
    yield rank.compute(seconds=1e-3, label="forward + backward")
    return (yield from rank.all_reduce(np.ones(n_params)))


try:
    cluster.run(train_step)
except CollectiveMismatchError as error:
    mismatch = error
    print(f"CollectiveMismatchError:\n{error}")

# %% [markdown]
# **演習 11.3 — レポートを読む。** ほかのランクと呼び出しが異なるのはどのランクでしょうか。

# %%
calls = dict(re.findall(r"rank (\d+): (.*)", str(mismatch)))
odd = [int(r) for r, call in calls.items() if list(calls.values()).count(call) == 1]
odd_rank_answer = None  # 自分の答え: ランク番号

teach.check_rank("11.3", odd_rank_answer, expected=odd[0], ranks=K,
                 why=f"このランクの呼び出しだけがほかと異なります: {calls[str(odd[0])]}",
                 about={int(r): f"このランクの呼び出しはほかのランクと同じです: {call}"
                        for r, call in calls.items() if int(r) != odd[0]})  # fmt: skip

# %% [markdown]
# ## 3. ブロッキング送信の循環
#
# リングシフトを考えます。各ランクが自分の配列を右隣へ送り、左隣から受け取ります。素直に
# `send` してから `recv` と書くと、デッドロックします。collsim の 1 対 1 通信は、NCCL と同じく
# (大きなメッセージでは MPI も同じく) **ランデブー方式**です。ブロッキング送信は、受信側が対応
# する受信を発行して初めて完了します。どのランクも自分の送信の中にいて、誰も受信までたどり着いて
# いないので、待ちグラフは循環になります。


# %%
def shift_blocking(rank, x):
    right, left = (rank.id + 1) % rank.size, (rank.id - 1) % rank.size
    yield rank.send(right, x)  # `right` が recv を発行するまでブロックする ...
    return (yield rank.recv(left))  # ... ところが相手も自分の send が終わるまで recv しない


def run_on_ring(program):
    """ランクのプログラム ``program(rank, x)`` を ``k`` ランクのリングで実行し (ランク ``r`` は
    ``x = [r, seed]`` から始める)、``(k, seed) -> 各ランクの戻り値`` を返す関数を作る。"""
    if program is None:
        return None

    def run(k, seed):
        ring = collsim.Cluster(collsim.topology.bidirectional_ring(k))
        return ring.run(lambda rank: program(rank, np.array([rank.id, seed], float))).returns

    return run


try:
    run_on_ring(shift_blocking)(K, 0)
except collsim.DeadlockError as error:
    cycle = error
    print(f"DeadlockError:\n{error}")
teach.show(wait_for_figure(cycle.waiting, K, "ring shift with blocking sends"), "11_waitfor_cycle")

# %% [markdown]
# 抜け出す定番の方法は 2 つあります。
#
# - **送信でブロックしない。** `rank.isend(...)` で送信を発行すると、すぐにハンドルが返ります。
#   続けて `recv` し、最後に `yield rank.wait(handle)` で送信の完了を待ちます。(あるいは MPI の
#   `sendrecv` にあたる `rank.exchange(...)` で両方を一度に発行します。) どのランクも受信まで
#   たどり着くので、どの送信も相手が見つかります。
# - **対称性を崩す。** ランク番号の偶奇で呼び出しの順序を変えます。偶数ランクは先に送信し、奇数
#   ランクは先に受信します。こうすると必ずどこかのペアが対応し、循環はほどける鎖に変わります
#   (ランク数が奇数でも動きます)。
#
# **演習 11.4 — プログラムを直す。** `shift(rank, x)` を書いてください。`x` を右隣へ送り、左隣
# から送られてきたものを返します。デッドロックしてはいけません。`run_on_ring` はあなたの
# プログラムを奇数を含むいくつかのサイズのリングで実行し、チェックは各ランクの結果を参照実装と
# 比べます。(まだハングするプログラムなら、その DeadlockError が表示されます。)

# %%
shift_answer = None  # ランクのプログラム: def shift(rank, x): ...  (yield を使う)


def reference_shift(k, seed):
    """ランク r が最後に持っているべきもの: 左隣の [r - 1, seed]。"""
    return [np.array([(r - 1) % k, seed], float) for r in range(k)]


teach.check_function("11.4", shift_answer, reference_shift,
                     cases=[(4, 0), (2, 1), (3, 2), (5, 3), (8, 4)], adapt=run_on_ring)  # fmt: skip

# %% [markdown]
# ## まとめ (Takeaways)
#
# - ハングとは**出口のない待ちグラフ**です。集団通信の視点 (集団通信 `#N` に誰が参加し、誰が
#   参加しなかったか) が原因のランクを指し示し、1 対 1 通信の視点 (誰が誰を待っているか) が
#   ほかのランクがどう巻き込まれたかを示します。NCCL のフライトレコーダからは事後に前者が
#   得られます。collsim は、イベントがもう起こりえなくなった瞬間に両方を報告します。
# - **参加しないランク**の原因は、たいてい制御フローかデータのバグです。データのシャードの
#   大きさがそろっていない、早すぎる `return`、`if rank == 0` の中にある集団通信などです。
#   すべてのランクが同じ順序で同じ集団通信を実行するようにします。
# - **食い違う集団通信** (同じ位置で演算・サイズ・dtype が異なる) は、
#   `TORCH_DISTRIBUTED_DEBUG=DETAIL` が検出するものです。collsim はすべての呼び出しを
#   チェックします。
# - **循環するブロッキング送信**は、ランデブー方式のもとではデッドロックします。
#   ノンブロッキングの `isend`/`irecv` (または送受信を一体にした exchange) を使うか、ランク番号の
#   偶奇で呼び出しの順序を変えます。
#
# 次のレッスン 12 では、これらの実行を実際のマシンに載せます。NVSwitch と InfiniBand、NCCL の
# プロトコル、そしてクラッシュしたランクについてのウォッチドッグのレポートを扱います。実行が
# ハングしたら、レポートは下から上へ読みましょう。
