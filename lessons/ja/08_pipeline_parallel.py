# %% [markdown]
# # 8. パイプライン並列: ステージ、マイクロバッチ、バブル
# 層をステージに切り分けます。バブル (p−1)/(m+p−1)、GPipe と 1F1B のメモリ、インターリーブ、ゼロバブル。
#
# テンソル並列は各層を分割しました。**パイプライン並列 (PP)** は層の *積み重ね* を分割
# します。`p` 個のステージがあるとき、GPU `s` は層 `s·L/p … (s+1)·L/p − 1` を持ちます。前の
# ステージから活性値を受け取り、自分の層を実行して、出力を次へ送ります。使うのは集団通信
# ではなく 1 対 1 通信のメッセージです。すべての GPU を働かせ続けるために、バッチを `m` 個の
# **マイクロバッチ** に分け、パイプの中を順に流します (Huang et al. 2019, GPipe)。
#
# `pipeline_step(name, stages, microbatches)` はスケジュールを組み立て、小さな Transformer を
# ステージに切り分け、仮想クラスタ上で本物の学習ステップを 1 回実行します。活性値と勾配は
# ランク間を行き来する numpy 配列で、勾配は単一デバイスの結果と照合されます。各パスには
# 固定のシミュレーション時間がかかります。順伝播 `t_f`、入力に対する勾配 `t_b`、重みに
# 対する勾配 `t_w` です (既定ではどれも等しいので、逆伝播全体 `t_b + t_w` は順伝播の 2 倍)。
# リンクの通信は無料にしてあるので、見えるのはスケジュールそのものです。
#
# これまでと同じく、各 `..._answer = None` を自分の予想に置き換えてからチェックを実行して
# ください。

# %%
from matplotlib.figure import Figure

from collsim import teach
from collsim.parallel.pipeline.runner import pipeline_step
from collsim.units import format_size, format_time
from collsim.viz.timeline import timeline_figure

P, M = 4, 8  # ステージ数、マイクロバッチ数

# %% [markdown]
# ## バブル
#
# GPipe は `m` 個の順伝播をすべて実行してから、`m` 個の逆伝播をすべて実行します。ステージ
# `s` は、最初のマイクロバッチが手前の `s` 個のステージを通り抜けるまで始められず、最後にも
# 最後の逆伝播が流れ切るまで手が空いたまま待ちます。1 ステップのうち各ステージが働くのは
# `m·(t_f + t_b + t_w)`、アイドルになるのは `(p−1)·(t_f + t_b + t_w)` なので、ステージの
# アイドル時間がステップに占める割合、つまり **バブル率** は次のとおりです。
#
#     bubble = (p − 1) / (m + p − 1)
#
# (Narayanan et al. 2021 は `(p−1)/m` と書いています。アイドル時間は同じで、ステップ全体では
# なく理想的な計算時間で割ったものです。) collsim はバブルをトレースから測ります。ステップ
# の中でステージが何も計算していない時間です。その横に式の値を並べます。

# %%
gpipe = pipeline_step("gpipe", stages=P, microbatches=M)
print(gpipe.schedule.table())
print(f"\nパスの時間 (s): {gpipe.times};  勾配が単一デバイスと一致: {gpipe.match}")
print(f"ステップ {format_time(gpipe.step_time)}、各ステージの稼働 {format_time(gpipe.busy_time[0])}、"
      f"待ち {format_time(gpipe.idle_time[0])}")  # fmt: skip
teach.show(timeline_figure(gpipe), "08_gpipe_timeline")

# %% [markdown]
# **演習 8.1 — 予想してから確かめる。** GPipe で `p = 4` ステージ、`m = 8` マイクロバッチの
# とき、ステージのアイドル時間はステップの何割でしょうか。

# %%
gpipe_bubble_answer = None  # 予想: 0 から 1 の間の割合

teach.check("8.1", gpipe_bubble_answer, expected=gpipe.bubble_fraction, rel=1e-3, unit="fraction")
print(f"式 (p-1)/(m+p-1): {gpipe.formula_bubble_fraction():.6g}")

# %% [markdown]
# `m` を大きくするほどバブルは小さくなります。立ち上がり (fill) と流し切り (drain) に重ねられる
# マイクロバッチが増えるからです。しかしグローバルバッチはオプティマイザの都合で決まって
# いる (レッスン 10) ので、`m` を大きくするとマイクロバッチが小さくなり、GPU をうまく使え
# なくなります。

# %%
print(" m   実測値     (p-1)/(m+p-1)")
for m in (1, 2, 4, 8, 16, 32):
    r = pipeline_step("1f1b", stages=P, microbatches=m)
    print(f"{m:>2}   {r.bubble_fraction:8.2%}   {r.formula_bubble_fraction():8.2%}")

# %% [markdown]
# **演習 8.2 — 予想してから確かめる。** `p = 4` ステージのとき、バブルを 10 % 以下に抑える
# マイクロバッチ数 `m` の最小値はいくつでしょうか。式を `m` について解いてください。collsim は
# `m = 1, 2, …` でパイプラインを実際に動かして求めます。

# %%
TARGET = 0.10
m_needed = next(m for m in range(1, 200)
                if pipeline_step("1f1b", P, m).bubble_fraction <= TARGET + 1e-12)  # fmt: skip

microbatches_needed_answer = None  # 予想: マイクロバッチの数

teach.check("8.2", microbatches_needed_answer, expected=m_needed, unit="micro-batches")

# %% [markdown]
# ## GPipe と 1F1B: バブルは同じ、メモリはずっと少ない
#
# 順伝播はどれも、逆伝播で必要になる活性値を残していきます。GPipe は `m` 個の順伝播を先に
# すべて実行するので、どのステージもピーク時には **`m`** 個のマイクロバッチの活性値を抱えます。
# **1F1B** (one forward, one backward。PipeDream-Flush、Narayanan et al. 2021) では、ステージ
# `s` はウォームアップの順伝播を `p − s` 回だけ実行し、そのあとは順伝播 1 回と逆伝播 1 回を
# 交互に行います。新しいマイクロバッチが届くたびに逆伝播が 1 つ分の活性値を解放するので、
# ステージ `s` が抱えるのは多くても `min(p − s, m)` 個、`m` がどれだけ大きくても `p` 個までです。
# アイドル時間は変わらず、ステージあたり `(p−1)(t_f + t_b + t_w)` です。

# %%
one_f_one_b = pipeline_step("1f1b", stages=P, microbatches=M)
print(one_f_one_b.schedule.table())
for r in (gpipe, one_f_one_b):
    print(f"\n{r.schedule.name:>5}: バブル {r.bubble_fraction:.2%};  ステージあたりの処理中マイクロバッチ数の"
          f"ピーク {r.peak_inflight} (式 {r.formula_peak_inflight()});  "
          f"ステージあたりの活性値のピークバイト数 {r.peak_activation_bytes}")  # fmt: skip
teach.show(timeline_figure(one_f_one_b), "08_1f1b_timeline")

# %%
fig = Figure(figsize=(9, 3.6), layout="constrained")
ax = fig.add_subplot()
for r, colour in ((gpipe, "#C44E52"), (one_f_one_b, "#4C72B0")):
    times = [0.0] + [t * 1e3 for t, _, _ in r.inflight[0]]
    held = [0] + [n for _, n, _ in r.inflight[0]]
    ax.step(times, held, where="post", color=colour, lw=2.2, label=r.schedule.name)
ax.set_xlabel("simulated time (ms)")
ax.set_ylabel("micro-batches held")
ax.set_title(f"Activations held by stage 0 (p={P}, m={M}), read from the run")
ax.legend()
teach.show(fig, "08_inflight_stage0")

# %% [markdown]
# 上の図は、実行結果から読み取ったステージ 0 が抱える活性値 (マイクロバッチの個数) の推移
# です。
#
# **演習 8.3 — 予想してから確かめる。** 1F1B、`p = 4` のまま、マイクロバッチを 2 倍の
# `m = 16` にします。ステージ 0 が同時に抱える活性値は、最大で何マイクロバッチ分でしょうか。

# %%
one_f_one_b_16 = pipeline_step("1f1b", stages=P, microbatches=16)

peak_inflight_answer = None  # 予想: マイクロバッチの数

teach.check("8.3", peak_inflight_answer, expected=one_f_one_b_16.peak_inflight[0],
            unit="micro-batches")  # fmt: skip
gpipe_16 = pipeline_step("gpipe", stages=P, microbatches=16)
print(f"m=16 の GPipe では、ステージ 0 が抱えるのは {gpipe_16.peak_inflight[0]} 個")

# %% [markdown]
# ## インターリーブ: GPU あたり v 個のモデルチャンクでバブルが 1/v に
#
# Megatron の **インターリーブ 1F1B** (Narayanan et al. 2021, §2.2) では、各 GPU が 1 つの
# 大きな層のかたまりではなく、`v` 個の小さな層のチャンクを持ちます。GPU `s` は `p·v` 個の
# チャンクのうち `s, s + p, s + 2p, …` 番目を持つので、マイクロバッチは GPU の間を `v` 周
# します。1 回のパスは `1/v` の長さになり、立ち上がりと流し切りもそれに合わせて縮むので、
# ステージあたりのアイドル時間は `(p−1)(t_f + t_b + t_w)/v` になります。
#
#     bubble = (p − 1) / (v·m + p − 1)
#
# その代わり、1 対 1 通信のメッセージが `v` 倍に増え (1 ステップあたり `2·m·(p − 1)` ではなく
# `2·m·(p·v − 1)`)、活性値のメモリもいくらか増えます。また Megatron では `m` が `p` の倍数で
# なければなりません。(Megatron-LM では `--num-layers-per-virtual-pipeline-stage` で `v` を
# 決めます。)

# %%
interleaved = pipeline_step("interleaved", stages=P, microbatches=M, virtual=2)
print(interleaved.schedule.table(), end="\n\n")
for r in (one_f_one_b, interleaved):
    v = r.schedule.virtual
    print(f"{r.schedule.name:>11} v={v}: バブル {r.bubble_fraction:.2%} "
          f"(式 {r.formula_bubble_fraction():.2%});  メッセージ {len(r.trace.transfers)} 個、"
          f"{format_size(sum(r.run.stats.bytes_sent))};  一致 {r.match}")  # fmt: skip
print(f"\n各ステージの処理中のピーク (チャンク単位。1 チャンクはステージの活性値の 1/v): "
      f"{interleaved.peak_inflight}")  # fmt: skip
teach.show(timeline_figure(interleaved), "08_interleaved_timeline")

# %% [markdown]
# **演習 8.4 — 式を書く。** ステージあたり `v` 個のチャンクを持つインターリーブ 1F1B の
# バブル率を返す `bubble(p, m, v)` を書いてください (`v = 1` はふつうの 1F1B です)。チェックでは
# 各パイプラインを仮想クラスタ上で *実際に動かし*、測ったバブルと比べます。

# %%
bubble_answer = None  # 関数を書く: def bubble(p, m, v): return ...


def measured_bubble(p, m, v):
    return pipeline_step("interleaved" if v > 1 else "1f1b", p, m, virtual=v).bubble_fraction


def close(got, want):
    return abs(got - want) <= 1e-9 * abs(want)


teach.check_function("8.4", bubble_answer, measured_bubble,
                     cases=[(4, 8, 1), (4, 8, 2), (2, 4, 4), (8, 8, 2), (3, 6, 3)],
                     compare=close, unit="fraction")  # fmt: skip

# %% [markdown]
# ## ゼロバブル: 重みの勾配で隙間を埋める
#
# 層の逆伝播は 2 つの行列積からなります。前のステージが待っている **入力の勾配** `B`
# (`dX = dY·Wᵀ`) と、誰も待っていない **重みの勾配** `W` (`dW = Xᵀ·dY`) です。Qi et al. 2024
# はこの 2 つを分けました。`B` はすぐに上流へ送り、`W` のパスはあとで、1F1B なら
# アイドルになってしまう場所で実行します。彼らの ZB-H1 スケジュールは 1F1B と同じメモリ
# (処理中のマイクロバッチは多くても `p` 個。今度はすべてのステージで) のまま、
# `t_w ≤ min(t_f, t_b)` であればアイドル時間を次だけに抑えます。
#
#     (p − 1)·(t_f + t_b − t_w)    ステージあたり (1F1B では (p − 1)·(t_f + t_b + t_w))
#
# (同じ論文の ZB-H2 と ZB-V のスケジュールは、メモリを多く使う代わりにバブルを完全に
# なくします。)

# %%
zb = pipeline_step("zb-h1", stages=P, microbatches=M)
print(zb.schedule.table())
print(f"\nzb-h1: バブル {zb.bubble_fraction:.2%} (式 {zb.formula_bubble_fraction():.2%})、"
      f"処理中のピーク {zb.peak_inflight}、一致 {zb.match}")  # fmt: skip
print(f"1f1b : ステージあたりのアイドル時間 {format_time(one_f_one_b.bubble_time)};  "
      f"zb-h1: {format_time(zb.bubble_time)}")  # fmt: skip
teach.show(timeline_figure(zb), "08_zb_h1_timeline")

# %% [markdown]
# **演習 8.5 — 予想してから確かめる。** `p = 4`、`m = 8` で、パスの時間が下に表示した値
# (秒) のとき、ZB-H1 の 1 ステップで各ステージのアイドル時間はどれだけでしょうか。(秒、または
# `"2ms"` のような文字列で答えてください。)

# %%
print(f"パスの時間: {zb.times}")

zb_idle_time_answer = None  # 予想 (秒、または "2ms" のような文字列)

teach.check("8.5", zb_idle_time_answer, expected=zb.bubble_time, rel=1e-3, unit="s")

# %% [markdown]
# ## 4 つを並べて比べる
#
# 同じモデル、同じバッチで 4 つのスケジュールを比べます。どれを使うかはトレードオフです。
# GPipe は最も単純ですが、抱える活性値が最も多い。1F1B が抱えるのは多くても `p` 個。
# インターリーブはメッセージを増やす代わりにバブルを小さくし、ゼロバブルのスケジュールは
# 逆伝播の 2 つの半分を並べ替えます。(インターリーブの処理中の個数はチャンク単位で、1 チャンク
# はステージの活性値の `1/v` です。)

# %%
CLOSED_FORMS = {"gpipe": "(p-1)/(m+p-1)", "1f1b": "(p-1)/(m+p-1)",
                "interleaved": "(p-1)/(v·m+p-1)", "zb-h1": "(p-1)(t_f+t_b-t_w)/step"}  # fmt: skip
print(
    f"{'schedule':<17}{'bubble':>7}{'formula':>9}  {'closed form':<24}{'peak in-flight':<18}"
    "messages"
)
for r in (gpipe, one_f_one_b, interleaved, zb):
    v = r.schedule.virtual
    label = r.schedule.name + (f" v={v}" if v > 1 else "")
    print(
        f"{label:<17}{r.bubble_fraction:>7.2%}{r.formula_bubble_fraction():>9.2%}  "
        f"{CLOSED_FORMS[r.schedule.name]:<24}{str(r.peak_inflight):<18}{len(r.trace.transfers)}"
    )

# %% [markdown]
# ## まとめ
#
# - `p` ステージのパイプラインでは、立ち上がりと流し切りで各ステージが `(p−1)` パス分
#   アイドルになります。GPipe と 1F1B の **バブル率は `(p−1)/(m+p−1)`** です (Huang et al.
#   2019、Narayanan et al. 2021)。マイクロバッチを増やすと小さくなりますが、`m` の上限はグローバルバッチで
#   決まります。
# - **1F1B** のバブルは GPipe と同じですが、ステージ `s` が抱える活性値は `m` 個ではなく
#   `min(p−s, m)` 個のマイクロバッチ分です。
# - GPU あたり `v` 個のチャンクで **インターリーブ** するとバブルは `1/v` になり
#   (`(p−1)/(v·m+p−1)`)、その代わりパイプラインのメッセージは `v` 倍、活性値のメモリも
#   いくらか増えます。`m` は `p` の倍数でなければなりません。
# - **ゼロバブル (ZB-H1)** は逆伝播を `B` と `W` に分け、`W` を隙間に移します。アイドル時間は
#   `(p−1)(t_f+t_b−t_w)` で、メモリは 1F1B と同じです (Qi et al. 2024)。
# - ここでの数値はすべてシミュレーションのトレースから測ったもので、どの実行の勾配も
#   単一デバイスと一致しました。
#
# 次のレッスン 9 では、これまで分けずにきた最後の次元である系列を分割します (コンテキスト
# 並列)。続くレッスン 10 で、すべての次元を 1 つのランクグリッドにまとめます。
